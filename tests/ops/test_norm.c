/* test_norm.c: LayerNorm and RMSNorm: closed forms, degenerate rows, gradients, kernels, errors. */
#include "kernel_check.h"
#include "core/internal.h" /* qkv__add_layernorm_over */
#include "ops/ops_internal.h"

static const double ftol = sizeof(qkv_real) == 4 ? 2e-6 : 1e-13;

TEST(layernorm_closed_form) {
    qkv_ctx *ctx = tu_ctx();
    /* row 0: [1, 2, 3]: mean 2, biased var 2/3 -> (x - 2) sqrt(3/2) = [-1.2247, 0, 1.2247]
     * row 1: [0, 0, 10]: mean 10/3, var 200/9 -> (x - 10/3) * 3 / sqrt(200) */
    qkv_tensor *x =
        qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){2, 3}, (qkv_real[]){1, 2, 3, 0, 0, 10});
    qkv_tensor *y = qkv_layernorm(ctx, x, NULL, NULL, 0.0);
    CHECK_OK(qkv_ctx_status(ctx));
    const qkv_real *yd = y->data;
    const double s = sqrt(1.5), r1 = 3 / sqrt(200.0);
    const double want[6] = {-s, 0, s, -10.0 / 3 * r1, -10.0 / 3 * r1, 20.0 / 3 * r1};
    for (int i = 0; i < 6; i++)
        CHECK_NEAR(yd[i], want[i], ftol);
    /* weight and bias: y = xhat * w + b */
    qkv_tensor *w = qkv_tensor_from(ctx, QKV_REAL, 1, (int64_t[]){3}, (qkv_real[]){2, 1, -1});
    qkv_tensor *b = qkv_tensor_from(ctx, QKV_REAL, 1, (int64_t[]){3}, (qkv_real[]){0.5, 0, 1});
    y = qkv_layernorm(ctx, x, w, b, 0.0);
    yd = y->data;
    CHECK_NEAR(yd[0], -2 * s + 0.5, ftol);
    CHECK_NEAR(yd[1], 0, ftol);
    CHECK_NEAR(yd[2], -s + 1, ftol);
    /* eps enters inside the root: [1, 3] has var 1 -> +-1 / sqrt(1 + eps) */
    x = qkv_tensor_from(ctx, QKV_REAL, 1, (int64_t[]){2}, (qkv_real[]){1, 3});
    y = qkv_layernorm(ctx, x, NULL, NULL, 0.25);
    CHECK_NEAR(((qkv_real *)y->data)[0], -1 / sqrt(1.25), ftol);
    CHECK_NEAR(((qkv_real *)y->data)[1], 1 / sqrt(1.25), ftol);
    qkv_ctx_free(ctx);
}

TEST(layernorm_keeps_precision_when_the_mean_dominates) {
    /* x = 1000 + [0, 1, 2, 3] / 256: every value is exact in float, and so is the answer
     * (k - 1.5) / sqrt(1.25). With float statistics x - mean would keep only a few digits. */
    qkv_ctx *ctx = tu_ctx();
    qkv_real xs[4];
    for (int k = 0; k < 4; k++)
        xs[k] = (qkv_real)(1000 + k / 256.0);
    qkv_tensor *x = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){1, 4}, xs);
    qkv_tensor_requires_grad(x);
    qkv_tensor *y = qkv_layernorm(ctx, x, NULL, NULL, 0.0);
    CHECK_OK(qkv_ctx_status(ctx));
    for (int k = 0; k < 4; k++)
        CHECK_NEAR(((qkv_real *)y->data)[k], (k - 1.5) / sqrt(1.25), 1e-6);
    /* d/dx sum(y * [1, 0, 0, 0]): rstd (e0 - 1/4 - xhat xhat_0 / 4), rstd = 256 / sqrt(1.25) */
    qkv_tensor *dy = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){1, 4}, (qkv_real[]){1, 0, 0, 0});
    CHECK_OK(qkv_backward_from(ctx, y, dy));
    const double rs = 256 / sqrt(1.25), x0 = -1.5 / sqrt(1.25);
    for (int k = 0; k < 4; k++) {
        double xk = (k - 1.5) / sqrt(1.25);
        double want = rs * ((k == 0) - 0.25 - xk * x0 / 4);
        CHECK_NEAR(((qkv_real *)x->grad)[k], want, 1e-5 * fabs(rs));
    }
    qkv_ctx_free(ctx);
}

TEST(layernorm_single_column_gives_bias_and_zero_gradient) {
    /* C = 1: x - mean is exactly 0, so y = bias and every gradient but the bias's is 0 */
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *x = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){3, 1}, (qkv_real[]){5, -2, 1e6});
    qkv_tensor *w = qkv_tensor_from(ctx, QKV_REAL, 1, (int64_t[]){1}, (qkv_real[]){3});
    qkv_tensor *b = qkv_tensor_from(ctx, QKV_REAL, 1, (int64_t[]){1}, (qkv_real[]){0.25});
    qkv_tensor_requires_grad(x);
    qkv_tensor_requires_grad(w);
    qkv_tensor_requires_grad(b);
    qkv_tensor *y = qkv_layernorm(ctx, x, w, b, 1e-5);
    CHECK_OK(qkv_ctx_status(ctx));
    for (int i = 0; i < 3; i++)
        CHECK(((qkv_real *)y->data)[i] == (qkv_real)0.25);
    CHECK_OK(qkv_backward(ctx, qkv_sum(ctx, y)));
    for (int i = 0; i < 3; i++)
        CHECK(((qkv_real *)x->grad)[i] == 0);
    CHECK(((qkv_real *)w->grad)[0] == 0);
    CHECK(((qkv_real *)b->grad)[0] == 3);
    qkv_ctx_free(ctx);
}

TEST(rmsnorm_closed_form) {
    qkv_ctx *ctx = tu_ctx();
    /* a constant row c: y = c / sqrt(c^2 + eps) w = sign(c) w for eps << c^2 */
    qkv_tensor *x = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){2, 5},
                                    (qkv_real[]){-3, -3, -3, -3, -3, 0.5, 0.5, 0.5, 0.5, 0.5});
    qkv_tensor *w = qkv_tensor_from(ctx, QKV_REAL, 1, (int64_t[]){5}, (qkv_real[]){1, 2, 3, 4, -5});
    qkv_tensor *y = qkv_rmsnorm(ctx, x, w, 1e-12);
    CHECK_OK(qkv_ctx_status(ctx));
    const qkv_real *yd = y->data;
    for (int c = 0; c < 5; c++) {
        const double wc = ((const qkv_real *)w->data)[c];
        CHECK_NEAR(yd[c], -wc / sqrt(1 + 1e-12 / 9), ftol * 5);
        CHECK_NEAR(yd[5 + c], wc / sqrt(1 + 1e-12 / 0.25), ftol * 5);
    }
    /* [3, 4]: mean square 12.5 -> [3, 4] / sqrt(12.5 + eps); no centring, no bias */
    x = qkv_tensor_from(ctx, QKV_REAL, 1, (int64_t[]){2}, (qkv_real[]){3, 4});
    y = qkv_rmsnorm(ctx, x, NULL, 0.5);
    CHECK_NEAR(((qkv_real *)y->data)[0], 3 / sqrt(13.0), ftol);
    CHECK_NEAR(((qkv_real *)y->data)[1], 4 / sqrt(13.0), ftol);
    qkv_ctx_free(ctx);
}

typedef struct {
    bool rms;
    double eps;
} norm_case;

static qkv_tensor *norm_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    const norm_case *nc = user;
    return nc->rms ? qkv_rmsnorm(ctx, in[0], in[1], nc->eps)
                   : qkv_layernorm(ctx, in[0], in[1], in[2], nc->eps);
}

/* Every combination of weight / bias present, on odd shapes (N = 1, C = 1, 2, 7, 13). */
static void norm_gradchecks(bool rms) {
    const int64_t shapes[][3] = {{1, 1, 7}, {2, 3, 13}, {1, 4, 1}, {5, 1, 2}};
    norm_case nc = {rms, 1e-5};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int64_t C = shapes[s][2];
        for (int affine = 0; affine < 4; affine++) {
            if (rms && (affine & 2)) continue; /* RMSNorm has no bias */
            qkv_tensor *in[3] = {tu_rand(3, shapes[s], -2, 2, 10 + s),
                                 (affine & 1) ? tu_rand(1, &C, 0.5, 1.5, 20 + s) : NULL,
                                 (affine & 2) ? tu_rand(1, &C, -1, 1, 30 + s) : NULL};
            for (int k = 0; k < 3; k++)
                qkv_tensor_requires_grad(in[k]);
            char what[64];
            snprintf(what, sizeof what, "%s C=%lld w=%d b=%d", rms ? "rmsnorm" : "layernorm",
                     (long long)C, affine & 1, (affine & 2) != 0);
            tu_gradcheck(what, norm_fn, in, 3, &nc, NULL);
            for (int k = 0; k < 3; k++)
                tu_free(in[k]);
        }
    }
}

TEST(layernorm_gradcheck) {
    TU_NEED_DOUBLE();
    norm_gradchecks(false);
}

TEST(rmsnorm_gradcheck) {
    TU_NEED_DOUBLE();
    norm_gradchecks(true);
}

TEST(norm_fast_matches_reference_and_threads) {
    /* Sizes above the kernels' parallel grain; C not a multiple of the 8 lanes or the 64-column
     * blocks; many short rows as well as few long ones. */
    const int64_t shapes[][3] = {{3, 41, 263}, {1, 1500, 20}, {2, 2, 5000}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int64_t C = shapes[s][2];
        for (int rms = 0; rms < 2; rms++) {
            qkv_tensor *in[3] = {tu_rand(3, shapes[s], -3, 5, 40 + s),
                                 tu_rand(1, &C, 0.5, 1.5, 50 + s),
                                 rms ? NULL : tu_rand(1, &C, -1, 1, 60 + s)};
            for (int k = 0; k < 3; k++)
                qkv_tensor_requires_grad(in[k]);
            norm_case nc = {rms != 0, 1e-5};
            kc_check(rms ? "rmsnorm" : "layernorm", norm_fn, in, 3, &nc);
            tu_free(in[1]);
            in[1] = NULL; /* and without weight */
            kc_check(rms ? "rmsnorm, no weight" : "layernorm, no weight", norm_fn, in, 3, &nc);
            for (int k = 0; k < 3; k++)
                tu_free(in[k]);
        }
    }
}

/* The lane order of kernels/rowreduce.h, written out one element at a time: acc[i mod 8] (the
 * tail starting again at lane 0), then ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)). */
static double lane_sum(const double *v, int64_t n) {
    double acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            acc[k] += v[i + k];
    for (int k = 0; i < n; i++, k++)
        acc[k] += v[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

TEST(layernorm_fast_kernel_gives_the_bits_of_its_documented_order) {
    /* The fast kernel runs in the clone for this CPU's vector width (AVX-512, AVX2 or SSE2);
     * every clone must give the bits of the scalar order written out here, forward and backward.
     * C = 45: five blocks of 8 lanes and a tail of 5. The double build tells the sums' order
     * apart (another tree over the lanes fails it); the float build's outputs, rounded from
     * double, mostly do not, and check the element-wise arithmetic. */
    enum { N = 6, C = 45 };
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *x = tu_rand(2, (int64_t[]){N, C}, -3, 5, 71);
    qkv_tensor *w = tu_rand(1, (int64_t[]){C}, 0.5, 1.5, 72);
    qkv_tensor *b = tu_rand(1, (int64_t[]){C}, -1, 1, 73);
    qkv_tensor *dy = tu_rand(2, (int64_t[]){N, C}, -1, 1, 74);
    qkv_tensor *in[3] = {x, w, b};
    for (int k = 0; k < 3; k++)
        qkv_tensor_requires_grad(in[k]);
    const double eps = 1e-5;
    qkv_tensor *y = qkv_layernorm(ctx, x, w, b, eps);
    CHECK_OK(qkv_backward_from(ctx, y, dy));
    const qkv_real *xd = x->data, *wd = w->data, *bd = b->data, *g = dy->data;
    qkv_real want_y[N * C], want_dx[N * C], want_dw[C], want_db[C];
    double sw[C] = {0}, sb[C] = {0};
    for (int64_t r = 0; r < N; r++) {
        const qkv_real *xr = xd + r * C, *gr = g + r * C;
        double v[C], v2[C];
        for (int64_t c = 0; c < C; c++)
            v[c] = (double)xr[c];
        const double mu = lane_sum(v, C) / (double)C;
        for (int64_t c = 0; c < C; c++)
            v[c] = ((double)xr[c] - mu) * ((double)xr[c] - mu);
        const double rs = 1.0 / sqrt(lane_sum(v, C) / (double)C + eps);
        for (int64_t c = 0; c < C; c++) {
            want_y[r * C + c] = (qkv_real)(((double)xr[c] - mu) * rs * wd[c] + bd[c]);
            v[c] = (double)gr[c] * (double)wd[c];                 /* g = dy w */
            v2[c] = v[c] * (((double)xr[c] - mu) * rs);           /* g xhat */
            sw[c] += (double)gr[c] * (((double)xr[c] - mu) * rs); /* rows in order (N < 64) */
            sb[c] += (double)gr[c];
        }
        const double mean_g = lane_sum(v, C) / (double)C, mean_gx = lane_sum(v2, C) / (double)C;
        for (int64_t c = 0; c < C; c++)
            want_dx[r * C + c] =
                (qkv_real)(0 + (qkv_real)(rs *
                                          (v[c] - mean_g - (((double)xr[c] - mu) * rs) * mean_gx)));
    }
    for (int64_t c = 0; c < C; c++) {
        want_dw[c] = (qkv_real)sw[c];
        want_db[c] = (qkv_real)sb[c];
    }
    CHECK(memcmp(y->data, want_y, sizeof want_y) == 0);
    CHECK(memcmp(x->grad, want_dx, sizeof want_dx) == 0);
    CHECK(memcmp(w->grad, want_dw, sizeof want_dw) == 0);
    CHECK(memcmp(b->grad, want_db, sizeof want_db) == 0);
    for (int k = 0; k < 3; k++)
        tu_free(in[k]);
    tu_free(dy);
    qkv_ctx_free(ctx);
}

TEST(norm_rejects_bad_inputs) {
    qkv_ctx *ctx = tu_ctx();
    /* test-owned tensors: they survive the qkv_ctx_reset between cases */
    qkv_tensor *x = tu_tensor(QKV_REAL, 2, (int64_t[]){2, 3});
    qkv_tensor *w4 = tu_tensor(QKV_REAL, 1, (int64_t[]){4});
    qkv_tensor *w2d = tu_tensor(QKV_REAL, 2, (int64_t[]){1, 3});
    qkv_tensor *bi = tu_tensor(QKV_I32, 1, (int64_t[]){3});
    qkv_tensor *xi = tu_tensor(QKV_I32, 2, (int64_t[]){2, 3});
    qkv_tensor *x0 = tu_tensor(QKV_REAL, 2, (int64_t[]){2, 0});
    qkv_tensor *sc = tu_tensor(QKV_REAL, 0, NULL);
    TU_EXPECT_FAIL(ctx, qkv_layernorm(ctx, x, w4, NULL, 1e-5), QKV_ERR_SHAPE, "layernorm: weight (4)",
                "(2, 3)");
    TU_EXPECT_FAIL(ctx, qkv_layernorm(ctx, x, NULL, w2d, 1e-5), QKV_ERR_SHAPE, "layernorm: bias (1, 3)",
                "(3)");
    TU_EXPECT_FAIL(ctx, qkv_layernorm(ctx, x, NULL, bi, 1e-5), QKV_ERR_SHAPE, "layernorm: bias must be",
                "I32");
    TU_EXPECT_FAIL(ctx, qkv_layernorm(ctx, xi, NULL, NULL, 1e-5), QKV_ERR_SHAPE, "layernorm: x must be",
                "I32");
    TU_EXPECT_FAIL(ctx, qkv_layernorm(ctx, x0, NULL, NULL, 1e-5), QKV_ERR_SHAPE, "layernorm: x (2, 0)",
                "C >= 1");
    TU_EXPECT_FAIL(ctx, qkv_layernorm(ctx, sc, NULL, NULL, 1e-5), QKV_ERR_SHAPE, "layernorm: x ()",
                "(..., C)");
    TU_EXPECT_FAIL(ctx, qkv_layernorm(ctx, x, NULL, NULL, -1), QKV_ERR_INVALID_ARG, "layernorm: eps = -1",
                ">= 0");
    TU_EXPECT_FAIL(ctx, qkv_layernorm(ctx, x, NULL, NULL, NAN), QKV_ERR_INVALID_ARG, "layernorm: eps",
                "finite");
    TU_EXPECT_FAIL(ctx, qkv_layernorm(ctx, NULL, NULL, NULL, 1e-5), QKV_ERR_INVALID_ARG, "layernorm",
                "NULL");
    TU_EXPECT_FAIL(ctx, qkv_rmsnorm(ctx, x, w4, 1e-5), QKV_ERR_SHAPE, "rmsnorm: weight (4)", "(C) = (3)");
    TU_EXPECT_FAIL(ctx, qkv_rmsnorm(ctx, xi, NULL, 1e-5), QKV_ERR_SHAPE, "rmsnorm: x must be", "I32");
    TU_EXPECT_FAIL(ctx, qkv_rmsnorm(ctx, x, NULL, INFINITY), QKV_ERR_INVALID_ARG, "rmsnorm: eps", "finite");
    tu_free(x), tu_free(w4), tu_free(w2d), tu_free(bi), tu_free(xi), tu_free(x0), tu_free(sc);
    qkv_ctx_free(ctx);
}

static qkv_real *copy_real(const void *p, int64_t n) {
    qkv_real *c = malloc(sizeof(qkv_real) * (size_t)n);
    if (c) memcpy(c, p, sizeof(qkv_real) * (size_t)n);
    return c;
}

/* A post-LN residual block's LayerNorm(x + drop(f)) in one pass (qkv__add_layernorm_over, for
 * decoding and evaluation) against qkv_layernorm(qkv_add(x, f)): the same output bits on both
 * kernel sets, with and without weight and bias, C with and without a tail of lanes; the sum is
 * written over f. Where a gradient is needed the two ops run (the tape has its entries) and give
 * the same bits, gradients included. */
TEST(add_layernorm_over_has_the_bits_of_add_then_layernorm) {
    static const int64_t shapes[][3] = {{3, 5, 37}, {2, 1, 64}, {1, 4, 1}, {2, 3, 130}};
    for (size_t sh = 0; sh < sizeof shapes / sizeof *shapes; sh++)
        for (int kern = 0; kern < 2; kern++)
            for (int affine = 0; affine < 3; affine++) { /* none, weight, weight and bias */
                const int64_t *shape = shapes[sh], C = shape[2], n = shape[0] * shape[1] * C;
                qkv_tensor *x0 = tu_rand(3, shape, -2, 2, 201 + sh),
                           *f0 = tu_rand(3, shape, -1, 3, 202 + sh);
                qkv_tensor *w0 = tu_rand(1, &C, 0.5, 1.5, 203), *b0 = tu_rand(1, &C, -1, 1, 204);
                qkv_real *out[2][2] = {{0}}; /* [one pass][output, sum] */
                for (int fused = 0; fused < 2; fused++) {
                    qkv_ctx *ctx = tu_ctx();
                    qkv_ctx_set_kernels(ctx, kern ? QKV_KERNELS_REF : QKV_KERNELS_FAST);
                    qkv_tensor *x = qkv_tensor_new(ctx, QKV_REAL, 3, shape),
                               *f = qkv_tensor_new(ctx, QKV_REAL, 3, shape);
                    memcpy(x->data, x0->data, sizeof(qkv_real) * (size_t)n);
                    memcpy(f->data, f0->data, sizeof(qkv_real) * (size_t)n);
                    qkv_tensor *w = affine ? w0 : NULL, *b = affine == 2 ? b0 : NULL;
                    qkv_tensor *sum = fused ? f : qkv_add(ctx, x, f);
                    qkv_tensor *y = fused ? qkv__add_layernorm_over(ctx, x, f, 0.1, w, b, 1e-5)
                                          : qkv_layernorm(ctx, sum, w, b, 1e-5);
                    CHECK_OK(qkv_ctx_status(ctx));
                    if (y && sum)
                        out[fused][0] = copy_real(y->data, n),
                        out[fused][1] = copy_real(sum->data, n);
                    qkv_ctx_free(ctx);
                }
                for (int t = 0; t < 2; t++) {
                    if (out[0][t] && out[1][t])
                        CHECK_MSG(memcmp(out[0][t], out[1][t], sizeof(qkv_real) * (size_t)n) == 0,
                                  "shape %zu, %s kernels, affine %d: %s differs", sh,
                                  kern ? "reference" : "fast", affine,
                                  t ? "the sum" : "the output");
                    free(out[0][t]), free(out[1][t]);
                }
                tu_free(x0), tu_free(f0), tu_free(w0), tu_free(b0);
            }
    /* with a gradient to take: the two ops, recorded */
    const int64_t shape[3] = {2, 3, 19}, n = 2 * 3 * 19;
    qkv_tensor *x0 = tu_rand(3, shape, -2, 2, 211), *f0 = tu_rand(3, shape, -1, 3, 212),
               *dy = tu_rand(3, shape, -1, 1, 213);
    qkv_real *ref[3] = {0};
    for (int fused = 0; fused < 2; fused++) {
        qkv_ctx *ctx = tu_ctx();
        qkv_tensor *x = qkv_tensor_new(ctx, QKV_REAL, 3, shape),
                   *f = qkv_tensor_new(ctx, QKV_REAL, 3, shape);
        memcpy(x->data, x0->data, sizeof(qkv_real) * (size_t)n);
        memcpy(f->data, f0->data, sizeof(qkv_real) * (size_t)n);
        qkv_tensor_requires_grad(x), qkv_tensor_requires_grad(f);
        qkv_tensor *y = fused ? qkv__add_layernorm_over(ctx, x, f, 0, NULL, NULL, 1e-5)
                              : qkv_layernorm(ctx, qkv_add(ctx, x, f), NULL, NULL, 1e-5);
        CHECK_OK(qkv_backward_from(ctx, y, dy));
        const qkv_real *got[3] = {y ? y->data : NULL, x->grad, f->grad};
        for (int t = 0; t < 3; t++) {
            CHECK_MSG(got[t] != NULL, "tensor %d was not computed", t);
            if (!got[t]) continue;
            if (!fused)
                ref[t] = copy_real(got[t], n);
            else if (ref[t])
                CHECK_MSG(memcmp(ref[t], got[t], sizeof(qkv_real) * (size_t)n) == 0,
                          "tensor %d differs", t);
        }
        qkv_ctx_free(ctx);
    }
    for (int t = 0; t < 3; t++)
        free(ref[t]);
    /* where one pass cannot stand for the two ops, the two ops run: a view f (its storage not
     * its own), training with dropout drawing, an invalid p (their error) */
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *x = qkv_tensor_new(ctx, QKV_REAL, 3, shape);
    qkv_tensor *wide = qkv_tensor_new(ctx, QKV_REAL, 3, (int64_t[]){2, 3, 20});
    memcpy(x->data, x0->data, sizeof(qkv_real) * (size_t)n);
    tu_fill_uniform(wide->data, 120, -1, 3, 214);
    qkv_real *wide0 = copy_real(wide->data, 120);
    qkv_tensor *view = qkv_narrow(ctx, wide, 2, 0, 19);
    qkv_tensor *y = qkv__add_layernorm_over(ctx, x, view, 0, NULL, NULL, 1e-5);
    qkv_tensor *want = qkv_layernorm(ctx, qkv_add(ctx, x, view), NULL, NULL, 1e-5);
    CHECK(y && want && memcmp(y->data, want->data, sizeof(qkv_real) * (size_t)n) == 0);
    CHECK(memcmp(wide->data, wide0, sizeof(qkv_real) * 120) == 0); /* not written over */
    free(wide0);
    qkv_ctx_set_training(ctx, true);
    qkv_tensor *g = qkv_tensor_new(ctx, QKV_REAL, 3, shape);
    memcpy(g->data, f0->data, sizeof(qkv_real) * (size_t)n);
    y = qkv__add_layernorm_over(ctx, x, g, 0.5, NULL, NULL, 1e-5); /* dropout draws */
    want = qkv_layernorm(ctx, g, NULL, NULL, 1e-5); /* g holds x + drop(g): its norm is y */
    int64_t dropped = 0; /* positions where the sum is x alone */
    for (int64_t i = 0; i < n; i++)
        dropped += ((qkv_real *)g->data)[i] == ((qkv_real *)x->data)[i];
    CHECK(y && want && memcmp(y->data, want->data, sizeof(qkv_real) * (size_t)n) == 0);
    CHECK_MSG(dropped > n / 4 && dropped < 3 * n / 4, "%lld of %lld dropped", (long long)dropped,
              (long long)n);
    qkv_ctx_set_training(ctx, false);
    CHECK(qkv__add_layernorm_over(ctx, x, g, -0.5, NULL, NULL, 1e-5) == NULL);
    CHECK(qkv_ctx_status(ctx) == QKV_ERR_INVALID_ARG && strstr(qkv_last_error(), "add_dropout"));
    qkv_ctx_free(ctx);
    tu_free(x0), tu_free(f0), tu_free(dy);
}
