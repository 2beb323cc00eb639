/*
 * sdpa_cpu.c: fast fused scaled-dot-product attention on the CPU, after FlashAttention-2
 * (Dao 2023) with the online softmax of Milakov & Gimelshein (2018).
 *
 * Forward: one task per (b, h, block of BR queries), handed to OpenMP threads. The task walks
 * the key blocks of BC keys that its rows can see (blocks wholly outside the causal / window
 * band are skipped untouched) and keeps, per row, the running max m, the running sum l and the
 * unnormalised output acc:
 *   S = Q K^T scale - alibi (masked = -inf),  m' = max(m, rowmax S),  P = exp(S - m'),
 *   l = l e^(m - m') + rowsum P,  acc = acc e^(m - m') + P V;   at the end o = acc / l and
 *   lse = m + log l (-inf and o = 0 for a row with no allowed key).
 * Memory: the outputs plus one set of tiles per thread; no (T, S) buffer ever exists.
 *
 * Backward (FlashAttention-2, recomputing P = exp(S - lse) tile by tile), with D_i = dO_i.O_i
 * and dS = P (dO V^T - D) scale, in two passes so that every output element is summed by one
 * thread in a fixed order (no atomics: the result does not depend on the thread count):
 *   pass 1, one task per query block:  dQ += dS K;
 *   pass 2, one task per key block:    dV += P^T dO,  dK += dS^T Q.
 *
 * All tile products go through mm_acc, a register-blocked micro-kernel that vectorises along
 * contiguous W-wide column chunks; tiles are copied (transposed or zero-padded to a multiple of
 * W) into per-thread scratch allocated from the arena before the parallel region.
 */
#include "sdpa.h"

#ifdef QKV_WITH_OPENMP
#include <omp.h>
#endif

#define BR 64       /* queries per block */
#define BC 64       /* keys per block */
#define W 16        /* width of the register-blocked column chunks; BR and BC are multiples */
#define GRAIN 65536 /* multiply-adds below which a call stays on one thread */

static inline int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}
static inline int64_t max64(int64_t a, int64_t b) {
    return a > b ? a : b;
}
static inline int64_t round_up(int64_t n, int64_t m) {
    return (n + m - 1) / m * m;
}
static inline int64_t ceil_div(int64_t n, int64_t m) {
    return (n + m - 1) / m;
}

static inline qkv_real rexp(qkv_real x) {
#ifdef QKV_DOUBLE
    return exp(x);
#else
    return expf(x);
#endif
}

/* c[r][0:n] += sum_{x < kk} a[r][x] b[x][0:n] for r < m; n is a multiple of W. The W sums of one
 * chunk stay in registers while x runs; each element is summed in x order. */
static void mm_acc(int64_t m, int64_t n, int64_t kk, const qkv_real *restrict a, int64_t lda,
                   const qkv_real *restrict b, int64_t ldb, qkv_real *restrict c, int64_t ldc) {
    for (int64_t r = 0; r < m; r++)
        for (int64_t c0 = 0; c0 < n; c0 += W) {
            qkv_real acc[W];
            qkv_real *restrict cr = c + r * ldc + c0;
            for (int w = 0; w < W; w++)
                acc[w] = cr[w];
            for (int64_t x = 0; x < kk; x++) {
                const qkv_real ax = a[r * lda + x];
                const qkv_real *restrict bx = b + x * ldb + c0;
                for (int w = 0; w < W; w++)
                    acc[w] += ax * bx[w];
            }
            for (int w = 0; w < W; w++)
                cr[w] = acc[w];
        }
}

/* dst (cols, ld) = src (rows, cols)^T, columns rows .. round_up(rows, W) - 1 zeroed. */
static void copy_t(const qkv_real *src, int64_t rows, int64_t cols, qkv_real *dst, int64_t ld) {
    const int64_t rp = round_up(rows, W);
    for (int64_t d = 0; d < cols; d++) {
        for (int64_t r = 0; r < rows; r++)
            dst[d * ld + r] = src[r * cols + d];
        for (int64_t r = rows; r < rp; r++)
            dst[d * ld + r] = 0;
    }
}

/* dst (rows, ld) = src (rows, cols) with columns cols .. ld - 1 zeroed. */
static void copy_pad(const qkv_real *src, int64_t rows, int64_t cols, qkv_real *dst, int64_t ld) {
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t d = 0; d < cols; d++)
            dst[r * ld + d] = src[r * cols + d];
        for (int64_t d = cols; d < ld; d++)
            dst[r * ld + d] = 0;
    }
}

static void zero(qkv_real *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        x[i] = 0;
}

/* Whether the causal / window rules allow every pair of the tile and no per-element mask is set
 * (then the tile needs no per-element test). */
static bool tile_all_allowed(const qkv_sdpa_problem *p, int64_t i0, int64_t ni, int64_t j0,
                             int64_t nj) {
    if (p->key_padding || p->allowed) return false;
    const int64_t i1 = i0 + ni - 1, j1 = j0 + nj - 1;
    if (p->causal && j1 > i0) return false;
    if (p->window_left >= 0 && j0 < i1 - p->window_left) return false;
    if (p->window_right >= 0 && j1 > i0 + p->window_right) return false;
    return true;
}

/* Key range [*lo, *hi) that queries [i0, i0 + ni) may see under the causal / window rules. */
static void key_range(const qkv_sdpa_problem *p, int64_t i0, int64_t ni, int64_t *lo, int64_t *hi) {
    *lo = 0;
    *hi = p->S;
    if (p->window_left >= 0) *lo = max64(*lo, i0 - p->window_left);
    if (p->causal) *hi = min64(*hi, i0 + ni);
    if (p->window_right >= 0) *hi = min64(*hi, i0 + ni + p->window_right);
}

/* Query range [*lo, *hi) that may see keys [j0, j0 + nj). */
static void query_range(const qkv_sdpa_problem *p, int64_t j0, int64_t nj, int64_t *lo,
                        int64_t *hi) {
    *lo = 0;
    *hi = p->T;
    if (p->causal) *lo = max64(*lo, j0);
    if (p->window_right >= 0) *lo = max64(*lo, j0 - p->window_right);
    if (p->window_left >= 0) *hi = min64(*hi, j0 + nj + p->window_left);
}

/* Turn the dot products of a tile into scores: s = scale s - m_h |i - j| where allowed, -inf
 * elsewhere. The tile holds queries [i0, i0 + ni) and keys [j0, j0 + nj); element (i, j) sits at
 * s[(i - i0) si + (j - j0) sj]. */
static void finish_scores(const qkv_sdpa_problem *p, int64_t b, int64_t h, int64_t i0, int64_t ni,
                          int64_t j0, int64_t nj, qkv_real *s, int64_t si, int64_t sj) {
    const qkv_real scale = (qkv_real)p->scale, slope = p->alibi ? p->alibi[h] : 0;
    const bool all = tile_all_allowed(p, i0, ni, j0, nj);
    for (int64_t r = 0; r < ni; r++) {
        const int64_t i = i0 + r;
        qkv_real *row = s + r * si;
        if (all && !p->alibi) {
            for (int64_t c = 0; c < nj; c++)
                row[c * sj] *= scale;
            continue;
        }
        for (int64_t c = 0; c < nj; c++) {
            const int64_t j = j0 + c;
            qkv_real x = scale * row[c * sj];
            if (p->alibi) x -= slope * (qkv_real)(i > j ? i - j : j - i);
            if (!all && !sdpa_allowed(p, b, i, j)) x = (qkv_real)-INFINITY;
            row[c * sj] = x;
        }
    }
}

static int max_threads(void) {
#ifdef QKV_WITH_OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static int thread_id(void) {
#ifdef QKV_WITH_OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* Per-thread scratch: nthreads slices of `per` reals (a multiple of W, so every slice and every
 * tile inside it starts W-aligned). */
static qkv_real *thread_scratch(qkv_ctx *ctx, int64_t per, int nthreads) {
    return qkv__scratch(ctx, sizeof(qkv_real) * (size_t)per * (size_t)nthreads);
}

/* ---- forward -------------------------------------------------------------------------------- */

static bool fwd(qkv_ctx *ctx, const qkv_sdpa_problem *p, const qkv_real *q, const qkv_real *k,
                const qkv_real *v, qkv_real *o, qkv_real *lse) {
    const int64_t B = p->B, H = p->H, T = p->T, S = p->S, D = p->D, Dv = p->Dv;
    const int64_t Dvp = round_up(Dv, W), nqb = ceil_div(T, BR), tasks = B * H * nqb;
    /* kt (D, BC), vp (BC, Dvp), s (BR, BC), acc (BR, Dvp), m (BR), l (BR) */
    const int64_t per = D * BC + BC * Dvp + BR * BC + BR * Dvp + 2 * BR;
    const int nthreads = max_threads();
    qkv_real *scratch = thread_scratch(ctx, per, nthreads);
    if (!scratch) return false;
    const bool par = B * H * T * S * (D + Dv) > GRAIN;
    (void)par;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static, 1) if (par) /* round-robin: balances causal bands */
#endif
    for (int64_t task = 0; task < tasks; task++) {
        qkv_real *kt = scratch + (int64_t)thread_id() * per, *vp = kt + D * BC, *s = vp + BC * Dvp;
        qkv_real *acc = s + BR * BC, *m = acc + BR * Dvp, *l = m + BR;
        const int64_t bh = task / nqb, b = bh / H, h = bh % H, i0 = task % nqb * BR;
        const int64_t nr = min64(BR, T - i0);
        const qkv_real *qb = q + (bh * T + i0) * D;
        for (int64_t r = 0; r < nr; r++) {
            m[r] = (qkv_real)-INFINITY;
            l[r] = 0;
        }
        zero(acc, nr * Dvp);
        int64_t jlo, jhi;
        key_range(p, i0, nr, &jlo, &jhi);
        for (int64_t j0 = jlo / BC * BC; j0 < jhi; j0 += BC) {
            const int64_t nc = min64(BC, S - j0), ncp = round_up(nc, W);
            copy_t(k + (bh * S + j0) * D, nc, D, kt, BC);
            zero(s, nr * BC);
            mm_acc(nr, ncp, D, qb, D, kt, BC, s, BC); /* S = Q K^T */
            finish_scores(p, b, h, i0, nr, j0, nc, s, BC, 1);
            for (int64_t r = 0; r < nr; r++) { /* online softmax: P = exp(S - m'), rescale */
                qkv_real *row = s + r * BC;
                qkv_real mx = m[r];
                for (int64_t c = 0; c < nc; c++)
                    mx = row[c] > mx ? row[c] : mx;
                if (mx == (qkv_real)-INFINITY) { /* nothing allowed yet in this row */
                    zero(row, nc);
                    continue;
                }
                qkv_real sum = 0;
                for (int64_t c = 0; c < nc; c++)
                    sum += row[c] = rexp(row[c] - mx);
                if (mx != m[r]) {
                    const qkv_real alpha = rexp(m[r] - mx); /* 0 while m = -inf */
                    l[r] *= alpha;
                    for (int64_t d = 0; d < Dvp; d++)
                        acc[r * Dvp + d] *= alpha;
                    m[r] = mx;
                }
                l[r] += sum;
            }
            copy_pad(v + (bh * S + j0) * Dv, nc, Dv, vp, Dvp);
            mm_acc(nr, Dvp, nc, s, BC, vp, Dvp, acc, Dvp); /* acc += P V */
        }
        for (int64_t r = 0; r < nr; r++) {
            qkv_real *orow = o + (bh * T + i0 + r) * Dv;
            if (l[r] == 0) { /* no allowed key */
                zero(orow, Dv);
                lse[bh * T + i0 + r] = (qkv_real)-INFINITY;
                continue;
            }
            const qkv_real inv = 1 / l[r];
            for (int64_t d = 0; d < Dv; d++)
                orow[d] = acc[r * Dvp + d] * inv;
            lse[bh * T + i0 + r] = m[r] + (qkv_real)log((double)l[r]);
        }
    }
    return true;
}

/* ---- backward ------------------------------------------------------------------------------- */

/* P = exp(S - lse_i) over a tile of ni queries and nj keys (element (i, j) at
 * s[(i - i0) si + (j - j0) sj], one of si, sj being 1); L holds the lse of rows i0 .. with 0 in
 * place of -inf (such a row has only -inf scores, so P = 0 there). */
static void probs(const qkv_real *L, int64_t ni, int64_t nj, qkv_real *s, int64_t si, int64_t sj) {
    if (si == 1) /* transposed tile: queries run along the contiguous dimension */
        for (int64_t c = 0; c < nj; c++)
            for (int64_t r = 0; r < ni; r++)
                s[r + c * sj] = rexp(s[r + c * sj] - L[r]);
    else
        for (int64_t r = 0; r < ni; r++)
            for (int64_t c = 0; c < nj; c++)
                s[r * si + c] = rexp(s[r * si + c] - L[r]);
}

/* dS = P (dP - D_i) scale, in place of dP, over the same tile layout as probs. */
static void dscores(const qkv_real *Di, qkv_real scale, int64_t ni, int64_t nj, const qkv_real *P,
                    qkv_real *dp, int64_t si, int64_t sj) {
    if (si == 1) /* transposed tile */
        for (int64_t c = 0; c < nj; c++)
            for (int64_t r = 0; r < ni; r++)
                dp[r + c * sj] = P[r + c * sj] * (dp[r + c * sj] - Di[r]) * scale;
    else
        for (int64_t r = 0; r < ni; r++)
            for (int64_t c = 0; c < nj; c++)
                dp[r * si + c] = P[r * si + c] * (dp[r * si + c] - Di[r]) * scale;
}

static bool bwd(qkv_ctx *ctx, const qkv_sdpa_problem *p, const qkv_real *q, const qkv_real *k,
                const qkv_real *v, const qkv_real *o, const qkv_real *lse, const qkv_real *dout,
                qkv_real *dq, qkv_real *dk, qkv_real *dv) {
    const int64_t B = p->B, H = p->H, T = p->T, S = p->S, D = p->D, Dv = p->Dv;
    const int64_t Dp = round_up(D, W), Dvp = round_up(Dv, W), rows = B * H * T;
    const qkv_real scale = (qkv_real)p->scale;
    const bool par = B * H * T * S * (D + Dv) > GRAIN;
    (void)par;
    /* Per-row statistics (B, H, T): Dd = dO.O and L = lse (0 for rows without keys). */
    qkv_real *Dd = qkv__scratch(ctx, sizeof(qkv_real) * (size_t)(2 * rows + 1));
    if (!Dd) return false;
    qkv_real *L = Dd + rows;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (rows * Dv > GRAIN)
#endif
    for (int64_t x = 0; x < rows; x++) {
        qkv_real t = 0;
        for (int64_t d = 0; d < Dv; d++)
            t += dout[x * Dv + d] * o[x * Dv + d];
        Dd[x] = t;
        L[x] = lse[x] == (qkv_real)-INFINITY ? 0 : lse[x];
    }
    /* pass 1: kt (D, BC), vt (Dv, BC), kp (BC, Dp), s (BR, BC), dp (BR, BC), dqa (BR, Dp)
     * pass 2: qt (D, BR), dot (Dv, BR), qp (BR, Dp), dop (BR, Dvp), s (BC, BR), dp (BC, BR),
     *         dka (BC, Dp), dva (BC, Dvp) */
    const int64_t per1 = D * BC + Dv * BC + BC * Dp + 2 * BR * BC + BR * Dp;
    const int64_t per2 = D * BR + Dv * BR + BR * Dp + BR * Dvp + 2 * BC * BR + BC * Dp + BC * Dvp;
    const int64_t per = max64(per1, per2);
    const int nthreads = max_threads();
    qkv_real *scratch = thread_scratch(ctx, per, nthreads);
    if (!scratch) return false;

    if (dq) { /* pass 1: dQ by query blocks */
        const int64_t nqb = ceil_div(T, BR), tasks = B * H * nqb;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static, 1) if (par)
#endif
        for (int64_t task = 0; task < tasks; task++) {
            qkv_real *kt = scratch + (int64_t)thread_id() * per, *vt = kt + D * BC;
            qkv_real *kp = vt + Dv * BC, *s = kp + BC * Dp, *dp = s + BR * BC, *dqa = dp + BR * BC;
            const int64_t bh = task / nqb, b = bh / H, h = bh % H, i0 = task % nqb * BR;
            const int64_t nr = min64(BR, T - i0), row0 = bh * T + i0;
            const qkv_real *qb = q + row0 * D, *dob = dout + row0 * Dv;
            zero(dqa, nr * Dp);
            int64_t jlo, jhi;
            key_range(p, i0, nr, &jlo, &jhi);
            for (int64_t j0 = jlo / BC * BC; j0 < jhi; j0 += BC) {
                const int64_t nc = min64(BC, S - j0), ncp = round_up(nc, W);
                const qkv_real *kb = k + (bh * S + j0) * D, *vb = v + (bh * S + j0) * Dv;
                copy_t(kb, nc, D, kt, BC);
                zero(s, nr * BC);
                mm_acc(nr, ncp, D, qb, D, kt, BC, s, BC); /* S = Q K^T */
                finish_scores(p, b, h, i0, nr, j0, nc, s, BC, 1);
                probs(L + row0, nr, nc, s, BC, 1);
                copy_t(vb, nc, Dv, vt, BC);
                zero(dp, nr * BC);
                mm_acc(nr, ncp, Dv, dob, Dv, vt, BC, dp, BC); /* dP = dO V^T */
                dscores(Dd + row0, scale, nr, nc, s, dp, BC, 1);
                copy_pad(kb, nc, D, kp, Dp);
                mm_acc(nr, Dp, nc, dp, BC, kp, Dp, dqa, Dp); /* dQ += dS K */
            }
            for (int64_t r = 0; r < nr; r++)
                for (int64_t d = 0; d < D; d++)
                    dq[(row0 + r) * D + d] += dqa[r * Dp + d];
        }
    }

    if (dk || dv) { /* pass 2: dK, dV by key blocks; tiles are transposed: rows = keys */
        const int64_t nkb = ceil_div(S, BC), tasks = B * H * nkb;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static, 1) if (par)
#endif
        for (int64_t task = 0; task < tasks; task++) {
            qkv_real *qt = scratch + (int64_t)thread_id() * per, *dot = qt + D * BR;
            qkv_real *qp = dot + Dv * BR, *dop = qp + BR * Dp, *s = dop + BR * Dvp;
            qkv_real *dp = s + BC * BR, *dka = dp + BC * BR, *dva = dka + BC * Dp;
            const int64_t bh = task / nkb, b = bh / H, h = bh % H, j0 = task % nkb * BC;
            const int64_t nc = min64(BC, S - j0);
            const qkv_real *kb = k + (bh * S + j0) * D, *vb = v + (bh * S + j0) * Dv;
            zero(dka, nc * Dp);
            zero(dva, nc * Dvp);
            int64_t ilo, ihi;
            query_range(p, j0, nc, &ilo, &ihi);
            for (int64_t i0 = ilo / BR * BR; i0 < ihi; i0 += BR) {
                const int64_t nr = min64(BR, T - i0), nrp = round_up(nr, W), row0 = bh * T + i0;
                const qkv_real *qb = q + row0 * D, *dob = dout + row0 * Dv;
                copy_t(qb, nr, D, qt, BR);
                zero(s, nc * BR);
                mm_acc(nc, nrp, D, kb, D, qt, BR, s, BR); /* S^T = K Q^T */
                finish_scores(p, b, h, i0, nr, j0, nc, s, 1, BR);
                probs(L + row0, nr, nc, s, 1, BR);
                if (dv) {
                    copy_pad(dob, nr, Dv, dop, Dvp);
                    mm_acc(nc, Dvp, nr, s, BR, dop, Dvp, dva, Dvp); /* dV += P^T dO */
                }
                if (dk) {
                    copy_t(dob, nr, Dv, dot, BR);
                    zero(dp, nc * BR);
                    mm_acc(nc, nrp, Dv, vb, Dv, dot, BR, dp, BR); /* dP^T = V dO^T */
                    dscores(Dd + row0, scale, nr, nc, s, dp, 1, BR);
                    copy_pad(qb, nr, D, qp, Dp);
                    mm_acc(nc, Dp, nr, dp, BR, qp, Dp, dka, Dp); /* dK += dS^T Q */
                }
            }
            for (int64_t c = 0; c < nc; c++) {
                if (dk)
                    for (int64_t d = 0; d < D; d++)
                        dk[(bh * S + j0 + c) * D + d] += dka[c * Dp + d];
                if (dv)
                    for (int64_t d = 0; d < Dv; d++)
                        dv[(bh * S + j0 + c) * Dv + d] += dva[c * Dvp + d];
            }
        }
    }
    return true;
}

const qkv_sdpa_kernels qkv_sdpa_cpu = {fwd, bwd};
