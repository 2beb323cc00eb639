/*
 * test_gemm_packed.c: qkv's packed AVX-512 GEMM (src/kernels/gemm/gemm_packed.c), which qkv_gemm takes
 * for large float products on CPUs with AVX-512F.
 *
 * - Exactness: with small integer operands every product and partial sum is exact, so the
 *   result must equal the naive reference bit for bit: all four transpose combinations, edges
 *   of the 12 x 32 micro-tile (m, n not multiples of 12 or 32), k tails of the 16-wide packing
 *   transposes, two and three k slices of 512, alpha and beta (0, 1, other), leading dimensions
 *   padded with NaN (a read outside the operand would show) and a sentinel in C's padding (a
 *   write outside C would show); both of the thread split's modes (rows: m > 384; columns);
 *   row mode with three k slices, each overwriting the shared packed B of the one before.
 * - BLAS semantics: beta = 0 ignores NaN in C; alpha = 0 and k = 0 are left to the caller.
 * - Rounding, bit for bit: on random floats the result equals a scalar emulation of the
 *   documented order (per k slice of 512 an FMA chain from zero in order of k, then
 *   C = beta C + alpha acc for the first slice and C + alpha acc for the next), for 1, 2 and 3
 *   threads and both split modes.
 * - The bias in the epilogue (qkv__gemm_packed_bias, for qkv_linear's y = x W^T + b): bit for
 *   bit the result of the bias copied into C's rows and the product added with beta = 1, in both
 *   modes, with several slices, at 1-3 threads (qkv_linear itself: test_dense.c).
 * - From a packed copy of W^T (qkv__gemm_packed_nt_copy, a decoding session's weight copies):
 *   filled by one product and read by the next, in both split modes, at 1-3 threads (the copy
 *   filled at one count and read at another), with and without a bias, n beyond one pass of
 *   packed B: bit for bit qkv__gemm_packed(_bias), which packs W at every product.
 * - The routing rule (qkv__gemm_uses_packed) on its boundaries, and qkv_gemm takes it.
 * - The packing buffer of a thread that exits is freed (the leak checker of the sanitizer build
 *   would report it).
 * Skipped where the kernel does not run (double build, not x86-64 Linux, no AVX-512F).
 */
#include "testutil.h"

#include <float.h>
#include <pthread.h>

#include "../../src/kernels/gemm/gemm.h"

#ifndef QKV_DOUBLE
#define NEED_KERNEL()                                                                                 \
    do {                                                                                              \
        if (!qkv__gemm_packed_available()) SKIP("the packed GEMM needs an x86-64 CPU with AVX-512F"); \
    } while (0)
#else
#define NEED_KERNEL() SKIP("the packed GEMM is a float kernel")
#endif

#ifndef QKV_DOUBLE
enum { KC = 512 }; /* the k slice of gemm_packed.c: part of the bits */

static void fill_small_ints(float *x, int64_t n, uint64_t seed) {
    tu_fill_uniform(x, n, -3.49, 3.49, seed);
    for (int64_t i = 0; i < n; i++) x[i] = (float)lround((double)x[i]);
}

/* A stored (rows, cols) with leading dimension cols + pad, the padding and GUARD values after it NaN. */
enum { GUARD = 32 };
static float *operand(int64_t rows, int64_t cols, int64_t pad, uint64_t seed) {
    const int64_t ld = cols + pad;
    float *x = malloc(sizeof(float) * (size_t)(rows * ld + GUARD));
    fill_small_ints(x, rows * ld, seed);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = cols; j < ld; j++) x[r * ld + j] = NAN;
    for (int g = 0; g < GUARD; g++) x[rows * ld + g] = NAN;
    return x;
}

/* op(A) (m, k), op(B) (k, n), C (m, n) with `pad` extra columns everywhere; packed against the
 * reference, exact. */
static void exact_case(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, float beta, int64_t pad) {
    const int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
    float *a = ta ? operand(k, m, pad, 21) : operand(m, k, pad, 21);
    float *b = tb ? operand(n, k, pad, 22) : operand(k, n, pad, 22);
    float *c0 = malloc(sizeof(float) * (size_t)(m * ldc)), *c1 = malloc(sizeof(float) * (size_t)(m * ldc));
    fill_small_ints(c0, m * ldc, 23);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = n; j < ldc; j++) c0[i * ldc + j] = 1000;
    memcpy(c1, c0, sizeof(float) * (size_t)(m * ldc));
    qkv_gemm_ref(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c0, ldc);
    const bool ran = qkv__gemm_packed(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c1, ldc);
    int64_t bad = -1;
    for (int64_t i = 0; i < m * ldc && bad < 0; i++)
        if (c1[i] != c0[i]) bad = i;
    CHECK_MSG(ran && bad < 0, "packed %c%c %lldx%lldx%lld alpha %g beta %g pad %lld: ran %d, C[%lld][%lld] = %.9g, "
              "reference %.9g", ta ? 'T' : 'N', tb ? 'T' : 'N', (long long)m, (long long)n, (long long)k,
              (double)alpha, (double)beta, (long long)pad, ran, (long long)(bad / ldc), (long long)(bad % ldc),
              bad < 0 ? 0.0 : (double)c1[bad], bad < 0 ? 0.0 : (double)c0[bad]);
    free(a), free(b), free(c0), free(c1);
}

/* The documented rounding, scalar: per k slice an FMA chain from zero, then into C. */
static void emulate(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                    const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float *cij = c + i * ldc + j;
            for (int64_t pc = 0; pc < k; pc += KC) {
                float acc = 0;
                for (int64_t p = pc; p < k && p < pc + KC; p++)
                    acc = fmaf(ta ? a[p * lda + i] : a[i * lda + p], tb ? b[j * ldb + p] : b[p * ldb + j], acc);
                const float scaled = alpha * acc;
                const float slice_beta = pc == 0 ? beta : 1;
                *cij = slice_beta == 0 ? scaled : slice_beta == 1 ? *cij + scaled : fmaf(slice_beta, *cij, scaled);
            }
        }
}
#endif

TEST(gemm_packed_exact_on_every_edge_path) {
    NEED_KERNEL();
#ifndef QKV_DOUBLE
    /* column mode (m <= 384): micro-tile edges and k tails; two and three k slices */
    const int64_t ms[] = {5, 12, 37}, ns[] = {7, 32, 70}, ks[] = {1, 17, 513, 1100};
    const float ab[][2] = {{1, 0}, {-2, 1}, {0.5f, -0.5f}};
    int count = 0;
    for (int t = 0; t < 4; t++)
        for (size_t i = 0; i < sizeof ms / sizeof *ms; i++)
            for (size_t j = 0; j < sizeof ns / sizeof *ns; j++)
                for (size_t l = 0; l < sizeof ks / sizeof *ks; l++, count++)
                    exact_case(t & 1, t & 2, ms[i], ns[j], ks[l], ab[count % 3][0], ab[count % 3][1], count % 3);
    /* row mode (m > 384): the packed B shared; rows split over the threads in blocks of 192 */
    for (int t = 0; t < 4; t++) {
        exact_case(t & 1, t & 2, 1037, 20, 530, 1, 0, 1);
        exact_case(t & 1, t & 2, 1200, 40, 20, -2, 1, 0);
        exact_case(t & 1, t & 2, 1030, 45, 1100, 0.5f, -0.5f, 0); /* three slices */
    }
    /* more columns than one pass of packed B (4096): two passes */
    exact_case(false, true, 1030, 4100, 3, 0.5f, -0.5f, 2);
    exact_case(false, false, 40, 4100, 5, 1, 1, 0);
#endif
}

TEST(gemm_packed_beta_zero_ignores_nan_and_leaves_degenerate_calls) {
    NEED_KERNEL();
#ifndef QKV_DOUBLE
    enum { M = 40, N = 70, K = 30 };
    float *a = operand(M, K, 0, 31), *b = operand(N, K, 0, 32), c[M * N];
    for (int i = 0; i < M * N; i++) c[i] = NAN;
    CHECK(qkv__gemm_packed(false, true, M, N, K, 1, a, K, b, K, 0, c, N));
    for (int i = 0; i < M * N; i++) CHECK_MSG(c[i] == c[i], "C[%d] is NaN after beta = 0", i);
    /* alpha = 0 (BLAS: A and B not read) and k = 0 are the caller's: C untouched, false */
    for (int i = 0; i < M * N; i++) c[i] = (float)i;
    CHECK(!qkv__gemm_packed(false, true, M, N, K, 0, a, K, b, K, 0.5f, c, N));
    CHECK(!qkv__gemm_packed(false, true, M, N, 0, 1, a, K, b, K, 0.5f, c, N));
    for (int i = 0; i < M * N; i++) CHECK_MSG(c[i] == (float)i, "C[%d] = %g after a refused call", i, (double)c[i]);
    free(a), free(b);
#endif
}

TEST(gemm_packed_bits_follow_the_documented_order_for_any_thread_count) {
    NEED_KERNEL();
#ifndef QKV_DOUBLE
    /* (m, n, k): column mode with 3 slices; row mode (m > 384) with 2 and with 3 (the shared
     * packed B overwritten twice); two passes of packed B (n > 4096) in column mode; ragged
     * edges everywhere */
    const int64_t shapes[][3] = {{131, 77, 1100}, {1031, 20, 520}, {1049, 70, 1300}, {40, 4200, 21}};
    const int saved = qkv_get_num_threads();
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int t = 0; t < 4; t++) {
            const bool ta = t & 1, tb = t & 2;
            const int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            const int64_t lda = ta ? m : k, ldb = tb ? k : n;
            float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(n * k));
            float *want = malloc(sizeof(float) * (size_t)(m * n)), *got = malloc(sizeof(float) * (size_t)(m * n));
            tu_fill_uniform(a, m * k, -1, 1, 41 + s);
            tu_fill_uniform(b, n * k, -1, 1, 42 + s);
            tu_fill_uniform(want, m * n, -1, 1, 43 + s);
            const float alpha = 0.75f, beta = t == 3 ? 0 : -1.25f;
            float *c0 = malloc(sizeof(float) * (size_t)(m * n));
            memcpy(c0, want, sizeof(float) * (size_t)(m * n));
            emulate(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, want, n);
            for (int threads = 1; threads <= 3; threads++) {
                qkv_set_num_threads(threads);
                memcpy(got, c0, sizeof(float) * (size_t)(m * n));
                const bool ran = qkv__gemm_packed(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, got, n);
                int64_t bad = -1;
                for (int64_t i = 0; i < m * n && bad < 0; i++)
                    if (memcmp(&got[i], &want[i], sizeof(float)) != 0) bad = i;
                CHECK_MSG(ran && bad < 0, "packed %c%c %lldx%lldx%lld, %d thread(s): C[%lld] = %.9g, emulated %.9g",
                          ta ? 'T' : 'N', tb ? 'T' : 'N', (long long)m, (long long)n, (long long)k, threads,
                          (long long)bad, bad < 0 ? 0.0 : (double)got[bad], bad < 0 ? 0.0 : (double)want[bad]);
            }
            free(a), free(b), free(want), free(got), free(c0);
        }
    qkv_set_num_threads(saved);
#endif
}

TEST(gemm_packed_bias_has_the_bits_of_bias_rows_then_beta_one) {
    NEED_KERNEL();
#ifndef QKV_DOUBLE
    /* the shapes of the test above: column mode with 3 slices (the bias in the first only), row
     * mode with 2 and 3, two passes of packed B (n > 4096); A (m, k) times B (n, k)^T as
     * qkv_linear multiplies, and N N */
    const int64_t shapes[][3] = {
        {131, 77, 1100}, {1031, 20, 520}, {1049, 70, 1300}, {40, 4200, 21}};
    const int saved = qkv_get_num_threads();
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int tb = 0; tb < 2; tb++) {
            const int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], ldb = tb ? k : n;
            float *a = malloc(sizeof(float) * (size_t)(m * k)),
                  *b = malloc(sizeof(float) * (size_t)(n * k));
            float *bias = malloc(sizeof(float) * (size_t)n),
                  *want = malloc(sizeof(float) * (size_t)(m * n));
            float *got = malloc(sizeof(float) * (size_t)(m * n));
            tu_fill_uniform(a, m * k, -1, 1, 61 + s);
            tu_fill_uniform(b, n * k, -1, 1, 62 + s);
            tu_fill_uniform(bias, n, -2, 2, 63 + s);
            for (int threads = 1; threads <= 3; threads++) {
                qkv_set_num_threads(threads);
                for (int64_t i = 0; i < m; i++)
                    memcpy(want + i * n, bias, sizeof(float) * (size_t)n);
                const bool ran_want =
                    qkv__gemm_packed(false, tb, m, n, k, 0.75f, a, k, b, ldb, 1, want, n);
                for (int64_t i = 0; i < m * n; i++)
                    got[i] = NAN; /* not read: beta 0 */
                const bool ran =
                    qkv__gemm_packed_bias(false, tb, m, n, k, 0.75f, a, k, b, ldb, bias, got, n);
                CHECK_MSG(ran && ran_want &&
                              memcmp(got, want, sizeof(float) * (size_t)(m * n)) == 0,
                          "packed with bias N%c %lldx%lldx%lld, %d thread(s): not the bits of bias "
                          "rows + beta 1",
                          tb ? 'T' : 'N', (long long)m, (long long)n, (long long)k, threads);
            }
            free(a), free(b), free(bias), free(want), free(got);
        }
    qkv_set_num_threads(saved);
#endif
}

TEST(gemm_routes_large_products_to_the_packed_gemm) {
    NEED_KERNEL();
    if (strstr(qkv_version(), "blas=off")) SKIP("without BLAS qkv_gemm is the blocked GEMM");
#ifndef QKV_DOUBLE
    /* the rule: at least 32 rows, 64 columns, depth 16 and more than 2^18 multiply-adds */
    const struct {
        int64_t m, n, k;
        bool packed;
    } rule[] = {{64, 64, 64, false},   {64, 64, 65, true},     {31, 1024, 1024, false}, {32, 1024, 1024, true},
                {1024, 63, 1024, false}, {1024, 64, 1024, true}, {4096, 4096, 15, false}, {4096, 4096, 16, true}};
    for (size_t i = 0; i < sizeof rule / sizeof *rule; i++)
        CHECK_MSG(qkv__gemm_uses_packed(rule[i].m, rule[i].n, rule[i].k) == rule[i].packed, "rule at %lldx%lldx%lld",
                  (long long)rule[i].m, (long long)rule[i].n, (long long)rule[i].k);
    /* qkv_gemm takes it: the same bits as the kernel called directly (OpenBLAS's differ) */
    const int64_t m = 200, n = 300, k = 700;
    float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * n * k);
    float *c1 = malloc(sizeof(float) * m * n), *c2 = malloc(sizeof(float) * m * n);
    tu_fill_uniform(a, m * k, -1, 1, 51);
    tu_fill_uniform(b, n * k, -1, 1, 52);
    qkv_gemm(false, true, m, n, k, 1, a, k, b, k, 0, c1, n);
    CHECK(qkv__gemm_packed(false, true, m, n, k, 1, a, k, b, k, 0, c2, n));
    CHECK_MSG(memcmp(c1, c2, sizeof(float) * m * n) == 0, "qkv_gemm did not take the packed GEMM");
    free(a), free(b), free(c1), free(c2);
#endif
}

#ifndef QKV_DOUBLE
static void *product_on_a_thread(void *arg) {
    (void)arg;
    enum { M = 100, N = 100, K = 100 };
    float *a = calloc(M * K, sizeof(float)), *b = calloc(N * K, sizeof(float)), *c = calloc(M * N, sizeof(float));
    const bool ran = a && b && c && qkv__gemm_packed(false, true, M, N, K, 1, a, K, b, K, 0, c, N);
    free(a), free(b), free(c);
    return ran ? arg : NULL;
}
#endif

TEST(gemm_packed_buffer_of_an_exiting_thread_is_freed) {
    NEED_KERNEL();
#ifndef QKV_DOUBLE
    pthread_t thread;
    int token = 0;
    void *result = NULL;
    CHECK(pthread_create(&thread, NULL, product_on_a_thread, &token) == 0);
    CHECK(pthread_join(thread, &result) == 0);
    CHECK_MSG(result == &token, "the product on a new thread did not run");
#endif
}

/* The two thread splits, each forced on the same products (qkv__gemm_packed_column_rows): the
 * bits of the documented order either way, so moving the bound between them moves no result.
 * Shapes on both sides of the bound, with k tails and three slices, on 2 threads. */
TEST(gemm_packed_row_and_column_splits_give_the_same_bits) {
    NEED_KERNEL();
#ifndef QKV_DOUBLE
    const int64_t shapes[][3] = {{450, 77, 1100}, {100, 300, 530}, {1030, 40, 70}};
    const int saved = qkv_get_num_threads();
    qkv_set_num_threads(2);
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(n * k));
        float *want = malloc(sizeof(float) * (size_t)(m * n)), *got = malloc(sizeof(float) * (size_t)(m * n));
        tu_fill_uniform(a, m * k, -1, 1, 81 + s);
        tu_fill_uniform(b, n * k, -1, 1, 82 + s);
        memset(want, 0, sizeof(float) * (size_t)(m * n));
        emulate(false, true, m, n, k, 1, a, k, b, k, 0, want, n);
        for (int split = 0; split < 2; split++) {
            qkv__gemm_packed_column_rows(split == 0 ? INT64_MAX : 0); /* columns, then rows */
            memset(got, 0xff, sizeof(float) * (size_t)(m * n));  /* NaN until written */
            const bool ran = qkv__gemm_packed(false, true, m, n, k, 1, a, k, b, k, 0, got, n);
            CHECK_MSG(ran && memcmp(got, want, sizeof(float) * (size_t)(m * n)) == 0,
                      "%lldx%lldx%lld split by %s: bits differ from the documented order", (long long)m,
                      (long long)n, (long long)k, split == 0 ? "columns" : "rows");
        }
        qkv__gemm_packed_column_rows(-1);
        free(a), free(b), free(want), free(got);
    }
    qkv_set_num_threads(saved);
#endif
}

TEST(gemm_packed_from_a_copy_has_the_bits_of_packing_each_product) {
    NEED_KERNEL();
#ifndef QKV_DOUBLE
    /* (m, n, k): row and column mode as the rule gives them and forced, 1-3 slices, ragged edges,
     * n past one 4096-column pass of row mode's packed B */
    const int64_t shapes[][3] = {{450, 77, 1100}, {100, 300, 530}, {1030, 40, 70}, {40, 4200, 21}, {320, 1024, 256}};
    const int saved = qkv_get_num_threads();
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int split = 0; split < 3; split++) { /* the rule, columns forced, rows forced */
            const int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], ldx = k + (int64_t)s % 2 * 3;
            float *x = malloc(sizeof(float) * (size_t)(2 * m * ldx)), *w = malloc(sizeof(float) * (size_t)(n * k)),
                  *bias = malloc(sizeof(float) * (size_t)n), *want = malloc(sizeof(float) * (size_t)(m * n)),
                  *got = malloc(sizeof(float) * (size_t)(m * n));
            const size_t floats = qkv__gemm_packed_copy_floats(n, k);
            float *copy = aligned_alloc(64, (sizeof(float) * floats + 63) & ~(size_t)63);
            tu_fill_uniform(x, 2 * m * ldx, -1, 1, 91 + s);
            tu_fill_uniform(w, n * k, -1, 1, 92 + s);
            tu_fill_uniform(bias, n, -1, 1, 93 + s);
            if (split) qkv__gemm_packed_column_rows(split == 1 ? INT64_MAX : 0);
            for (int use = 0; use < 4; use++) { /* the first fills the copy, the rest read it */
                const int threads = 3 - use % 3;
                const float *xu = x + (use % 2) * m * ldx, *b = use % 2 ? NULL : bias;
                qkv_set_num_threads(threads);
                const bool ran = b ? qkv__gemm_packed_bias(false, true, m, n, k, 1, xu, ldx, w, k, b, want, n)
                                   : qkv__gemm_packed(false, true, m, n, k, 1, xu, ldx, w, k, 0, want, n);
                memset(got, 0xff, sizeof(float) * (size_t)(m * n)); /* NaN until written */
                const bool copied = qkv__gemm_packed_nt_copy(m, n, k, xu, ldx, w, k, copy, use == 0, b, got, n);
                CHECK_MSG(ran && copied && memcmp(got, want, sizeof(float) * (size_t)(m * n)) == 0,
                          "%lldx%lldx%lld (%s split, %d thread(s), %s, copy %s): bits differ from packing W",
                          (long long)m, (long long)n, (long long)k, split == 0 ? "the rule's" : split == 1 ? "column" : "row",
                          threads, b ? "bias" : "no bias", use == 0 ? "filled" : "read");
            }
            qkv__gemm_packed_column_rows(-1);
            free(x), free(w), free(bias), free(want), free(got), free(copy);
        }
    qkv_set_num_threads(saved);
#endif
}
