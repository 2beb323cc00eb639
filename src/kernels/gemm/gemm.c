/*
 * gemm.c: row-major C = alpha op(A) op(B) + beta C on qkv_real, three implementations.
 *
 * - qkv_gemm: the fast path. cblas_sgemm / cblas_dgemm when built with BLAS (OpenBLAS, OpenMP
 *   build, sharing our OpenMP runtime) on fixed tiles spread over OpenMP threads (see below), else
 *   the blocked fallback. Float products of a few rows take the small-M kernel
 *   (gemm_small_m.c), large ones on CPUs with AVX-512F qkv's packed GEMM (gemm_packed.c).
 *   Called outside any OpenMP parallel region.
 * - qkv_gemm_blocked: the portable fallback in plain C11 (Goto / BLIS loop order, a 4 x 8
 *   register-blocked micro-kernel over packed panels, tiles of C spread over OpenMP threads);
 *   every element of C is summed over k in the same order whatever the tiling, so results are
 *   bit-identical across thread counts. Details at its definition below.
 * - qkv_gemm_ref: the naive triple loop with a double accumulator, the test oracle.
 */
#include "gemm.h"

#include <stdatomic.h>

#ifdef QKV_WITH_BLAS
#include <cblas.h>
#endif

/* Element (i, j) of op(X) for X stored row-major with leading dimension ld. */
#define OP_AT(x, trans, ld, i, j) ((trans) ? (x)[(int64_t)(j) * (ld) + (i)] : (x)[(int64_t)(i) * (ld) + (j)])

static void scale_c(int64_t m, int64_t n, qkv_real beta, qkv_real *c, int64_t ldc) {
    for (int64_t i = 0; i < m; i++) {
        qkv_real *row = c + i * ldc;
        if (beta == 0)
            for (int64_t j = 0; j < n; j++) row[j] = 0; /* beta = 0 ignores NaN in C, as BLAS */
        else if (beta != 1)
            for (int64_t j = 0; j < n; j++) row[j] *= beta;
    }
}

void qkv_gemm_ref(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, qkv_real alpha,
                  const qkv_real *a, int64_t lda, const qkv_real *b, int64_t ldb, qkv_real beta,
                  qkv_real *c, int64_t ldc) {
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            double acc = 0;
            for (int64_t p = 0; p < k; p++)
                acc += (double)OP_AT(a, trans_a, lda, i, p) * (double)OP_AT(b, trans_b, ldb, p, j);
            double old = beta == 0 ? 0.0 : (double)beta * c[i * ldc + j];
            c[i * ldc + j] = (qkv_real)(alpha * acc + old);
        }
    }
}

/*
 * Portable blocked GEMM (Goto & van de Geijn, "Anatomy of high-performance matrix
 * multiplication", TOMS 2008; the BLIS loop order of Van Zee & van de Geijn 2015), plain C11.
 *
 *   jc (NC columns of C)          B block KC x NC packed into NR-column micro-panels
 *    pc (KC of the k dimension)
 *     ic (MC rows of C)           A block MC x KC packed into MR-row micro-panels
 *      jr (NR columns)            one B micro-panel (KC x NR) stays in L1
 *       ir (MR rows)              micro-kernel: C[MR x NR] (+)= A-panel x B-panel
 *
 * The micro-kernel keeps the MR x NR tile of C in a fixed-size accumulator array that the
 * compiler holds in vector registers once both loops are unrolled (#pragma GCC unroll, which
 * clang also honours): per step p it broadcasts MR values of A and multiplies them with NR
 * contiguous values of B. NR is two 16-byte SSE2 vectors (8 floats, 4 doubles) and MR = 4, so
 * the 8 accumulators, 2 B vectors, a broadcast and a product fit in the 16 xmm registers of the
 * x86-64 baseline; wider tiles spill (BENCHMARKS.md compares the shapes from 2 x 4 to 12 x 32
 * with gcc and clang).
 * Partial tiles at the right and bottom edges run the same kernel on panels padded with zeros
 * (the padded lanes are discarded; zeros keep them free of uninitialised reads and of slow
 * denormal or NaN arithmetic), and only the valid mr x nr corner is written back.
 *
 * Rounding: for every element, each KC slice of the k sum is accumulated in order p = 0, 1, ..
 * from zero in a register, then added to C as C = beta C + alpha acc (first slice) or
 * C += alpha acc (later slices), slices in increasing k. That sequence depends neither on the
 * position of the element in a micro-tile nor on how C is split into tiles, so the result is
 * the same for any thread count (threads take whole tiles of C; k is never split).
 *
 * Memory: the packed blocks live on the stack of the thread that uses them, 128 KiB each for
 * A and B (256 KiB per thread in all), so the call never allocates and cannot fail. The calling
 * thread and the OpenMP workers need that much stack: glibc and the OpenMP runtimes give 2 MiB
 * or more by default, but a thread created with a small explicit stack (musl's default is
 * 128 KiB) must not call the portable GEMM.
 */
#ifdef QKV_DOUBLE
enum { GEMM_MR = 4, GEMM_NR = 4 };
#else
enum { GEMM_MR = 4, GEMM_NR = 8 };
#endif
#define GEMM_BLOCK_BYTES (128 * 1024)
enum {
    GEMM_KC = 256,
    GEMM_MC = (int)(GEMM_BLOCK_BYTES / (GEMM_KC * sizeof(qkv_real))), /* 128 floats, 64 doubles */
    GEMM_NC = GEMM_MC,
};
_Static_assert(GEMM_MC % GEMM_MR == 0 && GEMM_NC % GEMM_NR == 0, "blocks hold whole micro-panels");

static inline int64_t min64(int64_t x, int64_t y) { return x < y ? x : y; }

/* ap[r / MR][p][r % MR] = op(A)[r][p] for r < mc, p < kc, rows mc.. of the last panel zero.
 * `a` points at op(A)[0][0] of the block: A is (mc, kc) with leading dimension lda, or
 * (kc, mc) when trans. */
static void pack_a(bool trans, int64_t mc, int64_t kc, const qkv_real *a, int64_t lda,
                   qkv_real *restrict ap) {
    for (int64_t ir = 0; ir < mc; ir += GEMM_MR, ap += GEMM_MR * kc) {
        const int64_t mr = min64(GEMM_MR, mc - ir);
        if (!trans) {
            for (int64_t r = 0; r < mr; r++) {
                const qkv_real *row = a + (ir + r) * lda;
                for (int64_t p = 0; p < kc; p++) ap[p * GEMM_MR + r] = row[p];
            }
        } else if (mr == GEMM_MR) {
            for (int64_t p = 0; p < kc; p++)
                for (int r = 0; r < GEMM_MR; r++) ap[p * GEMM_MR + r] = a[p * lda + ir + r];
        } else {
            for (int64_t p = 0; p < kc; p++)
                for (int64_t r = 0; r < mr; r++) ap[p * GEMM_MR + r] = a[p * lda + ir + r];
        }
        for (int64_t r = mr; r < GEMM_MR; r++)
            for (int64_t p = 0; p < kc; p++) ap[p * GEMM_MR + r] = 0;
    }
}

/* bp[j / NR][p][j % NR] = op(B)[p][j] for p < kc, j < nc, columns nc.. of the last panel zero.
 * `b` points at op(B)[0][0] of the block: B is (kc, nc) with leading dimension ldb, or
 * (nc, kc) when trans. */
static void pack_b(bool trans, int64_t kc, int64_t nc, const qkv_real *b, int64_t ldb,
                   qkv_real *restrict bp) {
    for (int64_t jr = 0; jr < nc; jr += GEMM_NR, bp += GEMM_NR * kc) {
        const int64_t nr = min64(GEMM_NR, nc - jr);
        if (trans) {
            for (int64_t j = 0; j < nr; j++) {
                const qkv_real *col = b + (jr + j) * ldb;
                for (int64_t p = 0; p < kc; p++) bp[p * GEMM_NR + j] = col[p];
            }
        } else if (nr == GEMM_NR) {
            for (int64_t p = 0; p < kc; p++)
                for (int j = 0; j < GEMM_NR; j++) bp[p * GEMM_NR + j] = b[p * ldb + jr + j];
        } else {
            for (int64_t p = 0; p < kc; p++)
                for (int64_t j = 0; j < nr; j++) bp[p * GEMM_NR + j] = b[p * ldb + jr + j];
        }
        for (int64_t j = nr; j < GEMM_NR; j++)
            for (int64_t p = 0; p < kc; p++) bp[p * GEMM_NR + j] = 0;
    }
}

/* C[0..mr)[0..nr) = beta C + alpha acc, where beta = 0 overwrites (NaN in C is ignored, as in
 * BLAS) and beta = 1 skips the product (same value: 1 * c is exact). Called with the constants
 * MR, NR for whole tiles, so that copy is unrolled and vectorised. */
static inline void store_tile(int64_t mr, int64_t nr, const qkv_real acc[GEMM_MR][GEMM_NR],
                              qkv_real alpha, qkv_real beta, qkv_real *restrict c, int64_t ldc) {
    for (int64_t i = 0; i < mr; i++) {
        qkv_real *ci = c + i * ldc;
        if (beta == 0)
            for (int64_t j = 0; j < nr; j++) ci[j] = alpha * acc[i][j];
        else if (beta == 1)
            for (int64_t j = 0; j < nr; j++) ci[j] += alpha * acc[i][j];
        else
            for (int64_t j = 0; j < nr; j++) ci[j] = beta * ci[j] + alpha * acc[i][j];
    }
}

/* The micro-kernel: acc = sum over p < kc of ap[p][:] (outer) bp[p][:], in order of p, then
 * the valid mr x nr corner of it goes to C. */
static void micro_tile(int64_t kc, const qkv_real *restrict ap, const qkv_real *restrict bp,
                       int64_t mr, int64_t nr, qkv_real alpha, qkv_real beta, qkv_real *c,
                       int64_t ldc) {
    qkv_real acc[GEMM_MR][GEMM_NR] = {{0}};
    for (int64_t p = 0; p < kc; p++, ap += GEMM_MR, bp += GEMM_NR) {
#pragma GCC unroll 8
        for (int i = 0; i < GEMM_MR; i++) {
            const qkv_real ai = ap[i];
#pragma GCC unroll 16
            for (int j = 0; j < GEMM_NR; j++) acc[i][j] += ai * bp[j];
        }
    }
    if (mr == GEMM_MR && nr == GEMM_NR) store_tile(GEMM_MR, GEMM_NR, acc, alpha, beta, c, ldc);
    else store_tile(mr, nr, acc, alpha, beta, c, ldc);
}

/* One thread's GEMM on a tile of C (k > 0, alpha != 0): the five loops above. */
static void gemm_blocked_serial(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                qkv_real alpha, const qkv_real *a, int64_t lda,
                                const qkv_real *b, int64_t ldb, qkv_real beta, qkv_real *c,
                                int64_t ldc) {
    _Alignas(64) qkv_real ap[GEMM_MC * GEMM_KC]; /* 128 KiB: fits L2 with room for C */
    _Alignas(64) qkv_real bp[GEMM_KC * GEMM_NC]; /* 128 KiB; one micro-panel (8 KiB) in L1 */
    for (int64_t jc = 0; jc < n; jc += GEMM_NC) {
        const int64_t nc = min64(GEMM_NC, n - jc);
        for (int64_t pc = 0; pc < k; pc += GEMM_KC) {
            const int64_t kc = min64(GEMM_KC, k - pc);
            const qkv_real beta_pc = pc == 0 ? beta : 1; /* later slices accumulate */
            pack_b(trans_b, kc, nc, trans_b ? b + jc * ldb + pc : b + pc * ldb + jc, ldb, bp);
            for (int64_t ic = 0; ic < m; ic += GEMM_MC) {
                const int64_t mc = min64(GEMM_MC, m - ic);
                pack_a(trans_a, mc, kc, trans_a ? a + pc * lda + ic : a + ic * lda + pc, lda, ap);
                for (int64_t jr = 0; jr < nc; jr += GEMM_NR)
                    for (int64_t ir = 0; ir < mc; ir += GEMM_MR)
                        micro_tile(kc, ap + ir * kc, bp + jr * kc, min64(GEMM_MR, mc - ir),
                                   min64(GEMM_NR, nc - jr), alpha, beta_pc,
                                   c + (ic + ir) * ldc + jc + jr, ldc);
            }
        }
    }
}

/* Threads take whole tiles of C, sized from the shape alone (halved from 256 x 512 until there
 * are BLOCKED_TILE_TARGET of them), each running the serial loops with its own packed blocks.
 * A tile repacks B for itself: k x 512 copies against 2 x 256 x 512 x k flops. Which thread
 * computes which tile does not change any value, so tiles are handed out dynamically (load
 * balance when another process holds a core). */
enum {
    BLOCKED_TILE_ROWS = 256,
    BLOCKED_TILE_COLS = 512,
    BLOCKED_TILE_MIN = 64,
    BLOCKED_TILE_TARGET = 8,
};
#define BLOCKED_SERIAL_WORK ((int64_t)1 << 18) /* m n k below which one thread is faster */

void qkv_gemm_blocked(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, qkv_real alpha,
                      const qkv_real *a, int64_t lda, const qkv_real *b, int64_t ldb,
                      qkv_real beta, qkv_real *c, int64_t ldc) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0 || alpha == 0) {
        scale_c(m, n, beta, c, ldc);
        return;
    }
#ifdef QKV_WITH_OPENMP
    if (m * n * k > BLOCKED_SERIAL_WORK) {
        int64_t tr = BLOCKED_TILE_ROWS, tc = BLOCKED_TILE_COLS;
        while (((m + tr - 1) / tr) * ((n + tc - 1) / tc) < BLOCKED_TILE_TARGET &&
               (tr > BLOCKED_TILE_MIN || tc > BLOCKED_TILE_MIN)) {
            if (tr > BLOCKED_TILE_MIN && (tr >= tc || tc <= BLOCKED_TILE_MIN)) tr /= 2;
            else tc /= 2;
        }
        const int64_t row_tiles = (m + tr - 1) / tr, col_tiles = (n + tc - 1) / tc;
        if (row_tiles * col_tiles > 1) {
#pragma omp parallel for schedule(dynamic, 1)
            for (int64_t t = 0; t < row_tiles * col_tiles; t++) {
                const int64_t i0 = (t / col_tiles) * tr, j0 = (t % col_tiles) * tc;
                const int64_t mt = min64(tr, m - i0), nt = min64(tc, n - j0);
                const qkv_real *at = trans_a ? a + i0 : a + i0 * lda; /* rows i0.. of op(A) */
                const qkv_real *bt = trans_b ? b + j0 * ldb : b + j0; /* columns j0.. of op(B) */
                gemm_blocked_serial(trans_a, trans_b, mt, nt, k, alpha, at, lda, bt, ldb, beta,
                                    c + i0 * ldc + j0, ldc);
            }
            return;
        }
    }
#endif
    gemm_blocked_serial(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

#ifdef QKV_WITH_BLAS
static void blas_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, qkv_real alpha,
                      const qkv_real *a, int64_t lda, const qkv_real *b, int64_t ldb, qkv_real beta,
                      qkv_real *c, int64_t ldc) {
#ifdef QKV_DOUBLE
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
#else
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
#endif
}

/* One product on the calling thread's BLAS, or the small-M kernel where qkv__gemm_uses_small_m
 * says. */
static void gemm_one(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, qkv_real alpha,
                     const qkv_real *a, int64_t lda, const qkv_real *b, int64_t ldb, qkv_real beta,
                     qkv_real *c, int64_t ldc) {
#ifndef QKV_DOUBLE
    if (qkv__gemm_uses_small_m(trans_a, trans_b, m, n, k)) {
        qkv__gemm_small_m(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
#endif
    blas_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
#endif

/* Whether qkv_gemm (and each product of qkv__gemm_batched2) goes to the small-M kernel instead
 * of BLAS: a few rows against a matrix stored (n, k) (a linear layer's x W^T), where BLAS would
 * pack all of it for them. The choice depends on the shape alone, so a given product has the
 * same bits on every call. */
static _Atomic bool small_m_enabled = true; /* relaxed: a benchmark's switch, no ordering */

void qkv__gemm_small_m_enable(bool on) {
    atomic_store_explicit(&small_m_enabled, on, memory_order_relaxed);
}

bool qkv__gemm_uses_small_m(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k) {
#if defined(QKV_WITH_BLAS) && !defined(QKV_DOUBLE)
    if (!atomic_load_explicit(&small_m_enabled, memory_order_relaxed)) return false;
    const bool few = m <= QKV_SMALL_M_ROWS && n * k >= 4096,
               weight = m <= QKV_SMALL_M_WEIGHT_ROWS && k >= 256 && n * k >= ((int64_t)1 << 17);
    return !trans_a && trans_b && (few || weight) && qkv__gemm_small_m_available();
#else
    (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k;
    return false;
#endif
}

/*
 * Determinism across thread counts. OpenBLAS splits a large GEMM across its threads (above
 * m n k = 2^18 in 0.3.21) and the split changes the float result by an ulp. So qkv never lets
 * BLAS thread: C is cut into tiles whose size depends only on the shape, the tiles are handed to
 * OpenMP threads, and each tile is one BLAS call made inside the parallel region, where the
 * OpenMP build of OpenBLAS runs single-threaded. Each element of C is then computed by the same
 * single-threaded kernel on the same operands whatever the thread count.
 *
 * Size. Each BLAS call packs its rows of A and its columns of B afresh, so a product cut into
 * R x C tiles packs B R times and A C times: R n + C m elements per unit of k. A product takes
 * TILE_TARGET = 8 tiles (4 below 2^27 multiply-adds), R x C = 1 x 8, 2 x 4, .. 8 x 1, whichever
 * packs the fewest elements with tiles of at least TILE_MIN_ROWS x TILE_MIN_COLS (32 x 32 for
 * the smaller products), sides rounded up to 16 (counting the tiles the rounded sides make);
 * shapes too thin for any of them are halved from 512 x 1024 as before. Products of 2^32
 * multiply-adds and more (config B's vocabulary product, GPT-2's) take 16 tiles, from 2^34 32,
 * so that a machine with more threads still has a tile for each of them where the work is
 * large enough to share. Halving from 512 x 1024 tiles packed more: config B's vocabulary
 * product (2048 x 8000 x 512) got 4 x 8 tiles where 2 x 4 pack half as much, and beam search's
 * 320 x 256 x 256 products on config S 5 x 2 tiles of 64 x 128, the weight packed 5 times for 64
 * rows of use each (BENCHMARKS.md has the gains). 8 tiles keep 2, 4 or
 * 8 threads busy; 4 tiles of a small product (below 2^27 multiply-adds) keep 4. The tile
 * sizes are part of the result's bits: OpenBLAS rounds differently when the same element is
 * computed in another tile (BENCHMARKS.md, "GEMM tiles, revisited").
 */
enum { TILE_ROWS = 512, TILE_COLS = 1024, TILE_MIN_ROWS = 64, TILE_MIN_COLS = 128, TILE_TARGET = 8 };
#define GEMM_SERIAL_WORK ((int64_t)1 << 18) /* OpenBLAS runs smaller products on one thread */
#define GEMM_MID_WORK ((int64_t)1 << 27)    /* products below take 4 tiles, not 8 */
#define GEMM_LARGE_WORK ((int64_t)1 << 32)  /* from here 16 tiles, from 4x this 32 */

#if defined(QKV_WITH_BLAS) && defined(QKV_WITH_OPENMP)
/* The tile sizes (*tr rows, *tc columns of C) of an m x n x k product, from its shape alone. */
static void tile_sizes(int64_t m, int64_t n, int64_t k, int64_t *tr, int64_t *tc) {
    *tr = TILE_ROWS, *tc = TILE_COLS;
    const int64_t work = m * n * k;
    const bool mid = work < GEMM_MID_WORK;
    const int64_t tiles = mid ? 4 : work < GEMM_LARGE_WORK ? TILE_TARGET : work < 4 * GEMM_LARGE_WORK ? 2 * TILE_TARGET : 4 * TILE_TARGET;
    const int64_t min_rows = mid ? 32 : TILE_MIN_ROWS, min_cols = mid ? 32 : TILE_MIN_COLS;
    int64_t least = INT64_MAX;
    for (int64_t r = 1; r <= tiles; r *= 2) {
        const int64_t cols = tiles / r;
        const int64_t rows_each = ((m + r - 1) / r + 15) & ~(int64_t)15, cols_each = ((n + cols - 1) / cols + 15) & ~(int64_t)15;
        if ((r > 1 && rows_each < min_rows) || (cols > 1 && cols_each < min_cols)) continue;
        /* the tiles the rounded sides make (rounding up can leave fewer than r x cols) */
        const int64_t packed = (m + rows_each - 1) / rows_each * n + (n + cols_each - 1) / cols_each * m;
        if (packed < least) {
            least = packed;
            *tr = rows_each;
            *tc = cols_each;
        }
    }
    if (least < INT64_MAX) return;
    /* too thin for every split: halve until there are enough tiles to share */
    while (((m + *tr - 1) / *tr) * ((n + *tc - 1) / *tc) < TILE_TARGET && (*tr > TILE_MIN_ROWS || *tc > TILE_MIN_COLS)) {
        if (*tr > TILE_MIN_ROWS && (*tr >= *tc / 2 || *tc <= TILE_MIN_COLS)) *tr /= 2;
        else *tc /= 2;
    }
}
#endif

#ifdef QKV_WITH_BLAS
/* Which kernel qkv_gemm gives a product with k >= 1 (BLAS: whole or in tiles), from its shape
 * alone; the one rule for qkv_gemm and qkv__gemm_nt_bias. Both rules answer false in the double
 * build. */
typedef enum { BY_BLAS, BY_SMALL_M, BY_PACKED } gemm_kernel;

static gemm_kernel kernel_for(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k) {
    if (qkv__gemm_uses_small_m(trans_a, trans_b, m, n, k)) return BY_SMALL_M;
    return qkv__gemm_uses_packed(m, n, k) ? BY_PACKED : BY_BLAS;
}
#endif

bool qkv__gemm_nt_bias(int64_t m, int64_t n, int64_t k, const qkv_real *x, int64_t ldx,
                       const qkv_real *w, int64_t ldw, const qkv_real *bias, qkv_real *y,
                       int64_t ldy) {
#if defined(QKV_WITH_BLAS) && !defined(QKV_DOUBLE)
    if (m <= 0 || n <= 0 || k <= 0) return false;
    switch (kernel_for(false, true, m, n, k)) {
    case BY_SMALL_M:
        qkv__gemm_small_m_bias(m, n, k, 1, x, ldx, w, ldw, bias, y, ldy);
        return true;
    case BY_PACKED:
        return qkv__gemm_packed_bias(false, true, m, n, k, 1, x, ldx, w, ldw, bias, y, ldy);
    case BY_BLAS:
        break;
    }
    return false;
#else
    (void)m, (void)n, (void)k, (void)x, (void)ldx, (void)w, (void)ldw, (void)bias, (void)y,
        (void)ldy;
    return false;
#endif
}

void qkv_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, qkv_real alpha,
              const qkv_real *a, int64_t lda, const qkv_real *b, int64_t ldb, qkv_real beta,
              qkv_real *c, int64_t ldc) {
#ifdef QKV_WITH_BLAS
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        scale_c(m, n, beta, c, ldc);
        return;
    }
    /* BLAS wants lda >= 1 even for degenerate shapes. */
    lda = lda < 1 ? 1 : lda;
    ldb = ldb < 1 ? 1 : ldb;
    const gemm_kernel kernel = kernel_for(trans_a, trans_b, m, n, k);
#ifndef QKV_DOUBLE
    if (kernel == BY_PACKED &&
        qkv__gemm_packed(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
        return;
#endif
#ifdef QKV_WITH_OPENMP
    if (m * n * k > GEMM_SERIAL_WORK && kernel != BY_SMALL_M) {
        int64_t tr, tc;
        tile_sizes(m, n, k, &tr, &tc);
        const int64_t row_tiles = (m + tr - 1) / tr, col_tiles = (n + tc - 1) / tc;
        /* Tiles handed out one at a time: the last row of tiles can be much shorter than the
         * others (m = 80: 64 and 16 rows), and a static split gave one thread all the tall ones
         * (beam search's 80-row products ran at ~60 % of both threads). Which thread computes a
         * tile does not change its bits. */
#pragma omp parallel for schedule(dynamic, 1)
        for (int64_t t = 0; t < row_tiles * col_tiles; t++) {
            const int64_t i0 = (t / col_tiles) * tr, j0 = (t % col_tiles) * tc;
            const int64_t mt = m - i0 < tr ? m - i0 : tr, nt = n - j0 < tc ? n - j0 : tc;
            const qkv_real *at = trans_a ? a + i0 : a + i0 * lda; /* rows i0.. of op(A) */
            const qkv_real *bt = trans_b ? b + j0 * ldb : b + j0; /* columns j0.. of op(B) */
            blas_gemm(trans_a, trans_b, mt, nt, k, alpha, at, lda, bt, ldb, beta, c + i0 * ldc + j0, ldc);
        }
        return;
    }
#endif
    gemm_one(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#else
    qkv_gemm_blocked(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}

void qkv__gemm_batched2(bool trans_a, bool trans_b, int64_t n_outer, int64_t n_inner, int64_t m, int64_t n, int64_t k,
                        qkv_real alpha, const qkv_real *a, qkv__mat_layout la, const qkv_real *b, qkv__mat_layout lb,
                        qkv_real beta, qkv_real *c, qkv__mat_layout lc) {
    const int64_t batch = n_outer * n_inner;
    if (batch <= 0 || m <= 0 || n <= 0) return;
#define AT(p, l, s) ((p) + ((s) / n_inner) * (l).outer + ((s) % n_inner) * (l).inner)
#if defined(QKV_WITH_OPENMP)
    if (k > 0 && m * n * k <= GEMM_SERIAL_WORK) {
        /* Inside the parallel region every GEMM runs single-threaded, as qkv_gemm runs these
         * small ones: the same bits for any thread count. */
#pragma omp parallel for schedule(static) if (batch * m * n * k > GEMM_SERIAL_WORK)
        for (int64_t s = 0; s < batch; s++)
#ifdef QKV_WITH_BLAS
            gemm_one(trans_a, trans_b, m, n, k, alpha, AT(a, la, s), la.ld < 1 ? 1 : la.ld, AT(b, lb, s),
                      lb.ld < 1 ? 1 : lb.ld, beta, AT(c, lc, s), lc.ld);
#else
            qkv_gemm_blocked(trans_a, trans_b, m, n, k, alpha, AT(a, la, s), la.ld, AT(b, lb, s), lb.ld, beta,
                             AT(c, lc, s), lc.ld);
#endif
        return;
    }
#endif
    for (int64_t s = 0; s < batch; s++)
        qkv_gemm(trans_a, trans_b, m, n, k, alpha, AT(a, la, s), la.ld, AT(b, lb, s), lb.ld, beta, AT(c, lc, s), lc.ld);
#undef AT
}

void qkv_gemm_batched(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n, int64_t k, qkv_real alpha,
                      const qkv_real *a, int64_t lda, int64_t stride_a, const qkv_real *b, int64_t ldb,
                      int64_t stride_b, qkv_real beta, qkv_real *c, int64_t ldc, int64_t stride_c) {
    qkv__gemm_batched2(trans_a, trans_b, batch, 1, m, n, k, alpha, a, (qkv__mat_layout){lda, stride_a, 0}, b,
                       (qkv__mat_layout){ldb, stride_b, 0}, beta, c, (qkv__mat_layout){ldc, stride_c, 0});
}
