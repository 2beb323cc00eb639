/* test_softmax.c: softmax, log_softmax, argmax: closed forms, masked rows, gradients, kernels. */
#include "kernel_check.h"
#include "kernels/rowreduce.h"

#include <float.h>

static const double ftol = sizeof(qkv_real) == 4 ? 2e-6 : 1e-14;

TEST(softmax_closed_form) {
    qkv_ctx *ctx = tu_ctx();
    /* row 0: equal logits -> uniform; row 1: exp(x) = 1, 2, 3 -> 1/6, 2/6, 3/6;
     * row 2: huge logits (exp would overflow without the max shift); row 3: one dominates */
    qkv_tensor *x = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){4, 3},
                                    (qkv_real[]){7, 7, 7, 0, (qkv_real)log(2.0), (qkv_real)log(3.0),
                                                 1000, 1000, 999, -1000, 0, -1000});
    const qkv_real *p = qkv_softmax(ctx, x)->data, *lp = qkv_log_softmax(ctx, x)->data;
    CHECK_OK(qkv_ctx_status(ctx));
    const double e = exp(-1.0), z = 2 + e;
    const double want[12] = {1.0 / 3, 1.0 / 3, 1.0 / 3, 1.0 / 6, 2.0 / 6, 3.0 / 6,
                             1 / z,   1 / z,   e / z,   0,       1,       0};
    for (int i = 0; i < 12; i++) {
        CHECK_NEAR(p[i], want[i], ftol);
        if (want[i] > 0) CHECK_NEAR(lp[i], log(want[i]), 4 * ftol);
    }
    /* log_softmax stays finite where softmax underflows: log_softmax([-1000, 0]) = [-1000, 0] */
    CHECK_NEAR(lp[9], -1000, 1e-9);
    CHECK_NEAR(lp[10], 0, 1e-9);
    qkv_ctx_free(ctx);
}

TEST(softmax_masked_rows_give_zeros_and_zero_gradient) {
    qkv_ctx *ctx = tu_ctx();
    const qkv_real ninf = -(qkv_real)INFINITY;
    /* row 0 fully masked; row 1 partly masked -> softmax over the two live entries */
    const qkv_real xs[6] = {ninf, ninf, ninf, ninf, 0, (qkv_real)log(3.0)};
    qkv_tensor *x = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){2, 3}, xs);
    qkv_tensor_requires_grad(x);
    qkv_tensor *y = qkv_softmax(ctx, x);
    CHECK_OK(qkv_ctx_status(ctx));
    const qkv_real *yd = y->data;
    const double want[6] = {0, 0, 0, 0, 0.25, 0.75};
    for (int i = 0; i < 6; i++)
        CHECK_NEAR(yd[i], want[i], ftol);
    qkv_tensor *dy =
        qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){2, 3}, (qkv_real[]){1, 2, 3, 4, 5, 6});
    CHECK_OK(qkv_backward_from(ctx, y, dy));
    const qkv_real *dx = x->grad;
    /* row 1: dx = y (dy - sum(dy y)), sum(dy y) = 5/4 + 18/4 = 23/4 */
    const double gw[6] = {0, 0, 0, 0, 0.25 * (5 - 5.75), 0.75 * (6 - 5.75)};
    for (int i = 0; i < 6; i++) {
        CHECK(!isnan(dx[i]));
        CHECK_NEAR(dx[i], gw[i], ftol);
    }
    qkv_ctx_free(ctx);

    /* log_softmax: -inf on the masked row, zero gradient there */
    ctx = tu_ctx();
    x = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){2, 3}, xs);
    qkv_tensor_requires_grad(x);
    y = qkv_log_softmax(ctx, x);
    CHECK_OK(qkv_ctx_status(ctx));
    yd = y->data;
    for (int i = 0; i < 4; i++)
        CHECK(yd[i] == ninf);
    CHECK_NEAR(yd[4], log(0.25), ftol);
    CHECK_NEAR(yd[5], log(0.75), ftol);
    dy = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){2, 3}, (qkv_real[]){1, 2, 3, 4, 5, 6});
    CHECK_OK(qkv_backward_from(ctx, y, dy));
    dx = x->grad;
    /* row 1: dx = dy - p sum(dy), sum(dy) = 15; the masked entry keeps dy (p = 0), as PyTorch */
    const double lw[6] = {0, 0, 0, 4, 5 - 0.25 * 15, 6 - 0.75 * 15};
    for (int i = 0; i < 6; i++)
        CHECK_NEAR(dx[i], lw[i], 8 * ftol);
    qkv_ctx_free(ctx);
}

TEST(softmax_propagates_nan) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *x =
        qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){2, 9},
                        (qkv_real[]){0, 1, 2, 3, 4, 5, 6, 7, NAN, 0, 1, 2, 3, 4, 5, 6, 7, 8});
    const qkv_real *y = qkv_softmax(ctx, x)->data;
    CHECK_OK(qkv_ctx_status(ctx));
    for (int i = 0; i < 9; i++)
        CHECK(isnan(y[i]));
    for (int i = 9; i < 18; i++)
        CHECK(!isnan(y[i]));
    qkv_ctx_free(ctx);
}

TEST(fast_exp_is_within_about_one_ulp) {
    /* the vectorisable exp of the fast kernels against the double exp, over its whole normal
     * range: within 1 ulp of the correctly rounded value (1.02 when multiply-adds are fused) */
    const qkv_real eps = sizeof(qkv_real) == 4 ? FLT_EPSILON : DBL_EPSILON;
    double worst = 0;
    for (int i = 0; i <= 1 << 20; i++) {
        const qkv_real x = (qkv_real)(-87.3 + 88.0 * i / (1 << 20)); /* [-87.3, 0.7] */
        const double want = exp((double)x), got = qkv__exp_r(x);
        const double ulp = eps * pow(2.0, floor(log2(want))); /* spacing of qkv_real at want */
        const double err = fabs(got - want) / ulp;
        if (!(err <= worst)) worst = err;
    }
    CHECK_MSG(worst <= 1.05, "qkv__exp_r: %g ulp", worst);
    CHECK(qkv__exp_r(0) == 1);
    CHECK(qkv__exp_r(-(qkv_real)INFINITY) == 0);
    CHECK(isnan(qkv__exp_r((qkv_real)NAN)));
    CHECK(qkv__exp_r(-100) < 1e-38 && qkv__exp_r(-100) >= 0); /* float: flushed to 0 */
    CHECK(qkv__exp_r(-1e30f) == 0);
    CHECK_NEAR(qkv__exp_r(1) / exp(1.0), 1, 2 * eps);
}

typedef struct {
    bool log_;
    bool view; /* feed a transposed (strided) view */
} sm_case;

static qkv_tensor *softmax_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    const sm_case *c = user;
    qkv_tensor *x = in[0];
    if (c->view) x = qkv_permute(ctx, x, (const int[]){1, 0});
    return c->log_ ? qkv_log_softmax(ctx, x) : qkv_softmax(ctx, x);
}

TEST(softmax_gradcheck) {
    TU_NEED_DOUBLE();
    const int64_t shapes[][2] = {{1, 1}, {1, 7}, {3, 13}, {13, 2}};
    for (int log_ = 0; log_ < 2; log_++)
        for (size_t s = 0; s < 4; s++)
            for (int view = 0; view < 2; view++) {
                sm_case c = {log_ != 0, view != 0};
                qkv_tensor *in[1] = {tu_rand(2, shapes[s], -3, 3, 100 + s)};
                qkv_tensor_requires_grad(in[0]);
                tu_gradcheck(log_ ? "log_softmax" : "softmax", softmax_fn, in, 1, &c, NULL);
                tu_free(in[0]);
            }
    /* softmax with a partly masked and a fully masked row: the -inf entries have zero gradient */
    sm_case c = {false, false};
    qkv_tensor *in[1] = {tu_rand(2, (int64_t[]){3, 7}, -3, 3, 110)};
    qkv_real *x = in[0]->data;
    x[2] = x[5] = -(qkv_real)INFINITY;
    for (int i = 7; i < 14; i++)
        x[i] = -(qkv_real)INFINITY;
    qkv_tensor_requires_grad(in[0]);
    tu_gradcheck("softmax masked", softmax_fn, in, 1, &c, NULL);
    tu_free(in[0]);
}

TEST(softmax_fast_matches_reference_and_threads) {
    const int64_t shapes[][3] = {{2, 19, 1031}, {1, 3000, 7}};
    for (size_t s = 0; s < 2; s++)
        for (int log_ = 0; log_ < 2; log_++) {
            sm_case c = {log_ != 0, false};
            qkv_tensor *in[1] = {tu_rand(3, shapes[s], -20, 20, 120 + s)};
            qkv_real *x = in[0]->data;
            if (!log_) { /* a fully masked row and a masked entry (log_softmax would give -inf,
                            which a relative difference cannot compare: see the masked test) */
                for (int64_t i = 0; i < shapes[s][2]; i++)
                    x[i] = -(qkv_real)INFINITY;
                x[shapes[s][2] + 3] = -(qkv_real)INFINITY;
            }
            qkv_tensor_requires_grad(in[0]);
            kc_check(log_ ? "log_softmax" : "softmax", softmax_fn, in, 1, &c);
            tu_free(in[0]);
        }
}

TEST(argmax_closed_form) {
    qkv_ctx *ctx = tu_ctx();
    const qkv_real ninf = -(qkv_real)INFINITY;
    /* (2, 2, 4): ties go to the lowest index; NaN wins; all -inf -> 0; negative values */
    qkv_tensor *x = qkv_tensor_from(
        ctx, QKV_REAL, 3, (int64_t[]){2, 2, 4},
        (qkv_real[]){1, 3, 3, 2, -5, -4, -4, -9, 0, NAN, 9, NAN, ninf, ninf, ninf, ninf});
    qkv_tensor *a = qkv_argmax(ctx, x);
    CHECK_OK(qkv_ctx_status(ctx));
    CHECK(a->dtype == QKV_I32 && a->ndim == 2 && a->shape[0] == 2 && a->shape[1] == 2);
    const int32_t *ad = a->data;
    CHECK(ad[0] == 1 && ad[1] == 1 && ad[2] == 1 && ad[3] == 0);
    /* 1-D input -> 0-D output; C = 1 -> 0 */
    qkv_tensor *v = qkv_tensor_from(ctx, QKV_REAL, 1, (int64_t[]){5}, (qkv_real[]){0, 1, 7, 7, 2});
    a = qkv_argmax(ctx, v);
    CHECK(a && a->ndim == 0 && ((int32_t *)a->data)[0] == 2);
    qkv_tensor *one = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){2, 1}, (qkv_real[]){4, -4});
    a = qkv_argmax(ctx, one);
    CHECK(a && ((int32_t *)a->data)[0] == 0 && ((int32_t *)a->data)[1] == 0);
    /* gradients disabled: an input that requires one is fine */
    qkv_tensor_requires_grad(v);
    qkv_ctx_set_grad_enabled(ctx, false);
    CHECK(qkv_argmax(ctx, v) != NULL);
    CHECK_OK(qkv_ctx_status(ctx));
    qkv_ctx_free(ctx);
}

TEST(argmax_fast_matches_reference_and_threads) {
    qkv_tensor *x = tu_rand(2, (int64_t[]){61, 1009}, -1, 1, 130);
    qkv_real *xd = x->data;
    for (int i = 0; i < 1009; i++)
        xd[i] = 0.5;                   /* an all-tied row */
    xd[1009 + 700] = xd[1009 + 3] = 2; /* a tie between two maxima */
    int32_t *out[3];
    const qkv_kernels ks[3] = {QKV_KERNELS_REF, QKV_KERNELS_FAST, QKV_KERNELS_FAST};
    const int threads[3] = {1, 1, 2}, saved = qkv_get_num_threads();
    for (int k = 0; k < 3; k++) {
        qkv_set_num_threads(threads[k]);
        qkv_ctx *ctx = tu_ctx();
        qkv_ctx_set_kernels(ctx, ks[k]);
        qkv_tensor *a = qkv_argmax(ctx, x);
        CHECK_OK(qkv_ctx_status(ctx));
        out[k] = malloc(sizeof(int32_t) * 61);
        memcpy(out[k], a->data, sizeof(int32_t) * 61);
        qkv_ctx_free(ctx);
    }
    qkv_set_num_threads(saved);
    CHECK(out[0][0] == 0 && out[0][1] == 3);
    for (int r = 2; r < 61; r++) { /* independent check: the row max is at the index found */
        const qkv_real *row = xd + r * 1009;
        for (int c = 0; c < 1009; c++)
            CHECK(row[c] <= row[out[0][r]]);
    }
    CHECK(memcmp(out[0], out[1], sizeof(int32_t) * 61) == 0);
    CHECK(memcmp(out[1], out[2], sizeof(int32_t) * 61) == 0);
    for (int k = 0; k < 3; k++)
        free(out[k]);
    tu_free(x);
}

TEST(softmax_and_argmax_reject_bad_inputs) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *xi = tu_tensor(QKV_I32, 2, (int64_t[]){2, 3});
    qkv_tensor *sc = tu_tensor(QKV_REAL, 0, NULL);
    qkv_tensor *empty = tu_tensor(QKV_REAL, 2, (int64_t[]){2, 0});
    qkv_tensor *x = tu_tensor(QKV_REAL, 2, (int64_t[]){2, 3});
    TU_EXPECT_FAIL(ctx, qkv_softmax(ctx, xi), QKV_ERR_SHAPE, "softmax: x must be", "I32");
    TU_EXPECT_FAIL(ctx, qkv_log_softmax(ctx, xi), QKV_ERR_SHAPE, "log_softmax: x must be", "I32");
    TU_EXPECT_FAIL(ctx, qkv_softmax(ctx, sc), QKV_ERR_SHAPE, "softmax: x ()", "at least one dim");
    TU_EXPECT_FAIL(ctx, qkv_log_softmax(ctx, NULL), QKV_ERR_INVALID_ARG, "log_softmax", "NULL");
    TU_EXPECT_FAIL(ctx, qkv_argmax(ctx, xi), QKV_ERR_SHAPE, "argmax: x must be", "I32");
    TU_EXPECT_FAIL(ctx, qkv_argmax(ctx, sc), QKV_ERR_SHAPE, "argmax: x ()", "(..., C)");
    TU_EXPECT_FAIL(ctx, qkv_argmax(ctx, empty), QKV_ERR_SHAPE, "argmax: x (2, 0)", "1 <= C");
    qkv_tensor_requires_grad(x);
    TU_EXPECT_FAIL(ctx, qkv_argmax(ctx, x), QKV_ERR_UNSUPPORTED, "argmax is not differentiable",
                "gradient");
    tu_free(xi), tu_free(sc), tu_free(empty), tu_free(x);
    qkv_ctx_free(ctx);
}
