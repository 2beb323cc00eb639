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
 *   lse = m + log l (-inf and o = 0 for a row with no allowed key; NaN for a row with a NaN
 *   score). e^x is qkv__exp_r (rowreduce.h, within ~1 ulp of expf), which the compiler
 *   vectorises, in the forward and in the backward's recomputation alike.
 *
 * Backward (FlashAttention-2, recomputing P = exp(S - lse) tile by tile), with D_i = dO_i.O_i
 * and dS = P (dO V^T - D) scale. Every output element is summed by one thread in a fixed order
 * (no atomics: the result does not depend on the thread count). With B H at least
 * QKV_SDPA_ONE_PASS_HEADS_PER_THREAD (sdpa.h) x threads, as in training, one task per head walks
 * its key blocks and, inside, their query blocks, and each tile does all of it:  dV_j += P^T dO_i,
 * dK_j += dS^T Q_i,  dQ_i += dS K_j  (dQ of the whole head in the task's scratch): S, P, dP and
 * the dropout decisions once per tile. With fewer heads there would be too few tasks for the
 * threads, so two passes split the work finer, at the price of computing them twice:
 *   pass 1, one task per query block:  dQ += dS K;
 *   pass 2, one task per key block:    dV += P^T dO,  dK += dS^T Q.
 * Both schedules give the same bits: each element of dQ, dK, dV sums the same products over the
 * same tiles in the same order (tiles one schedule visits and the other skips lie wholly outside
 * the causal / window band: they add exact zeros to sums that start at +0), and a product and
 * its transpose multiply the same pairs in the same order.
 *
 * Dropout (training, FlashAttention's way): with z_ij = keep_ij / (1 - p) and P the undropped
 * softmax numerators, the forward keeps l (and lse) over the undropped P and accumulates only the
 * kept weights, o_i = sum_j keep_ij P_ij v_j / ((1 - p) l_i). Backward regenerates keep_ij from
 * Philox tile by tile (no mask is stored). With A = softmax(S), A' = z A, O = A' V:
 *   dV = A'^T dO,  dA' = dO V^T = dP,  dA = z dP,
 *   dS_ij = A_ij (dA_ij - sum_k A_ik dA_ik),  and  sum_k A_ik z_ik dP_ik = dO_i . sum_k A'_ik V_k
 *   = dO_i . O_i = D_i,
 * so the undropped backward holds with dP replaced by z dP and P^T by (z P)^T in dV: D_i is still
 * dO_i . O_i of the (dropped) output.
 *
 * Memory: no (T, S) buffer ever exists. Besides the outputs, each call builds transposed copies
 * of the operands whose rows a product contracts over (K^T for the forward; K^T, V^T, then Q^T,
 * dO^T in the same place for the backward: O(B H T D), one pass each instead of a transpose per
 * pair of blocks) and one set of tiles per thread (BR x BC scores, accumulators); all of it is one
 * buffer taken before the parallel regions and handed back after them (qkv__grad_scratch), so the
 * next attention call of the same size reuses it: a model's attention layers share one buffer
 * instead of each leaving its scratch in the step arena.
 *
 * Every tile product goes through mm_acc, a micro-kernel blocked over 2 rows x 32 columns of
 * registers that vectorises along the columns, compiled for AVX-512, AVX2 and the baseline with
 * the same bits (QKV_CLONES; see mm_tile).
 */
#include "sdpa.h"

#include "rowreduce.h"

#ifdef QKV_WITH_OPENMP
#include <omp.h>
#endif

#define BR 64       /* queries per block */
#define BC 64       /* keys per block */
#define GRAIN 65536 /* multiply-adds below which a call stays on one thread */
/* mm_acc's register tile: 2 rows x W columns of sums (64 bytes of columns per row: 8 AVX2
 * registers of sums, 16 SSE ones). Measured on 64 x 64 x 64 products (AMD EPYC, AVX2, GCC 12
 * -O2): 2 x 32 floats ~31 GFLOP/s in the AVX2 clone and ~13 in the SSE2 baseline, against ~14 and
 * ~7 for one row of 32 (the previous kernel); 4 x 16 ~29 / 11, 4 x 32 ~22 / 11. */
#ifdef QKV_DOUBLE
#define W 16
#else
#define W 32
#endif

static inline int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}
static inline int64_t max64(int64_t a, int64_t b) {
    return a > b ? a : b;
}
static inline int64_t ceil_div(int64_t n, int64_t m) {
    return (n + m - 1) / m;
}

static void zero(qkv_real *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        x[i] = 0;
}

#if defined(__GNUC__)
#define SDPA_INLINE inline __attribute__((always_inline))
#else
#define SDPA_INLINE inline
#endif

/* One tile of mm_acc: rows 0 (and 1, when two) of width columns,
 *   c[r][0:width] += sum_x a[r][x] b[x][0:width].
 * With width a constant after inlining, the column loop unrolls fully, the sums stay in vector
 * registers while x runs and each row of b is loaded once for both rows. Each sum runs in x
 * order with a separate multiply and add (no FMA: -ffp-contract=off), so every lane computes the
 * same operations whatever the vector width: the clones give the baseline's bits. */
static SDPA_INLINE void mm_tile(int width, bool two, int64_t kk, const qkv_real *restrict a,
                                int64_t lda, const qkv_real *restrict b, int64_t ldb,
                                qkv_real *restrict c, int64_t ldc) {
    qkv_real s0[W], s1[W];
    for (int w = 0; w < width; w++) {
        s0[w] = c[w];
        s1[w] = two ? c[ldc + w] : 0;
    }
    for (int64_t x = 0; x < kk; x++) {
        const qkv_real x0 = a[x], x1 = two ? a[lda + x] : 0;
        const qkv_real *restrict bx = b + x * ldb;
#pragma GCC unroll 32
        for (int w = 0; w < width; w++) {
            const qkv_real bw = bx[w];
            s0[w] += x0 * bw;
            if (two) s1[w] += x1 * bw;
        }
    }
    for (int w = 0; w < width; w++) {
        c[w] = s0[w];
        if (two) c[ldc + w] = s1[w];
    }
}

/* One or two rows of mm_acc: columns in tiles of W, then of 4, then one by one. */
static SDPA_INLINE void mm_rows(bool two, int64_t n, int64_t kk, const qkv_real *restrict a,
                                int64_t lda, const qkv_real *restrict b, int64_t ldb,
                                qkv_real *restrict c, int64_t ldc) {
    int64_t j = 0;
    for (; j + W <= n; j += W)
        mm_tile(W, two, kk, a, lda, b + j, ldb, c + j, ldc);
    for (; j + 4 <= n; j += 4)
        mm_tile(4, two, kk, a, lda, b + j, ldb, c + j, ldc);
    for (; j < n; j++)
        mm_tile(1, two, kk, a, lda, b + j, ldb, c + j, ldc);
}

/* c[r][0:n] += sum_{x < kk} a[r][x] b[x][0:n] for r < m, rows two at a time. Every element is
 * summed in x order whatever its tile, so the result is the plain triple loop's to the bit.
 * Compiled for AVX-512, AVX2 and the baseline (QKV_CLONES). */
QKV_CLONES
static void mm_acc_lanes(int64_t m, int64_t n, int64_t kk, const qkv_real *restrict a, int64_t lda,
                         const qkv_real *restrict b, int64_t ldb, qkv_real *restrict c,
                         int64_t ldc) {
    int64_t r = 0;
    for (; r + 2 <= m; r += 2)
        mm_rows(true, n, kk, a + r * lda, lda, b, ldb, c + r * ldc, ldc);
    if (r < m) mm_rows(false, n, kk, a + r * lda, lda, b, ldb, c + r * ldc, ldc);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(QKV_NO_CLONES) && !defined(QKV_DOUBLE)
#include "transpose16.h"
#define SDPA_AVX512 1

enum { MM_ROWS = 6 }; /* rows of c per register tile: 12 zmm sums of 2 x 16 columns each */

/* mm_acc on rows 0 .. rows - 1 (rows <= MM_ROWS, a constant at each call site) of c, columns in
 * tiles of 32 (the last masked): per x, two vectors of b's row and one broadcast of a per row,
 * each sum s += a b as a multiply then an add (no FMA), in x order: the plain loop's bits. Two
 * rows at a time (mm_tile) keep 4 sums in flight, fewer than the adder's latency hides; 6 keep
 * 12 (config-B encoder attention's 64 x 64 x 64 products: see BENCHMARKS.md). */
__attribute__((target("avx512f"), always_inline)) static inline void
mm_rows_avx512(int rows, int64_t n, int64_t kk, const float *restrict a, int64_t lda,
               const float *restrict b, int64_t ldb, float *restrict c, int64_t ldc) {
    for (int64_t j = 0; j < n; j += 32) {
        const __mmask16 k0 = qkv__first_lanes(n - j), k1 = qkv__first_lanes(n - j - 16);
        __m512 s[MM_ROWS][2];
#pragma GCC unroll 6
        for (int r = 0; r < MM_ROWS; r++)
            if (r < rows) {
                s[r][0] = _mm512_maskz_loadu_ps(k0, c + r * ldc + j);
                s[r][1] = _mm512_maskz_loadu_ps(k1, c + r * ldc + j + 16);
            }
        for (int64_t x = 0; x < kk; x++) {
            const __m512 b0 = _mm512_maskz_loadu_ps(k0, b + x * ldb + j),
                         b1 = _mm512_maskz_loadu_ps(k1, b + x * ldb + j + 16);
#pragma GCC unroll 6
            for (int r = 0; r < MM_ROWS; r++)
                if (r < rows) {
                    const __m512 ar = _mm512_set1_ps(a[r * lda + x]);
                    s[r][0] = _mm512_add_ps(s[r][0], _mm512_mul_ps(ar, b0));
                    s[r][1] = _mm512_add_ps(s[r][1], _mm512_mul_ps(ar, b1));
                }
        }
#pragma GCC unroll 6
        for (int r = 0; r < MM_ROWS; r++)
            if (r < rows) {
                _mm512_mask_storeu_ps(c + r * ldc + j, k0, s[r][0]);
                _mm512_mask_storeu_ps(c + r * ldc + j + 16, k1, s[r][1]);
            }
    }
}

__attribute__((target("avx512f"))) static void mm_acc_avx512(int64_t m, int64_t n, int64_t kk,
                                                             const float *restrict a, int64_t lda,
                                                             const float *restrict b, int64_t ldb,
                                                             float *restrict c, int64_t ldc) {
    int64_t r = 0;
    for (; r + MM_ROWS <= m; r += MM_ROWS)
        mm_rows_avx512(MM_ROWS, n, kk, a + r * lda, lda, b, ldb, c + r * ldc, ldc);
    /* the last 1-5 rows as 4, 2 and 1-row tiles, each count with its own unrolled code (rows are
     * independent, so how they are grouped does not touch a bit) */
    if ((m - r) & 4) {
        mm_rows_avx512(4, n, kk, a + r * lda, lda, b, ldb, c + r * ldc, ldc);
        r += 4;
    }
    if ((m - r) & 2) {
        mm_rows_avx512(2, n, kk, a + r * lda, lda, b, ldb, c + r * ldc, ldc);
        r += 2;
    }
    if ((m - r) & 1) mm_rows_avx512(1, n, kk, a + r * lda, lda, b, ldb, c + r * ldc, ldc);
}
#endif

/* c[r][0:n] += sum_{x < kk} a[r][x] b[x][0:n] for r < m, every element summed in x order: the
 * AVX-512 tiles above where the CPU has them, else mm_acc_lanes (the same bits either way). */
static void mm_acc(int64_t m, int64_t n, int64_t kk, const qkv_real *restrict a, int64_t lda,
                   const qkv_real *restrict b, int64_t ldb, qkv_real *restrict c, int64_t ldc) {
#ifdef SDPA_AVX512
    if (__builtin_cpu_supports("avx512f")) {
        mm_acc_avx512(m, n, kk, a, lda, b, ldb, c, ldc);
        return;
    }
#endif
    mm_acc_lanes(m, n, kk, a, lda, b, ldb, c, ldc);
}

/* For the tests (kernels/sdpa.h). A plain function: clang (up to 15 at least) names the
 * dispatcher of a cloned function differently from what callers in other files expect. */
void qkv__sdpa_mm_acc(int64_t m, int64_t n, int64_t kk, const qkv_real *a, int64_t lda,
                      const qkv_real *b, int64_t ldb, qkv_real *c, int64_t ldc) {
    mm_acc(m, n, kk, a, lda, b, ldb, c, ldc);
}

/* Leading dimension of a transposed layout with rows of N: padded so that the rows a tile
 * product walks down are never a power-of-two apart (which maps them all to a few cache sets). */
static inline int64_t tld(int64_t N) {
    return (N + 15) / 16 * 16 + 16;
}

#ifdef SDPA_AVX512
/* dst[c ldd + r] = src[r lds + c] for r < rows (<= 16), c < C: 16 x 16 blocks transposed in
 * AVX-512 registers, each written as one (masked) vector per column. */
__attribute__((target("avx512f"))) static void
transpose_block16(int rows, int64_t C, const float *src, int64_t lds, float *dst, int64_t ldd) {
    const __mmask16 keep = qkv__first_lanes(rows);
    for (int64_t c0 = 0; c0 < C; c0 += 16) {
        const int64_t cols = min64(16, C - c0);
        __m512 o[16];
        qkv__transpose16(rows, cols, src + c0, lds, o);
        for (int64_t q = 0; q < cols; q++)
            _mm512_mask_storeu_ps(dst + (c0 + q) * ldd, keep, o[q]);
    }
}
#endif

/* y (BH, C, tld(N)) = x (BH, N, C) transposed, x's row n of head bh at x + sdpa_row(lx, H, bh, n):
 * the right-hand operand of a product contracting over C (S = Q K^T reads K^T tiles from it).
 * Entries N .. tld(N) - 1 of a row are never read. Returns y + BH C tld(N), where the next layout
 * may go. */
static qkv_real *transpose_into(qkv_real *y, const qkv_real *x, qkv__mat_layout lx, int64_t H,
                                int64_t BH, int64_t N, int64_t C) {
    const int64_t nb = ceil_div(N, BR), ld = tld(N);
#ifdef SDPA_AVX512
    const bool wide = __builtin_cpu_supports("avx512f");
#endif
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (BH * N * C > GRAIN)
#endif
    for (int64_t task = 0; task < BH * nb; task++) { /* blocks of BR rows of x */
        const int64_t bh = task / nb, n0 = task % nb * BR, n1 = min64(n0 + BR, N);
        const qkv_real *src = x + sdpa_row(lx, H, bh, 0);
        qkv_real *dst = y + bh * C * ld;
#ifdef SDPA_AVX512
        if (wide) { /* the same copy, 16 rows at a time */
            for (int64_t n = n0; n < n1; n += 16)
                transpose_block16((int)min64(16, n1 - n), C, src + n * lx.ld, lx.ld, dst + n, ld);
            continue;
        }
#endif
        for (int64_t cc = 0; cc < C; cc++)
            for (int64_t n = n0; n < n1; n++)
                dst[cc * ld + n] = src[n * lx.ld + cc];
    }
    return y + BH * C * ld;
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

/* s *= scale over a tile of ni x nj scores, the contiguous dimension being the one of nj when
 * si != 1 (rows of stride si), of ni otherwise (columns of stride sj). */
QKV_CLONES static void scale_tile(int64_t ni, int64_t nj, qkv_real *restrict s, int64_t si,
                                  int64_t sj, qkv_real scale) {
    const bool rows = si != 1;
    const int64_t lines = rows ? ni : nj, len = rows ? nj : ni, stride = rows ? si : sj;
    for (int64_t r = 0; r < lines; r++) {
        qkv_real *restrict line = s + r * stride;
        QKV_LANE_LOOP(c, len, line[c] *= scale;);
    }
}

/* Turn the dot products of a tile into scores: s = scale s - m_h |i - j| where allowed, -inf
 * elsewhere. The tile holds queries [i0, i0 + ni) and keys [j0, j0 + nj); element (i, j) sits at
 * s[(i - i0) si + (j - j0) sj]. */
static void finish_scores(const qkv_sdpa_problem *p, int64_t b, int64_t h, int64_t i0, int64_t ni,
                          int64_t j0, int64_t nj, qkv_real *s, int64_t si, int64_t sj) {
    const qkv_real scale = (qkv_real)p->scale, slope = p->alibi ? p->alibi[h] : 0;
    const bool all = tile_all_allowed(p, i0, ni, j0, nj);
    if (all && !p->alibi) { /* the common case, vectorised */
        scale_tile(ni, nj, s, si, sj, scale);
        return;
    }
    for (int64_t r = 0; r < ni; r++) {
        const int64_t i = i0 + r;
        qkv_real *row = s + r * si;
        for (int64_t c = 0; c < nj; c++) {
            const int64_t j = j0 + c;
            qkv_real x = scale * row[c * sj];
            if (p->alibi) x -= slope * (qkv_real)(i > j ? i - j : j - i);
            if (!all && !sdpa_allowed(p, b, i, j)) x = (qkv_real)-INFINITY;
            row[c * sj] = x;
        }
    }
}

/* The dropout decisions of a tile: keep[(i - i0) ki + (j - j0) kj] = 1 where weight (i, j) of head
 * bh is kept, 0 where dropped (sdpa.h: the Philox word of its (B, H, T, S) index). A row's keys are
 * consecutive indices, and so are the rows of a tile that spans whole rows (j0 = 0, nj = S, as
 * with S <= BC): the words come 64 at a time (16 Philox blocks) and a batch serves every element
 * it covers, across rows too. */
static void keep_tile(const qkv_sdpa_problem *p, int64_t bh, int64_t i0, int64_t ni, int64_t j0,
                      int64_t nj, qkv_real *keep, int64_t ki, int64_t kj) {
    enum { G = 4 * QKV_PHILOX_LANES };
    const uint32_t threshold = sdpa_keep_threshold(p->dropout);
    uint32_t r[G];
    uint64_t have = 0; /* r holds the words of elements have .. have + G - 1 */
    bool any = false;
    for (int64_t x = 0; x < ni; x++) {
        uint64_t e = sdpa_weight_index(p, bh, i0 + x, j0);
        for (int64_t c = 0; c < nj; c++, e++) {
            if (!any || e - have >= G) { /* e < have wraps around to a large difference */
                const uint64_t block = e >> 2;
                qkv__philox_blocks(p->seed, p->step, p->stream, block, r);
                have = 4 * block;
                any = true;
            }
            keep[x * ki + c * kj] = (r[e - have] >> 8) >= threshold ? 1 : 0;
        }
    }
}

/* x <- z x over the rows x cols of a tile with leading dimension ld (keep as keep_tile wrote it,
 * same layout): keep ? x / (1 - p) : 0, as qkv_dropout computes it (rs = 1 / (1 - p) rounded). */
static void drop_tile(const qkv_real *keep, qkv_real rs, int64_t rows, int64_t cols, int64_t ld,
                      qkv_real *x) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            x[r * ld + c] = keep[r * ld + c] != 0 ? x[r * ld + c] * rs : 0;
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

/* The score tile of query rows i0 .. i0 + nr - 1 and keys j0 .. j0 + nc - 1 of head bh = b H + h
 * into s (nr x nc, leading dimension BC): S = Q K^T from the rows qb and the transposed keys kt
 * (B, H, D, tld(S)), then scaled, biased and masked (finish_scores). */
static void score_tile(const qkv_sdpa_problem *p, int64_t b, int64_t h, int64_t bh, const qkv_real *qb,
                       const qkv_real *kt, int64_t i0, int64_t nr, int64_t j0, int64_t nc, qkv_real *s) {
    const int64_t D = p->D, S = p->S;
    zero(s, nr * BC);
    mm_acc(nr, nc, D, qb, p->lq.ld, kt + bh * D * tld(S) + j0, tld(S), s, BC); /* S = Q K^T */
    finish_scores(p, b, h, i0, nr, j0, nc, s, BC, 1);
}

/* ---- forward -------------------------------------------------------------------------------- */

/* The online softmax's update from one tile of scores (rows r < nr of s, nc scores each, row
 * stride BC), in place: m' = max(m, rowmax S), P = exp(S - m'), l = l e^(m - m') + rowsum P and
 * acc = acc e^(m - m'). The exponentials are qkv__exp_r (within ~1 ulp of expf, and vectorised,
 * where libm's expf is a call per element) and each row's sum runs in QKV_LANES double partials
 * added in a fixed tree (rowreduce.h), so every clone gives the same bits. A NaN score makes the
 * row's output NaN. */
QKV_CLONES static void online_softmax(int64_t nr, int64_t nc, qkv_real *restrict s,
                                      qkv_real *restrict m, qkv_real *restrict l,
                                      qkv_real *restrict acc, int64_t Dv) {
    for (int64_t r = 0; r < nr; r++) {
        qkv_real *restrict row = s + r * BC;
        const qkv_real tile_max = qkv__row_max(row, nc);
        const qkv_real mx = m[r] > tile_max ? m[r] : tile_max;
        if (mx == (qkv_real)-INFINITY) { /* nothing allowed yet in this row */
            zero(row, nc);
            continue;
        }
        qkv__row_exp_shift(row, mx, nc); /* 16 wide, then summed in double partials */
        const double sum = qkv__row_sum(row, nc);
        if (mx != m[r]) {
            const qkv_real alpha = qkv__exp_r(m[r] - mx); /* 0 while m = -inf */
            qkv_real *restrict a = acc + r * Dv;
            l[r] *= alpha;
            QKV_LANE_LOOP(d, Dv, a[d] *= alpha;);
            m[r] = mx;
        }
        l[r] += (qkv_real)sum;
    }
}

static bool fwd(qkv_ctx *ctx, const qkv_sdpa_problem *p, const qkv_real *q, const qkv_real *k,
                const qkv_real *v, qkv_real *o, qkv_real *lse) {
    const int64_t B = p->B, H = p->H, T = p->T, S = p->S, D = p->D, Dv = p->Dv;
    const int64_t nqb = ceil_div(T, BR), tasks = B * H * nqb;
    const qkv_real rs = (qkv_real)(1.0 / (1.0 - p->dropout));
    /* K^T (B, H, D, tld(S)), then per thread: s (BR, BC), acc (BR, Dv), m (BR), l (BR), and
     * keep (BR, BC) with dropout. Released at the end for the next call of the same size. */
    const bool drop = p->dropout > 0;
    const int64_t per = BR * BC + BR * Dv + 2 * BR + (drop ? BR * BC : 0), nkt = B * H * D * tld(S);
    const size_t bytes = sizeof(qkv_real) * (size_t)(nkt + per * max_threads());
    qkv_real *kt = qkv__grad_scratch(ctx, bytes);
    if (!kt) return false;
    qkv_real *scratch = kt + nkt;
    transpose_into(kt, k, p->lk, H, B * H, S, D); /* (B, H, D, tld(S)) */
    const bool par = B * H * T * S * (D + Dv) > GRAIN;
    (void)par;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static, 1) if (par) /* round-robin: balances causal bands */
#endif
    for (int64_t task = 0; task < tasks; task++) {
        qkv_real *s = scratch + (int64_t)thread_id() * per, *acc = s + BR * BC;
        qkv_real *m = acc + BR * Dv, *l = m + BR, *keep = l + BR;
        const int64_t bh = task / nqb, b = bh / H, h = bh % H, i0 = task % nqb * BR;
        const int64_t nr = min64(BR, T - i0);
        const qkv_real *qb = q + sdpa_row(p->lq, H, bh, i0);
        for (int64_t r = 0; r < nr; r++) {
            m[r] = (qkv_real)-INFINITY;
            l[r] = 0;
        }
        zero(acc, nr * Dv);
        int64_t jlo, jhi;
        key_range(p, i0, nr, &jlo, &jhi);
        for (int64_t j0 = jlo / BC * BC; j0 < jhi; j0 += BC) {
            const int64_t nc = min64(BC, S - j0);
            score_tile(p, b, h, bh, qb, kt, i0, nr, j0, nc, s);
            online_softmax(nr, nc, s, m, l, acc, Dv); /* P = exp(S - m'), rescale */
            if (drop) { /* l keeps the undropped sum; only the kept weights reach acc */
                keep_tile(p, bh, i0, nr, j0, nc, keep, BC, 1);
                for (int64_t r = 0; r < nr; r++)
                    for (int64_t c = 0; c < nc; c++)
                        s[r * BC + c] *= keep[r * BC + c];
            }
            mm_acc(nr, Dv, nc, s, BC, v + sdpa_row(p->lv, H, bh, j0), p->lv.ld, acc,
                   Dv); /* acc += P V */
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
                orow[d] = acc[r * Dv + d] * inv;
            if (drop)
                for (int64_t d = 0; d < Dv; d++)
                    orow[d] *= rs;
            lse[bh * T + i0 + r] = m[r] + (qkv_real)log((double)l[r]);
        }
    }
    qkv__grad_scratch_release(ctx, kt, bytes);
    return true;
}

/* ---- backward ------------------------------------------------------------------------------- */

/* P = exp(S - lse_i) over a tile of ni queries and nj keys (element (i, j) at
 * s[(i - i0) si + (j - j0) sj], one of si, sj being 1); L holds the lse of rows i0 .. with 0 in
 * place of -inf (such a row has only -inf scores, so P = 0 there). */
QKV_CLONES static void probs(const qkv_real *restrict L, int64_t ni, int64_t nj,
                             qkv_real *restrict s, int64_t si, int64_t sj) {
    if (si == 1) /* transposed tile: queries run along the contiguous dimension */
        for (int64_t c = 0; c < nj; c++) {
            qkv_real *restrict col = s + c * sj;
            QKV_LANE_LOOP(r, ni, col[r] = qkv__exp_r(col[r] - L[r]););
        }
    else
        for (int64_t r = 0; r < ni; r++) {
            qkv_real *restrict row = s + r * si;
            const qkv_real lr = L[r];
            QKV_LANE_LOOP(c, nj, row[c] = qkv__exp_r(row[c] - lr););
        }
}

/* dS = P (dP - D_i) scale, in place of dP, over the same tile layout as probs. */
QKV_CLONES static void dscores(const qkv_real *restrict Di, qkv_real scale, int64_t ni, int64_t nj,
                               const qkv_real *restrict P, qkv_real *restrict dp, int64_t si,
                               int64_t sj) {
    if (si == 1) /* transposed tile */
        for (int64_t c = 0; c < nj; c++) {
            const qkv_real *restrict pc = P + c * sj;
            qkv_real *restrict dc = dp + c * sj;
            QKV_LANE_LOOP(r, ni, dc[r] = pc[r] * (dc[r] - Di[r]) * scale;);
        }
    else
        for (int64_t r = 0; r < ni; r++) {
            const qkv_real *restrict pr = P + r * si;
            const qkv_real d_r = Di[r];
            qkv_real *restrict dr = dp + r * si;
            QKV_LANE_LOOP(c, nj, dr[c] = pr[c] * (dr[c] - d_r) * scale;);
        }
}

/* dst (cols, rows; leading dimension ldd) = src (rows, cols; leading dimension lds) transposed. */
static void transpose_tile(const qkv_real *src, int64_t rows, int64_t cols, int64_t lds,
                           qkv_real *dst, int64_t ldd) {
#ifdef SDPA_AVX512
    if (__builtin_cpu_supports("avx512f")) { /* 16 rows at a time in registers, as transpose_into */
        for (int64_t r = 0; r < rows; r += 16)
            transpose_block16((int)min64(16, rows - r), cols, src + r * lds, lds, dst + r, ldd);
        return;
    }
#endif
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            dst[c * ldd + r] = src[r * lds + c];
}

/* dK, dV rows j0 .. j0 + nc - 1 of head bh += a key block's sums dka (nc, D), dva (nc, Dv) (either
 * gradient may be NULL). */
static void add_key_block(const qkv_sdpa_problem *p, int64_t bh, int64_t j0, int64_t nc,
                          const qkv_real *dka, const qkv_real *dva, qkv_real *dk, qkv_real *dv) {
    for (int64_t c = 0; c < nc; c++) {
        for (int64_t d = 0; dk && d < p->D; d++)
            dk[sdpa_row(p->lk, p->H, bh, j0 + c) + d] += dka[c * p->D + d];
        for (int64_t d = 0; dv && d < p->Dv; d++)
            dv[sdpa_row(p->lv, p->H, bh, j0 + c) + d] += dva[c * p->Dv + d];
    }
}

/* What both backward schedules read: the problem, its operands and gradients, the per-row
 * statistics Dd = dO.O and L (lse with 0 for -inf), K^T and V^T (B, H, D | Dv, tld(S)). */
typedef struct bwd_args {
    const qkv_sdpa_problem *p;
    const qkv_real *q, *k, *v, *dout, *Dd, *L, *kt, *vt;
    qkv_real *dq, *dk, *dv;
    qkv_real scale, rs; /* the score scale; the dropout's rescaling 1 / (1 - p) */
    int64_t acc_n;      /* the two-pass schedule's accumulators per thread */
    bool drop, par;
} bwd_args;

/* Per-thread scratch of the one-pass schedule: s, dp, st (BR x BC each), keep (BR x BC, with
 * dropout), dka (BC x D), dva (BC x Dv), dqa (T x D). */
static int64_t one_pass_scratch(const qkv_sdpa_problem *p) {
    return 3 * BR * BC + (p->dropout > 0 ? BR * BC : 0) + BC * (p->D + p->Dv) + p->T * p->D;
}

/* The one-pass schedule: one task per head bh = b H + h (module comment). */
static void bwd_one_pass(const bwd_args *a, qkv_real *scratch, int64_t per) {
    const qkv_sdpa_problem *p = a->p;
    const int64_t B = p->B, H = p->H, T = p->T, S = p->S, D = p->D, Dv = p->Dv;
    const qkv_real scale = (qkv_real)p->scale, rs = (qkv_real)(1.0 / (1.0 - p->dropout));
    const bool drop = p->dropout > 0, want_ds = a->dq || a->dk;
    const bool par = B * H * T * S * (D + Dv) > GRAIN;
    (void)par;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static, 1) if (par)
#endif
    for (int64_t bh = 0; bh < B * H; bh++) {
        qkv_real *s = scratch + (int64_t)thread_id() * per, *dp = s + BR * BC, *st = dp + BR * BC;
        qkv_real *keep = st + BR * BC, *dka = keep + (drop ? BR * BC : 0), *dva = dka + BC * D;
        qkv_real *dqa = dva + BC * Dv;
        const int64_t b = bh / H, h = bh % H;
        if (a->dq) zero(dqa, T * D);
        for (int64_t j0 = 0; j0 < S; j0 += BC) {
            const int64_t nc = min64(BC, S - j0);
            const qkv_real *kb = a->k + sdpa_row(p->lk, H, bh, j0);
            zero(dka, nc * D);
            zero(dva, nc * Dv);
            int64_t ilo, ihi;
            query_range(p, j0, nc, &ilo, &ihi);
            for (int64_t i0 = ilo / BR * BR; i0 < ihi; i0 += BR) {
                const int64_t nr = min64(BR, T - i0), row0 = bh * T + i0;
                const qkv_real *qb = a->q + sdpa_row(p->lq, H, bh, i0), *dob = a->dout + row0 * Dv;
                score_tile(p, b, h, bh, qb, a->kt, i0, nr, j0, nc, s);
                probs(a->L + row0, nr, nc, s, BC, 1);
                if (drop) keep_tile(p, bh, i0, nr, j0, nc, keep, BC, 1);
                if (want_ds) {
                    zero(dp, nr * BC);
                    mm_acc(nr, nc, Dv, dob, Dv, a->vt + bh * Dv * tld(S) + j0, tld(S), dp,
                           BC);                                    /* dP = dO V^T */
                    if (drop) drop_tile(keep, rs, nr, nc, BC, dp); /* dP <- z dP */
                    dscores(a->Dd + row0, scale, nr, nc, s, dp, BC, 1);
                    if (a->dq) /* dQ_i += dS K_j */
                        mm_acc(nr, D, nc, dp, BC, kb, p->lk.ld, dqa + i0 * D, D);
                    if (a->dk) { /* dK_j += dS^T Q_i */
                        transpose_tile(dp, nr, nc, BC, st, BR);
                        mm_acc(nc, D, nr, st, BR, qb, p->lq.ld, dka, D);
                    }
                }
                if (a->dv) { /* dV_j += (z P)^T dO_i */
                    if (drop) drop_tile(keep, rs, nr, nc, BC, s);
                    transpose_tile(s, nr, nc, BC, st, BR);
                    mm_acc(nc, Dv, nr, st, BR, dob, Dv, dva, Dv);
                }
            }
            add_key_block(p, bh, j0, nc, dka, dva, a->dk, a->dv);
        }
        for (int64_t i = 0; a->dq && i < T; i++)
            for (int64_t d = 0; d < D; d++)
                a->dq[sdpa_row(p->lq, H, bh, i) + d] += dqa[i * D + d];
    }
}

/* Pass 1 of the two-pass schedule: dQ by query blocks, with K^T and V^T transposed into lay. */
static void bwd_dq_pass(const bwd_args *a, qkv_real *lay, qkv_real *scratch, int64_t per) {
    const qkv_sdpa_problem *p = a->p;
    const int64_t B = p->B, H = p->H, T = p->T, S = p->S, D = p->D, Dv = p->Dv, acc_n = a->acc_n;
    const qkv_real *q = a->q, *k = a->k, *v = a->v, *dout = a->dout, *Dd = a->Dd, *L = a->L;
    qkv_real *dq = a->dq;
    const int64_t nqb = ceil_div(T, BR), tasks = B * H * nqb;
    qkv_real *kt = lay,
             *vt = transpose_into(kt, k, p->lk, H, B * H, S, D); /* (B, H, D, tld(S)) */
    transpose_into(vt, v, p->lv, H, B * H, S, Dv);               /* (B, H, Dv, tld(S)) */
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static, 1) if (a->par)
#endif
    for (int64_t task = 0; task < tasks; task++) {
        qkv_real *s = scratch + (int64_t)thread_id() * per, *dp = s + BR * BC;
        qkv_real *dqa = dp + BR * BC, *keep = dqa + acc_n;
        const int64_t bh = task / nqb, b = bh / H, h = bh % H, i0 = task % nqb * BR;
        const int64_t nr = min64(BR, T - i0), row0 = bh * T + i0;
        const qkv_real *qb = q + sdpa_row(p->lq, H, bh, i0), *dob = dout + row0 * Dv;
        zero(dqa, nr * D);
        int64_t jlo, jhi;
        key_range(p, i0, nr, &jlo, &jhi);
        for (int64_t j0 = jlo / BC * BC; j0 < jhi; j0 += BC) {
            const int64_t nc = min64(BC, S - j0);
            score_tile(p, b, h, bh, qb, kt, i0, nr, j0, nc, s);
            probs(L + row0, nr, nc, s, BC, 1);
            zero(dp, nr * BC);
            mm_acc(nr, nc, Dv, dob, Dv, vt + bh * Dv * tld(S) + j0, tld(S), dp,
                   BC); /* dP = dO V^T */
            if (a->drop) { /* dP <- z dP */
                keep_tile(p, bh, i0, nr, j0, nc, keep, BC, 1);
                drop_tile(keep, a->rs, nr, nc, BC, dp);
            }
            dscores(Dd + row0, a->scale, nr, nc, s, dp, BC, 1);
            mm_acc(nr, D, nc, dp, BC, k + sdpa_row(p->lk, H, bh, j0), p->lk.ld, dqa,
                   D); /* dQ += dS K */
        }
        for (int64_t r = 0; r < nr; r++)
            for (int64_t d = 0; d < D; d++)
                dq[sdpa_row(p->lq, H, bh, i0 + r) + d] += dqa[r * D + d];
    }
}

/* Pass 2 of the two-pass schedule: dK, dV by key blocks (tiles are transposed: rows = keys), with
 * Q^T and dO^T transposed into lay. */
static void bwd_dkdv_pass(const bwd_args *a, qkv_real *lay, qkv_real *scratch, int64_t per) {
    const qkv_sdpa_problem *p = a->p;
    const int64_t B = p->B, H = p->H, T = p->T, S = p->S, D = p->D, Dv = p->Dv, acc_n = a->acc_n;
    const qkv_real *q = a->q, *k = a->k, *v = a->v, *dout = a->dout, *Dd = a->Dd, *L = a->L;
    qkv_real *dk = a->dk, *dv = a->dv;
    const int64_t nkb = ceil_div(S, BC), tasks = B * H * nkb;
    const qkv__mat_layout lo = {Dv, H * T * Dv, T * Dv}; /* dout: contiguous */
    qkv_real *qt = lay,
             *dot = transpose_into(qt, q, p->lq, H, B * H, T, D); /* (B, H, D, tld(T)) */
    if (dk) transpose_into(dot, dout, lo, H, B * H, T, Dv);       /* (B, H, Dv, tld(T)) */
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static, 1) if (a->par)
#endif
    for (int64_t task = 0; task < tasks; task++) {
        qkv_real *s = scratch + (int64_t)thread_id() * per, *dp = s + BC * BR;
        qkv_real *dka = dp + BC * BR, *dva = dka + BC * D, *keep = dka + acc_n;
        const int64_t bh = task / nkb, b = bh / H, h = bh % H, j0 = task % nkb * BC;
        const int64_t nc = min64(BC, S - j0);
        const qkv_real *kb = k + sdpa_row(p->lk, H, bh, j0),
                       *vb = v + sdpa_row(p->lv, H, bh, j0);
        zero(dka, nc * D);
        zero(dva, nc * Dv);
        int64_t ilo, ihi;
        query_range(p, j0, nc, &ilo, &ihi);
        for (int64_t i0 = ilo / BR * BR; i0 < ihi; i0 += BR) {
            const int64_t nr = min64(BR, T - i0), row0 = bh * T + i0;
            zero(s, nc * BR);
            mm_acc(nc, nr, D, kb, p->lk.ld, qt + bh * D * tld(T) + i0, tld(T), s,
                   BR); /* S^T = K Q^T */
            finish_scores(p, b, h, i0, nr, j0, nc, s, 1, BR);
            probs(L + row0, nr, nc, s, 1, BR);
            if (a->drop) keep_tile(p, bh, i0, nr, j0, nc, keep, 1, BR);
            if (dk) {
                zero(dp, nc * BR);
                mm_acc(nc, nr, Dv, vb, p->lv.ld, dot + bh * Dv * tld(T) + i0, tld(T), dp,
                       BR);                                    /* dP^T */
                if (a->drop) drop_tile(keep, a->rs, nc, nr, BR, dp); /* dP <- z dP */
                dscores(Dd + row0, a->scale, nr, nc, s, dp, 1, BR);
            }
            if (dv) { /* dV += (z P)^T dO */
                if (a->drop) drop_tile(keep, a->rs, nc, nr, BR, s);
                mm_acc(nc, Dv, nr, s, BR, dout + row0 * Dv, Dv, dva, Dv);
            }
            if (dk) /* dK += dS^T Q */
                mm_acc(nc, D, nr, dp, BR, q + sdpa_row(p->lq, H, bh, i0), p->lq.ld, dka, D);
        }
        add_key_block(p, bh, j0, nc, dka, dva, dk, dv);
    }
}

static bool bwd(qkv_ctx *ctx, const qkv_sdpa_problem *p, const qkv_real *q, const qkv_real *k,
                const qkv_real *v, const qkv_real *o, const qkv_real *lse, const qkv_real *dout,
                qkv_real *dq, qkv_real *dk, qkv_real *dv) {
    const int64_t B = p->B, H = p->H, T = p->T, S = p->S, D = p->D, Dv = p->Dv, rows = B * H * T;
    /* One buffer, released at the end for the next call of the same size:
     * per-row statistics (B, H, T): Dd = dO.O and L = lse (0 for rows without keys);
     * transposed operands: K^T, V^T for the one pass or pass 1, then Q^T, dO^T for pass 2 in
     * the same place;
     * per thread, one pass: one_pass_scratch;
     *             pass 1: s (BR, BC), dp (BR, BC), dqa (BR, D);
     *             pass 2: s (BC, BR), dp (BC, BR), dka (BC, D), dva (BC, Dv);
     * with dropout, keep (BR, BC) after them. */
    const bool drop = p->dropout > 0, one_pass =
                        B * H >= QKV_SDPA_ONE_PASS_HEADS_PER_THREAD * (int64_t)max_threads();
    const int64_t acc_n = max64(BR * D, BC * (D + Dv)); /* pass 1's dqa, or pass 2's dka and dva */
    const int64_t per = one_pass ? one_pass_scratch(p) : 2 * BR * BC + acc_n + (drop ? BR * BC : 0);
    const int64_t lay1 = dq || one_pass ? (D + Dv) * tld(S) : 0;
    const int64_t lay2 = !one_pass && (dk || dv) ? (D + Dv) * tld(T) : 0;
    const int64_t nlay = B * H * max64(lay1, lay2);
    const size_t bytes = sizeof(qkv_real) * (size_t)(2 * rows + 1 + nlay + per * max_threads());
    qkv_real *Dd = qkv__grad_scratch(ctx, bytes);
    if (!Dd) return false;
    qkv_real *L = Dd + rows, *lay = Dd + 2 * rows + 1, *scratch = lay + nlay;
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

    bwd_args a = {.p = p, .q = q, .k = k, .v = v, .dout = dout, .Dd = Dd, .L = L, .dq = dq, .dk = dk, .dv = dv,
                  .scale = (qkv_real)p->scale, .rs = (qkv_real)(1.0 / (1.0 - p->dropout)), .acc_n = acc_n,
                  .drop = drop, .par = B * H * T * S * (D + Dv) > GRAIN};
    if (one_pass) {
        qkv_real *kt = lay, *vt = transpose_into(kt, k, p->lk, H, B * H, S, D); /* K^T */
        transpose_into(vt, v, p->lv, H, B * H, S, Dv);                          /* V^T */
        a.kt = kt, a.vt = vt;
        bwd_one_pass(&a, scratch, per);
    } else {
        if (dq) bwd_dq_pass(&a, lay, scratch, per);
        if (dk || dv) bwd_dkdv_pass(&a, lay, scratch, per);
    }
    qkv__grad_scratch_release(ctx, Dd, bytes);
    return true;
}

const qkv_sdpa_kernels qkv_sdpa_cpu = {fwd, bwd};
