/*
 * test_gemm_blocked.c: the portable blocked GEMM (qkv_gemm_blocked) on every edge path.
 *
 * - Exactness: with small integer operands every product and partial sum is exact in float and
 *   double, so whatever the blocking the result must equal the naive reference bit for bit; any
 *   packing or indexing slip (edge micro-tiles, KC / MC / NC block boundaries, the tiles threads
 *   take, leading dimensions larger than the rows) shows up as a difference. All four
 *   transpose combinations, alpha and beta in {1, 0}, {-2, 1}, {0.5, -0.5}.
 * - BLAS semantics: beta = 0 ignores NaN in C; alpha = 0 or k = 0 only scales C.
 * - Rounding independent of tiling: a sub-block of C computed by its own call (so its elements
 *   sit at other micro-tile positions, in other tiles) is bit-identical to the same elements of
 *   the full product; the property that makes results independent of the thread count, which is
 *   then checked directly for 1 and 2 threads.
 * The block sizes (src/kernels/gemm/gemm.c): micro-tile 4 x 8 (float) / 4 x 4 (double), KC = 256,
 * MC = NC = 128 (float) / 64 (double); above m n k = 2^18 threads take tiles of at most 256 x 512.
 */
#include "testutil.h"

/* Uniform integers in [-3, 3] stored as qkv_real. */
static void fill_small_ints(qkv_real *x, int64_t n, uint64_t seed) {
    tu_fill_uniform(x, n, -3.49, 3.49, seed);
    for (int64_t i = 0; i < n; i++)
        x[i] = (qkv_real)lround((double)x[i]);
}

/* op(A) is (m, k), op(B) is (k, n), C is (m, n); each stored with `pad` extra columns. */
static void exact_case(bool ta, bool tb, int64_t m, int64_t n, int64_t k, qkv_real alpha,
                       qkv_real beta, int64_t pad) {
    const int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    const int64_t lda = ac + pad, ldb = bc + pad, ldc = n + pad;
    qkv_real *a = malloc(sizeof(qkv_real) * (size_t)(ar * lda + 1));
    qkv_real *b = malloc(sizeof(qkv_real) * (size_t)(br * ldb + 1));
    qkv_real *c0 = malloc(sizeof(qkv_real) * (size_t)(m * ldc + 1));
    qkv_real *c1 = malloc(sizeof(qkv_real) * (size_t)(m * ldc + 1));
    fill_small_ints(a, ar * lda, 11);
    fill_small_ints(b, br * ldb, 12);
    fill_small_ints(c0, m * ldc, 13);
    for (int64_t i = 0; i < m; i++) /* padding of C: a sentinel that must survive */
        for (int64_t j = n; j < ldc; j++)
            c0[i * ldc + j] = 1000;
    memcpy(c1, c0, sizeof(qkv_real) * (size_t)(m * ldc));
    qkv_gemm_ref(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c0, ldc);
    qkv_gemm_blocked(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c1, ldc);
    int64_t bad = -1;
    for (int64_t i = 0; i < m * ldc && bad < 0; i++)
        if (c1[i] != c0[i]) bad = i;
    CHECK_MSG(bad < 0,
              "gemm_blocked %c%c %lldx%lldx%lld alpha %g beta %g pad %lld: C[%lld][%lld] = %.9g, "
              "reference %.9g",
              ta ? 'T' : 'N', tb ? 'T' : 'N', (long long)m, (long long)n, (long long)k,
              (double)alpha, (double)beta, (long long)pad, (long long)(bad / ldc),
              (long long)(bad % ldc), bad < 0 ? 0.0 : (double)c1[bad],
              bad < 0 ? 0.0 : (double)c0[bad]);
    free(a), free(b), free(c0), free(c1);
}

TEST(gemm_blocked_exact_on_every_edge_path) {
    const int64_t shapes[][3] = {
        {1, 1, 1},     {1, 37, 1},     {37, 1, 1},   {1, 300, 1},    /* vectors */
        {129, 1, 300}, {4, 8, 256},    {5, 9, 257},  {7, 13, 300},   /* one micro-tile +- 1 */
        {130, 3, 600}, {3, 130, 600},  {65, 9, 513}, {128, 16, 256}, /* MC, NC, KC edges */
        {129, 257, 9}, {257, 130, 20}, {600, 9, 70}, {9, 600, 70},   /* tiled for threads */
    };
    const qkv_real ab[][2] = {{1, 0}, {-2, 1}, {0.5, -0.5}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int t = 0; t < 4; t++)
            for (int v = 0; v < 3; v++)
                exact_case(t & 1, t & 2, shapes[s][0], shapes[s][1], shapes[s][2], ab[v][0],
                           ab[v][1], v == 0 ? 0 : 3);
}

TEST(gemm_blocked_beta_zero_ignores_nan_and_alpha_zero_only_scales) {
    const int64_t m = 9, n = 11, k = 5;
    qkv_real a[9 * 5], b[5 * 11], c[9 * 11], want[9 * 11];
    fill_small_ints(a, m * k, 21);
    fill_small_ints(b, k * n, 22);
    for (int64_t i = 0; i < m * n; i++)
        c[i] = (qkv_real)NAN, want[i] = 0;
    qkv_gemm_ref(false, false, m, n, k, 1, a, k, b, n, 0, want, n);
    qkv_gemm_blocked(false, false, m, n, k, 1, a, k, b, n, 0, c, n);
    CHECK(memcmp(c, want, sizeof c) == 0);
    /* alpha = 0: A and B are not read (NaN there changes nothing), C = beta C. */
    for (int64_t i = 0; i < m * k; i++)
        a[i] = (qkv_real)NAN;
    for (int64_t i = 0; i < m * n; i++)
        c[i] = (qkv_real)(i % 7), want[i] = (qkv_real)(i % 7) * -2;
    qkv_gemm_blocked(false, false, m, n, k, 0, a, k, b, n, -2, c, n);
    CHECK(memcmp(c, want, sizeof c) == 0);
    /* k = 0: the product is empty, C = beta C; beta = 0 clears even NaN. */
    qkv_gemm_blocked(true, true, m, n, 0, 1, a, m, b, 1, (qkv_real)0.5, c, n);
    for (int64_t i = 0; i < m * n; i++)
        want[i] *= (qkv_real)0.5;
    CHECK(memcmp(c, want, sizeof c) == 0);
    for (int64_t i = 0; i < m * n; i++)
        c[i] = (qkv_real)NAN;
    qkv_gemm_blocked(false, false, m, n, 0, 1, a, k, b, n, 0, c, n);
    for (int64_t i = 0; i < m * n; i++)
        CHECK(c[i] == 0);
}

TEST(gemm_blocked_subblock_is_bit_identical_to_full_product) {
    /* Rows i0.. and columns j0.. of C from their own call: odd offsets move every element to
     * another micro-tile position and tile, the k order must stay the same. */
    const int64_t m = 120, n = 150, k = 260, i0 = 3, j0 = 5, ms = 101, ns = 103;
    qkv_real *a = malloc(sizeof(qkv_real) * m * k), *b = malloc(sizeof(qkv_real) * k * n);
    qkv_real *c = malloc(sizeof(qkv_real) * m * n), *cs = malloc(sizeof(qkv_real) * ms * ns);
    tu_fill_uniform(a, m * k, -1, 1, 31);
    tu_fill_uniform(b, k * n, -1, 1, 32);
    for (int t = 0; t < 4; t++) {
        const bool ta = t & 1, tb = t & 2;
        const int64_t lda = ta ? m : k, ldb = tb ? k : n;
        qkv_gemm_blocked(ta, tb, m, n, k, 1, a, lda, b, ldb, 0, c, n);
        const qkv_real *as = ta ? a + i0 : a + i0 * lda; /* rows i0.. of op(A) */
        const qkv_real *bs = tb ? b + j0 * ldb : b + j0; /* columns j0.. of op(B) */
        qkv_gemm_blocked(ta, tb, ms, ns, k, 1, as, lda, bs, ldb, 0, cs, ns);
        int64_t diffs = 0;
        for (int64_t i = 0; i < ms; i++)
            diffs += memcmp(cs + i * ns, c + (i0 + i) * n + j0, sizeof(qkv_real) * ns) != 0;
        CHECK_MSG(diffs == 0, "gemm_blocked %c%c: %lld rows of the sub-block differ",
                  ta ? 'T' : 'N', tb ? 'T' : 'N', (long long)diffs);
    }
    free(a), free(b), free(c), free(cs);
}

TEST(gemm_blocked_all_transposes_identical_across_thread_counts) {
    const int64_t m = 120, n = 150, k = 260; /* above the serial threshold, ragged tiles */
    qkv_real *a = malloc(sizeof(qkv_real) * m * k), *b = malloc(sizeof(qkv_real) * k * n);
    qkv_real *c1 = malloc(sizeof(qkv_real) * m * n), *c2 = malloc(sizeof(qkv_real) * m * n);
    tu_fill_uniform(a, m * k, -1, 1, 41);
    tu_fill_uniform(b, k * n, -1, 1, 42);
    tu_fill_uniform(c1, m * n, -1, 1, 43);
    memcpy(c2, c1, sizeof(qkv_real) * m * n);
    const int saved = qkv_get_num_threads();
    for (int t = 0; t < 4; t++) {
        const bool ta = t & 1, tb = t & 2;
        const int64_t lda = ta ? m : k, ldb = tb ? k : n;
        qkv_set_num_threads(1);
        qkv_gemm_blocked(ta, tb, m, n, k, (qkv_real)0.75, a, lda, b, ldb, (qkv_real)0.5, c1, n);
        qkv_set_num_threads(2);
        qkv_gemm_blocked(ta, tb, m, n, k, (qkv_real)0.75, a, lda, b, ldb, (qkv_real)0.5, c2, n);
        CHECK_MSG(memcmp(c1, c2, sizeof(qkv_real) * m * n) == 0, "gemm_blocked %c%c differs",
                  ta ? 'T' : 'N', tb ? 'T' : 'N');
    }
    qkv_set_num_threads(saved);
    free(a), free(b), free(c1), free(c2);
}
