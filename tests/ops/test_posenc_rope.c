/* test_posenc_rope.c: rotary embedding: closed forms, norm preservation, relative-position
 * property, gradient checks, fast vs reference kernels, bad inputs. */
#include "posenc_testutil.h"

static const double rope_tol = sizeof(qkv_real) == 4 ? 2e-6 : 1e-14;

TEST(rope_closed_form_rotations) {
    qkv_ctx *ctx = tu_ctx();
    /* D = 2: theta_0 = 1, so x = (1, 0) at position t becomes (cos t, sin t) */
    qkv_tensor *x =
        qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){3, 2}, (qkv_real[]){1, 0, 1, 0, 1, 0});
    qkv_tensor *y = qkv_rope(ctx, x, 0, 10000);
    CHECK(y && y->ndim == 2 && y->shape[0] == 3 && y->shape[1] == 2);
    for (int t = 0; t < 3; t++) {
        CHECK_NEAR(((qkv_real *)y->data)[2 * t], cos(t), rope_tol);
        CHECK_NEAR(((qkv_real *)y->data)[2 * t + 1], sin(t), rope_tol);
    }
    /* D = 4, base 100: theta = (1, 100^(-1/2) = 0.1); x = (1, 2, 3, 4) at position 2 (offset 2) */
    qkv_tensor *x4 =
        qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){1, 1, 1, 4}, (qkv_real[]){1, 2, 3, 4});
    qkv_tensor *y4 = qkv_rope(ctx, x4, 2, 100);
    CHECK(y4);
    const qkv_real *v = y4->data;
    CHECK_NEAR(v[0], cos(2.0) - 2 * sin(2.0), 4 * rope_tol);
    CHECK_NEAR(v[1], sin(2.0) + 2 * cos(2.0), 4 * rope_tol);
    CHECK_NEAR(v[2], 3 * cos(0.2) - 4 * sin(0.2), 4 * rope_tol);
    CHECK_NEAR(v[3], 3 * sin(0.2) + 4 * cos(0.2), 4 * rope_tol);
    qkv_ctx_free(ctx);
}

TEST(rope_keeps_position_zero_and_every_pair_norm) {
    qkv_ctx *ctx = tu_ctx();
    const int64_t B = 2, H = 3, T = 9, D = 10;
    qkv_tensor *xs = tu_rand(4, (int64_t[]){B, H, T, D}, -2, 2, 31);
    qkv_tensor *y = qkv_rope(ctx, xs, 0, 10000);
    CHECK(y);
    const qkv_real *a = xs->data, *b = y->data;
    for (int64_t n = 0; n < B * H; n++) {
        /* position 0: angle 0, cos 1 and sin 0 exactly, so the row is untouched bit for bit */
        CHECK(memcmp(a + n * T * D, b + n * T * D, sizeof(qkv_real) * (size_t)D) == 0);
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < D; i += 2) {
                const int64_t at = (n * T + t) * D + i;
                const double na = hypot(a[at], a[at + 1]), nb = hypot(b[at], b[at + 1]);
                CHECK_NEAR(nb, na, 4 * rope_tol * (1 + na));
            }
    }
    tu_free(xs);
    qkv_ctx_free(ctx);
}

/* PROPERTY: after rotation, q_m . k_n depends on n - m only. q and k are the same vectors at
 * every position; the dot-product matrix must be constant along its diagonals and unchanged when
 * every position is shifted by s (the offset). */
TEST(rope_scores_depend_only_on_relative_position) {
    qkv_ctx *ctx = tu_ctx();
    const int64_t T = 12, D = 8;
    qkv_real q0[8], k0[8];
    tu_fill_uniform(q0, D, -1, 1, 41);
    tu_fill_uniform(k0, D, -1, 1, 42);
    qkv_real *qs = malloc(sizeof(qkv_real) * T * D), *ks = malloc(sizeof(qkv_real) * T * D);
    for (int64_t t = 0; t < T; t++) {
        memcpy(qs + t * D, q0, sizeof q0);
        memcpy(ks + t * D, k0, sizeof k0);
    }
    qkv_tensor *q = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){T, D}, qs);
    qkv_tensor *k = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){T, D}, ks);
    const double tol = sizeof(qkv_real) == 4 ? 1e-5 : 1e-12;
    const int64_t shifts[] = {0, 1, 5, 1000};
    double at0[12][12]; /* dot products at shift 0 */
    for (int si = 0; si < 4; si++) {
        const qkv_real *rq = qkv_rope(ctx, q, shifts[si], 10000)->data;
        const qkv_real *rk = qkv_rope(ctx, k, shifts[si], 10000)->data;
        for (int64_t m = 0; m < T; m++)
            for (int64_t n = 0; n < T; n++) {
                double dot = 0;
                for (int64_t d = 0; d < D; d++)
                    dot += (double)rq[m * D + d] * rk[n * D + d];
                if (si == 0)
                    at0[m][n] = dot;
                else /* positions (m + s, n + s) against (m, n) */
                    CHECK_NEAR(dot, at0[m][n], tol);
            }
        if (si == 0) /* constant along every diagonal: (m, n) against (m + 1, n + 1) */
            for (int64_t m = 0; m + 1 < T; m++)
                for (int64_t n = 0; n + 1 < T; n++)
                    CHECK_NEAR(at0[m + 1][n + 1], at0[m][n], tol);
    }
    CHECK(qkv_ctx_status(ctx) == QKV_OK);
    free(qs);
    free(ks);
    qkv_ctx_free(ctx);
}

typedef struct {
    int64_t offset;
    double base;
} rope_args;

static qkv_tensor *rope_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    const rope_args *a = user;
    return qkv_rope(ctx, in[0], a->offset, a->base);
}

TEST(rope_gradcheck) {
    TU_NEED_DOUBLE();
    const struct {
        int ndim;
        int64_t shape[4];
        rope_args args;
    } cases[] = {
        {4, {1, 1, 1, 2}, {0, 10000}},   /* T = 1, one pair */
        {4, {2, 3, 5, 6}, {3, 10000}},   /* odd T, offset */
        {4, {1, 2, 7, 4}, {0, 10}},      /* small base: fast-turning angles */
        {3, {3, 1, 8, 0}, {100, 10000}}, /* (B, T, D), T = 1 far into the sequence */
        {2, {4, 2, 0, 0}, {1, 500}},     /* (T, D) */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        qkv_tensor *in[1] = {tu_rand(cases[c].ndim, cases[c].shape, -1, 1, 50 + c)};
        qkv_tensor_requires_grad(in[0]);
        tu_gradcheck("rope", rope_fn, in, 1, (void *)&cases[c].args, NULL);
        tu_free(in[0]);
    }
}

TEST(rope_fast_matches_reference_and_thread_counts) {
    const struct {
        int64_t shape[4];
        rope_args args;
    } cases[] = {
        {{2, 3, 37, 10}, {5, 10000}},
        {{4, 4, 130, 64}, {0, 10000}}, /* large enough to run the OpenMP loops in parallel */
        {{1, 2, 3, 2}, {7, 2}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        qkv_tensor *in[1] = {tu_rand(4, cases[c].shape, -1, 1, 60 + c)};
        qkv_tensor_requires_grad(in[0]);
        CHECK(pe_check_kernels("rope", rope_fn, in, 1, (void *)&cases[c].args, 1) == 1);
        tu_free(in[0]);
    }
}

TEST(rope_backward_is_the_inverse_rotation) {
    /* With dy = y = R x, the gradient R^T dy must give back x. */
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *x = tu_rand(4, (int64_t[]){1, 2, 6, 8}, -1, 1, 70);
    qkv_tensor_requires_grad(x);
    qkv_tensor *y = qkv_rope(ctx, x, 11, 10000);
    CHECK(y && (y->flags & QKV_REQUIRES_GRAD));
    CHECK_OK(qkv_backward_from(ctx, y, y));
    CHECK(x->grad &&
          tu_max_rel_diff(x->grad, x->data, 96) <= (sizeof(qkv_real) == 4 ? 1e-6 : 1e-14));
    x->grad = NULL;
    tu_free(x);
    qkv_ctx_free(ctx);
}

TEST(rope_rejects_bad_inputs) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *odd = tu_rand(4, (int64_t[]){1, 1, 3, 5}, -1, 1, 1);
    qkv_tensor *ids = tu_ids(4, (int64_t[]){1, 1, 3, 4}, 0, 5, 1);
    qkv_tensor *flat = tu_rand(1, (int64_t[]){4}, -1, 1, 1);
    qkv_tensor *ok = tu_rand(4, (int64_t[]){1, 1, 3, 4}, -1, 1, 1);
    PE_CHECK_FAILS(ctx, qkv_rope(ctx, odd, 0, 10000), QKV_ERR_SHAPE, "rope", "even");
    PE_CHECK_FAILS(ctx, qkv_rope(ctx, ids, 0, 10000), QKV_ERR_SHAPE, "rope", "I32");
    PE_CHECK_FAILS(ctx, qkv_rope(ctx, flat, 0, 10000), QKV_ERR_SHAPE, "rope", "(4)");
    PE_CHECK_FAILS(ctx, qkv_rope(ctx, ok, -1, 10000), QKV_ERR_INVALID_ARG, "rope", "offset -1");
    PE_CHECK_FAILS(ctx, qkv_rope(ctx, ok, 0, 0), QKV_ERR_INVALID_ARG, "rope", "base");
    PE_CHECK_FAILS(ctx, qkv_rope(ctx, ok, 0, -10), QKV_ERR_INVALID_ARG, "rope", "base");
    PE_CHECK_FAILS(ctx, qkv_rope(ctx, ok, 0, INFINITY), QKV_ERR_INVALID_ARG, "rope", "base");
    PE_CHECK_FAILS(ctx, qkv_rope(ctx, ok, 0, NAN), QKV_ERR_INVALID_ARG, "rope", "base");
    PE_CHECK_FAILS(ctx, qkv_rope(ctx, NULL, 0, 10000), QKV_ERR_INVALID_ARG, "rope", "NULL");
    tu_free(odd);
    tu_free(ids);
    tu_free(flat);
    tu_free(ok);
    qkv_ctx_free(ctx);
}
