/*
 * test_sdpa_checks.c: fused scaled-dot-product attention (qkv_sdpa), its checks beyond the values
 * of test_sdpa.c: finite-difference gradients under every mask, ALiBi, across tiles and with
 * dropout; strided views and head views of one projection against contiguous copies; bad
 * arguments with their messages; and memory that grows linearly in the sequence length.
 */
#include "sdpa_testutil.h"

/* ---- gradients ------------------------------------------------------------------------------ */

typedef struct {
    double scale;
    const qkv_mask *mask;
    const qkv_real *alibi;
    bool permuted_q; /* in[0] is (B, T, H, D): hand sdpa a permuted view */
    double dropout;  /* attention dropout (gradcheck in training mode) */
} grad_user;

static qkv_tensor *sdpa_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    const grad_user *u = user;
    qkv_tensor *q = u->permuted_q ? qkv_permute(ctx, in[0], (const int[]){0, 2, 1, 3}) : in[0];
    return qkv_sdpa_dropout(ctx, q, in[1], in[2], u->scale, u->mask, u->alibi, u->dropout);
}

static void gradcheck_case(const char *what, const int64_t g[6], const grad_user *u) {
    const int64_t qs[4] = {g[0], u->permuted_q ? g[2] : g[1], u->permuted_q ? g[1] : g[2], g[4]};
    qkv_tensor *in[3] = {tu_rand(4, qs, -1.5, 1.5, 31),
                         tu_rand(4, (int64_t[]){g[0], g[1], g[3], g[4]}, -1.5, 1.5, 32),
                         tu_rand(4, (int64_t[]){g[0], g[1], g[3], g[5]}, -1, 1, 33)};
    for (int x = 0; x < 3; x++)
        qkv_tensor_requires_grad(in[x]);
    const qkv_kernels saved = qkv_test_kernels;
    for (int kern = 0; kern < 2;
         kern++) { /* both kernel sets: tu_gradcheck uses qkv_test_kernels */
        qkv_test_kernels = (qkv_kernels)kern;
        tu_gradcheck_opts o = tu_gradcheck_default();
        o.training = u->dropout > 0; /* the same mask at every evaluation: one seed, step, stream */
        tu_gradcheck(what, sdpa_fn, in, 3, (void *)u, &o);
    }
    qkv_test_kernels = saved;
    for (int x = 0; x < 3; x++)
        tu_free(in[x]);
}

TEST(sdpa_gradcheck_masks_and_alibi) {
    TU_NEED_DOUBLE();
    const qkv_real slopes[2] = {0.5, 0.125};
    qkv_mask m = mask_all();
    gradcheck_case("no mask", (int64_t[]){2, 2, 3, 4, 3, 2},
                   &(grad_user){0.7, NULL, NULL, false, 0});
    gradcheck_case("T = S = D = 1", (int64_t[]){1, 1, 1, 1, 1, 1},
                   &(grad_user){1.3, NULL, slopes, false, 0});
    gradcheck_case("alibi", (int64_t[]){1, 2, 5, 3, 2, 3},
                   &(grad_user){0.5, NULL, slopes, false, 0});
    m.causal = true;
    m.window_left = 2;
    gradcheck_case("causal + window + alibi", (int64_t[]){1, 2, 6, 7, 3, 1},
                   &(grad_user){0.6, &m, slopes, false, 0});
    m = mask_all();
    m.window_left = 1;
    m.window_right = 1;
    gradcheck_case("window 1/1, T > S", (int64_t[]){1, 1, 7, 4, 2, 2},
                   &(grad_user){0.9, &m, NULL, false, 0});
    /* key padding (batch 1 fully padded) and a (B, T, S) graph with an empty row */
    qkv_tensor *pad = tu_tensor(QKV_I32, 2, (int64_t[]){2, 5});
    qkv_tensor *allowed = tu_ids(3, (int64_t[]){2, 4, 5}, 0, 2, 5);
    for (int64_t j = 0; j < 5; j++) {
        ((int32_t *)pad->data)[j] = j == 1;
        ((int32_t *)pad->data)[5 + j] = 1;
        ((int32_t *)allowed->data)[2 * 5 + j] = 0; /* b = 0, i = 2 */
    }
    ((int32_t *)allowed->data)[0] = 1;
    m = mask_all();
    m.key_padding = pad;
    m.allowed = allowed;
    gradcheck_case("padding + allowed, masked rows", (int64_t[]){2, 2, 4, 5, 3, 2},
                   &(grad_user){0.8, &m, slopes, false, 0});
    gradcheck_case("permuted q view", (int64_t[]){2, 2, 4, 5, 3, 2},
                   &(grad_user){0.8, &m, NULL, true, 0});
    tu_free(pad), tu_free(allowed);
}

TEST(sdpa_gradcheck_across_tiles) {
    TU_NEED_DOUBLE();
    /* Larger than one 64 x 64 tile on both sides, odd sizes, with the causal band: exercises the
     * block skipping and the tile edges of both backward passes. Few elements are checked per
     * tensor to keep the runtime small: D = Dv = 1. */
    const qkv_real slopes[1] = {0.03125};
    qkv_mask m = mask_all();
    m.causal = true;
    m.window_left = 70;
    gradcheck_case("tiles", (int64_t[]){1, 1, 67, 131, 1, 1},
                   &(grad_user){0.5, &m, slopes, false, 0});
}

TEST(sdpa_gradcheck_with_dropout) {
    TU_NEED_DOUBLE();
    /* p = 0.5 drops about half of the weights: the finite differences see the dropped chain */
    const qkv_real slopes[2] = {0.5, 0.125};
    qkv_mask m = mask_all();
    gradcheck_case("dropout", (int64_t[]){2, 2, 4, 5, 3, 2},
                   &(grad_user){0.7, NULL, NULL, false, 0.5});
    m.causal = true;
    gradcheck_case("dropout + causal + alibi", (int64_t[]){1, 2, 6, 7, 3, 2},
                   &(grad_user){0.6, &m, slopes, false, 0.3});
    m = mask_all();
    m.causal = true;
    m.window_left = 70;
    gradcheck_case("dropout across tiles", (int64_t[]){1, 1, 67, 131, 1, 1},
                   &(grad_user){0.5, &m, slopes, false, 0.2});
}

TEST(sdpa_strided_views_match_contiguous_inputs) {
    const int64_t B = 2, H = 3, T = 9, D = 4;
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *x = qkv_tensor_new(ctx, QKV_REAL, 4, (int64_t[]){B, T, H, D}); /* (B, T, H, D) */
    tu_fill_uniform(x->data, B * T * H * D, -1, 1, 17);
    qkv_tensor *view = qkv_permute(ctx, x, (const int[]){0, 2, 1, 3}); /* (B, H, T, D) strided */
    qkv_tensor *copy = qkv_contiguous(ctx, view);
    qkv_mask m = mask_all();
    m.causal = true;
    qkv_tensor *a = qkv_sdpa(ctx, view, view, view, 0.5, &m, NULL);
    qkv_tensor *b = qkv_sdpa(ctx, copy, copy, copy, 0.5, &m, NULL);
    CHECK(a && b && !qkv_tensor_is_contiguous(view));
    if (a && b)
        CHECK(memcmp(a->data, b->data, sizeof(qkv_real) * (size_t)qkv_tensor_numel(a)) == 0);
    /* a strided (transposed) allowed mask equals its contiguous copy */
    qkv_tensor *al = qkv_tensor_new(ctx, QKV_I32, 2, (int64_t[]){T, T});
    for (int64_t i = 0; i < T * T; i++)
        ((int32_t *)al->data)[i] = (i * 7) % 3 != 0;
    qkv_tensor *alt = qkv_permute(ctx, al, (const int[]){1, 0});
    qkv_tensor *alc = qkv_contiguous(ctx, alt);
    qkv_mask m1 = mask_all(), m2 = mask_all();
    m1.allowed = alt;
    m2.allowed = alc;
    a = qkv_sdpa(ctx, copy, copy, copy, 0.5, &m1, NULL);
    b = qkv_sdpa(ctx, copy, copy, copy, 0.5, &m2, NULL);
    CHECK(a && b);
    if (a && b)
        CHECK(memcmp(a->data, b->data, sizeof(qkv_real) * (size_t)qkv_tensor_numel(a)) == 0);
    qkv_ctx_free(ctx);
}

/* ---- errors --------------------------------------------------------------------------------- */

static void expect_error_at(qkv_tensor *q, qkv_tensor *k, qkv_tensor *v, double scale,
                            const qkv_mask *m, const qkv_real *alibi, qkv_status st,
                            const char *needle, int line) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *o = qkv_sdpa(ctx, q, k, v, scale, m, alibi);
    if (o || qkv_ctx_status(ctx) != st || !strstr(qkv_last_error(), "sdpa") ||
        !strstr(qkv_last_error(), needle))
        qkv_test_fail(__FILE__, line, "expected %s with '%s', got %s: %s", qkv_status_str(st),
                      needle, qkv_status_str(qkv_ctx_status(ctx)), qkv_last_error());
    qkv_ctx_free(ctx);
}
#define expect_error(...) expect_error_at(__VA_ARGS__, __LINE__)

/* q, k, v as head views of one projection (B, T, 3 H D), as attention hands them over, are read
 * and their gradients written in place: the same bits as three contiguous copies, forward and
 * backward, on both kernel sets (the gradients land in the projection's gradient, each head view
 * in its own columns). */
TEST(sdpa_head_views_of_one_projection_match_contiguous_copies) {
    const int64_t B = 2, T = 70, H = 3, D = 5, C = H * D;
    for (int kern = 0; kern < 2; kern++) {
        qkv_ctx *ctx = ctx_with((qkv_kernels)kern);
        qkv_ctx_set_training(ctx, true);
        qkv_tensor *y = qkv_tensor_new(ctx, QKV_REAL, 3, (int64_t[]){B, T, 3 * C});
        tu_fill_uniform(y->data, B * T * 3 * C, -1.5, 1.5, 61);
        qkv_tensor_requires_grad(y);
        qkv_tensor *r = qkv_reshape(ctx, y, 4, (int64_t[]){B, T, 3 * H, D});
        qkv_tensor *t = qkv_permute(ctx, r, (const int[]){0, 2, 1, 3}); /* (B, 3H, T, D) */
        qkv_tensor *views[3], *copies[3];
        for (int x = 0; x < 3; x++) {
            views[x] = qkv_narrow(ctx, t, 1, x * H, H); /* (B, H, T, D) strided */
            qkv_tensor *c = qkv_contiguous(ctx, views[x]);
            copies[x] = qkv_tensor_from(ctx, QKV_REAL, 4, c->shape, c->data);
            qkv_tensor_requires_grad(copies[x]);
        }
        qkv_mask m = mask_all();
        m.causal = true;
        qkv_tensor *a = qkv_sdpa_dropout(ctx, views[0], views[1], views[2], 0.5, &m, NULL, 0.2);
        qkv_ctx_set_rng(ctx, 1234, 0); /* the same dropout mask for the second call */
        qkv_tensor *b = qkv_sdpa_dropout(ctx, copies[0], copies[1], copies[2], 0.5, &m, NULL, 0.2);
        CHECK_OK(qkv_ctx_status(ctx));
        if (!a || !b) {
            qkv_ctx_free(ctx);
            continue;
        }
        CHECK(memcmp(a->data, b->data, sizeof(qkv_real) * (size_t)qkv_tensor_numel(a)) == 0);
        CHECK_OK(qkv_backward(ctx, qkv_sum(ctx, qkv_add(ctx, qkv_tanh(ctx, a), qkv_tanh(ctx, b)))));
        bool same = y->grad != NULL;
        for (int x = 0; same && x < 3; x++)
            for (int64_t bb = 0; bb < B; bb++)
                for (int64_t h = 0; h < H; h++)
                    for (int64_t i = 0; i < T; i++)
                        for (int64_t d = 0; d < D; d++) {
                            const qkv_real gv =
                                ((qkv_real *)y->grad)[(bb * T + i) * 3 * C + x * C + h * D + d];
                            const qkv_real gc =
                                ((qkv_real *)copies[x]->grad)[((bb * H + h) * T + i) * D + d];
                            same = same && gv == gc;
                        }
        CHECK_MSG(same, "%s kernels: gradients through head views differ from the copies'",
                  kern ? "ref" : "fast");
        qkv_ctx_free(ctx);
    }
}

TEST(sdpa_rejects_bad_arguments) {
    qkv_tensor *q = tu_rand(4, (int64_t[]){2, 3, 4, 5}, -1, 1, 1);
    qkv_tensor *k = tu_rand(4, (int64_t[]){2, 3, 6, 5}, -1, 1, 2);
    qkv_tensor *v = tu_rand(4, (int64_t[]){2, 3, 6, 7}, -1, 1, 3);
    qkv_tensor *k_badD = tu_rand(4, (int64_t[]){2, 3, 6, 4}, -1, 1, 4);
    qkv_tensor *v_badS = tu_rand(4, (int64_t[]){2, 3, 5, 7}, -1, 1, 5);
    qkv_tensor *k_badH = tu_rand(4, (int64_t[]){2, 2, 6, 5}, -1, 1, 6);
    qkv_tensor *q3 = tu_rand(3, (int64_t[]){2, 4, 5}, -1, 1, 7);
    qkv_tensor *qi = tu_ids(4, (int64_t[]){2, 3, 4, 5}, 0, 3, 8);
    expect_error(q, k_badD, v, 1, NULL, NULL, QKV_ERR_SHAPE, "(2, 3, 6, 4)");
    expect_error(q, k, v_badS, 1, NULL, NULL, QKV_ERR_SHAPE, "(2, 3, 5, 7)");
    expect_error(q, k_badH, v, 1, NULL, NULL, QKV_ERR_SHAPE, "(2, 2, 6, 5)");
    expect_error(q3, k, v, 1, NULL, NULL, QKV_ERR_SHAPE, "(2, 4, 5)");
    expect_error(qi, k, v, 1, NULL, NULL, QKV_ERR_SHAPE, "q must be");
    expect_error(q, k, v, NAN, NULL, NULL, QKV_ERR_INVALID_ARG, "scale");
    expect_error(q, k, v, INFINITY, NULL, NULL, QKV_ERR_INVALID_ARG, "scale");
    const qkv_real bad_slopes[3] = {1, (qkv_real)NAN, 1};
    expect_error(q, k, v, 1, NULL, bad_slopes, QKV_ERR_INVALID_ARG, "alibi_slopes[1]");
    qkv_mask m = mask_all();
    qkv_tensor *pad_bad = tu_tensor(QKV_I32, 2, (int64_t[]){2, 5});
    m.key_padding = pad_bad;
    expect_error(q, k, v, 1, &m, NULL, QKV_ERR_SHAPE, "mask.key_padding");
    qkv_tensor *pad_f = tu_tensor(QKV_REAL, 2, (int64_t[]){2, 6});
    m.key_padding = pad_f;
    expect_error(q, k, v, 1, &m, NULL, QKV_ERR_SHAPE, "mask.key_padding must be I32");
    m = mask_all();
    qkv_tensor *al_bad = tu_tensor(QKV_I32, 2, (int64_t[]){6, 4});
    m.allowed = al_bad;
    expect_error(q, k, v, 1, &m, NULL, QKV_ERR_SHAPE, "mask.allowed");
    qkv_tensor *al_bad3 = tu_tensor(QKV_I32, 3, (int64_t[]){3, 4, 6});
    m.allowed = al_bad3;
    expect_error(q, k, v, 1, &m, NULL, QKV_ERR_SHAPE, "(3, 4, 6)");
    expect_error(q, NULL, v, 1, NULL, NULL, QKV_ERR_INVALID_ARG, "NULL");
    const double bad_p[3] = {1.0, -0.1, NAN};
    for (int x = 0; x < 3; x++) { /* rejected in evaluation mode too, as qkv_dropout does */
        qkv_ctx *ctx = tu_ctx();
        TU_EXPECT_FAIL(ctx, qkv_sdpa_dropout(ctx, q, k, v, 1, NULL, NULL, bad_p[x]),
                       QKV_ERR_INVALID_ARG, "sdpa", "dropout_p");
        qkv_ctx_free(ctx);
    }
    tu_free(q), tu_free(k), tu_free(v), tu_free(k_badD), tu_free(v_badS), tu_free(k_badH),
        tu_free(q3);
    tu_free(qi), tu_free(pad_bad), tu_free(pad_f), tu_free(al_bad), tu_free(al_bad3);
}

/* ---- memory --------------------------------------------------------------------------------- */

/* Arena growth of one fast forward + backward at B = 1, H = 2, T = S, D = 16 (bytes). */
static size_t sdpa_arena_growth(int64_t T) {
    const int64_t B = 1, H = 2, D = 16, n = B * H * T * D;
    qkv_ctx *ctx = ctx_with(QKV_KERNELS_FAST);
    const int64_t shape[4] = {B, H, T, D};
    qkv_tensor *q = qkv_tensor_new(ctx, QKV_REAL, 4, shape);
    qkv_tensor *k = qkv_tensor_new(ctx, QKV_REAL, 4, shape);
    qkv_tensor *v = qkv_tensor_new(ctx, QKV_REAL, 4, shape);
    qkv_tensor *dy = qkv_tensor_new(ctx, QKV_REAL, 4, shape);
    tu_fill_uniform(q->data, n, -1, 1, 1);
    tu_fill_uniform(k->data, n, -1, 1, 2);
    tu_fill_uniform(v->data, n, -1, 1, 3);
    tu_fill_uniform(dy->data, n, -1, 1, 4);
    qkv_tensor_requires_grad(q), qkv_tensor_requires_grad(k), qkv_tensor_requires_grad(v);
    const size_t before = qkv_ctx_arena_peak(ctx);
    qkv_tensor *o = qkv_sdpa(ctx, q, k, v, 0.25, NULL, NULL);
    CHECK_OK(qkv_backward_from(ctx, o, dy));
    const size_t growth = qkv_ctx_arena_peak(ctx) - before;
    CHECK(o && all_finite(o->data, n) && all_finite(q->grad, n) && all_finite(k->grad, n));
    qkv_ctx_free(ctx);
    return growth;
}

TEST(sdpa_fast_memory_is_linear_in_sequence_length) {
    /* Forward + backward of both heads must take less than half of ONE head's (T, S) score
     * matrix, and doubling T must (about) double the memory, not quadruple it. What it does
     * hold: o, lse, d(o), the input gradients, transposed operands (all B H T D) and per-thread
     * tiles. The sanitizer build runs T = 1024 (T = 2048 takes too long there). */
#ifdef SDPA_SANITIZED
    const int64_t T = 1024;
#else
    const int64_t T = 2048;
#endif
    const size_t gT = sdpa_arena_growth(T), ghalf = sdpa_arena_growth(T / 2);
    const size_t scores = (size_t)(T * T) * sizeof(qkv_real);
    CHECK_MSG(
        2 * gT < scores,
        "T = %lld: forward + backward grew the arena by %zu bytes (one head's (T, S) matrix: %zu)",
        (long long)T, gT, scores);
    CHECK_MSG(gT <= 2.1 * (double)ghalf, "arena growth %zu at T = %lld, %zu at T = %lld: not O(T)",
              ghalf, (long long)T / 2, gT, (long long)T);
}
