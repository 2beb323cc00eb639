/*
 * sdpa_ref.c: the reference (oracle) scaled-dot-product attention kernels. Plain loops, one row
 * of S scores at a time, every sum in double; never optimised.
 *
 * Forward, per row i:  s_j = scale q_i.k_j - m_h |i - j| (allowed j), p_j = softmax_j(s_j),
 *                      o_i = sum_j p_j v_j, lse_i = log sum_j exp(s_j).
 * Backward, per row i (the row's softmax is recomputed from q and k, not read from lse):
 *   dp_j = dO_i.v_j,  D_i = sum_j p_j dp_j,  ds_j = p_j (dp_j - D_i),
 *   dq_i += scale sum_j ds_j k_j,  dk_j += scale ds_j q_i,  dv_j += p_j dO_i.
 * With dropout, the chain rule through the composed ops (softmax, then dropout z_j = keep_j /
 * (1 - p), then the product with v), keep_j from the scalar qkv_rng_uniform as in the reference
 * dropout kernel:  o_i = sum_j z_j p_j v_j;  da_j = z_j dO_i.v_j,  D_i = sum_j p_j da_j,
 * ds_j = p_j (da_j - D_i),  dv_j += z_j p_j dO_i.
 */
#include "sdpa.h"

/* Scores of row (b, h, i) into s[0:S] (-inf where not allowed); returns their max (-inf when the
 * row has no allowed key, NaN when a score is NaN: the NaN then reaches the row's output). */
static double row_scores(const qkv_sdpa_problem *p, int64_t b, int64_t h, int64_t i,
                         const qkv_real *qi, const qkv_real *k, double *s) {
    double mx = -INFINITY;
    for (int64_t j = 0; j < p->S; j++) {
        if (!sdpa_allowed(p, b, i, j)) {
            s[j] = -INFINITY;
            continue;
        }
        const qkv_real *kj = k + sdpa_row(p->lk, p->H, b * p->H + h, j);
        double dot = 0;
        for (int64_t d = 0; d < p->D; d++)
            dot += (double)qi[d] * (double)kj[d];
        s[j] = p->scale * dot - sdpa_alibi(p, h, i, j);
        if (s[j] > mx || s[j] != s[j]) mx = s[j];
    }
    return mx;
}

/* s[j] <- softmax weights exp(s_j - mx) / sum (0 where not allowed); returns the sum. */
static double row_softmax(int64_t S, double mx, double *s) {
    double sum = 0;
    for (int64_t j = 0; j < S; j++)
        sum += s[j] = exp(s[j] - mx);
    for (int64_t j = 0; j < S; j++)
        s[j] /= sum;
    return sum;
}

/* z_j of row (bh, i) into z[0:S]: 1 / (1 - p) where the weight is kept, 0 where dropped; all 1
 * without dropout. */
static void row_dropout(const qkv_sdpa_problem *p, int64_t bh, int64_t i, double *z) {
    const double rs = (double)(qkv_real)(1.0 / (1.0 - p->dropout));
    for (int64_t j = 0; j < p->S; j++)
        z[j] = p->dropout == 0 ? 1.0
               : qkv_rng_uniform(p->seed, p->step, p->stream, sdpa_weight_index(p, bh, i, j)) >=
                       (float)p->dropout
                   ? rs
                   : 0.0;
}

static bool fwd(qkv_ctx *ctx, const qkv_sdpa_problem *p, const qkv_real *q, const qkv_real *k,
                const qkv_real *v, qkv_real *o, qkv_real *lse) {
    const int64_t T = p->T, S = p->S, Dv = p->Dv;
    double *s = qkv__scratch(ctx, sizeof(double) * (size_t)(2 * S + Dv));
    if (!s) return false;
    double *z = s + S, *acc = z + S;
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t h = 0; h < p->H; h++) {
            const int64_t bh = b * p->H + h;
            for (int64_t i = 0; i < T; i++) {
                const qkv_real *qi = q + sdpa_row(p->lq, p->H, bh, i);
                qkv_real *oi = o + (bh * T + i) * Dv;
                const double mx = row_scores(p, b, h, i, qi, k, s);
                if (mx == -INFINITY) { /* no allowed key: zero output, lse = -inf */
                    for (int64_t d = 0; d < Dv; d++)
                        oi[d] = 0;
                    lse[bh * T + i] = (qkv_real)-INFINITY;
                    continue;
                }
                const double sum = row_softmax(S, mx, s);
                row_dropout(p, bh, i, z);
                for (int64_t d = 0; d < Dv; d++)
                    acc[d] = 0;
                for (int64_t j = 0; j < S; j++) {
                    const qkv_real *vj = v + sdpa_row(p->lv, p->H, bh, j);
                    for (int64_t d = 0; d < Dv; d++)
                        acc[d] += z[j] * s[j] * (double)vj[d];
                }
                for (int64_t d = 0; d < Dv; d++)
                    oi[d] = (qkv_real)acc[d];
                lse[bh * T + i] = (qkv_real)(mx + log(sum));
            }
        }
    return true;
}

static bool bwd(qkv_ctx *ctx, const qkv_sdpa_problem *p, const qkv_real *q, const qkv_real *k,
                const qkv_real *v, const qkv_real *o, const qkv_real *lse, const qkv_real *dout,
                qkv_real *dq, qkv_real *dk, qkv_real *dv) {
    (void)o, (void)lse; /* the oracle recomputes the softmax itself */
    const int64_t T = p->T, S = p->S, D = p->D, Dv = p->Dv;
    /* s (S), dp (S), z (S), dq_i (D), and the (S, D) / (S, Dv) key gradients of one (b, h) in
     * double */
    double *s = qkv__scratch(ctx, sizeof(double) * (size_t)(3 * S + D + S * D + S * Dv));
    if (!s) return false;
    double *dp = s + S, *z = dp + S, *dqi = z + S, *dkbh = dqi + D, *dvbh = dkbh + S * D;
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t h = 0; h < p->H; h++) {
            const int64_t bh = b * p->H + h;
            for (int64_t x = 0; x < S * D; x++)
                dkbh[x] = 0;
            for (int64_t x = 0; x < S * Dv; x++)
                dvbh[x] = 0;
            for (int64_t i = 0; i < T; i++) {
                const qkv_real *qi = q + sdpa_row(p->lq, p->H, bh, i);
                const qkv_real *doi = dout + (bh * T + i) * Dv;
                const double mx = row_scores(p, b, h, i, qi, k, s);
                if (mx == -INFINITY) continue; /* no allowed key: no gradient flows */
                row_softmax(S, mx, s);
                row_dropout(p, bh, i, z);
                double Di = 0;
                for (int64_t j = 0; j < S; j++) {
                    double t = 0;
                    const qkv_real *vj = v + sdpa_row(p->lv, p->H, bh, j);
                    for (int64_t d = 0; d < Dv; d++)
                        t += (double)doi[d] * (double)vj[d];
                    dp[j] = z[j] * t; /* the gradient of the softmax weight */
                    Di += s[j] * dp[j];
                }
                for (int64_t d = 0; d < D; d++)
                    dqi[d] = 0;
                for (int64_t j = 0; j < S; j++) {
                    if (s[j] == 0) continue; /* masked (or underflowed): contributes nothing */
                    const double ds = p->scale * s[j] * (dp[j] - Di);
                    const qkv_real *kj = k + sdpa_row(p->lk, p->H, bh, j);
                    for (int64_t d = 0; d < D; d++) {
                        dqi[d] += ds * (double)kj[d];
                        dkbh[j * D + d] += ds * (double)qi[d];
                    }
                    for (int64_t d = 0; d < Dv; d++)
                        dvbh[j * Dv + d] += z[j] * s[j] * (double)doi[d];
                }
                if (dq)
                    for (int64_t d = 0; d < D; d++)
                        dq[sdpa_row(p->lq, p->H, bh, i) + d] += (qkv_real)dqi[d];
            }
            for (int64_t j = 0; j < S; j++) {
                for (int64_t d = 0; dk && d < D; d++)
                    dk[sdpa_row(p->lk, p->H, bh, j) + d] += (qkv_real)dkbh[j * D + d];
                for (int64_t d = 0; dv && d < Dv; d++)
                    dv[sdpa_row(p->lv, p->H, bh, j) + d] += (qkv_real)dvbh[j * Dv + d];
            }
        }
    return true;
}

const qkv_sdpa_kernels qkv_sdpa_ref = {fwd, bwd};
