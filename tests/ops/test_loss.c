/* test_loss.c: cross-entropy with ignore_index and label smoothing: hand-computed values and
 * gradients, the all-ignored case, finite differences, kernels, errors. */
#include "kernel_check.h"

static const double ftol = sizeof(qkv_real) == 4 ? 2e-6 : 1e-14;

TEST(cross_entropy_of_uniform_logits_is_log_v) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *x = qkv_tensor_zeros(ctx, QKV_REAL, 2, (int64_t[]){4, 5});
    qkv_tensor *t = qkv_tensor_from(ctx, QKV_I32, 1, (int64_t[]){4}, (int32_t[]){0, 4, 2, 1});
    qkv_tensor *l0 = qkv_cross_entropy(ctx, x, t, -100, 0.0);
    qkv_tensor *l1 =
        qkv_cross_entropy(ctx, x, t, -100, 0.2); /* q is irrelevant when p is uniform */
    CHECK_OK(qkv_ctx_status(ctx));
    CHECK(l0->ndim == 0 && l0->dtype == QKV_REAL);
    CHECK_NEAR(((qkv_real *)l0->data)[0], log(5.0), ftol);
    CHECK_NEAR(((qkv_real *)l1->data)[0], log(5.0), ftol);
    qkv_ctx_free(ctx);
}

TEST(cross_entropy_hand_computed_with_smoothing_and_ignore) {
    /* row 0: exp(x) = 1, 2, 3 -> p = 1/6, 1/3, 1/2, target 2; row 1 ignored; row 2: uniform,
     * target 0. eps = 0.3, V = 3, q = 0.7 onehot + 0.1:
     *   loss_0 = 0.7 (-log 1/2) + 0.3 (log 6 + log 3 + log 2) / 3,  loss_2 = log 3,
     *   loss = (loss_0 + loss_2) / 2,  dx_row = (p - q) / 2 (row 1: 0). */
    for (int k = 0; k < 2; k++) {
        qkv_ctx *ctx = tu_ctx();
        qkv_ctx_set_kernels(ctx, k ? QKV_KERNELS_FAST : QKV_KERNELS_REF);
        qkv_tensor *x = qkv_tensor_from(
            ctx, QKV_REAL, 2, (int64_t[]){3, 3},
            (qkv_real[]){0, (qkv_real)log(2.0), (qkv_real)log(3.0), 5, -7, 100, 2, 2, 2});
        qkv_tensor_requires_grad(x);
        qkv_tensor *t = qkv_tensor_from(ctx, QKV_I32, 1, (int64_t[]){3}, (int32_t[]){2, -100, 0});
        qkv_tensor *loss = qkv_cross_entropy(ctx, x, t, -100, 0.3);
        CHECK_OK(qkv_ctx_status(ctx));
        const double l0 = 0.7 * log(2.0) + 0.3 * (log(6.0) + log(3.0) + log(2.0)) / 3;
        CHECK_NEAR(((qkv_real *)loss->data)[0], (l0 + log(3.0)) / 2, ftol);
        CHECK_OK(qkv_backward(ctx, loss));
        const double p0[3] = {1.0 / 6, 1.0 / 3, 0.5}, q0[3] = {0.1, 0.1, 0.8};
        const double q2[3] = {0.8, 0.1, 0.1};
        const qkv_real *dx = x->grad;
        for (int v = 0; v < 3; v++) {
            CHECK_NEAR(dx[v], (p0[v] - q0[v]) / 2, ftol);
            CHECK(dx[3 + v] == 0);
            CHECK_NEAR(dx[6 + v], (1.0 / 3 - q2[v]) / 2, ftol);
        }
        qkv_ctx_free(ctx);
    }
}

TEST(cross_entropy_with_every_row_ignored_is_zero) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *x =
        qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){2, 3}, (qkv_real[]){1, 2, 3, 4, 5, 6});
    qkv_tensor_requires_grad(x);
    qkv_tensor *t = qkv_tensor_from(ctx, QKV_I32, 1, (int64_t[]){2}, (int32_t[]){-1, -1});
    qkv_tensor *loss = qkv_cross_entropy(ctx, x, t, -1, 0.1);
    CHECK_OK(qkv_ctx_status(ctx));
    CHECK(((qkv_real *)loss->data)[0] == 0);
    CHECK_OK(qkv_backward(ctx, loss));
    for (int i = 0; i < 6; i++)
        CHECK(x->grad == NULL || ((qkv_real *)x->grad)[i] == 0);
    qkv_ctx_free(ctx);
    /* N = 0 too */
    ctx = tu_ctx();
    x = qkv_tensor_zeros(ctx, QKV_REAL, 2, (int64_t[]){0, 4});
    t = qkv_tensor_zeros(ctx, QKV_I32, 1, (int64_t[]){0});
    loss = qkv_cross_entropy(ctx, x, t, -100, 0.0);
    CHECK(loss && ((qkv_real *)loss->data)[0] == 0);
    qkv_ctx_free(ctx);
}

TEST(cross_entropy_ignore_index_inside_the_vocabulary) {
    /* ignore_index = 1 is a valid class: rows with target 1 are skipped, others count */
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *x = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){2, 2},
                                    (qkv_real[]){0, 0, 0, (qkv_real)log(3.0)});
    qkv_tensor *t = qkv_tensor_from(ctx, QKV_I32, 1, (int64_t[]){2}, (int32_t[]){1, 0});
    qkv_tensor *loss = qkv_cross_entropy(ctx, x, t, 1, 0.0);
    CHECK_OK(qkv_ctx_status(ctx));
    CHECK_NEAR(((qkv_real *)loss->data)[0], log(4.0), ftol); /* row 1: p_0 = 1/4 */
    qkv_ctx_free(ctx);
}

typedef struct {
    qkv_tensor *targets;
    int32_t ignore;
    double eps;
} ce_case;

static qkv_tensor *ce_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    const ce_case *c = user;
    return qkv_cross_entropy(ctx, in[0], c->targets, c->ignore, c->eps);
}

TEST(cross_entropy_gradcheck) {
    TU_NEED_DOUBLE();
    const int64_t shapes[][2] = {{1, 1}, {1, 7}, {6, 13}, {5, 2}};
    const double eps[] = {0.0, 0.1, 1.0};
    for (size_t s = 0; s < 4; s++)
        for (int e = 0; e < 3; e++)
            for (int ig = 0; ig < 2; ig++) {
                const int64_t N = shapes[s][0], V = shapes[s][1];
                qkv_tensor *in[1] = {tu_rand(2, shapes[s], -3, 3, 140 + s)};
                qkv_tensor_requires_grad(in[0]);
                qkv_tensor *t = tu_ids(1, &N, 0, (int32_t)V, 150 + s);
                ce_case c = {t, ig ? -100 : 1, eps[e]};
                if (ig && N > 2) ((int32_t *)t->data)[1] = ((int32_t *)t->data)[N - 1] = -100;
                char what[64];
                snprintf(what, sizeof what, "cross_entropy %lldx%lld eps=%g ignore=%d",
                         (long long)N, (long long)V, eps[e], (int)c.ignore);
                tu_gradcheck(what, ce_fn, in, 1, &c, NULL);
                tu_free(t);
                tu_free(in[0]);
            }
}

TEST(cross_entropy_fast_matches_reference_and_threads) {
    const int64_t shapes[][2] = {{37, 1031}, {3000, 7}};
    for (size_t s = 0; s < 2; s++)
        for (int e = 0; e < 2; e++) {
            const int64_t N = shapes[s][0], V = shapes[s][1];
            qkv_tensor *in[1] = {tu_rand(2, shapes[s], -15, 15, 160 + s)};
            qkv_tensor_requires_grad(in[0]);
            qkv_tensor *t = tu_ids(1, &N, 0, (int32_t)V, 170 + s);
            for (int64_t r = 0; r < N; r += 5)
                ((int32_t *)t->data)[r] = -100;
            ce_case c = {t, -100, e ? 0.1 : 0.0};
            kc_check("cross_entropy", ce_fn, in, 1, &c);
            tu_free(t);
            tu_free(in[0]);
        }
}

TEST(cross_entropy_rejects_bad_inputs) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *x = tu_tensor(QKV_REAL, 2, (int64_t[]){3, 4});
    qkv_tensor *x3 = tu_tensor(QKV_REAL, 3, (int64_t[]){1, 3, 4});
    qkv_tensor *x0 = tu_tensor(QKV_REAL, 2, (int64_t[]){3, 0});
    qkv_tensor *t = tu_tensor(QKV_I32, 1, (int64_t[]){3});
    qkv_tensor *t2 = tu_tensor(QKV_I32, 1, (int64_t[]){2});
    qkv_tensor *tf = tu_tensor(QKV_REAL, 1, (int64_t[]){3});
    TU_EXPECT_FAIL(ctx, qkv_cross_entropy(ctx, x3, t, -100, 0), QKV_ERR_SHAPE,
                "cross_entropy: logits (1, 3, 4)", "(N, V)");
    TU_EXPECT_FAIL(ctx, qkv_cross_entropy(ctx, x, t2, -100, 0), QKV_ERR_SHAPE,
                "cross_entropy: logits (3, 4)", "targets (2) I32");
    TU_EXPECT_FAIL(ctx, qkv_cross_entropy(ctx, x0, t, -100, 0), QKV_ERR_SHAPE,
                "cross_entropy: logits (3, 0)", "V >= 1");
    TU_EXPECT_FAIL(ctx, qkv_cross_entropy(ctx, x, tf, -100, 0), QKV_ERR_SHAPE,
                "cross_entropy: targets must be I32", "(3)");
    TU_EXPECT_FAIL(ctx, qkv_cross_entropy(ctx, t, t, -100, 0), QKV_ERR_SHAPE,
                "cross_entropy: logits must be", "I32");
    int32_t *td = t->data;
    td[2] = 4;
    TU_EXPECT_FAIL(ctx, qkv_cross_entropy(ctx, x, t, -100, 0), QKV_ERR_INVALID_ARG,
                "cross_entropy: target 4 of row 2", "[0, 4)");
    td[2] = -100; /* the default ignore value is out of range when ignore_index is something else */
    TU_EXPECT_FAIL(ctx, qkv_cross_entropy(ctx, x, t, 0, 0), QKV_ERR_INVALID_ARG,
                "cross_entropy: target -100 of row 2", "ignore_index (0)");
    td[2] = 0;
    TU_EXPECT_FAIL(ctx, qkv_cross_entropy(ctx, x, t, -100, 1.5), QKV_ERR_INVALID_ARG,
                "cross_entropy: label_smoothing = 1.5", "[0, 1]");
    TU_EXPECT_FAIL(ctx, qkv_cross_entropy(ctx, x, t, -100, -0.1), QKV_ERR_INVALID_ARG,
                "cross_entropy: label_smoothing", "[0, 1]");
    TU_EXPECT_FAIL(ctx, qkv_cross_entropy(ctx, x, t, -100, NAN), QKV_ERR_INVALID_ARG,
                "cross_entropy: label_smoothing", "[0, 1]");
    t->flags |= QKV_REQUIRES_GRAD; /* qkv_tensor_requires_grad refuses I32; force it */
    TU_EXPECT_FAIL(ctx, qkv_cross_entropy(ctx, x, t, -100, 0), QKV_ERR_INVALID_ARG,
                "cross_entropy: targets (3)", "gradient");
    t->flags = 0;
    TU_EXPECT_FAIL(ctx, qkv_cross_entropy(ctx, x, NULL, -100, 0), QKV_ERR_INVALID_ARG, "cross_entropy",
                "NULL");
    tu_free(x), tu_free(x3), tu_free(x0), tu_free(t), tu_free(t2), tu_free(tf);
    qkv_ctx_free(ctx);
}
