/*
 * attention_ref.c: reference kernels of the attention building blocks: plain loops in the order
 * of the formulas, double accumulators, tanh / exp in double, masks through qkv_mask_allows.
 * The oracle of the tests; never optimised.
 *
 * Cosine backward, with n_q = max(|q_i|, eps), n_k = max(|k_j|, eps), c_ij = q_i.k_j/(n_q n_k):
 *   d c_ij / d q_i = k_j / (n_q n_k) - [|q_i| > eps] c_ij q_i / n_q^2   (the clamp has no slope)
 * Additive backward, with t = tanh(qp_ia + kp_ja):
 *   dqp_ia += sum_j de_ij v_a (1 - t^2),  dkp_ja += sum_i de_ij v_a (1 - t^2),
 *   dv_a   += sum_{b,i,j} de_ij t.
 */
#include "attention.h"

static double dot(const qkv_real *x, const qkv_real *y, int64_t n) {
    double s = 0;
    for (int64_t p = 0; p < n; p++)
        s += (double)x[p] * (double)y[p];
    return s;
}

/* ---- dot / scaled dot ------------------------------------------------------------------------ */

/* Row i of head (b, h) of a tensor laid out as l. */
static inline int64_t row_at(const qkv__mat_layout *l, int64_t b, int64_t h, int64_t i) {
    return b * l->outer + h * l->inner + i * l->ld;
}

static void dot_fwd(const qkv_attn_dims *d, qkv_real alpha, const qkv_real *q, const qkv_real *k,
                    qkv_real *e) {
    const int64_t T = d->T, S = d->S, D = d->D;
    for (int64_t b = 0; b < d->B; b++)
        for (int64_t h = 0; h < d->H; h++)
            for (int64_t i = 0; i < T; i++)
                for (int64_t j = 0; j < S; j++)
                    e[((b * d->H + h) * T + i) * S + j] =
                        (qkv_real)((double)alpha * dot(q + row_at(&d->lq, b, h, i), k + row_at(&d->lk, b, h, j), D));
}

static void dot_bwd(const qkv_attn_dims *d, qkv_real alpha, const qkv_real *q, const qkv_real *k,
                    const qkv_real *de, qkv_real *dq, qkv_real *dk) {
    const int64_t T = d->T, S = d->S, D = d->D;
    for (int64_t b = 0; b < d->B; b++)
        for (int64_t h = 0; h < d->H; h++) {
            const qkv_real *deb = de + (b * d->H + h) * T * S;
            for (int64_t i = 0; dq && i < T; i++)
                for (int64_t c = 0; c < D; c++) {
                    double acc = 0;
                    for (int64_t j = 0; j < S; j++)
                        acc += (double)deb[i * S + j] * k[row_at(&d->lk, b, h, j) + c];
                    dq[row_at(&d->lq, b, h, i) + c] += (qkv_real)((double)alpha * acc);
                }
            for (int64_t j = 0; dk && j < S; j++)
                for (int64_t c = 0; c < D; c++) {
                    double acc = 0;
                    for (int64_t i = 0; i < T; i++)
                        acc += (double)deb[i * S + j] * q[row_at(&d->lq, b, h, i) + c];
                    dk[row_at(&d->lk, b, h, j) + c] += (qkv_real)((double)alpha * acc);
                }
        }
}

/* ---- cosine ---------------------------------------------------------------------------------- */

static double clamped_norm(const qkv_real *x, int64_t n) {
    return fmax(sqrt(dot(x, x, n)), QKV_COSINE_EPS);
}

static void cos_fwd(const qkv_attn_dims *d, const qkv_real *g, int64_t gn, const qkv_real *q,
                    const qkv_real *k, qkv_real *nq, qkv_real *nk, qkv_real *e) {
    const int64_t H = d->H, T = d->T, S = d->S, D = d->D;
    for (int64_t r = 0; r < d->B * H * T; r++)
        nq[r] = (qkv_real)clamped_norm(q + r * D, D);
    for (int64_t r = 0; r < d->B * H * S; r++)
        nk[r] = (qkv_real)clamped_norm(k + r * D, D);
    for (int64_t bh = 0; bh < d->B * H; bh++) {
        const double gh = g[gn == 1 ? 0 : bh % H];
        for (int64_t i = 0; i < T; i++) {
            const qkv_real *qi = q + (bh * T + i) * D;
            for (int64_t j = 0; j < S; j++) {
                const qkv_real *kj = k + (bh * S + j) * D;
                e[(bh * T + i) * S + j] =
                    (qkv_real)(gh * dot(qi, kj, D) / (clamped_norm(qi, D) * clamped_norm(kj, D)));
            }
        }
    }
}

static bool cos_bwd(qkv_ctx *ctx, const qkv_attn_dims *d, const qkv_real *g, int64_t gn,
                    const qkv_real *q, const qkv_real *k, const qkv_real *nq, const qkv_real *nk,
                    const qkv_real *e, const qkv_real *de, qkv_real *dq, qkv_real *dk,
                    qkv_real *dg) {
    const int64_t H = d->H, T = d->T, S = d->S, D = d->D;
    double *acc = qkv__scratch(ctx, sizeof(double) * (size_t)D); /* one row of dq or dk */
    if (!acc) return false;
    for (int64_t bh = 0; bh < d->B * H; bh++) {
        const int64_t gi = gn == 1 ? 0 : bh % H;
        const double gh = g[gi];
        const qkv_real *qb = q + bh * T * D, *kb = k + bh * S * D, *deb = de + bh * T * S;
        const qkv_real *nqb = nq + bh * T, *nkb = nk + bh * S;
#define COS(i, j) (dot(qb + (i)*D, kb + (j)*D, D) / ((double)nqb[i] * nkb[j]))
        for (int64_t i = 0; dq && i < T; i++) { /* dq_i = g sum_j de_ij d cos_ij / d q_i */
            const double nqi = nqb[i], slope = qkv__cos_unclamped(nqb[i]) ? 1 : 0;
            for (int64_t c = 0; c < D; c++)
                acc[c] = 0;
            for (int64_t j = 0; j < S; j++) {
                const double cij = COS(i, j), w = deb[i * S + j];
                for (int64_t c = 0; c < D; c++)
                    acc[c] += w * (kb[j * D + c] / (nqi * nkb[j]) -
                                   slope * cij * qb[i * D + c] / (nqi * nqi));
            }
            for (int64_t c = 0; c < D; c++)
                dq[(bh * T + i) * D + c] += (qkv_real)(gh * acc[c]);
        }
        for (int64_t j = 0; dk && j < S; j++) { /* dk_j = g sum_i de_ij d cos_ij / d k_j */
            const double nkj = nkb[j], slope = qkv__cos_unclamped(nkb[j]) ? 1 : 0;
            for (int64_t c = 0; c < D; c++)
                acc[c] = 0;
            for (int64_t i = 0; i < T; i++) {
                const double cij = COS(i, j), w = deb[i * S + j];
                for (int64_t c = 0; c < D; c++)
                    acc[c] += w * (qb[i * D + c] / (nqb[i] * nkj) -
                                   slope * cij * kb[j * D + c] / (nkj * nkj));
            }
            for (int64_t c = 0; c < D; c++)
                dk[(bh * S + j) * D + c] += (qkv_real)(gh * acc[c]);
        }
        if (dg) { /* dg = sum_ij de_ij cos_ij */
            double sum = 0;
            for (int64_t i = 0; i < T; i++)
                for (int64_t j = 0; j < S; j++)
                    sum += (double)deb[i * S + j] * COS(i, j);
            dg[gi] += (qkv_real)sum;
        }
#undef COS
    }
    return true;
}

/* ---- additive -------------------------------------------------------------------------------- */

static void additive_fwd(const qkv_attn_dims *d, const qkv_real *qp, const qkv_real *kp,
                         const qkv_real *v, qkv_real *e) {
    const int64_t H = d->H, T = d->T, S = d->S, A = d->D;
    for (int64_t bh = 0; bh < d->B * H; bh++) {
        const qkv_real *vh = v + (bh % H) * A;
        for (int64_t i = 0; i < T; i++)
            for (int64_t j = 0; j < S; j++) {
                double acc = 0;
                for (int64_t a = 0; a < A; a++)
                    acc += (double)vh[a] * tanh((double)qp[(bh * T + i) * A + a] +
                                                (double)kp[(bh * S + j) * A + a]);
                e[(bh * T + i) * S + j] = (qkv_real)acc;
            }
    }
}

static bool additive_bwd(qkv_ctx *ctx, const qkv_attn_dims *d, const qkv_real *qp,
                         const qkv_real *kp, const qkv_real *v, const qkv_real *de, qkv_real *dqp,
                         qkv_real *dkp, qkv_real *dv) {
    const int64_t B = d->B, H = d->H, T = d->T, S = d->S, A = d->D;
#define TANH(bh, i, j, a)                                                                          \
    tanh((double)qp[((bh)*T + (i)) * A + (a)] + (double)kp[((bh)*S + (j)) * A + (a)])
    for (int64_t bh = 0; bh < B * H; bh++) {
        const qkv_real *vh = v + (bh % H) * A, *deb = de + bh * T * S;
        for (int64_t i = 0; dqp && i < T; i++)
            for (int64_t a = 0; a < A; a++) {
                double acc = 0;
                for (int64_t j = 0; j < S; j++) {
                    double t = TANH(bh, i, j, a);
                    acc += (double)deb[i * S + j] * vh[a] * (1 - t * t);
                }
                dqp[(bh * T + i) * A + a] += (qkv_real)acc;
            }
        for (int64_t j = 0; dkp && j < S; j++)
            for (int64_t a = 0; a < A; a++) {
                double acc = 0;
                for (int64_t i = 0; i < T; i++) {
                    double t = TANH(bh, i, j, a);
                    acc += (double)deb[i * S + j] * vh[a] * (1 - t * t);
                }
                dkp[(bh * S + j) * A + a] += (qkv_real)acc;
            }
    }
    for (int64_t h = 0; dv && h < H; h++)
        for (int64_t a = 0; a < A; a++) {
            double acc = 0;
            for (int64_t b = 0; b < B; b++)
                for (int64_t i = 0; i < T; i++)
                    for (int64_t j = 0; j < S; j++)
                        acc += (double)de[((b * H + h) * T + i) * S + j] * TANH(b * H + h, i, j, a);
            dv[h * A + a] += (qkv_real)acc;
        }
#undef TANH
    return true;
}

/* ---- normalisers ----------------------------------------------------------------------------- */

static double sigmoid(double x) {
    return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x));
}

/* Sparsemax's threshold over the allowed scores of row (b, i), by its definition (Martins &
 * Astudillo 2016, eq. 3 with the sorted order replaced by counts): k = the largest number of
 * top scores z_(1) >= .. >= z_(k) with 1 + k z_(k) > sum_{l <= k} z_(l), and
 * tau = (sum_{l <= k} z_(l) - 1) / k. Scores tied with z_(k) enter together, which gives the same
 * tau. O(S^2): an oracle. NaN when an allowed score is; -inf when no key is allowed. */
static double sparsemax_tau(const qkv_mask *m, int64_t b, int64_t i, const qkv_real *er, int64_t S) {
    double tau = -INFINITY;
    int64_t best = 0;
    for (int64_t j = 0; j < S; j++) {
        if (!qkv_mask_allows(m, b, i, j)) continue;
        if (isnan(er[j])) return NAN;
        int64_t k = 0;
        double sum = 0;
        for (int64_t l = 0; l < S; l++)
            if (qkv_mask_allows(m, b, i, l) && er[l] >= er[j]) k++, sum += er[l];
        if (1 + (double)k * er[j] > sum && k > best) best = k, tau = (sum - 1) / (double)k;
    }
    return tau;
}

static void normalize_fwd(const qkv_attn_dims *d, qkv_attn_norm norm, const qkv_mask *m,
                          const qkv_real *e, qkv_real *a, qkv_real *z) {
    const int64_t H = d->H, T = d->T, S = d->S;
    for (int64_t r = 0; r < d->B * H * T; r++) {
        const int64_t b = r / (H * T), i = r % T;
        const qkv_real *er = e + r * S;
        qkv_real *ar = a + r * S;
        switch (norm) {
        case QKV_NORM_SOFTMAX: {
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < S; j++)
                if (qkv_mask_allows(m, b, i, j) && (er[j] > mx || isnan(er[j]))) mx = er[j];
            for (int64_t j = 0; j < S; j++) /* an allowed NaN score: mx = NaN, NaN where allowed */
                if (qkv_mask_allows(m, b, i, j) && mx != -INFINITY) sum += exp(er[j] - mx);
            for (int64_t j = 0; j < S; j++) /* no allowed key (mx = -inf): all zero */
                ar[j] = qkv_mask_allows(m, b, i, j) && mx != -INFINITY
                            ? (qkv_real)(exp(er[j] - mx) / sum)
                            : 0;
            break;
        }
        case QKV_NORM_RELU:
            for (int64_t j = 0; j < S; j++)
                ar[j] = qkv_mask_allows(m, b, i, j) && er[j] > 0 ? er[j] : 0;
            break;
        case QKV_NORM_RELU_ROWNORM: {
            double sum = 0;
            for (int64_t j = 0; j < S; j++)
                if (qkv_mask_allows(m, b, i, j) && er[j] > 0) sum += er[j];
            const double zr = sum + QKV_ROWNORM_EPS;
            for (int64_t j = 0; j < S; j++)
                ar[j] = qkv_mask_allows(m, b, i, j) && er[j] > 0 ? (qkv_real)(er[j] / zr) : 0;
            z[r] = (qkv_real)zr;
            break;
        }
        case QKV_NORM_SIGMOID:
            for (int64_t j = 0; j < S; j++)
                ar[j] = qkv_mask_allows(m, b, i, j) ? (qkv_real)sigmoid(er[j]) : 0;
            break;
        case QKV_NORM_SPARSEMAX: {
            const double tau = sparsemax_tau(m, b, i, er, S); /* -inf: no allowed key, zeros */
            for (int64_t j = 0; j < S; j++)
                ar[j] = qkv_mask_allows(m, b, i, j) && tau != -INFINITY
                            ? (qkv_real)(isnan(tau) ? NAN : er[j] > tau ? er[j] - tau : 0)
                            : 0;
            break;
        }
        }
    }
}

static void normalize_bwd(const qkv_attn_dims *d, qkv_attn_norm norm, const qkv_mask *m,
                          const qkv_real *e, const qkv_real *a, const qkv_real *z,
                          const qkv_real *da, qkv_real *de) {
    const int64_t H = d->H, T = d->T, S = d->S;
    for (int64_t r = 0; r < d->B * H * T; r++) {
        const int64_t b = r / (H * T), i = r % T;
        const qkv_real *er = e + r * S, *ar = a + r * S, *dar = da + r * S;
        qkv_real *der = de + r * S;
        double s = 0; /* sum_j a_j da_j */
        for (int64_t j = 0; j < S; j++)
            s += (double)ar[j] * dar[j];
        /* sparsemax: the Jacobian is diag(1_S) - 1_S 1_S^T / |S| on the support S = {a_j > 0} */
        double support_sum = 0;
        int64_t support = 0;
        for (int64_t j = 0; j < S; j++)
            if (ar[j] > 0) support_sum += dar[j], support++;
        const double support_mean = support ? support_sum / (double)support : 0;
        for (int64_t j = 0; j < S; j++) {
            if (!qkv_mask_allows(m, b, i, j)) continue; /* masked: zero gradient */
            switch (norm) {
            case QKV_NORM_SOFTMAX:
                der[j] += (qkv_real)(ar[j] * (dar[j] - s));
                break;
            case QKV_NORM_RELU:
                if (er[j] > 0) der[j] += dar[j];
                break;
            case QKV_NORM_RELU_ROWNORM:
                if (er[j] > 0) der[j] += (qkv_real)((dar[j] - s) / z[r]);
                break;
            case QKV_NORM_SIGMOID:
                der[j] += (qkv_real)(dar[j] * (double)ar[j] * (1 - (double)ar[j]));
                break;
            case QKV_NORM_SPARSEMAX:
                if (ar[j] > 0) der[j] += (qkv_real)(dar[j] - support_mean);
                break;
            }
        }
    }
}

const qkv_attention_kernels qkv_attention_ref = {
    dot_fwd, dot_bwd, cos_fwd, cos_bwd, additive_fwd, additive_bwd, normalize_fwd, normalize_bwd,
};
