/*
 * test_gemm_small_m.c: the small-M kernel C = alpha A B^T + beta C (src/kernels/gemm_small_m.c),
 * the product of a decoding step's linear layers, and qkv_gemm's use of it.
 *
 * - Exactness: with small integer operands every product and partial sum is exact, so whatever
 *   the lane order the result must equal the naive reference bit for bit; row blocks of 1 to 4,
 *   column tails of 1 and 2 (NB = 3), k tails of 1 to 7 (the masked loads), leading dimensions
 *   larger than the rows and a sentinel in C's padding catch any indexing slip.
 * - BLAS semantics: beta = 0 ignores NaN in C.
 * - Rounding: on random floats within a k-proportional bound of the double reference; each row
 *   of C has the same bits whatever the other rows (an M = 16 product against 16 one-row
 *   products: batched decoding gives a hypothesis the bits it gets alone) and whatever the
 *   thread count.
 * - qkv_gemm routes x W^T with m <= QKV_SMALL_M_ROWS to it (same bits), larger m to BLAS.
 * Skipped where the kernel does not run (double build, no AVX2 / FMA, not x86-64).
 */
#include "testutil.h"

#include "../../src/core/internal.h"

#ifndef QKV_DOUBLE
#define NEED_KERNEL()                                                                             \
    do {                                                                                          \
        if (!qkv__gemm_small_m_available()) SKIP("the small-M kernel needs x86-64 AVX2 and FMA"); \
    } while (0)
#else
#define NEED_KERNEL() SKIP("the small-M kernel is a float kernel")
#endif

#ifndef QKV_DOUBLE
static void fill_small_ints(qkv_real *x, int64_t n, uint64_t seed) {
    tu_fill_uniform(x, n, -3.49, 3.49, seed);
    for (int64_t i = 0; i < n; i++) x[i] = (qkv_real)lround((double)x[i]);
}

/* A (m, k) and B (n, k) with `pad` extra columns, C (m, n) with pad columns holding a sentinel. */
static void exact_case(int64_t m, int64_t n, int64_t k, float alpha, float beta, int64_t pad) {
    const int64_t lda = k + pad, ldb = k + pad, ldc = n + pad;
    float *a = malloc(sizeof(float) * (size_t)(m * lda)), *b = malloc(sizeof(float) * (size_t)(n * ldb));
    float *c0 = malloc(sizeof(float) * (size_t)(m * ldc)), *c1 = malloc(sizeof(float) * (size_t)(m * ldc));
    fill_small_ints(a, m * lda, 21);
    fill_small_ints(b, n * ldb, 22);
    fill_small_ints(c0, m * ldc, 23);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = n; j < ldc; j++) c0[i * ldc + j] = 1000;
    memcpy(c1, c0, sizeof(float) * (size_t)(m * ldc));
    qkv_gemm_ref(false, true, m, n, k, alpha, a, lda, b, ldb, beta, c0, ldc);
    qkv__gemm_small_m(m, n, k, alpha, a, lda, b, ldb, beta, c1, ldc);
    int64_t bad = -1;
    for (int64_t i = 0; i < m * ldc && bad < 0; i++)
        if (c1[i] != c0[i]) bad = i;
    CHECK_MSG(bad < 0, "small-M %lldx%lldx%lld alpha %g beta %g pad %lld: C[%lld][%lld] = %.9g, reference %.9g",
              (long long)m, (long long)n, (long long)k, (double)alpha, (double)beta, (long long)pad,
              (long long)(bad / ldc), (long long)(bad % ldc), bad < 0 ? 0.0 : (double)c1[bad],
              bad < 0 ? 0.0 : (double)c0[bad]);
    free(a), free(b), free(c0), free(c1);
}
#endif

TEST(gemm_small_m_exact_on_every_edge_path) {
    NEED_KERNEL();
#ifndef QKV_DOUBLE
    const int64_t ms[] = {1, 2, 3, 4, 5, 7, 16}, ns[] = {1, 2, 3, 4, 5, 145, 301}, ks[] = {1, 7, 8, 9, 15, 64, 67, 515};
    const float ab[][2] = {{1, 0}, {-2, 1}, {0.5f, -0.5f}};
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++)
        for (size_t j = 0; j < sizeof ns / sizeof *ns; j++)
            for (size_t l = 0; l < sizeof ks / sizeof *ks; l++)
                for (int s = 0; s < 3; s++) exact_case(ms[i], ns[j], ks[l], ab[s][0], ab[s][1], (i + j + l) % 3);
#endif
}

TEST(gemm_small_m_beta_zero_ignores_nan) {
    NEED_KERNEL();
#ifndef QKV_DOUBLE
    enum { M = 3, N = 5, K = 9 };
    float a[M * K], b[N * K], c[M * N];
    fill_small_ints(a, M * K, 31);
    fill_small_ints(b, N * K, 32);
    for (int i = 0; i < M * N; i++) c[i] = NAN;
    qkv__gemm_small_m(M, N, K, 1, a, K, b, K, 0, c, N);
    for (int i = 0; i < M * N; i++) CHECK_MSG(c[i] == c[i], "C[%d] is NaN after beta = 0", i);
#endif
}

TEST(gemm_small_m_rows_independent_of_batch_and_threads) {
    NEED_KERNEL();
#ifndef QKV_DOUBLE
    const int64_t m = 16, n = 1000, k = 517; /* above the parallel threshold; k tail of 5 */
    float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * n * k);
    float *c1 = malloc(sizeof(float) * m * n), *c2 = malloc(sizeof(float) * m * n);
    float *rows = malloc(sizeof(float) * m * n);
    tu_fill_uniform(a, m * k, -1, 1, 41);
    tu_fill_uniform(b, n * k, -1, 1, 42);
    const int saved = qkv_get_num_threads();
    qkv_set_num_threads(1);
    qkv__gemm_small_m(m, n, k, 1, a, k, b, k, 0, c1, n);
    qkv_set_num_threads(2);
    qkv__gemm_small_m(m, n, k, 1, a, k, b, k, 0, c2, n);
    qkv_set_num_threads(saved);
    CHECK_MSG(memcmp(c1, c2, sizeof(float) * m * n) == 0, "small-M: 1 and 2 threads differ");
    for (int64_t i = 0; i < m; i++) qkv__gemm_small_m(1, n, k, 1, a + i * k, k, b, k, 0, rows + i * n, n);
    CHECK_MSG(memcmp(c1, rows, sizeof(float) * m * n) == 0, "small-M: a row alone differs from the batch");
    /* against the double reference: the error of a k-term float sum */
    double worst = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0, mag = 0;
            for (int64_t p = 0; p < k; p++) {
                s += (double)a[i * k + p] * b[j * k + p];
                mag += fabs((double)a[i * k + p] * b[j * k + p]);
            }
            const double e = fabs(c1[i * n + j] - s) / (mag * 1e-7 * 64); /* k / 8 lanes + 8 */
            worst = e > worst ? e : worst;
        }
    CHECK_MSG(worst <= 1, "small-M: error %g of the bound", worst);
    free(a), free(b), free(c1), free(c2), free(rows);
#endif
}

TEST(gemm_routes_few_rows_to_the_small_m_kernel) {
    NEED_KERNEL();
    if (strstr(qkv_version(), "blas=off")) SKIP("without BLAS qkv_gemm is the blocked GEMM");
#ifndef QKV_DOUBLE
    const int64_t n = 300, k = 200;
    float *a = malloc(sizeof(float) * 32 * k), *b = malloc(sizeof(float) * n * k);
    float *c1 = malloc(sizeof(float) * 32 * n), *c2 = malloc(sizeof(float) * 32 * n);
    tu_fill_uniform(a, 32 * k, -1, 1, 51);
    tu_fill_uniform(b, n * k, -1, 1, 52);
    qkv_gemm(false, true, QKV_SMALL_M_ROWS, n, k, 1, a, k, b, k, 0, c1, n);
    qkv__gemm_small_m(QKV_SMALL_M_ROWS, n, k, 1, a, k, b, k, 0, c2, n);
    CHECK_MSG(memcmp(c1, c2, sizeof(float) * QKV_SMALL_M_ROWS * n) == 0,
              "qkv_gemm with %d rows is not the small-M kernel", QKV_SMALL_M_ROWS);
    /* with more rows, BLAS: within rounding of the kernel, not necessarily the same bits */
    qkv_gemm(false, true, 32, n, k, 1, a, k, b, k, 0, c1, n);
    qkv__gemm_small_m(32, n, k, 1, a, k, b, k, 0, c2, n);
    CHECK(tu_max_rel_diff(c1, c2, 32 * n) < 1e-4);
    free(a), free(b), free(c1), free(c2);
#endif
}
