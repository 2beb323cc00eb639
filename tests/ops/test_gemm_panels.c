/*
 * test_gemm_panels.c: the weight panels (src/kernels/gemm/gemm_panels.c), y = x W^T (+ b) for the
 * few rows of a decoding step from W repacked residue-major, against the small-M kernel on 16
 * lanes whose bits they must have.
 *
 * - Bits: memcmp against qkv__gemm_small_m (alpha 1, beta 0) and qkv__gemm_small_m_bias on random
 *   floats of mixed magnitudes (where any other order of the sums would round differently), for
 *   rows 1 .. 96 across the groups of 16 (full, 8, and tails), W's rows in whole panels and with a
 *   tail, k in whole blocks of 16, with a tail and below 16 (residues with no terms), on 1 and 2
 *   threads; from panels being filled (pack) and from filled ones.
 * - Only y's n columns are written (a sentinel past them, in a wider buffer, stays).
 * - The store (qkv__panels_linear, src/kernels/gemm/weight_copies.c): declines where the rule does
 *   not hold (rows below 8, a weight under 1 MiB, a product neither the small kernel nor the
 *   packed GEMM would take), fills a copy once and multiplies from it, and after
 *   qkv__panels_invalidate refills it from the weight's new values; beyond the small kernel's 96
 *   rows it multiplies from a copy for the packed GEMM, with that kernel's bits.
 * Skipped where the panels cannot run (double build, no AVX-512F); the store's tests also where
 * qkv_gemm never takes the small-M kernel (builds without BLAS).
 */
#include "testutil.h"

#include "../../src/core/internal.h"
#include "kernels/backend.h"
#include "kernels/gemm/gemm.h"

#ifndef QKV_DOUBLE
#define NEED_PANELS()                                                                              \
    do {                                                                                           \
        if (!qkv__gemm_panels_available()) SKIP("the weight panels need x86-64 AVX-512F");         \
    } while (0)

/* Uniform in [-1, 1) times 2^e, e in [-8, 8): sums whose order shows in the last bits. */
static float *mixed(int64_t n, uint64_t seed) {
    float *x = malloc(sizeof(float) * (size_t)(n ? n : 1));
    tu_fill_uniform(x, n, -1, 1, seed);
    for (int64_t i = 0; i < n; i++)
        x[i] = ldexpf(x[i], (int)((i * 7 + (int64_t)seed) % 16) - 8);
    return x;
}

static float *aligned_floats(size_t n) {
    return aligned_alloc(64, (sizeof(float) * (n ? n : 1) + 63) & ~(size_t)63);
}

/* qkv__gemm_panels (filling the panels, then from them) against the small kernel on 16 lanes. */
static void bits_case(int64_t m, int64_t n, int64_t k, bool with_bias, int threads) {
    float *x = mixed(m * k, 1 + (uint64_t)(m * 131 + k)), *w = mixed(n * k, 2 + (uint64_t)(n + k)),
          *b = with_bias ? mixed(n, 3) : NULL;
    float *want = malloc(sizeof(float) * (size_t)(m * n)),
          *got = malloc(sizeof(float) * (size_t)(m * n + 1));
    qkv_set_num_threads(threads);
    float *panels = aligned_floats(qkv__panels_floats(n, k)),
          *at = aligned_floats(qkv__panels_at_floats(m, k)); /* for this thread count */
    qkv__gemm_small_m_lanes(16);
    if (b)
        qkv__gemm_small_m_bias(m, n, k, 1, x, k, w, k, b, want, n);
    else
        qkv__gemm_small_m(m, n, k, 1, x, k, w, k, 0, want, n);
    qkv__gemm_small_m_lanes(0);
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t i = 0; i <= m * n; i++)
            got[i] = -7.0f; /* sentinel, also just past y */
        qkv__gemm_panels(m, n, k, x, w, panels, pass == 0, b, got, at);
        CHECK_MSG(memcmp(want, got, sizeof(float) * (size_t)(m * n)) == 0,
                  "m %lld n %lld k %lld bias %d threads %d %s: not the small kernel's bits",
                  (long long)m, (long long)n, (long long)k, with_bias, threads,
                  pass ? "from panels" : "packing");
        CHECK_MSG(got[m * n] == -7.0f, "wrote past y (m %lld n %lld k %lld)", (long long)m,
                  (long long)n, (long long)k);
    }
    free(x), free(w), free(b), free(want), free(got), free(panels), free(at);
}
/* The store takes only what qkv_gemm gives the small-M kernel, which builds without BLAS never
 * do (their products all run in the portable blocked GEMM). */
#define NEED_ROUTING()                                                                             \
    do {                                                                                           \
        if (!qkv__gemm_uses_small_m(false, true, 16, 512, 512))                                    \
            SKIP("qkv_gemm gives no product to the small-M kernel in this build");                 \
    } while (0)
#else
#define NEED_PANELS() SKIP("the weight panels are a float kernel")
#define NEED_ROUTING()
#endif

TEST(panels_have_the_bits_of_the_small_m_kernel) {
    NEED_PANELS();
#ifndef QKV_DOUBLE
    const int saved = qkv_get_num_threads();
    static const int64_t rows[] = {1, 3, 8, 13, 16, 17, 24, 40, 96};
    static const int64_t shapes[][2] = {{16, 16}, {37, 100}, {130, 9}, {512, 512}, {70, 1030}};
    for (int threads = 1; threads <= 3; threads++) /* 3: more threads than this machine's cores,
                                                     * each with its copy of x transposed */
        for (size_t r = 0; r < sizeof rows / sizeof *rows; r++)
            for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
                bits_case(rows[r], shapes[s][0], shapes[s][1], (r + s) % 2 == 0, threads);
    qkv_set_num_threads(saved);
#endif
}

TEST(panels_store_declines_fills_once_and_refills_after_invalidate) {
    NEED_PANELS();
    NEED_ROUTING();
#ifndef QKV_DOUBLE
    const int64_t n = 512, k = 512; /* 1 MiB: the smallest weight the store takes */
    float *w = mixed(n * k, 11), *x = mixed(97 * k, 12), *b = mixed(n, 13);
    float *want = malloc(sizeof(float) * (size_t)(97 * n)),
          *got = malloc(sizeof(float) * (size_t)(97 * n));
    qkv__panels *p = qkv__panels_new();
    CHECK(p != NULL);
    CHECK(!qkv__panels_linear(p, 7, n, k, x, w, b, got));      /* fewer than 8 rows */
    CHECK(!qkv__panels_linear(p, 16, n - 1, k, x, w, b, got)); /* under 1 MiB */
    CHECK(!qkv__panels_linear(p, 31, 16, 16, x, w, b, got));   /* neither kernel's product */
    CHECK(qkv__panels_bytes(p) == 0);
    qkv__gemm_small_m_bias(16, n, k, 1, x, k, w, k, b, want, n);
    CHECK(qkv__panels_linear(p, 16, n, k, x, w, b, got));
    CHECK(memcmp(want, got, sizeof(float) * (size_t)(16 * n)) == 0);
    const size_t bytes = qkv__panels_bytes(p);
    CHECK(bytes >= sizeof(float) * (size_t)(n * k));
    CHECK(qkv__panels_linear(p, 96, n, k, x, w, NULL, got)); /* the same copy, now read */
    CHECK(qkv__panels_bytes(p) == bytes);
    qkv__gemm_small_m(96, n, k, 1, x, k, w, k, 0, want, n);
    CHECK(memcmp(want, got, sizeof(float) * (size_t)(96 * n)) == 0);
    for (int64_t i = 0; i < n * k; i++)
        w[i] = -w[i] * 0.5f;   /* the weight changes .. */
    qkv__panels_invalidate(p); /* .. and the store is told */
    CHECK(qkv__panels_linear(p, 16, n, k, x, w, b, got));
    qkv__gemm_small_m_bias(16, n, k, 1, x, k, w, k, b, want, n);
    CHECK_MSG(memcmp(want, got, sizeof(float) * (size_t)(16 * n)) == 0,
              "the copy was not refilled");
    CHECK(qkv__panels_bytes(p) == bytes);
    if (qkv__gemm_uses_packed(97, n, k)) { /* 97 rows: the packed GEMM's product, from its copy */
        for (int pass = 0; pass < 2; pass++) { /* filled, then read after the weight changed */
            if (pass) {
                for (int64_t i = 0; i < n * k; i++)
                    w[i] = w[i] * 1.5f;
                qkv__panels_invalidate(p);
            }
            CHECK(qkv__gemm_packed_bias(false, true, 97, n, k, 1, x, k, w, k, b, want, n));
            CHECK(qkv__panels_linear(p, 97, n, k, x, w, b, got));
            CHECK_MSG(memcmp(want, got, sizeof(float) * (size_t)(97 * n)) == 0,
                      "97 rows, %s: not the packed GEMM's bits", pass ? "refilled" : "filled");
            CHECK(qkv__panels_bytes(p) >= bytes + sizeof(float) * (size_t)(n * k));
        }
    }
    qkv__panels_free(p);
    free(w), free(x), free(b), free(want), free(got);
#endif
}

/* qkv_linear under a context with a store: a parameter's weight (and a row slice of one, as the
 * attention's in_proj) is copied, an arena tensor of the same values is not (its address is not
 * stable: the next step's arena may put another tensor there), and all three give the bits of the
 * small kernel. */
TEST(panels_take_parameters_only_in_qkv_linear) {
    NEED_PANELS();
    NEED_ROUTING();
    if (qkv_test_kernels != QKV_KERNELS_FAST)
        SKIP("qkv_linear multiplies by the panels with the fast kernels only");
#ifndef QKV_DOUBLE
    enum { M = 16, N = 512, K = 512 };
    qkv_params *params = NULL;
    qkv_tensor *w = NULL;
    CHECK_OK(qkv_params_new(&params));
    CHECK_OK(qkv_params_add(params, "w", 2, (const int64_t[]){2 * N, K}, &w));
    CHECK_OK(qkv_params_finalize(params));
    qkv_ctx *ctx = tu_ctx();
    qkv__panels *p = qkv__panels_new();
    if (!params || !w || !ctx || !p) {
        qkv_params_free(params), qkv_ctx_free(ctx), qkv__panels_free(p);
        return;
    }
    float *wv = mixed(2 * N * K, 21), *xv = mixed(M * K, 22), *want = malloc(sizeof(float) * M * N);
    memcpy(w->data, wv, sizeof(float) * 2 * N * K);
    qkv__gemm_small_m(M, N, K, 1, xv, K, wv + N * K, K, 0, want, N); /* rows N .. 2N of w */
    qkv_backend with_panels = *ctx->backend; /* as a decoding session runs its steps */
    with_panels.panels = p;
    with_panels.linear_panels = qkv__backend_linear_panels;
    const qkv_backend *plain = ctx->backend;
    ctx->backend = &with_panels;
    qkv_tensor *x = qkv_tensor_from(ctx, QKV_REAL, 2, (const int64_t[]){M, K}, xv);
    qkv_tensor *arena_w = qkv_tensor_from(ctx, QKV_REAL, 2, (const int64_t[]){N, K}, wv + N * K);
    qkv_tensor *y = qkv_linear(ctx, x, arena_w, NULL);
    CHECK(y && memcmp(y->data, want, sizeof(float) * M * N) == 0);
    CHECK_MSG(qkv__panels_bytes(p) == 0, "an arena tensor was copied");
    y = qkv_linear(ctx, x, qkv_narrow(ctx, w, 0, N, N), NULL);
    CHECK(y && memcmp(y->data, want, sizeof(float) * M * N) == 0);
    CHECK_MSG(qkv__panels_bytes(p) >= sizeof(float) * N * K, "a parameter's slice was not copied");
    ctx->backend = plain;
    qkv__panels_free(p);
    qkv_ctx_free(ctx);
    qkv_params_free(params);
    free(wv), free(xv), free(want);
#endif
}
