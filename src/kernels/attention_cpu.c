/*
 * attention_cpu.c: fast kernels of the attention building blocks.
 *
 * - dot / scaled dot: one qkv_gemm per (b, h), called outside any OpenMP region (BLAS threads
 *   itself): e = alpha Q K^T, dQ += alpha dE K, dK += alpha dE^T Q.
 * - cosine: E = Q K^T by GEMM, then each row scaled by g / (n_q n_k). Backward with the unit
 *   rows U = Q / n_q, W = K / n_k (scratch) and two GEMMs per head, M = dE W and N = dE^T U:
 *     dq_i += (g M_i - [|q_i| > eps] (sum_j dE_ij E_ij) u_i) / n_q_i
 *     dk_j += (g N_j - [|k_j| > eps] (sum_i dE_ij E_ij) w_j) / n_k_j
 *     dg   += sum_i u_i . M_i            (= sum_ij dE_ij cos_ij)
 * - additive: OpenMP over query rows; backward over fixed work units (a head and a block of
 *   query rows, the block size a function of the shapes only) with per-unit partial sums for
 *   dkp and dv in double, added in unit order: thread-count independent, and the (B, H, T, S, A)
 *   tanh tensor is recomputed rather than stored.
 * - normalisers: OpenMP over rows (b, h, i). A row's mask is a band [lo, hi) from causal /
 *   window plus per-key tensor lookups; tensor-masked keys are read as -inf, which every
 *   normaliser maps to weight 0 (softmax: exp(-inf) = 0, relu, sigmoid(-inf) = 0), and keys
 *   outside the band are written as 0 without being read.
 * Every reduction runs in a fixed order inside one row / unit, so results are bit-identical for
 * any thread count.
 */
#include "attention.h"
#include "gemm/gemm.h"
#include "rowreduce.h"

#include <string.h>

#define QKV_ATTN_GRAIN 16384 /* scalar operations below which a loop stays serial */

/* ---- dot / scaled dot ------------------------------------------------------------------------ */

static void dot_fwd(const qkv_attn_dims *d, qkv_real alpha, const qkv_real *q, const qkv_real *k,
                    qkv_real *e) {
    const int64_t T = d->T, S = d->S, D = d->D;
    if (T == 0 || S == 0) return;
    const qkv__mat_layout le = {S, d->H * T * S, T * S}; /* e (B, H, T, S) */
    /* (T, D) (S, D)^T -> (T, S) per head */
    qkv__gemm_batched2(false, true, d->B, d->H, T, S, D, alpha, q, d->lq, k, d->lk, 0, e, le);
}

static void dot_bwd(const qkv_attn_dims *d, qkv_real alpha, const qkv_real *q, const qkv_real *k,
                    const qkv_real *de, qkv_real *dq, qkv_real *dk) {
    const int64_t T = d->T, S = d->S, D = d->D;
    if (T == 0 || S == 0) return;
    const qkv__mat_layout le = {S, d->H * T * S, T * S};
    if (dq) /* (T, S) (S, D) per head */
        qkv__gemm_batched2(false, false, d->B, d->H, T, D, S, alpha, de, le, k, d->lk, 1, dq, d->lq);
    if (dk) /* (T, S)^T (T, D) per head */
        qkv__gemm_batched2(true, false, d->B, d->H, S, D, T, alpha, de, le, q, d->lq, 1, dk, d->lk);
}

/* ---- cosine ---------------------------------------------------------------------------------- */

/* n_r = max(|x_r|, eps) for each of the rows of x (rows, D). */
static void clamped_norms(int64_t rows, int64_t D, const qkv_real *x, qkv_real *n) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (rows * D > QKV_ATTN_GRAIN)
#endif
    for (int64_t r = 0; r < rows; r++) {
        double s = 0;
        for (int64_t c = 0; c < D; c++)
            s += (double)x[r * D + c] * x[r * D + c];
        n[r] = (qkv_real)fmax(sqrt(s), QKV_COSINE_EPS);
    }
}

/* u_r = x_r / n_r. */
static void unit_rows(int64_t rows, int64_t D, const qkv_real *x, const qkv_real *n, qkv_real *u) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (rows * D > QKV_ATTN_GRAIN)
#endif
    for (int64_t r = 0; r < rows; r++) {
        const qkv_real inv = (qkv_real)(1.0 / n[r]);
        for (int64_t c = 0; c < D; c++)
            u[r * D + c] = x[r * D + c] * inv;
    }
}

static void cos_fwd(const qkv_attn_dims *d, const qkv_real *g, int64_t gn, const qkv_real *q,
                    const qkv_real *k, qkv_real *nq, qkv_real *nk, qkv_real *e) {
    const int64_t H = d->H, T = d->T, S = d->S, D = d->D, R = d->B * H * T;
    clamped_norms(R, D, q, nq);
    clamped_norms(d->B * H * S, D, k, nk);
    dot_fwd(d, 1, q, k, e);
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (R * S > QKV_ATTN_GRAIN)
#endif
    for (int64_t r = 0; r < R; r++) { /* row (bh, i): e_ij *= g_h / (n_q_i n_k_j) */
        const int64_t bh = r / T;
        const double gq = (double)g[gn == 1 ? 0 : bh % H] / nq[r];
        const qkv_real *nkb = nk + bh * S;
        qkv_real *er = e + r * S;
        for (int64_t j = 0; j < S; j++)
            er[j] = (qkv_real)((double)er[j] * gq / nkb[j]);
    }
}

static bool cos_bwd(qkv_ctx *ctx, const qkv_attn_dims *d, const qkv_real *g, int64_t gn,
                    const qkv_real *q, const qkv_real *k, const qkv_real *nq, const qkv_real *nk,
                    const qkv_real *e, const qkv_real *de, qkv_real *dq, qkv_real *dk,
                    qkv_real *dg) {
    const int64_t H = d->H, T = d->T, S = d->S, D = d->D, BH = d->B * H;
    if (T == 0 || S == 0) return true;
    const size_t rs = sizeof(qkv_real);
    qkv_real *u = qkv__scratch(ctx, (size_t)(BH * T * D) * rs); /* (B, H, T, D) q / n_q */
    qkv_real *w = qkv__scratch(ctx, (size_t)(BH * S * D) * rs); /* (B, H, S, D) k / n_k */
    qkv_real *m = dq || dg ? qkv__scratch(ctx, (size_t)(BH * T * D) * rs) : NULL; /* dE W */
    qkv_real *n = dk ? qkv__scratch(ctx, (size_t)(BH * S * D) * rs) : NULL;       /* dE^T U */
    double *gpart = dg ? qkv__scratch(ctx, (size_t)(BH * T) * sizeof(double)) : NULL;
    double *coldot = dk ? qkv__scratch(ctx, (size_t)(BH * S) * sizeof(double)) : NULL;
    if (ctx->status) return false;
    unit_rows(BH * T, D, q, nq, u);
    unit_rows(BH * S, D, k, nk, w);
    if (m) qkv_gemm_batched(false, false, BH, T, D, S, 1, de, S, T * S, w, D, S * D, 0, m, D, T * D);
    if (n) qkv_gemm_batched(true, false, BH, S, D, T, 1, de, S, T * S, u, D, T * D, 0, n, D, S * D);
    if (m) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (BH * T * (S + D) > QKV_ATTN_GRAIN)
#endif
        for (int64_t r = 0; r < BH * T; r++) { /* query row (bh, i) */
            const double gh = g[gn == 1 ? 0 : (r / T) % H];
            const qkv_real *ur = u + r * D, *mr = m + r * D;
            if (dq) {
                double rowdot = 0;
                for (int64_t j = 0; j < S; j++)
                    rowdot += (double)de[r * S + j] * e[r * S + j];
                if (!qkv__cos_unclamped(nq[r])) rowdot = 0;
                const double rq = 1.0 / nq[r];
                for (int64_t c = 0; c < D; c++)
                    dq[r * D + c] += (qkv_real)(rq * (gh * mr[c] - rowdot * ur[c]));
            }
            if (gpart) {
                double s = 0;
                for (int64_t c = 0; c < D; c++)
                    s += (double)ur[c] * mr[c];
                gpart[r] = s;
            }
        }
    }
    if (n) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (BH * T * S > QKV_ATTN_GRAIN)
#endif
        for (int64_t bh = 0; bh < BH; bh++) { /* column sums sum_i dE_ij E_ij, rows in order */
            double *cd = coldot + bh * S;
            for (int64_t j = 0; j < S; j++)
                cd[j] = 0;
            for (int64_t i = 0; i < T; i++) {
                const qkv_real *der = de + (bh * T + i) * S, *er = e + (bh * T + i) * S;
                for (int64_t j = 0; j < S; j++)
                    cd[j] += (double)der[j] * er[j];
            }
        }
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (BH * S * D > QKV_ATTN_GRAIN)
#endif
        for (int64_t r = 0; r < BH * S; r++) { /* key row (bh, j) */
            const double gh = g[gn == 1 ? 0 : (r / S) % H];
            const double cd = qkv__cos_unclamped(nk[r]) ? coldot[r] : 0, rk = 1.0 / nk[r];
            const qkv_real *wr = w + r * D, *nr = n + r * D;
            for (int64_t c = 0; c < D; c++)
                dk[r * D + c] += (qkv_real)(rk * (gh * nr[c] - cd * wr[c]));
        }
    }
    for (int64_t bh = 0; gpart && bh < BH; bh++) { /* heads in order, rows in order */
        double s = 0;
        for (int64_t i = 0; i < T; i++)
            s += gpart[bh * T + i];
        dg[gn == 1 ? 0 : bh % H] += (qkv_real)s;
    }
    return true;
}

/* ---- additive -------------------------------------------------------------------------------- */

static void additive_fwd(const qkv_attn_dims *d, const qkv_real *qp, const qkv_real *kp,
                         const qkv_real *v, qkv_real *e) {
    const int64_t H = d->H, T = d->T, S = d->S, A = d->D, R = d->B * H * T;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (R * S * A > QKV_ATTN_GRAIN / 8)
#endif
    for (int64_t r = 0; r < R; r++) { /* query row (bh, i) */
        const int64_t bh = r / T;
        const qkv_real *vh = v + (bh % H) * A, *qi = qp + r * A, *kb = kp + bh * S * A;
        for (int64_t j = 0; j < S; j++) {
            const qkv_real *kj = kb + j * A;
            double acc = 0;
            for (int64_t a = 0; a < A; a++)
                acc += (double)vh[a] * qkv__rtanh(qi[a] + kj[a]);
            e[r * S + j] = (qkv_real)acc;
        }
    }
}

/* Backward work units: head bh, query rows [c * rows, (c + 1) * rows). With fewer than
 * ADD_UNITS heads the rows are split so that small batches still spread over threads; the
 * split depends on the shapes only. */
enum { ADD_UNITS = 16 };

static bool additive_bwd(qkv_ctx *ctx, const qkv_attn_dims *d, const qkv_real *qp,
                         const qkv_real *kp, const qkv_real *v, const qkv_real *de, qkv_real *dqp,
                         qkv_real *dkp, qkv_real *dv) {
    const int64_t B = d->B, H = d->H, T = d->T, S = d->S, A = d->D, BH = B * H;
    if (T == 0 || S == 0 || BH == 0) return true;
    const int64_t want = BH >= ADD_UNITS ? 1 : (ADD_UNITS + BH - 1) / BH; /* blocks per head */
    const int64_t rows = (T + want - 1) / want, nblk = (T + rows - 1) / rows, U = BH * nblk;
    /* per unit: a query-row accumulator (A), dkp partials (S, A), dv partials (A); double */
    double *qacc = dqp ? qkv__scratch(ctx, (size_t)(U * A) * sizeof(double)) : NULL;
    double *kacc = dkp ? qkv__scratch(ctx, (size_t)(U * S * A) * sizeof(double)) : NULL;
    double *vacc = dv ? qkv__scratch(ctx, (size_t)(U * A) * sizeof(double)) : NULL;
    if (ctx->status) return false;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (BH * T * S * A > QKV_ATTN_GRAIN / 8)
#endif
    for (int64_t u = 0; u < U; u++) {
        const int64_t bh = u / nblk, i0 = (u % nblk) * rows, i1 = i0 + rows < T ? i0 + rows : T;
        const qkv_real *vh = v + (bh % H) * A, *kb = kp + bh * S * A;
        double *qa = qacc ? qacc + u * A : NULL, *ka = kacc ? kacc + u * S * A : NULL;
        double *va = vacc ? vacc + u * A : NULL;
        if (ka) memset(ka, 0, sizeof(double) * (size_t)(S * A));
        if (va) memset(va, 0, sizeof(double) * (size_t)A);
        for (int64_t i = i0; i < i1; i++) {
            const int64_t r = bh * T + i;
            const qkv_real *qi = qp + r * A;
            if (qa) memset(qa, 0, sizeof(double) * (size_t)A);
            for (int64_t j = 0; j < S; j++) {
                const double gij = de[r * S + j];
                if (gij == 0) continue; /* masked keys: every term below is a multiple of 0 */
                const qkv_real *kj = kb + j * A;
                double *kaj = ka ? ka + j * A : NULL;
                for (int64_t a = 0; a < A; a++) {
                    const double t = qkv__rtanh(qi[a] + kj[a]), s = gij * vh[a] * (1 - t * t);
                    if (qa) qa[a] += s;
                    if (kaj) kaj[a] += s;
                    if (va) va[a] += gij * t;
                }
            }
            for (int64_t a = 0; qa && a < A; a++)
                dqp[r * A + a] += (qkv_real)qa[a];
        }
    }
    if (kacc) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (BH * S * A * nblk > QKV_ATTN_GRAIN)
#endif
        for (int64_t r = 0; r < BH * S; r++) { /* key row (bh, j): blocks in order */
            const int64_t bh = r / S, j = r % S;
            for (int64_t a = 0; a < A; a++) {
                double s = 0;
                for (int64_t c = 0; c < nblk; c++)
                    s += kacc[((bh * nblk + c) * S + j) * A + a];
                dkp[r * A + a] += (qkv_real)s;
            }
        }
    }
    for (int64_t h = 0; vacc && h < H; h++) /* batches in order, blocks in order */
        for (int64_t a = 0; a < A; a++) {
            double s = 0;
            for (int64_t b = 0; b < B; b++)
                for (int64_t c = 0; c < nblk; c++)
                    s += vacc[((b * H + h) * nblk + c) * A + a];
            dv[h * A + a] += (qkv_real)s;
        }
    return true;
}

/* ---- normalisers ----------------------------------------------------------------------------- */

/* Softmax in place on a row's band ar[lo, hi), tensor-masked keys already -inf: their maximum
 * (a NaN score makes the row NaN where keys are allowed, 0 where masked, as the reference kernel
 * does; no allowed key gives zero weights), then e^(x - max) by qkv__exp_r 16 wide, its sum in
 * double lane partials, and x e / sum (rowreduce.h). Cloned per vector width: each width gives
 * the same bits, and much faster than the reference's scalar expf and running sum. */
QKV_CLONES
static void softmax_band(const qkv_mask_row *mr, qkv_real *ar, int64_t lo, int64_t hi) {
    qkv_real *restrict x = ar + lo;
    const int64_t n = hi - lo;
    const qkv_real mx = qkv__row_max(x, n);
    if (mx != mx) { /* NaN where allowed, 0 where masked: the reference's weights */
        for (int64_t j = lo; j < hi; j++) {
            const bool allowed = !(mr->padding || mr->allowed) || qkv__mask_row_key(mr, j);
            ar[j] = allowed ? (qkv_real)NAN : 0;
        }
        return;
    }
    if (mx == -(qkv_real)INFINITY) { /* no allowed key: zero weights */
        for (int64_t j = 0; j < n; j++)
            x[j] = 0;
        return;
    }
    qkv__row_exp_shift(x, mx, n);
    const double inv = 1.0 / qkv__row_sum(x, n);
    QKV_LANE_LOOP(j, n, x[j] = (qkv_real)(x[j] * inv););
}

/* Sparsemax over the band x[lo, hi), masked keys -inf, in place: tau by Michelot's iteration
 * (the projection onto the simplex): start from every finite score; tau = (sum - 1) / count over
 * those above the previous tau, until the count stops falling (at most one pass per score, a few
 * in practice). No sort and no scratch; the reference kernel computes tau from its definition. */
static void sparsemax_band(qkv_real *x, int64_t lo, int64_t hi) {
    double tau = -INFINITY;
    int64_t count = -1;
    for (;;) {
        double sum = 0;
        int64_t k = 0;
        for (int64_t j = lo; j < hi; j++)
            if (x[j] > tau || x[j] != x[j]) sum += x[j], k++;
        if (sum != sum) { /* an allowed NaN score: NaN where allowed */
            for (int64_t j = lo; j < hi; j++) x[j] = x[j] == -(qkv_real)INFINITY ? 0 : (qkv_real)NAN;
            return;
        }
        if (k == 0 || k == count) break;
        count = k;
        tau = (sum - 1) / (double)k;
    }
    for (int64_t j = lo; j < hi; j++) x[j] = count > 0 && x[j] > tau ? (qkv_real)(x[j] - tau) : 0;
}

static void normalize_fwd(const qkv_attn_dims *d, qkv_attn_norm norm, const qkv_mask *m,
                          const qkv_real *e, qkv_real *a, qkv_real *z) {
    const int64_t H = d->H, T = d->T, S = d->S, R = d->B * H * T;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (R * S > QKV_ATTN_GRAIN)
#endif
    for (int64_t r = 0; r < R; r++) {
        const qkv_mask_row mr = qkv__mask_row(m, r / (H * T), r % T, S);
        const int64_t lo = mr.lo, hi = mr.hi;
        const qkv_real *er = e + r * S;
        qkv_real *ar = a + r * S;
        for (int64_t j = 0; j < lo; j++)
            ar[j] = 0;
        for (int64_t j = hi; j < S; j++)
            ar[j] = 0;
        if (mr.padding || mr.allowed)
            for (int64_t j = lo; j < hi; j++)
                ar[j] = qkv__mask_row_key(&mr, j) ? er[j] : -INFINITY;
        else
            for (int64_t j = lo; j < hi; j++)
                ar[j] = er[j];
        switch (norm) { /* in place on the band ar[lo, hi) */
        case QKV_NORM_SOFTMAX:
            softmax_band(&mr, ar, lo, hi);
            break;
        case QKV_NORM_RELU:
            for (int64_t j = lo; j < hi; j++)
                ar[j] = ar[j] > 0 ? ar[j] : 0;
            break;
        case QKV_NORM_RELU_ROWNORM: {
            double sum = 0;
            for (int64_t j = lo; j < hi; j++) {
                ar[j] = ar[j] > 0 ? ar[j] : 0;
                sum += ar[j];
            }
            const double zr = sum + QKV_ROWNORM_EPS;
            for (int64_t j = lo; j < hi; j++)
                ar[j] = (qkv_real)(ar[j] / zr);
            z[r] = (qkv_real)zr;
            break;
        }
        case QKV_NORM_SIGMOID:
            for (int64_t j = lo; j < hi; j++) {
                const qkv_real x = ar[j];
                ar[j] = x >= 0 ? 1 / (1 + qkv__rexp(-x)) : qkv__rexp(x) / (1 + qkv__rexp(x));
            }
            break;
        case QKV_NORM_SPARSEMAX:
            sparsemax_band(ar, lo, hi);
            break;
        }
    }
}

static void normalize_bwd(const qkv_attn_dims *d, qkv_attn_norm norm, const qkv_mask *m,
                          const qkv_real *e, const qkv_real *a, const qkv_real *z,
                          const qkv_real *da, qkv_real *de) {
    const int64_t H = d->H, T = d->T, S = d->S, R = d->B * H * T;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (R * S > QKV_ATTN_GRAIN)
#endif
    for (int64_t r = 0; r < R; r++) {
        /* Keys outside the band have a = 0 and get no gradient: only the band is visited. Inside
         * it, tensor-masked keys have a = 0 too, which zeroes their softmax / sigmoid / relu terms;
         * RELU_ROWNORM's indicator [allowed, e > 0] is evaluated explicitly. */
        const qkv_mask_row mr = qkv__mask_row(m, r / (H * T), r % T, S);
        const int64_t lo = mr.lo, hi = mr.hi;
        const qkv_real *er = e + r * S, *ar = a + r * S, *dar = da + r * S;
        qkv_real *der = de + r * S;
        switch (norm) {
        case QKV_NORM_SOFTMAX: {
            double s = 0;
            for (int64_t j = lo; j < hi; j++)
                s += (double)ar[j] * dar[j];
            for (int64_t j = lo; j < hi; j++)
                der[j] += (qkv_real)(ar[j] * (dar[j] - s));
            break;
        }
        case QKV_NORM_RELU:
            for (int64_t j = lo; j < hi; j++)
                der[j] += ar[j] > 0 ? dar[j] : 0;
            break;
        case QKV_NORM_RELU_ROWNORM: {
            double s = 0;
            for (int64_t j = lo; j < hi; j++)
                s += (double)ar[j] * dar[j];
            for (int64_t j = lo; j < hi; j++)
                if (er[j] > 0 && qkv__mask_row_key(&mr, j))
                    der[j] += (qkv_real)((dar[j] - s) / z[r]);
            break;
        }
        case QKV_NORM_SIGMOID:
            for (int64_t j = lo; j < hi; j++)
                der[j] += dar[j] * ar[j] * (1 - ar[j]);
            break;
        case QKV_NORM_SPARSEMAX: { /* (da_j - mean of da over the support) on the support */
            double sum = 0;
            int64_t k = 0;
            for (int64_t j = lo; j < hi; j++)
                if (ar[j] > 0) sum += dar[j], k++;
            const double mean = k ? sum / (double)k : 0;
            for (int64_t j = lo; j < hi; j++)
                if (ar[j] > 0) der[j] += (qkv_real)(dar[j] - mean);
            break;
        }
        }
    }
}

const qkv_attention_kernels qkv_attention_cpu = {
    dot_fwd, dot_bwd, cos_fwd, cos_bwd, additive_fwd, additive_bwd, normalize_fwd, normalize_bwd,
};
