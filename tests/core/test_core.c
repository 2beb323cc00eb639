/* test_core.c: RNG, arena, context, views, tape and error behaviour. */
#include "core/internal.h"
#include "testutil.h"

#include <time.h>

/* Known-answer vectors of Philox4x32-10 from Random123's kat_vectors. */
TEST(philox_known_answers) {
    uint32_t out[4];
    qkv_philox4x32((uint32_t[]){0, 0, 0, 0}, (uint32_t[]){0, 0}, out);
    CHECK(out[0] == 0x6627e8d5u && out[1] == 0xe169c58du && out[2] == 0xbc57ac4cu && out[3] == 0x9b00dbd8u);
    qkv_philox4x32((uint32_t[]){0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                   (uint32_t[]){0xffffffffu, 0xffffffffu}, out);
    CHECK(out[0] == 0x408f276du && out[1] == 0x41c83b0eu && out[2] == 0xa20bc7c6u && out[3] == 0x6d5451fdu);
    qkv_philox4x32((uint32_t[]){0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                   (uint32_t[]){0xa4093822u, 0x299f31d0u}, out);
    CHECK(out[0] == 0xd16cfe09u && out[1] == 0x94fdccebu && out[2] == 0x5001e420u && out[3] == 0x24126ea1u);
}

/* The vectorised 16-block generator (used by dropout; AVX-512, AVX2 and portable C) against the
 * scalar Philox, with a 64-bit seed and block ranges that cross 2^32 (the counter's high word) at
 * every lane position: the mismatches of qkv__philox_blocks as qkv__philox_widest set it. */
static int philox_blocks_mismatches(void) {
    const uint64_t seed = 0x0123456789abcdefULL, step = 77, stream = 5;
    uint32_t lanes[4 * QKV_PHILOX_LANES], out[4];
    int mismatches = 0;
    for (uint64_t first = 0xFFFFFFE0ULL; first < 0x100000040ULL; first++) {
        uint32_t portable[4 * QKV_PHILOX_LANES];
        qkv__philox_blocks(seed, step, stream, first, lanes);
        qkv__philox_blocks_c(seed, step, stream, first, portable);
        mismatches += memcmp(lanes, portable, sizeof lanes) != 0;
        for (int l = 0; l < QKV_PHILOX_LANES; l++) {
            const uint64_t b = first + (uint64_t)l;
            qkv_philox4x32((uint32_t[]){(uint32_t)b, (uint32_t)(b >> 32), (uint32_t)stream, (uint32_t)step},
                           (uint32_t[]){(uint32_t)seed, (uint32_t)(seed >> 32)}, out);
            for (int k = 0; k < 4; k++) mismatches += lanes[4 * l + k] != out[k];
            /* and in qkv_rng_uniform's numbering: element 4 b + k */
            mismatches += (float)(lanes[4 * l + 3] >> 8) * (1.0f / 16777216.0f) !=
                          qkv_rng_uniform(seed, step, stream, 4 * b + 3);
        }
    }
    return mismatches;
}

TEST(philox_blocks_equal_scalar_philox) {
    CHECK_MSG(philox_blocks_mismatches() == 0, "the widest vectors the CPU has");
    qkv__philox_widest(256);
    CHECK_MSG(philox_blocks_mismatches() == 0, "AVX2 at most");
    qkv__philox_widest(512);
}

TEST(rng_uniform_moments_and_independence) {
    const int n = 200000;
    double s = 0, s2 = 0, cross = 0;
    float prev = 0;
    for (int i = 0; i < n; i++) {
        float u = qkv_rng_uniform(7, 3, 1, (uint64_t)i);
        CHECK(u >= 0.0f && u < 1.0f);
        s += u;
        s2 += (double)u * u;
        if (i) cross += (double)(u - 0.5) * (prev - 0.5);
        prev = u;
    }
    CHECK_NEAR(s / n, 0.5, 0.005);
    CHECK_NEAR(s2 / n - (s / n) * (s / n), 1.0 / 12, 0.002);
    CHECK_NEAR(cross / n, 0.0, 0.002); /* lag-1 correlation */
    /* different streams, steps and seeds give different numbers */
    CHECK(qkv_rng_uniform(7, 3, 1, 5) != qkv_rng_uniform(7, 3, 2, 5));
    CHECK(qkv_rng_uniform(7, 3, 1, 5) != qkv_rng_uniform(7, 4, 1, 5));
    CHECK(qkv_rng_uniform(7, 3, 1, 5) != qkv_rng_uniform(8, 3, 1, 5));
    CHECK(qkv_rng_uniform(7, 3, 1, 5) == qkv_rng_uniform(7, 3, 1, 5));
    double m = 0, v = 0;
    for (int i = 0; i < n; i++) {
        double z = qkv_rng_normal(1, 0, 0, (uint64_t)i);
        m += z;
        v += z * z;
    }
    CHECK_NEAR(m / n, 0.0, 0.01);
    CHECK_NEAR(v / n, 1.0, 0.02);
}

TEST(arena_grows_then_stops_allocating) {
    qkv_ctx_params p = qkv_ctx_default_params();
    p.arena_bytes = 4096;
    qkv_ctx *ctx = NULL;
    CHECK_OK(qkv_ctx_new(&p, &ctx));
    uint64_t mallocs_after_first = 0;
    for (int step = 0; step < 4; step++) {
        qkv_ctx_reset(ctx);
        for (int i = 0; i < 50; i++) {
            qkv_tensor *t = qkv_tensor_zeros(ctx, QKV_REAL, 2, (int64_t[]){16, 17});
            CHECK(t && ((uintptr_t)t->data % 64) == 0);
        }
        CHECK(qkv_ctx_arena_used(ctx) <= qkv_ctx_arena_peak(ctx));
        if (step == 1) mallocs_after_first = qkv_ctx_arena_mallocs(ctx);
    }
#ifndef QKV_ARENA_PER_ALLOC
    /* Steps 2 and 3 fit in the block sized by the high-water mark: no malloc. */
    CHECK(qkv_ctx_arena_mallocs(ctx) == mallocs_after_first);
#else
    (void)mallocs_after_first;
#endif
    CHECK(qkv_ctx_arena_peak(ctx) >= 50 * 16 * 17 * sizeof(qkv_real));
    qkv_ctx_free(ctx);
}

TEST(arena_poison_fills_nan) {
    qkv_ctx_params p = qkv_ctx_default_params();
    p.poison = true;
    qkv_ctx *ctx = NULL;
    CHECK_OK(qkv_ctx_new(&p, &ctx));
    qkv_tensor *t = qkv_tensor_new(ctx, QKV_REAL, 1, (int64_t[]){5});
    for (int i = 0; i < 5; i++) CHECK(isnan(((qkv_real *)t->data)[i]));
    qkv_ctx_free(ctx);
}

TEST(sticky_error_names_op_and_shapes) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *x = qkv_tensor_zeros(ctx, QKV_REAL, 2, (int64_t[]){3, 4});
    qkv_tensor *w = qkv_tensor_zeros(ctx, QKV_REAL, 2, (int64_t[]){5, 6});
    qkv_tensor *y = qkv_linear(ctx, x, w, NULL);
    CHECK(y == NULL);
    CHECK(qkv_ctx_status(ctx) == QKV_ERR_SHAPE);
    CHECK(strstr(qkv_last_error(), "linear") && strstr(qkv_last_error(), "(3, 4)") &&
          strstr(qkv_last_error(), "(5, 6)") && strstr(qkv_last_error(), "dense.c:"));
    /* later ops are no-ops and keep the first message */
    CHECK(qkv_matmul(ctx, x, x, false, true) == NULL);
    CHECK(strstr(qkv_last_error(), "linear") != NULL);
    /* NULL inputs after an error are fine; reset clears the error */
    CHECK(qkv_relu(ctx, y) == NULL);
    qkv_ctx_reset(ctx);
    CHECK(qkv_ctx_status(ctx) == QKV_OK);
    CHECK(qkv_relu(ctx, NULL) == NULL && qkv_ctx_status(ctx) == QKV_ERR_INVALID_ARG);
    qkv_ctx_free(ctx);
}

TEST(views_share_data_and_gradient) {
    qkv_ctx *ctx = tu_ctx();
    qkv_real data[24];
    for (int i = 0; i < 24; i++) data[i] = (qkv_real)i;
    qkv_tensor *x = qkv_tensor_from(ctx, QKV_REAL, 3, (int64_t[]){1, 4, 6}, data); /* (B, T, H*D) */
    qkv_tensor_requires_grad(x);
    qkv_tensor *h = qkv_split_heads(ctx, x, 2); /* (1, 2, 4, 3) view */
    CHECK(h && h->shape[1] == 2 && h->shape[2] == 4 && h->shape[3] == 3 && !qkv_tensor_is_contiguous(h));
    /* h[0, 1, 2, 0] = x[0, 2, 1*3 + 0] */
    CHECK(((qkv_real *)h->data)[1 * h->stride[1] + 2 * h->stride[2]] == data[2 * 6 + 3]);
    qkv_tensor *m = qkv_merge_heads(ctx, h);
    CHECK(m && qkv_tensor_is_contiguous(m));
    for (int i = 0; i < 24; i++) CHECK(((qkv_real *)m->data)[i] == data[i]);
    CHECK_OK(qkv_backward(ctx, qkv_sum(ctx, m)));
    for (int i = 0; i < 24; i++) CHECK(((qkv_real *)x->grad)[i] == 1);
    qkv_ctx_free(ctx);
}

TEST(backward_twice_is_refused) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *x = qkv_tensor_zeros(ctx, QKV_REAL, 1, (int64_t[]){3});
    qkv_tensor_requires_grad(x);
    qkv_tensor *s = qkv_sum(ctx, x);
    CHECK_OK(qkv_backward(ctx, s));
    CHECK_ERR(qkv_backward(ctx, s), QKV_ERR_STATE, "already");
    qkv_ctx_free(ctx);
}

TEST(no_recording_without_grad) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *x = qkv_tensor_zeros(ctx, QKV_REAL, 2, (int64_t[]){2, 3});
    qkv_tensor *w = qkv_tensor_zeros(ctx, QKV_REAL, 2, (int64_t[]){4, 3});
    CHECK(qkv_linear(ctx, x, w, NULL) != NULL);
    CHECK(qkv_tape_size(ctx) == 0);
    qkv_tensor_requires_grad(w);
    qkv_ctx_set_grad_enabled(ctx, false);
    CHECK(qkv_linear(ctx, x, w, NULL) != NULL && qkv_tape_size(ctx) == 0);
    qkv_ctx_set_grad_enabled(ctx, true);
    qkv_tensor *y = qkv_linear(ctx, x, w, NULL);
    CHECK(qkv_tape_size(ctx) == 1 && (y->flags & QKV_REQUIRES_GRAD));
    CHECK_ERR(qkv_backward(ctx, y), QKV_ERR_SHAPE, "one element");
    qkv_ctx_free(ctx);
}

TEST(params_blocks_are_contiguous_in_order) {
    qkv_params *p = NULL;
    CHECK_OK(qkv_params_new(&p));
    qkv_tensor *a, *b, *c;
    CHECK_OK(qkv_params_add(p, "layer.weight", 2, (int64_t[]){3, 5}, &a));
    CHECK_OK(qkv_params_add(p, "layer.bias", 1, (int64_t[]){3}, &b));
    CHECK_ERR(qkv_params_add(p, "layer.bias", 1, (int64_t[]){3}, &c), QKV_ERR_INVALID_ARG, "duplicate");
    CHECK_ERR(qkv_params_add(p, "bad", 1, (int64_t[]){0}, &c), QKV_ERR_SHAPE, "bad");
    CHECK_OK(qkv_params_finalize(p));
    CHECK(qkv_params_numel(p) == 18 && qkv_params_count(p) == 2);
    qkv_real *data = qkv_params_block(p, QKV_BLOCK_DATA), *grad = qkv_params_block(p, QKV_BLOCK_GRAD);
    CHECK(a->data == data && b->data == data + 15 && a->grad == grad && b->grad == grad + 15);
    /* every block 64-byte aligned and zero (they come from calloc, aligned by hand) */
    for (int blk = QKV_BLOCK_DATA; blk <= QKV_BLOCK_V; blk++) {
        const qkv_real *x = qkv_params_block(p, (qkv_param_block)blk);
        CHECK(((uintptr_t)x % 64) == 0);
        for (int i = 0; i < 18; i++) CHECK(x[i] == 0);
    }
    CHECK(qkv_params_find(p, "layer.bias") == b && qkv_params_find(p, "nope") == NULL);
    CHECK_ERR(qkv_params_add(p, "late", 1, (int64_t[]){3}, &c), QKV_ERR_STATE, "after");
    qkv_init_xavier_uniform(a, 1, 0);
    double bound = sqrt(6.0 / 8.0), mx = 0;
    for (int i = 0; i < 15; i++) mx = fmax(mx, fabs((double)((qkv_real *)a->data)[i]));
    CHECK(mx <= bound && mx > 0.3 * bound);
    qkv_params_free(p);
    qkv_params_free(NULL);
}

/* The table's total is bounded like one tensor's: tensors that each fit but together pass 2^59
 * values were summed into a signed overflow (a model file's header asked for 1000 layers of
 * 2^28 x 2^28 matrices; UBSan: "signed integer overflow" in qkv_params_add). */
TEST(params_table_too_large_is_refused) {
    qkv_params *p = NULL;
    CHECK_OK(qkv_params_new(&p));
    const int64_t big = INT64_C(1) << 28;
    CHECK_OK(qkv_params_add(p, "a", 2, (int64_t[]){big, big}, NULL));
    int k = 0;
    qkv_status st = QKV_OK;
    while (st == QKV_OK && k < 64) {
        char name[16];
        snprintf(name, sizeof name, "b%d", k++);
        st = qkv_params_add(p, name, 2, (int64_t[]){big, big}, NULL);
    }
    CHECK(st == QKV_ERR_SHAPE && strstr(qkv_last_error(), "larger than 2^59"));
    CHECK(k == 7 && qkv_params_numel(p) == 7 * big * big); /* an 8th 2^56 would make 2^59 */
    qkv_params_free(p);
}

/* Names are found by hash: a model file's header can ask for tens of thousands of tensors (2 x
 * 1000 layers), and the linear duplicate check made registering them quadratic (2.5 s for the
 * 2000-layer header of tests/fuzz/corpus/model_config/slow_2000_layers.safetensors; 10^5 names
 * took minutes). */
TEST(params_registration_of_many_names_is_fast) {
    qkv_params *p = NULL;
    CHECK_OK(qkv_params_new(&p));
    enum { N = 100000 };
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char name[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "layers.%d.weight", i);
        CHECK_OK(qkv_params_add(p, name, 1, (int64_t[]){1}, NULL));
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    CHECK_MSG(seconds < 5, "%d registrations took %.2f s", N, seconds);
    for (int i = 0; i < N; i += 997) {
        snprintf(name, sizeof name, "layers.%d.weight", i);
        const qkv_tensor *t = qkv_params_find(p, name);
        CHECK(t == qkv_params_get(p, i) && t && !strcmp(t->name, name));
    }
    CHECK(qkv_params_find(p, "layers.100000.weight") == NULL && qkv_params_find(p, "layers.") == NULL);
    CHECK_ERR(qkv_params_add(p, "layers.4242.weight", 1, (int64_t[]){1}, NULL), QKV_ERR_INVALID_ARG, "duplicate");
    CHECK(qkv_params_count(p) == N);
    qkv_params_free(p);
}

/* The initialisers draw Philox blocks 16 at a time over the threads; element i must still be
 * exactly what qkv_rng_uniform / qkv_rng_normal give index i, at any thread count, including the
 * ragged last group (n is not a multiple of 64) and sizes below the parallel threshold. */
TEST(init_uniform_and_normal_equal_the_rng_element_by_element) {
    const int64_t sizes[] = {5, 3 * 65536 + 37};
    for (int s = 0; s < 2; s++) {
        const int64_t n = sizes[s];
        qkv_params *p;
        CHECK_OK(qkv_params_new(&p));
        qkv_tensor *u, *g;
        CHECK_OK(qkv_params_add(p, "u", 1, (int64_t[]){n}, &u));
        CHECK_OK(qkv_params_add(p, "g", 1, (int64_t[]){n}, &g));
        CHECK_OK(qkv_params_finalize(p));
        const int saved = qkv_get_num_threads();
        for (int threads = 1; threads <= 2; threads++) {
            qkv_set_num_threads(threads);
            const double a = sqrt(6.0 / 8.0); /* a xavier bound: hi - lo is not a power of two */
            qkv_init_uniform(u, -a, a, 42, 7);
            qkv_init_normal(g, 0.5, 0.02, 42, 1001);
            int64_t bad_u = -1, bad_g = -1;
            for (int64_t i = 0; i < n; i++) {
                const qkv_real want_u = (qkv_real)(-a + (a - -a) * qkv_rng_uniform(42, 0, 7, (uint64_t)i));
                const qkv_real want_g = (qkv_real)(0.5 + 0.02 * qkv_rng_normal(42, 0, 1001, (uint64_t)i));
                if (bad_u < 0 && ((qkv_real *)u->data)[i] != want_u) bad_u = i;
                if (bad_g < 0 && ((qkv_real *)g->data)[i] != want_g) bad_g = i;
            }
            CHECK_MSG(bad_u < 0 && bad_g < 0, "n %lld, %d thread(s): first uniform mismatch %lld, normal %lld",
                      (long long)n, threads, (long long)bad_u, (long long)bad_g);
        }
        qkv_set_num_threads(saved);
        qkv_params_free(p);
    }
}

/* The gradient checker itself must catch a wrong backward: y = 2x with a backward of 3 dy. */
static void wrong_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    qkv_real *dx = qkv__grad(ctx, e->in[0]);
    const qkv_real *dy = (const qkv_real *)e->out->grad;
    for (int64_t i = 0, n = qkv_tensor_numel(e->out); i < n; i++) dx[i] += 3 * dy[i];
}
static const qkv_op_desc wrong_op = {"wrong_double", wrong_backward};
static qkv_tensor *wrong_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    (void)user;
    qkv_tensor *y = qkv_scale(ctx, in[0], 1.0); /* a fresh output, then overwrite as 2x */
    qkv_tensor *z = qkv__alloc_like(ctx, y);
    for (int64_t i = 0; i < qkv_tensor_numel(y); i++) ((qkv_real *)z->data)[i] = 2 * ((qkv_real *)y->data)[i];
    qkv__record(ctx, &wrong_op, z, 1, &y);
    return z;
}

TEST(gradcheck_detects_a_wrong_backward) {
    TU_NEED_DOUBLE();
    qkv_tensor *in[1] = {tu_rand(1, (int64_t[]){3}, -1, 1, 1)};
    qkv_tensor_requires_grad(in[0]);
    /* run the check with failures counted, then expect exactly its failure */
    int before = qkv_test_failures();
    qkv_test_quiet(true);
    bool ok = tu_gradcheck("wrong op", wrong_fn, in, 1, NULL, NULL);
    qkv_test_quiet(false);
    int reported = qkv_test_failures() - before;
    tu_free(in[0]);
    if (!ok && reported == 1) qkv_test_expect_failures(1); /* absorb the expected failure */
    else qkv_test_fail(__FILE__, __LINE__, "gradcheck accepted a wrong gradient");
}

/* qkv__zero_bytes zeroes exactly [p, p + bytes) below and above its parallel size (1 MiB; chunks
 * of 256 KiB, the last one partial), with 1 and 2 threads: the byte after the end keeps its
 * value. */
TEST(zero_bytes_clears_exactly_the_range) {
    const size_t sizes[] = {0, 1, 1000, ((size_t)1 << 20) - 1, ((size_t)5 << 20) + 12345};
    const int saved = qkv_get_num_threads();
    for (int threads = 1; threads <= 2; threads++) {
        qkv_set_num_threads(threads);
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            unsigned char *buf = malloc(sizes[k] + 1);
            CHECK(buf != NULL);
            if (!buf) continue;
            memset(buf, 0xA5, sizes[k] + 1);
            qkv__zero_bytes(buf, sizes[k]);
            size_t nonzero = 0;
            for (size_t i = 0; i < sizes[k]; i++)
                nonzero += buf[i] != 0;
            CHECK_MSG(nonzero == 0 && buf[sizes[k]] == 0xA5,
                      "%zu bytes, %d thread(s): %zu bytes not cleared, end byte %#x", sizes[k],
                      threads, nonzero, buf[sizes[k]]);
            free(buf);
        }
    }
    qkv_set_num_threads(saved);
}

/* Gradients stored by their first contribution (qkv__grad_into: linear's dx, layernorm's dx,
 * add_dropout's dx and df, dropout's dx): u has three consumers, a linear, a layernorm and an
 * add_dropout, recorded in both orders so that each kind of backward is the first to reach u's
 * gradient (and stores) or a later one (and adds). In a poisoned arena, where every fresh buffer
 * is NaN, the result must be the closed form: du = colsum(W) (the linear, W integer-valued so the
 * sums are exact) + 1 (the residual path of add_dropout) + g_ln (the layernorm's gradient alone,
 * from a context of its own), and df the dropout mask's 0 or 1 / (1 - p). */
static void grad_into_case(bool linear_last, const qkv_real *xv, const qkv_real *wv, const qkv_real *g_ln) {
    enum { N = 6, C = 8, O = 5 };
    qkv_ctx_params p = qkv_ctx_default_params();
    p.kernels = qkv_test_kernels;
    p.seed = 99;
    p.poison = true;
    qkv_ctx *ctx = NULL;
    CHECK_OK(qkv_ctx_new(&p, &ctx));
    if (!ctx) return;
    qkv_ctx_set_training(ctx, true);
    qkv_tensor *x = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){N, C}, xv);
    qkv_tensor *f = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){N, C}, xv);
    qkv_tensor *w = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){O, C}, wv);
    qkv_tensor_requires_grad(x);
    qkv_tensor_requires_grad(f);
    qkv_tensor *u = qkv_scale(ctx, x, 1); /* an intermediate: its gradient is recycled */
    qkv_tensor *lin = NULL, *ln = NULL, *res = NULL;
    if (linear_last) {
        res = qkv_add_dropout(ctx, u, f, 0.5);
        ln = qkv_layernorm(ctx, u, NULL, NULL, 1e-5);
        lin = qkv_linear(ctx, u, w, NULL);
    } else {
        lin = qkv_linear(ctx, u, w, NULL);
        ln = qkv_layernorm(ctx, u, NULL, NULL, 1e-5);
        res = qkv_add_dropout(ctx, u, f, 0.5);
    }
    qkv_tensor *loss = qkv_add(ctx, qkv_add(ctx, qkv_sum(ctx, lin), qkv_sum(ctx, ln)), qkv_sum(ctx, res));
    CHECK_OK(qkv_backward(ctx, loss));
    const qkv_real *dx = x->grad, *df = f->grad;
    int64_t bad = -1, kept = 0, odd_df = 0;
    for (int64_t i = 0; dx && i < N * C; i++) {
        qkv_real colsum = 0;
        for (int o = 0; o < O; o++) colsum += wv[o * C + i % C];
        const double want = (double)colsum + 1 + (double)g_ln[i];
        if (!(fabs((double)dx[i] - want) <= 1e-5 * (1 + fabs(want))) && bad < 0) bad = i;
    }
    for (int64_t i = 0; df && i < N * C; i++) {
        kept += df[i] == 2;
        odd_df += df[i] != 0 && df[i] != 2;
    }
    CHECK_MSG(dx && bad < 0, "linear %s: dx[%lld] = %g", linear_last ? "last" : "first", (long long)bad,
              dx && bad >= 0 ? (double)dx[bad] : 0.0);
    CHECK_MSG(df && odd_df == 0 && kept > 4 && kept < N * C - 4, "df: %lld kept, %lld neither 0 nor 2",
              (long long)kept, (long long)odd_df);
    qkv_ctx_free(ctx);
}

TEST(gradients_stored_by_their_first_contribution_sum_every_later_one) {
    enum { N = 6, C = 8, O = 5 };
    qkv_real xv[N * C], wv[O * C];
    tu_fill_uniform(xv, N * C, -2, 2, 5);
    for (int i = 0; i < O * C; i++) wv[i] = (qkv_real)((i * 7) % 5 - 2);
    /* the layernorm's gradient alone */
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *x = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){N, C}, xv);
    qkv_tensor_requires_grad(x);
    CHECK_OK(qkv_backward(ctx, qkv_sum(ctx, qkv_layernorm(ctx, qkv_scale(ctx, x, 1), NULL, NULL, 1e-5))));
    qkv_real g_ln[N * C];
    memcpy(g_ln, x->grad, sizeof g_ln);
    qkv_ctx_free(ctx);
    grad_into_case(true, xv, wv, g_ln);
    grad_into_case(false, xv, wv, g_ln);
}
