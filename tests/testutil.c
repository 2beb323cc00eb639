/* testutil.c: see testutil.h. */
#include "testutil.h"

#include "core/internal.h"

#include <unistd.h>

qkv_tensor *tu_tensor(qkv_dtype dt, int ndim, const int64_t *shape) {
    qkv_tensor *t = calloc(1, sizeof *t);
    t->dtype = dt;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
    qkv__set_contiguous_strides(t);
    const int64_t n = qkv_tensor_numel(t);
    t->data = calloc((size_t)(n ? n : 1), qkv_dtype_size(dt));
    return t;
}

void tu_fill_uniform(qkv_real *x, int64_t n, double lo, double hi, uint64_t seed) {
    for (int64_t i = 0; i < n; i++)
        x[i] = (qkv_real)(lo + (hi - lo) * qkv_rng_uniform(seed, 77, 0, (uint64_t)i));
}

qkv_tensor *tu_rand(int ndim, const int64_t *shape, double lo, double hi, uint64_t seed) {
    qkv_tensor *t = tu_tensor(QKV_REAL, ndim, shape);
    tu_fill_uniform((qkv_real *)t->data, qkv_tensor_numel(t), lo, hi, seed);
    return t;
}

qkv_tensor *tu_ids(int ndim, const int64_t *shape, int32_t lo, int32_t hi, uint64_t seed) {
    qkv_tensor *t = tu_tensor(QKV_I32, ndim, shape);
    int32_t *x = t->data;
    for (int64_t i = 0, n = qkv_tensor_numel(t); i < n; i++)
        x[i] = lo + (int32_t)(qkv_rng_uniform(seed, 78, 0, (uint64_t)i) * (float)(hi - lo));
    return t;
}

void tu_free(qkv_tensor *t) {
    if (!t) return;
    free(t->data);
    free(t);
}

qkv_ctx *tu_ctx(void) {
    qkv_ctx_params p = qkv_ctx_default_params();
    p.kernels = qkv_test_kernels;
    p.seed = 1234;
    p.arena_bytes = (size_t)1 << 20;
    qkv_ctx *ctx = NULL;
    if (qkv_ctx_new(&p, &ctx) != QKV_OK) {
        fprintf(stderr, "tu_ctx: %s\n", qkv_last_error());
        exit(2);
    }
    return ctx;
}

double tu_max_rel_diff(const qkv_real *a, const qkv_real *b, int64_t n) {
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]) / fmax(1.0, fabs((double)b[i]));
        if (!(d <= worst)) worst = d; /* NaN propagates */
    }
    return worst;
}

tu_gradcheck_opts tu_gradcheck_default(void) {
    return (tu_gradcheck_opts){.eps = 1e-6, .rtol = 1e-6, .atol = 1e-9, .training = false};
}

/* One forward pass at the fixed RNG position; returns sum(y * dy) (and y's size). */
static double eval_loss(qkv_ctx *ctx, tu_forward_fn f, qkv_tensor **in, void *user,
                        const qkv_real *dy, int64_t n_out, bool training, bool *ok) {
    qkv_ctx_reset(ctx);
    qkv_ctx_set_rng(ctx, 99, 5);
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_ctx_set_training(ctx, training);
    qkv_tensor *y = f(ctx, in, user);
    if (!y || qkv_ctx_status(ctx) || qkv_tensor_numel(y) != n_out) {
        *ok = false;
        return 0;
    }
    qkv_tensor *yc = qkv_contiguous(ctx, y);
    const qkv_real *yd = (const qkv_real *)yc->data;
    double s = 0;
    for (int64_t i = 0; i < n_out; i++) s += (double)yd[i] * (double)dy[i];
    return s;
}

bool tu_gradcheck(const char *what, tu_forward_fn f, qkv_tensor **in, int n_in, void *user,
                  const tu_gradcheck_opts *opts) {
    tu_gradcheck_opts o = opts ? *opts : tu_gradcheck_default();
    qkv_ctx *ctx = tu_ctx();
    bool all_ok = true;
    /* Analytic pass. */
    for (int k = 0; k < n_in; k++) {
        if (!in[k]) continue;
        if (in[k]->flags & QKV_PARAM)
            memset(in[k]->grad, 0, (size_t)qkv_tensor_numel(in[k]) * sizeof(qkv_real));
        else
            in[k]->grad = NULL;
    }
    qkv_ctx_set_rng(ctx, 99, 5);
    qkv_ctx_set_training(ctx, o.training);
    qkv_tensor *y = f(ctx, in, user);
    if (!y || qkv_ctx_status(ctx)) {
        qkv_test_fail(__FILE__, __LINE__, "%s: forward failed: %s", what, qkv_last_error());
        qkv_ctx_free(ctx);
        return false;
    }
    const int64_t n_out = qkv_tensor_numel(y);
    qkv_real *dy = malloc(sizeof(qkv_real) * (size_t)(n_out ? n_out : 1));
    tu_fill_uniform(dy, n_out, -1, 1, 4242);
    qkv_tensor *yc = qkv_contiguous(ctx, y);
    qkv_tensor *dyt = qkv_tensor_from(ctx, QKV_REAL, yc->ndim, yc->shape, dy);
    qkv_status st = qkv_backward_from(ctx, yc, dyt);
    if (st != QKV_OK) {
        qkv_test_fail(__FILE__, __LINE__, "%s: backward failed: %s", what, qkv_last_error());
        free(dy);
        qkv_ctx_free(ctx);
        return false;
    }
    qkv_real **analytic = calloc((size_t)n_in, sizeof *analytic);
    for (int k = 0; k < n_in; k++) {
        if (!in[k] || !(in[k]->flags & QKV_REQUIRES_GRAD)) continue;
        int64_t n = qkv_tensor_numel(in[k]);
        analytic[k] = calloc((size_t)(n ? n : 1), sizeof(qkv_real));
        if (in[k]->grad) memcpy(analytic[k], in[k]->grad, (size_t)n * sizeof(qkv_real));
    }
    /* Numeric pass. */
    for (int k = 0; k < n_in && all_ok; k++) {
        if (!analytic[k]) continue;
        qkv_real *x = (qkv_real *)in[k]->data;
        for (int64_t j = 0, n = qkv_tensor_numel(in[k]); j < n; j++) {
            const qkv_real saved = x[j];
            bool ok = true;
            x[j] = saved + (qkv_real)o.eps;
            double lp = eval_loss(ctx, f, in, user, dy, n_out, o.training, &ok);
            x[j] = saved - (qkv_real)o.eps;
            double lm = eval_loss(ctx, f, in, user, dy, n_out, o.training, &ok);
            x[j] = saved;
            if (!ok) {
                qkv_test_fail(__FILE__, __LINE__, "%s: perturbed forward failed: %s", what, qkv_last_error());
                all_ok = false;
                break;
            }
            double num = (lp - lm) / (2 * o.eps), ana = (double)analytic[k][j];
            double tol = o.atol + o.rtol * fmax(fabs(num), fabs(ana));
            if (!(fabs(num - ana) <= tol)) {
                qkv_test_fail(__FILE__, __LINE__, "%s: d/d input %d [%lld]: analytic %.12g, numeric %.12g", what,
                              k, (long long)j, ana, num);
                all_ok = false;
                break;
            }
        }
    }
    for (int k = 0; k < n_in; k++) {
        free(analytic[k]);
        if (in[k] && !(in[k]->flags & QKV_PARAM)) in[k]->grad = NULL;
    }
    free(analytic);
    free(dy);
    qkv_ctx_free(ctx);
    return all_ok;
}

bool tu_smooth_at(tu_forward_fn f, qkv_tensor **in, int n_in, void *user, double eps, double rtol) {
    qkv_ctx *ctx = tu_ctx();
    /* output size and the upstream weights dy, as tu_gradcheck uses them */
    qkv_ctx_set_rng(ctx, 99, 5);
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_tensor *y = f(ctx, in, user);
    if (!y || qkv_ctx_status(ctx)) {
        qkv_ctx_free(ctx);
        return false;
    }
    const int64_t n_out = qkv_tensor_numel(y);
    qkv_real *dy = malloc(sizeof(qkv_real) * (size_t)(n_out ? n_out : 1));
    tu_fill_uniform(dy, n_out, -1, 1, 4242);
    double loss[4];
    const double steps[4] = {-2, -1, 1, 2};
    bool ok = true;
    for (int s = 0; s < 4 && ok; s++) {
        for (int k = 0; k < n_in; k++) { /* x += h d, d uniform in [-1, 1] */
            if (!in[k] || !(in[k]->flags & QKV_REQUIRES_GRAD)) continue;
            qkv_real *x = in[k]->data;
            for (int64_t j = 0, n = qkv_tensor_numel(in[k]); j < n; j++)
                x[j] += (qkv_real)(steps[s] * eps * (2 * qkv_rng_uniform(31, (uint64_t)k, 0, (uint64_t)j) - 1));
        }
        loss[s] = eval_loss(ctx, f, in, user, dy, n_out, false, &ok);
        for (int k = 0; k < n_in; k++) { /* undo (the same float expression, so exact for F64) */
            if (!in[k] || !(in[k]->flags & QKV_REQUIRES_GRAD)) continue;
            qkv_real *x = in[k]->data;
            for (int64_t j = 0, n = qkv_tensor_numel(in[k]); j < n; j++)
                x[j] -= (qkv_real)(steps[s] * eps * (2 * qkv_rng_uniform(31, (uint64_t)k, 0, (uint64_t)j) - 1));
        }
    }
    free(dy);
    qkv_ctx_free(ctx);
    if (!ok) return false;
    const double g1 = (loss[2] - loss[1]) / (2 * eps), g2 = (loss[3] - loss[0]) / (4 * eps);
    return fabs(g1 - g2) <= rtol * fmax(1.0, fmax(fabs(g1), fabs(g2)));
}

qkv_model *tu_model_roundtrip(const qkv_model *m) {
    char path[] = "/tmp/qkv_model_XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return NULL;
    close(fd);
    qkv_model *back = NULL;
    CHECK_OK(qkv_model_save(m, path));
    CHECK_OK(qkv_model_load(path, &back));
    unlink(path);
    return back;
}
