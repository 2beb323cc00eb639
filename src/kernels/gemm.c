/*
 * gemm.c: row-major C = alpha op(A) op(B) + beta C on qkv_real, three implementations.
 *
 * - qkv_gemm: the fast path. cblas_sgemm / cblas_dgemm when built with BLAS (OpenBLAS, OpenMP
 *   build, sharing our OpenMP runtime) on fixed tiles spread over OpenMP threads (see below), else
 *   the blocked fallback. Called outside any OpenMP parallel region.
 * - qkv_gemm_blocked: a portable cache-blocked GEMM (Goto & van de Geijn 2008 loop order,
 *   simplified): B is packed in KC x NC panels, A in MC x KC blocks, and the inner loop streams a
 *   row of the packed B panel so the compiler vectorises it. Rows of C are split across OpenMP
 *   threads; every element of C is summed over k in the same order whatever the thread count,
 *   so results are bit-identical across thread counts.
 * - qkv_gemm_ref: the naive triple loop with a double accumulator, the test oracle.
 */
#include "../core/internal.h"

#include <stdlib.h>

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

enum { GEMM_MC = 64, GEMM_KC = 256, GEMM_NC = 1024 };

void qkv_gemm_blocked(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, qkv_real alpha,
                      const qkv_real *a, int64_t lda, const qkv_real *b, int64_t ldb,
                      qkv_real beta, qkv_real *c, int64_t ldc) {
    if (m <= 0 || n <= 0) return;
    scale_c(m, n, beta, c, ldc);
    if (k <= 0 || alpha == 0) return;
    /* The packed B panel is the one allocation; this path only runs when BLAS is off. */
    qkv_real *bp = malloc(sizeof(qkv_real) * GEMM_KC * GEMM_NC);
    if (!bp) { /* out of memory: fall back to the unblocked loop, slower but correct */
        qkv_gemm_ref(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, 1, c, ldc);
        return;
    }
    for (int64_t jc = 0; jc < n; jc += GEMM_NC) {
        int64_t nc = n - jc < GEMM_NC ? n - jc : GEMM_NC;
        for (int64_t pc = 0; pc < k; pc += GEMM_KC) {
            int64_t kc = k - pc < GEMM_KC ? k - pc : GEMM_KC;
            for (int64_t p = 0; p < kc; p++) /* bp[p][j] = op(B)[pc + p][jc + j] */
                for (int64_t j = 0; j < nc; j++) bp[p * nc + j] = OP_AT(b, trans_b, ldb, pc + p, jc + j);
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (m * nc * kc > 32768)
#endif
            for (int64_t ic = 0; ic < m; ic += GEMM_MC) {
                int64_t mc = m - ic < GEMM_MC ? m - ic : GEMM_MC;
                qkv_real ap[GEMM_MC * GEMM_KC]; /* alpha * op(A)[ic.., pc..] */
                for (int64_t i = 0; i < mc; i++)
                    for (int64_t p = 0; p < kc; p++)
                        ap[i * kc + p] = alpha * OP_AT(a, trans_a, lda, ic + i, pc + p);
                for (int64_t i = 0; i < mc; i++) {
                    qkv_real *crow = c + (ic + i) * ldc + jc;
                    for (int64_t p = 0; p < kc; p++) {
                        const qkv_real aip = ap[i * kc + p];
                        const qkv_real *brow = bp + p * nc;
                        for (int64_t j = 0; j < nc; j++) crow[j] += aip * brow[j];
                    }
                }
            }
        }
    }
    free(bp);
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
#endif

/*
 * Determinism across thread counts. OpenBLAS splits a large GEMM across its threads (above
 * m n k = 2^18 in 0.3.21) and the split changes the float result by an ulp. So qkv never lets
 * BLAS thread: C is cut into tiles whose size depends only on the shape, the tiles are handed to
 * OpenMP threads, and each tile is one BLAS call made inside the parallel region, where the
 * OpenMP build of OpenBLAS runs single-threaded. Each element of C is then computed by the same
 * single-threaded kernel on the same operands whatever the thread count.
 */
enum { TILE_ROWS = 256, TILE_COLS = 512, TILE_MIN_ROWS = 64, TILE_MIN_COLS = 128, TILE_TARGET = 8 };
#define GEMM_SERIAL_WORK ((int64_t)1 << 18) /* OpenBLAS runs smaller products on one thread */

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
#ifdef QKV_WITH_OPENMP
    if (m * n * k > GEMM_SERIAL_WORK) {
        /* Tile sizes from the shape alone: halve until there are enough tiles to share. */
        int64_t tr = TILE_ROWS, tc = TILE_COLS;
        while (((m + tr - 1) / tr) * ((n + tc - 1) / tc) < TILE_TARGET && (tr > TILE_MIN_ROWS || tc > TILE_MIN_COLS)) {
            if (tr > TILE_MIN_ROWS && (tr >= tc / 2 || tc <= TILE_MIN_COLS)) tr /= 2;
            else tc /= 2;
        }
        const int64_t row_tiles = (m + tr - 1) / tr, col_tiles = (n + tc - 1) / tc;
#pragma omp parallel for schedule(static)
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
    blas_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#else
    qkv_gemm_blocked(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}
