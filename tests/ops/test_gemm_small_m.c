/*
 * test_gemm_small_m.c: the small-M kernel C = alpha A B^T + beta C (src/kernels/gemm/gemm_small_m.c),
 * the product of a decoding step's linear layers, and qkv_gemm's use of it.
 *
 * - Exactness: with small integer operands every product and partial sum is exact, so whatever
 *   the lane order the result must equal the naive reference bit for bit; row blocks of 1 to 4,
 *   column tails of 1 and 2 (NB = 3), k tails of 1 to 7 (the masked loads), leading dimensions
 *   larger than the rows filled with NaN (and NaN after the last row: a read outside [0, k) would
 *   show) and a sentinel in C's padding catch any indexing slip; products split over the threads
 *   in chunks of B's rows, down to chunks with no rows.
 * - BLAS semantics: beta = 0 ignores NaN in C.
 * - The bias in the epilogue (qkv__gemm_small_m_bias, a decoding step's linear layers): bit for
 *   bit the bias copied into C's rows and the product added with beta = 1 (qkv_linear itself:
 *   test_dense.c).
 * - Both widths the CPU has (8 lanes with AVX2, 16 with AVX-512F), each test at each.
 * - Rounding: on random floats within a k-proportional bound of the double reference; each row
 *   of C has the same bits whatever the other rows (an M = 16 product against 16 one-row
 *   products: batched decoding gives a hypothesis the bits it gets alone) and whatever the
 *   thread count.
 * - The routing rule (qkv__gemm_uses_small_m) on its boundaries; qkv_gemm and the batched
 *   products take it (same bits), larger m goes to BLAS.
 * Skipped where the kernel does not run (double build, no AVX2 / FMA, not x86-64).
 */
#include "testutil.h"

#include <float.h>

#include "../../src/core/internal.h"
#include "kernels/gemm/gemm.h"

#ifndef QKV_DOUBLE
#define NEED_KERNEL()                                                                             \
    do {                                                                                          \
        if (!qkv__gemm_small_m_available()) SKIP("the small-M kernel needs x86-64 AVX2 and FMA"); \
    } while (0)
#else
#define NEED_KERNEL() SKIP("the small-M kernel is a float kernel")
#endif

#ifndef QKV_DOUBLE
/* The kernel's widths on this CPU: 8 lanes (AVX2) always, 16 (AVX-512F) where it has them. Each
 * test below runs at every one of them (qkv__gemm_small_m_lanes) and goes back to the default. */
static int kernel_widths(int widths[2]) {
    int n = 0;
    widths[n++] = 8;
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx512f")) widths[n++] = 16;
#endif
    return n;
}

static void fill_small_ints(qkv_real *x, int64_t n, uint64_t seed) {
    tu_fill_uniform(x, n, -3.49, 3.49, seed);
    for (int64_t i = 0; i < n; i++) x[i] = (qkv_real)lround((double)x[i]);
}

/* NaN in columns k .. ld of each of the rows and in GUARD values after the last one: a read
 * outside [0, k) would turn C's element into NaN. */
enum { GUARD = 16 };
static float *operand(int64_t rows, int64_t k, int64_t ld, uint64_t seed) {
    float *x = malloc(sizeof(float) * (size_t)(rows * ld + GUARD));
    fill_small_ints(x, rows * ld, seed);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = k; j < ld; j++) x[r * ld + j] = NAN;
    for (int g = 0; g < GUARD; g++) x[rows * ld + g] = NAN;
    return x;
}

/* A (m, k) and B (n, k) with `pad` extra columns, C (m, n) with pad columns holding a sentinel. */
static void exact_case(int64_t m, int64_t n, int64_t k, float alpha, float beta, int64_t pad) {
    const int64_t lda = k + pad, ldb = k + pad, ldc = n + pad;
    float *a = operand(m, k, lda, 21), *b = operand(n, k, ldb, 22);
    float *c0 = malloc(sizeof(float) * (size_t)(m * ldc)), *c1 = malloc(sizeof(float) * (size_t)(m * ldc));
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
    /* row blocks of 4 and single rows; column tails of NB = 3 and NB_WIDE = 6 blocks and of a
     * 144-row chunk; k tails of the 8 and 16 lanes */
    const int64_t ms[] = {1, 2, 3, 4, 5, 7, 16}, ns[] = {1, 2, 3, 4, 5, 11, 145, 301},
                  ks[] = {1, 7, 8, 9, 15, 16, 17, 31, 64, 67, 515};
    const float ab[][2] = {{1, 0}, {-2, 1}, {0.5f, -0.5f}};
    int widths[2];
    const int n_widths = kernel_widths(widths);
    for (int w = 0; w < n_widths; w++) {
        qkv__gemm_small_m_lanes(widths[w]);
        for (size_t i = 0; i < sizeof ms / sizeof *ms; i++)
            for (size_t j = 0; j < sizeof ns / sizeof *ns; j++)
                for (size_t l = 0; l < sizeof ks / sizeof *ks; l++)
                    for (int s = 0; s < 3; s++) exact_case(ms[i], ns[j], ks[l], ab[s][0], ab[s][1], (i + j + l) % 3);
        /* over the threads with fewer blocks of B's rows than chunks (a chunk with no rows) and
         * with chunks of unequal length, the last B of at least STREAM_BYTES (its rows also
         * prefetched FAR_ROWS ahead into L2); exact: |sums| <= 9 k < 2^24 */
        const int64_t par[][3] = {{16, 1, 20000}, {16, 7, 4099}, {16, 301, 515}, {3, 1000, 517}};
        const int saved = qkv_get_num_threads();
        qkv_set_num_threads(4); /* 4 chunks at least, so n = 1 and 7 leave some without rows */
        for (size_t i = 0; i < sizeof par / sizeof *par; i++) exact_case(par[i][0], par[i][1], par[i][2], 1, 0, 1);
        qkv_set_num_threads(saved);
    }
    qkv__gemm_small_m_lanes(0);
#endif
}

TEST(gemm_small_m_beta_zero_ignores_nan) {
    NEED_KERNEL();
#ifndef QKV_DOUBLE
    enum { M = 3, N = 5, K = 9 };
    float a[M * K], b[N * K], c[M * N];
    int widths[2];
    const int n_widths = kernel_widths(widths);
    for (int w = 0; w < n_widths; w++) {
        qkv__gemm_small_m_lanes(widths[w]);
        fill_small_ints(a, M * K, 31);
        fill_small_ints(b, N * K, 32);
        for (int i = 0; i < M * N; i++) c[i] = NAN;
        qkv__gemm_small_m(M, N, K, 1, a, K, b, K, 0, c, N);
        for (int i = 0; i < M * N; i++) CHECK_MSG(c[i] == c[i], "C[%d] is NaN after beta = 0", i);
        /* alpha = 0: A and B are not read (BLAS): NaN there leaves C = beta C */
        a[4] = NAN;
        b[7] = INFINITY;
        for (int i = 0; i < M * N; i++) c[i] = (float)i;
        qkv__gemm_small_m(M, N, K, 0, a, K, b, K, 0.5f, c, N);
        for (int i = 0; i < M * N; i++) CHECK_MSG(c[i] == 0.5f * (float)i, "C[%d] = %g after alpha = 0", i, (double)c[i]);
    }
    qkv__gemm_small_m_lanes(0);
#endif
}

TEST(gemm_small_m_rows_independent_of_batch_and_threads) {
    NEED_KERNEL();
#ifndef QKV_DOUBLE
    const int64_t m = 16, n = 1000, k = 517; /* above the parallel threshold; k tail of 5 */
    float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * n * k);
    float *c1 = malloc(sizeof(float) * m * n), *c2 = malloc(sizeof(float) * m * n);
    float *rows = malloc(sizeof(float) * m * n), *c8 = malloc(sizeof(float) * m * n);
    tu_fill_uniform(a, m * k, -1, 1, 41);
    tu_fill_uniform(b, n * k, -1, 1, 42);
    int widths[2];
    const int n_widths = kernel_widths(widths);
    for (int w = 0; w < n_widths; w++) {
        qkv__gemm_small_m_lanes(widths[w]);
        const int saved = qkv_get_num_threads();
        qkv_set_num_threads(1);
        qkv__gemm_small_m(m, n, k, 1, a, k, b, k, 0, c1, n);
        qkv_set_num_threads(2);
        qkv__gemm_small_m(m, n, k, 1, a, k, b, k, 0, c2, n);
        qkv_set_num_threads(saved);
        CHECK_MSG(memcmp(c1, c2, sizeof(float) * m * n) == 0, "small-M, %d lanes: 1 and 2 threads differ", widths[w]);
        for (int64_t i = 0; i < m; i++) qkv__gemm_small_m(1, n, k, 1, a + i * k, k, b, k, 0, rows + i * n, n);
        CHECK_MSG(memcmp(c1, rows, sizeof(float) * m * n) == 0, "small-M, %d lanes: a row alone differs from the batch",
                  widths[w]);
        /* against the double reference: the error of a k-term float sum */
        double worst = 0;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0, mag = 0;
                for (int64_t p = 0; p < k; p++) {
                    s += (double)a[i * k + p] * b[j * k + p];
                    mag += fabs((double)a[i * k + p] * b[j * k + p]);
                }
                /* a lane sums k / 8 (or k / 16) terms (FMA), then 3 (or 4) levels of pairwise sums */
                const double e = fabs(c1[i * n + j] - s) / (mag * (double)(k / 8 + 8) * FLT_EPSILON / 2);
                worst = e > worst ? e : worst;
            }
        CHECK_MSG(worst <= 1, "small-M, %d lanes: error %g of the bound", widths[w], worst);
        /* the widths sum in different orders: the same bits from both would mean one width ran twice */
        if (w == 0) memcpy(c8, c1, sizeof(float) * m * n);
        else CHECK_MSG(memcmp(c8, c1, sizeof(float) * m * n) != 0, "small-M: 16 lanes gave the 8-lane bits");
    }
    qkv__gemm_small_m_lanes(0);
    free(a), free(b), free(c1), free(c2), free(rows), free(c8);
#endif
}

TEST(gemm_small_m_bias_has_the_bits_of_bias_rows_then_beta_one) {
    NEED_KERNEL();
#ifndef QKV_DOUBLE
    /* row blocks of 4 and single rows, column tails, k tails, a B of at least STREAM_BYTES, more
     * chunks than rows of B; at 1 and 2 threads and both widths */
    const int64_t shapes[][3] = {
        {1, 7, 9}, {5, 301, 517}, {16, 1000, 517}, {16, 20, 40}, {7, 145, 64}};
    int widths[2];
    const int n_widths = kernel_widths(widths), saved = qkv_get_num_threads();
    for (int w = 0; w < n_widths; w++) {
        qkv__gemm_small_m_lanes(widths[w]);
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            for (int threads = 1; threads <= 2; threads++) {
                qkv_set_num_threads(threads);
                const int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
                float *a = malloc(sizeof(float) * (size_t)(m * k)),
                      *b = malloc(sizeof(float) * (size_t)(n * k));
                float *bias = malloc(sizeof(float) * (size_t)n),
                      *want = malloc(sizeof(float) * (size_t)(m * n));
                float *got = malloc(sizeof(float) * (size_t)(m * n));
                tu_fill_uniform(a, m * k, -1, 1, 81 + s);
                tu_fill_uniform(b, n * k, -1, 1, 82 + s);
                tu_fill_uniform(bias, n, -2, 2, 83 + s);
                const float alpha = s % 2 ? 0.75f : 1;
                for (int64_t i = 0; i < m; i++)
                    memcpy(want + i * n, bias, sizeof(float) * (size_t)n);
                qkv__gemm_small_m(m, n, k, alpha, a, k, b, k, 1, want, n);
                for (int64_t i = 0; i < m * n; i++)
                    got[i] = NAN; /* never read */
                qkv__gemm_small_m_bias(m, n, k, alpha, a, k, b, k, bias, got, n);
                CHECK_MSG(memcmp(got, want, sizeof(float) * (size_t)(m * n)) == 0,
                          "small-M with bias, %d lanes, %lldx%lldx%lld, %d thread(s): not the bits "
                          "of bias rows "
                          "+ beta 1",
                          widths[w], (long long)m, (long long)n, (long long)k, threads);
                free(a), free(b), free(bias), free(want), free(got);
            }
    }
    qkv_set_num_threads(saved);
    qkv__gemm_small_m_lanes(0);
#endif
}

TEST(gemm_routes_few_rows_to_the_small_m_kernel) {
    NEED_KERNEL();
    if (strstr(qkv_version(), "blas=off")) SKIP("without BLAS qkv_gemm is the blocked GEMM");
#ifndef QKV_DOUBLE
    /* the rule: x W^T (no transposed A, transposed B); at most 16 rows and n k >= 4096, or at
     * most 96 rows against a weight (k >= 256, n k >= 2^17) */
    const struct {
        bool ta, tb;
        int64_t m, n, k;
        bool small;
    } rule[] = {{false, true, 1, 64, 64, true},      {false, true, 16, 512, 512, true},
                {false, true, 17, 64, 64, false},     {false, true, 16, 4095, 1, false},
                {false, true, 16, 4096, 1, true},     {false, false, 4, 512, 512, false},
                {true, true, 4, 512, 512, false},     {true, false, 4, 512, 512, false},
                {false, true, 17, 512, 512, true},    {false, true, 96, 512, 256, true},
                {false, true, 97, 512, 256, false},   {false, true, 64, 511, 256, false},
                {false, true, 64, 1024, 255, false},  {false, false, 64, 512, 512, false},
                {true, true, 64, 512, 512, false}};
    for (size_t i = 0; i < sizeof rule / sizeof *rule; i++)
        CHECK_MSG(qkv__gemm_uses_small_m(rule[i].ta, rule[i].tb, rule[i].m, rule[i].n, rule[i].k) == rule[i].small,
                  "rule %zu: %c%c %lldx%lldx%lld", i, rule[i].ta ? 'T' : 'N', rule[i].tb ? 'T' : 'N',
                  (long long)rule[i].m, (long long)rule[i].n, (long long)rule[i].k);
    const int64_t n = 300, k = 200;
    float *a = malloc(sizeof(float) * 32 * k), *b = malloc(sizeof(float) * n * k);
    float *c1 = malloc(sizeof(float) * 32 * n), *c2 = malloc(sizeof(float) * 32 * n);
    tu_fill_uniform(a, 32 * k, -1, 1, 51);
    tu_fill_uniform(b, n * k, -1, 1, 52);
    qkv_gemm(false, true, QKV_SMALL_M_ROWS, n, k, 1, a, k, b, k, 0, c1, n);
    qkv__gemm_small_m(QKV_SMALL_M_ROWS, n, k, 1, a, k, b, k, 0, c2, n);
    CHECK_MSG(memcmp(c1, c2, sizeof(float) * QKV_SMALL_M_ROWS * n) == 0,
              "qkv_gemm with %d rows is not the small-M kernel", QKV_SMALL_M_ROWS);
    /* the batched products take the same path: each matrix has qkv_gemm's bits */
    const int64_t half = n / 2; /* two products of 4 rows against 150 rows of B each */
    qkv_gemm_batched(false, true, 2, 4, half, k, 1, a, k, 4 * k, b, k, half * k, 0, c1, half, 4 * half);
    for (int s = 0; s < 2; s++)
        qkv_gemm(false, true, 4, half, k, 1, a + s * 4 * k, k, b + s * half * k, k, 0, c2 + s * 4 * half, half);
    CHECK_MSG(memcmp(c1, c2, sizeof(float) * 8 * half) == 0, "a batched product differs from qkv_gemm's");
    /* up to 96 rows against a weight, the kernel too */
    const int64_t wn = 512, wk = 256;
    float *wa = malloc(sizeof(float) * 96 * wk), *wb = malloc(sizeof(float) * wn * wk);
    float *wc1 = malloc(sizeof(float) * 96 * wn), *wc2 = malloc(sizeof(float) * 96 * wn);
    CHECK(wa && wb && wc1 && wc2);
    if (!(wa && wb && wc1 && wc2)) {
        free(wa), free(wb), free(wc1), free(wc2), free(a), free(b), free(c1), free(c2);
        return;
    }
    tu_fill_uniform(wa, 96 * wk, -1, 1, 53);
    tu_fill_uniform(wb, wn * wk, -1, 1, 54);
    qkv_gemm(false, true, 96, wn, wk, 1, wa, wk, wb, wk, 0, wc1, wn);
    qkv__gemm_small_m(96, wn, wk, 1, wa, wk, wb, wk, 0, wc2, wn);
    CHECK_MSG(memcmp(wc1, wc2, sizeof(float) * 96 * wn) == 0, "qkv_gemm with 96 rows of a weight is not the small-M kernel");
    free(wa), free(wb), free(wc1), free(wc2);
    /* with more rows, BLAS: within rounding of the kernel, not necessarily the same bits */
    qkv_gemm(false, true, 32, n, k, 1, a, k, b, k, 0, c1, n);
    qkv__gemm_small_m(32, n, k, 1, a, k, b, k, 0, c2, n);
    CHECK(tu_max_rel_diff(c1, c2, 32 * n) < 1e-4);
    free(a), free(b), free(c1), free(c2);
#endif
}
