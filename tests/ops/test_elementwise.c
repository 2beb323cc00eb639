/* test_elementwise.c: add / mul with broadcasting, scale, activations, dropout, sum, mean. */
#include "kernel_check.h"

#include "core/internal.h" /* qkv__add_dropout_over */
#include "ops/ops_internal.h"

#include <float.h>
#include <math.h>

/* ---- broadcasting --------------------------------------------------------------------------- */

TEST(add_mul_broadcast_closed_form) {
    qkv_ctx *ctx = tu_ctx();
    /* a (2, 3), b (3): row-wise bias; b (2, 1): column broadcast */
    qkv_tensor *a = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){2, 3}, (qkv_real[]){1, 2, 3, 4, 5, 6});
    qkv_tensor *b = qkv_tensor_from(ctx, QKV_REAL, 1, (int64_t[]){3}, (qkv_real[]){10, 20, 30});
    qkv_tensor *col = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){2, 1}, (qkv_real[]){2, -1});
    const qkv_real *s = qkv_add(ctx, a, b)->data, *p = qkv_mul(ctx, a, col)->data;
    const qkv_real want_s[] = {11, 22, 33, 14, 25, 36}, want_p[] = {2, 4, 6, -4, -5, -6};
    for (int i = 0; i < 6; i++) CHECK(s[i] == want_s[i] && p[i] == want_p[i]);
    qkv_tensor *bad = qkv_tensor_zeros(ctx, QKV_REAL, 1, (int64_t[]){2});
    CHECK(qkv_add(ctx, a, bad) == NULL && qkv_ctx_status(ctx) == QKV_ERR_SHAPE);
    CHECK(strstr(qkv_last_error(), "add") && strstr(qkv_last_error(), "(2) F") && strstr(qkv_last_error(), "(2, 3)"));
    qkv_ctx_free(ctx);
}

typedef struct {
    bool mul;
} bin_case;

static qkv_tensor *binary_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    const bin_case *c = user;
    return c->mul ? qkv_mul(ctx, in[0], in[1]) : qkv_add(ctx, in[0], in[1]);
}

/* (a shape, b shape) pairs covering every broadcast pattern the models use */
static const struct {
    int na, nb;
    int64_t a[4], b[4];
} bcast_cases[] = {
    {3, 3, {2, 3, 5}, {2, 3, 5}},      /* same shape */
    {3, 1, {2, 3, 5}, {5}},            /* bias (C) onto (B, T, C) */
    {4, 3, {2, 3, 4, 5}, {3, 4, 5}},   /* (H, T, S) bias onto (B, H, T, S) */
    {4, 4, {2, 3, 4, 5}, {2, 1, 1, 5}},/* key-padding style (B, 1, 1, S) */
    {2, 2, {7, 1}, {1, 1}},            /* size-1 everything */
    {3, 3, {2, 3, 5}, {2, 3, 1}},      /* per-row scale */
};

TEST(add_mul_broadcast_gradcheck) {
    TU_NEED_DOUBLE();
    for (size_t c = 0; c < sizeof bcast_cases / sizeof *bcast_cases; c++)
        for (int mul = 0; mul < 2; mul++) {
            qkv_tensor *in[2] = {tu_rand(bcast_cases[c].na, bcast_cases[c].a, -1, 1, 3 + c),
                                 tu_rand(bcast_cases[c].nb, bcast_cases[c].b, -1, 1, 9 + c)};
            qkv_tensor_requires_grad(in[0]);
            qkv_tensor_requires_grad(in[1]);
            bin_case bc = {mul};
            tu_gradcheck(mul ? "mul broadcast" : "add broadcast", binary_fn, in, 2, &bc, NULL);
            tu_free(in[0]);
            tu_free(in[1]);
        }
}

TEST(add_mul_fast_matches_reference_and_threads) {
    for (int mul = 0; mul < 2; mul++) {
        /* big enough to cross the OpenMP threshold */
        qkv_tensor *in[2] = {tu_rand(4, (int64_t[]){3, 5, 37, 129}, -1, 1, 21), tu_rand(3, (int64_t[]){5, 1, 129}, -1, 1, 22)};
        qkv_tensor_requires_grad(in[0]);
        qkv_tensor_requires_grad(in[1]);
        bin_case bc = {mul};
        kc_check(mul ? "mul" : "add", binary_fn, in, 2, &bc);
        tu_free(in[0]);
        tu_free(in[1]);
    }
}

/* ---- activations ---------------------------------------------------------------------------- */

TEST(activations_closed_form) {
    qkv_ctx *ctx = tu_ctx();
    const qkv_real xs[] = {-2, -0.5, 0, 0.5, 3};
    qkv_tensor *x = qkv_tensor_from(ctx, QKV_REAL, 1, (int64_t[]){5}, xs);
    const qkv_real *r = qkv_relu(ctx, x)->data, *t = qkv_tanh(ctx, x)->data, *s = qkv_sigmoid(ctx, x)->data;
    const qkv_real *ge = qkv_gelu(ctx, x, QKV_GELU_ERF)->data, *gt = qkv_gelu(ctx, x, QKV_GELU_TANH)->data;
    for (int i = 0; i < 5; i++) {
        double v = xs[i];
        CHECK(r[i] == (v > 0 ? xs[i] : 0));
        CHECK_NEAR(t[i], tanh(v), 1e-6);
        CHECK_NEAR(s[i], 1 / (1 + exp(-v)), 1e-6);
        CHECK_NEAR(ge[i], 0.5 * v * (1 + erf(v / sqrt(2.0))), 1e-6);
        CHECK_NEAR(gt[i], 0.5 * v * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (v + 0.044715 * v * v * v))), 1e-6);
    }
    /* known values: GELU(1) = 0.8413447460685429 (erf), 0.8411919906082768 (tanh) */
    qkv_tensor *one = qkv_tensor_from(ctx, QKV_REAL, 1, (int64_t[]){1}, (qkv_real[]){1});
    CHECK_NEAR(((qkv_real *)qkv_gelu(ctx, one, QKV_GELU_ERF)->data)[0], 0.8413447460685429, 1e-6);
    CHECK_NEAR(((qkv_real *)qkv_gelu(ctx, one, QKV_GELU_TANH)->data)[0], 0.8411919906082768, 1e-6);
    /* sigmoid saturates without overflow */
    qkv_tensor *big = qkv_tensor_from(ctx, QKV_REAL, 1, (int64_t[]){2}, (qkv_real[]){-1000, 1000});
    const qkv_real *sb = qkv_sigmoid(ctx, big)->data;
    CHECK(sb[0] == 0 && sb[1] == 1);
    CHECK(qkv_gelu(ctx, x, (qkv_gelu_kind)7) == NULL && strstr(qkv_last_error(), "gelu"));
    qkv_ctx_free(ctx);
}

typedef struct {
    int op; /* 0 relu, 1 gelu erf, 2 gelu tanh, 3 tanh, 4 sigmoid, 5 scale, 6 sum, 7 mean */
} un_case;

static qkv_tensor *unary_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    switch (((un_case *)user)->op) {
    case 0: return qkv_relu(ctx, in[0]);
    case 1: return qkv_gelu(ctx, in[0], QKV_GELU_ERF);
    case 2: return qkv_gelu(ctx, in[0], QKV_GELU_TANH);
    case 3: return qkv_tanh(ctx, in[0]);
    case 4: return qkv_sigmoid(ctx, in[0]);
    case 5: return qkv_scale(ctx, in[0], -1.5);
    case 6: return qkv_sum(ctx, in[0]);
    default: return qkv_mean(ctx, in[0]);
    }
}

TEST(activations_and_reductions_gradcheck) {
    TU_NEED_DOUBLE();
    for (int op = 0; op < 8; op++) {
        /* inputs in +-[0.1, 2]: away from ReLU's kink at 0 */
        qkv_tensor *x = tu_rand(3, (int64_t[]){2, 3, 7}, 0.1, 2, 5 + op);
        qkv_real *xd = x->data;
        for (int i = 0; i < 42; i += 2) xd[i] = -xd[i];
        qkv_tensor_requires_grad(x);
        un_case c = {op};
        tu_gradcheck("unary", unary_fn, &x, 1, &c, NULL);
        tu_free(x);
    }
}

TEST(activations_fast_matches_reference_and_threads) {
    for (int op = 0; op < 8; op++) {
        qkv_tensor *x = tu_rand(2, (int64_t[]){97, 301}, -3, 3, 30 + op);
        qkv_tensor_requires_grad(x);
        un_case c = {op};
        kc_check("unary", unary_fn, &x, 1, &c);
        tu_free(x);
    }
}

/* GELU-tanh over its whole range, both kernel sets, against the logistic form
 * x / (1 + e^{-2u}) in long double: within 4 + 4 |u| ulps of the value (twice that, for the
 * derivative s + 2 x s (1 - s) u', of the sum of its two terms' sizes): u is rounded and e^{-2u}
 * amplifies that by 2 |u|. Near 0 in the tails (values below 1e-36 max(1, |x|), derivatives below
 * 1e-34), NaN for NaN. The fast kernel evaluates it in qkv_real with its own exp; the reference
 * in double with libm's. */
TEST(gelu_tanh_within_ulps_over_its_whole_range) {
    enum { GRID = 6001, SPECIAL = 14, N = GRID + SPECIAL };
    static const double special[SPECIAL] = {0,     1e-30, -1e-30, 1e-6, -1e-6, -9.3,  -9.45,
                                            -10.1, 10.1,  -100,   100,  1e20,  -1e20, NAN};
    qkv_real xs[N], ones[N];
    for (int i = 0; i < GRID; i++) xs[i] = (qkv_real)(-30 + 0.01 * i);
    for (int i = 0; i < SPECIAL; i++) xs[GRID + i] = (qkv_real)special[i];
    for (int i = 0; i < N; i++) ones[i] = 1;
    const long double eps = sizeof(qkv_real) == 4 ? FLT_EPSILON : DBL_EPSILON, c = 0.79788456080286535588L;
    for (int kind = 0; kind < 2; kind++) {
        qkv_ctx *ctx = tu_ctx();
        qkv_ctx_set_kernels(ctx, kind ? QKV_KERNELS_FAST : QKV_KERNELS_REF);
        qkv_tensor *x = qkv_tensor_from(ctx, QKV_REAL, 1, (int64_t[]){N}, xs);
        qkv_tensor_requires_grad(x);
        qkv_tensor *y = qkv_gelu(ctx, x, QKV_GELU_TANH);
        CHECK(y && qkv_backward_from(ctx, y, qkv_tensor_from(ctx, QKV_REAL, 1, (int64_t[]){N}, ones)) == QKV_OK);
        if (!y || !x->grad) {
            qkv_ctx_free(ctx);
            return;
        }
        const qkv_real *yd = y->data, *gd = (const qkv_real *)x->grad;
        int bad_y = 0, bad_g = 0;
        for (int i = 0; i < N; i++) {
            if (isnan(xs[i])) { /* NaN in, NaN out (value and gradient) */
                bad_y += !isnan(yd[i]);
                bad_g += !isnan(gd[i]);
                continue;
            }
            const long double v = xs[i], u = c * (v + 0.044715L * v * v * v), e = expl(-2 * u), s = 1 / (1 + e);
            const long double want = v / (1 + e), tail = 2 * v * s * (e * s) * c * (1 + 3 * 0.044715L * v * v);
            const long double want_g = isfinite(tail) ? s + tail : s;
            /* u itself is rounded (relative error ~eps) and e^{-2u} amplifies that by 2 |u|: the
             * bound is the float evaluation's conditioning, 4 + 4 |u| ulps */
            const long double ulps = (4 + 4 * fabsl(u)) * eps;
            if (fabsl(yd[i] - want) > ulps * fabsl(want) + 1e-36L * fmaxl(1, fabsl(v))) bad_y++;
            if (fabsl(gd[i] - want_g) > 2 * ulps * (fabsl(s) + (isfinite(tail) ? fabsl(tail) : 0)) + 1e-34L) bad_g++;
        }
        CHECK_MSG(bad_y == 0, "%s kernels: %d of %d GELU-tanh values off", kind ? "fast" : "reference", bad_y, N);
        CHECK_MSG(bad_g == 0, "%s kernels: %d of %d GELU-tanh derivatives off", kind ? "fast" : "reference", bad_g, N);
        qkv_ctx_free(ctx);
    }
}

/* ---- dropout -------------------------------------------------------------------------------- */

static qkv_tensor *dropout_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    qkv_ctx_set_training(ctx, true);
    return qkv_dropout(ctx, in[0], *(double *)user);
}

TEST(dropout_statistics_eval_identity_and_determinism) {
    const int64_t n = 100000;
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *x = qkv_tensor_new(ctx, QKV_REAL, 1, &n);
    for (int64_t i = 0; i < n; i++) ((qkv_real *)x->data)[i] = 1;
    /* evaluation mode: the identity, no copy */
    CHECK(qkv_dropout(ctx, x, 0.3) == x);
    qkv_ctx_set_training(ctx, true);
    qkv_tensor *y = qkv_dropout(ctx, x, 0.3);
    int64_t zeros = 0;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        qkv_real v = ((qkv_real *)y->data)[i];
        CHECK(v == 0 || fabs((double)v - 1 / 0.7) < 1e-6);
        zeros += v == 0;
        sum += v;
    }
    CHECK_NEAR((double)zeros / n, 0.3, 0.005); /* 3.5 sigma is 0.005 */
    CHECK_NEAR(sum / n, 1.0, 0.01);            /* inverted dropout keeps the mean */
    /* a second dropout in the same step draws a different mask; the same (seed, step, order) the same */
    qkv_tensor *y2 = qkv_dropout(ctx, x, 0.3);
    CHECK(memcmp(y->data, y2->data, sizeof(qkv_real) * (size_t)n) != 0);
    qkv_real *first = malloc(sizeof(qkv_real) * (size_t)n);
    memcpy(first, y->data, sizeof(qkv_real) * (size_t)n);
    qkv_ctx_set_rng(ctx, 1234, 0); /* rewind to the RNG position of the first call */
    qkv_tensor *again = qkv_dropout(ctx, x, 0.3);
    uint64_t seed, step;
    qkv_ctx_get_rng(ctx, &seed, &step);
    CHECK(seed == 1234 && step == 0);
    CHECK(memcmp(first, again->data, sizeof(qkv_real) * (size_t)n) == 0);
    free(first);
    CHECK(qkv_dropout(ctx, x, 1.0) == NULL && strstr(qkv_last_error(), "dropout"));
    qkv_ctx_free(ctx);
}

TEST(dropout_gradcheck_and_kernels) {
    double p = 0.4;
    qkv_tensor *x = tu_rand(2, (int64_t[]){33, 257}, -1, 1, 71);
    qkv_tensor_requires_grad(x);
    kc_check("dropout", dropout_fn, &x, 1, &p);
    tu_free(x);
#ifdef QKV_DOUBLE
    x = tu_rand(2, (int64_t[]){3, 5}, -1, 1, 72);
    qkv_tensor_requires_grad(x);
    tu_gradcheck_opts o = tu_gradcheck_default();
    o.training = true;
    tu_gradcheck("dropout", dropout_fn, &x, 1, &p, &o);
    tu_free(x);
#endif
}

static qkv_tensor *relu_dropout_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    qkv_ctx_set_training(ctx, true);
    return qkv_relu_dropout(ctx, in[0], *(double *)user);
}

/* The fused op against the pair it replaces: the same bits forward and backward (same random
 * stream), on a size that is not a multiple of the 64-element groups. */
TEST(relu_dropout_equals_relu_then_dropout) {
    const int64_t shape[2] = {37, 129};
    const double p = 0.3;
    qkv_tensor *x = tu_rand(2, shape, -1, 1, 81), *dy = tu_rand(2, shape, -1, 1, 82);
    qkv_real *ref_y = NULL, *ref_dx = NULL;
    for (int fused = 0; fused < 2; fused++) {
        qkv_ctx *ctx = tu_ctx();
        qkv_ctx_set_training(ctx, true);
        qkv_ctx_set_rng(ctx, 99, 5);
        qkv_tensor *xv = qkv_tensor_new(ctx, QKV_REAL, 2, shape);
        memcpy(xv->data, x->data, sizeof(qkv_real) * 37 * 129);
        qkv_tensor_requires_grad(xv);
        qkv_tensor *y = fused ? qkv_relu_dropout(ctx, xv, p) : qkv_dropout(ctx, qkv_relu(ctx, xv), p);
        CHECK_OK(qkv_backward_from(ctx, y, dy));
        const size_t bytes = sizeof(qkv_real) * 37 * 129;
        if (!fused) {
            ref_y = malloc(bytes), ref_dx = malloc(bytes);
            memcpy(ref_y, y->data, bytes);
            memcpy(ref_dx, xv->grad, bytes);
        } else {
            CHECK(memcmp(ref_y, y->data, bytes) == 0);
            CHECK(memcmp(ref_dx, xv->grad, bytes) == 0);
            int64_t zeros = 0;
            for (int64_t i = 0; i < 37 * 129; i++) zeros += ((qkv_real *)y->data)[i] == 0;
            CHECK(zeros > 37 * 129 / 2 && zeros < 37 * 129); /* ReLU's half and dropout's 30 % of the rest */
        }
        qkv_ctx_free(ctx);
    }
    free(ref_y), free(ref_dx);
    /* evaluation mode is the ReLU */
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *y = qkv_relu_dropout(ctx, x, p);
    for (int64_t i = 0; i < 37 * 129; i++) {
        const qkv_real v = ((qkv_real *)x->data)[i];
        CHECK(((qkv_real *)y->data)[i] == (v > 0 ? v : 0));
    }
    CHECK(qkv_relu_dropout(ctx, x, 1.0) == NULL && strstr(qkv_last_error(), "relu_dropout"));
    qkv_ctx_free(ctx);
    tu_free(x), tu_free(dy);
}

TEST(relu_dropout_gradcheck_and_kernels) {
    double p = 0.25;
    qkv_tensor *x = tu_rand(2, (int64_t[]){17, 301}, -1, 1, 83);
    qkv_tensor_requires_grad(x);
    kc_check("relu_dropout", relu_dropout_fn, &x, 1, &p);
    tu_free(x);
#ifdef QKV_DOUBLE
    /* inputs away from ReLU's kink at 0 */
    x = tu_rand(2, (int64_t[]){3, 7}, 0.1, 1, 84);
    for (int i = 0; i < 21; i += 2) ((qkv_real *)x->data)[i] = -((qkv_real *)x->data)[i];
    qkv_tensor_requires_grad(x);
    tu_gradcheck_opts o = tu_gradcheck_default();
    o.training = true;
    tu_gradcheck("relu_dropout", relu_dropout_fn, &x, 1, &p, &o);
    tu_free(x);
#endif
}

static qkv_tensor *add_dropout_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    qkv_ctx_set_training(ctx, true);
    return qkv_add_dropout(ctx, in[0], in[1], *(double *)user);
}

/* A training context on kernel set k (random position fixed) holding copies of x0 and f0 as
 * leaves that need gradients: the operands of a residual connection. */
static qkv_ctx *residual_case(qkv_kernels k, const qkv_tensor *x0, const qkv_tensor *f0, qkv_tensor **x, qkv_tensor **f) {
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_kernels(ctx, k);
    qkv_ctx_set_training(ctx, true);
    qkv_ctx_set_rng(ctx, 5, 9);
    *x = qkv_tensor_new(ctx, QKV_REAL, x0->ndim, x0->shape);
    *f = qkv_tensor_new(ctx, QKV_REAL, f0->ndim, f0->shape);
    memcpy((*x)->data, x0->data, sizeof(qkv_real) * (size_t)qkv_tensor_numel(x0));
    memcpy((*f)->data, f0->data, sizeof(qkv_real) * (size_t)qkv_tensor_numel(f0));
    qkv_tensor_requires_grad(*x), qkv_tensor_requires_grad(*f);
    return ctx;
}

/* x + dropout(f) fused against qkv_add(x, qkv_dropout(f)): the same bits forward and backward. */
TEST(add_dropout_equals_add_of_dropout) {
    const int64_t shape[3] = {3, 11, 67};
    const int64_t n = 3 * 11 * 67;
    qkv_tensor *x0 = tu_rand(3, shape, -1, 1, 101), *f0 = tu_rand(3, shape, -1, 1, 102), *dy = tu_rand(3, shape, -1, 1, 103);
    qkv_real *ref[3] = {NULL, NULL, NULL};
    for (int fused = 0; fused < 2; fused++) {
        qkv_tensor *x, *f;
        qkv_ctx *ctx = residual_case(QKV_KERNELS_FAST, x0, f0, &x, &f);
        qkv_tensor *y = fused ? qkv_add_dropout(ctx, x, f, 0.35) : qkv_add(ctx, x, qkv_dropout(ctx, f, 0.35));
        CHECK_OK(qkv_backward_from(ctx, y, dy));
        qkv_real *got[3] = {(qkv_real *)y->data, (qkv_real *)x->grad, (qkv_real *)f->grad};
        for (int i = 0; i < 3; i++) {
            if (!fused) {
                ref[i] = malloc(sizeof(qkv_real) * (size_t)n);
                memcpy(ref[i], got[i], sizeof(qkv_real) * (size_t)n);
            } else {
                CHECK_MSG(memcmp(ref[i], got[i], sizeof(qkv_real) * (size_t)n) == 0, "tensor %d differs", i);
                free(ref[i]);
            }
        }
        qkv_ctx_free(ctx);
    }
    qkv_ctx *ctx = tu_ctx();
    CHECK(qkv_add_dropout(ctx, x0, qkv_narrow(ctx, f0, 2, 0, 66), 0.1) == NULL && strstr(qkv_last_error(), "add_dropout"));
    qkv_ctx_free(ctx);
    tu_free(x0), tu_free(f0), tu_free(dy);
}

/* The residual written over f's storage (qkv__add_dropout_over, for a sub-layer's last
 * projection) against qkv_add_dropout: the same output, x and f gradients and the same next random
 * draw, bit for bit, on both kernel sets; f's storage holds the sum where f owns it, and a view f
 * (whose storage is not its own) or evaluation mode takes the general op. */
TEST(add_dropout_over_has_the_bits_of_add_dropout) {
    const int64_t shape[3] = {3, 11, 67};
    const int64_t n = 3 * 11 * 67;
    qkv_tensor *x0 = tu_rand(3, shape, -1, 1, 111), *f0 = tu_rand(3, shape, -1, 1, 112), *dy = tu_rand(3, shape, -1, 1, 113);
    for (int kern = 0; kern < 2; kern++) {
        qkv_real *ref[4] = {NULL, NULL, NULL, NULL};
        for (int over = 0; over < 2; over++) {
            qkv_tensor *x, *f;
            qkv_ctx *ctx = residual_case(kern ? QKV_KERNELS_REF : QKV_KERNELS_FAST, x0, f0, &x, &f);
            qkv_tensor *y = over ? qkv__add_dropout_over(ctx, x, f, 0.35) : qkv_add_dropout(ctx, x, f, 0.35);
            qkv_tensor *ones = qkv_tensor_new(ctx, QKV_REAL, 1, (int64_t[]){64});
            for (int i = 0; i < 64; i++) ((qkv_real *)ones->data)[i] = 1;
            qkv_tensor *next = qkv_dropout(ctx, ones, 0.5);
            CHECK_OK(qkv_backward_from(ctx, y, dy));
            if (over) CHECK_MSG(y->data == f->data && !y->base, "the sum is not written over f's storage");
            qkv_real *got[4] = {(qkv_real *)y->data, (qkv_real *)x->grad, (qkv_real *)f->grad, (qkv_real *)next->data};
            const int64_t len[4] = {n, n, n, 64};
            for (int i = 0; i < 4; i++) {
                if (!over) {
                    ref[i] = malloc(sizeof(qkv_real) * (size_t)len[i]);
                    memcpy(ref[i], got[i], sizeof(qkv_real) * (size_t)len[i]);
                } else {
                    CHECK_MSG(memcmp(ref[i], got[i], sizeof(qkv_real) * (size_t)len[i]) == 0,
                              "%s kernels: tensor %d differs", kern ? "reference" : "fast", i);
                    free(ref[i]);
                }
            }
            qkv_ctx_free(ctx);
        }
    }
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_training(ctx, true);
    qkv_tensor *f = qkv_tensor_new(ctx, QKV_REAL, 3, (int64_t[]){3, 11, 68});
    qkv_tensor *fv = qkv_narrow(ctx, f, 2, 0, 67), *x = qkv_tensor_new(ctx, QKV_REAL, 3, shape);
    qkv_tensor *y = qkv__add_dropout_over(ctx, x, fv, 0.35); /* a view: the general op, a new tensor */
    CHECK(y && y->data != f->data && y->data != fv->data);
    qkv_ctx_set_training(ctx, false);
    qkv_tensor *g = qkv_tensor_new(ctx, QKV_REAL, 3, shape);
    y = qkv__add_dropout_over(ctx, x, g, 0.35); /* evaluation: x + g, a new tensor */
    CHECK(y && y->data != g->data);
    CHECK_OK(qkv_ctx_status(ctx));
    qkv_ctx_free(ctx);
    tu_free(x0), tu_free(f0), tu_free(dy);
}

TEST(add_dropout_gradcheck_and_kernels) {
    double p = 0.3;
    qkv_tensor *in[2] = {tu_rand(2, (int64_t[]){13, 70}, -1, 1, 104), tu_rand(2, (int64_t[]){13, 70}, -1, 1, 105)};
    qkv_tensor_requires_grad(in[0]), qkv_tensor_requires_grad(in[1]);
    kc_check("add_dropout", add_dropout_fn, in, 2, &p);
#ifdef QKV_DOUBLE
    tu_gradcheck_opts o = tu_gradcheck_default();
    o.training = true;
    tu_gradcheck("add_dropout", add_dropout_fn, in, 2, &p, &o);
#endif
    tu_free(in[0]), tu_free(in[1]);
}

TEST(sum_and_mean_closed_form) {
    qkv_ctx *ctx = tu_ctx();
    const int64_t n = 10001; /* crosses the fixed 4096-element chunks */
    qkv_tensor *x = qkv_tensor_new(ctx, QKV_REAL, 1, &n);
    for (int64_t i = 0; i < n; i++) ((qkv_real *)x->data)[i] = (qkv_real)(i % 7);
    double want = 0;
    for (int64_t i = 0; i < n; i++) want += (double)(i % 7);
    qkv_tensor *s = qkv_sum(ctx, x), *m = qkv_mean(ctx, x);
    CHECK(s->ndim == 0 && qkv_tensor_numel(s) == 1);
    CHECK_NEAR(((qkv_real *)s->data)[0], want, 1e-6 * want);
    CHECK_NEAR(((qkv_real *)m->data)[0], want / n, 1e-6);
    qkv_ctx_free(ctx);
}

TEST(elementwise_rejects_integer_inputs) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *ids = qkv_tensor_zeros(ctx, QKV_I32, 1, (int64_t[]){3});
    CHECK(qkv_relu(ctx, ids) == NULL && qkv_ctx_status(ctx) == QKV_ERR_SHAPE && strstr(qkv_last_error(), "relu: x must be"));
    qkv_ctx_free(ctx);
}

/* ---- dense kernels (BLAS) against the reference GEMM, per op ---------------------------------- */

static qkv_tensor *linear_kc_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    (void)user;
    return qkv_linear(ctx, in[0], in[1], in[2]);
}

TEST(linear_fast_matches_reference_and_threads) {
    qkv_tensor *in[3] = {tu_rand(3, (int64_t[]){4, 65, 96}, -1, 1, 81), tu_rand(2, (int64_t[]){130, 96}, -1, 1, 82),
                         tu_rand(1, (int64_t[]){130}, -1, 1, 83)};
    for (int k = 0; k < 3; k++) qkv_tensor_requires_grad(in[k]);
    kc_check("linear", linear_kc_fn, in, 3, NULL);
    for (int k = 0; k < 3; k++) tu_free(in[k]);
}
