/* attn_testutil.c: see attn_testutil.h. */
#include "attn_testutil.h"

static qkv_tensor *zeros_i32(int ndim, const int64_t *shape) {
    return tu_tensor(QKV_I32, ndim, shape);
}

at_mask at_mask_make(int kind, int64_t B, int64_t T, int64_t S, uint64_t seed) {
    at_mask r;
    memset(&r, 0, sizeof r);
    r.use = kind != 0;
    r.m = qkv_mask_none();
    switch (kind) {
    case 0:
        r.name = "NULL mask";
        break;
    case 1:
        r.name = "qkv_mask_none";
        break;
    case 2:
        r.name = "causal";
        r.m.causal = true;
        break;
    case 3:
        r.name = "window left 1, right 0";
        r.m.window_left = 1;
        r.m.window_right = 0;
        break;
    case 4:
        r.name = "window right 1";
        r.m.window_right = 1;
        break;
    case 5:
        r.name = "diagonal window";
        r.m.window_left = 0;
        r.m.window_right = 0;
        break;
    case 6: {
        r.name = "key padding";
        r.padding = zeros_i32(2, (int64_t[]){B, S});
        int32_t *p = r.padding->data;
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < S; j++) /* even b: last key padded; odd b: everything */
                p[b * S + j] = (b % 2 == 1 || (j == S - 1 && S > 1)) ? 7 : 0;
        r.m.key_padding = r.padding;
        break;
    }
    case 7: {
        r.name = "allowed (T, S)";
        r.allowed = tu_ids(2, (int64_t[]){T, S}, 0, 2, seed);
        int32_t *a = r.allowed->data;
        for (int64_t j = 0; j < S; j++)
            a[j] = 0;                 /* row 0 attends to nothing */
        if (T > 1) a[S + S - 1] = -3; /* any nonzero value allows */
        r.m.allowed = r.allowed;
        break;
    }
    case 8:
        r.name = "allowed (B, T, S)";
        r.allowed = tu_ids(3, (int64_t[]){B, T, S}, 0, 2, seed);
        r.m.allowed = r.allowed;
        break;
    case 9: {
        r.name = "combined";
        r.m.causal = true;
        r.m.window_left = 2;
        r.padding = zeros_i32(2, (int64_t[]){B, S});
        for (int64_t b = 1; b < B; b += 2)
            ((int32_t *)r.padding->data)[b * S] = 1; /* key 0 */
        r.allowed = tu_ids(2, (int64_t[]){T, S}, 0, 2, seed);
        r.m.key_padding = r.padding;
        r.m.allowed = r.allowed;
        break;
    }
    }
    return r;
}

void at_mask_free(at_mask *m) {
    tu_free(m->padding);
    tu_free(m->allowed);
    m->padding = m->allowed = NULL;
}

qkv_tensor *at_rand_away(int ndim, const int64_t *shape, uint64_t seed) {
    qkv_tensor *t = tu_rand(ndim, shape, -1, 1, seed);
    qkv_real *x = t->data;
    for (int64_t i = 0, n = qkv_tensor_numel(t); i < n; i++)
        x[i] = x[i] < 0 ? x[i] - (qkv_real)0.1 : x[i] + (qkv_real)0.1;
    return t;
}

#define AT_MAX_IN 6

typedef struct {
    qkv_real *out;
    int64_t n_out;
    qkv_real *grad[AT_MAX_IN];
} at_result;

static void result_free(at_result *r) {
    free(r->out);
    for (int k = 0; k < AT_MAX_IN; k++)
        free(r->grad[k]);
}

static bool run_once(qkv_kernels kern, int threads, tu_forward_fn f, qkv_tensor **in, int n_in,
                     void *user, at_result *r) {
    memset(r, 0, sizeof *r);
    qkv_set_num_threads(threads);
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_kernels(ctx, kern);
    bool needs_grad = false;
    for (int k = 0; k < n_in; k++)
        if (in[k]) {
            in[k]->grad = NULL;
            needs_grad |= (in[k]->flags & QKV_REQUIRES_GRAD) != 0;
        }
    qkv_tensor *y = f(ctx, in, user);
    qkv_tensor *yc = y ? qkv_contiguous(ctx, y) : NULL;
    bool ok = yc && qkv_ctx_status(ctx) == QKV_OK;
    if (ok) {
        r->n_out = qkv_tensor_numel(yc);
        r->out = malloc(sizeof(qkv_real) * (size_t)(r->n_out + 1));
        memcpy(r->out, yc->data, sizeof(qkv_real) * (size_t)r->n_out);
    }
    if (ok && needs_grad) {
        qkv_real *dy = malloc(sizeof(qkv_real) * (size_t)(r->n_out + 1));
        tu_fill_uniform(dy, r->n_out, -1, 1, 4343);
        qkv_tensor *dyt = qkv_tensor_from(ctx, QKV_REAL, yc->ndim, yc->shape, dy);
        free(dy);
        ok = qkv_backward_from(ctx, yc, dyt) == QKV_OK;
        for (int k = 0; ok && k < n_in; k++) {
            if (!in[k] || !(in[k]->flags & QKV_REQUIRES_GRAD)) continue;
            int64_t n = qkv_tensor_numel(in[k]);
            r->grad[k] = calloc((size_t)(n + 1), sizeof(qkv_real));
            if (in[k]->grad) memcpy(r->grad[k], in[k]->grad, sizeof(qkv_real) * (size_t)n);
        }
    }
    if (!ok) qkv_test_fail(__FILE__, __LINE__, "run failed: %s", qkv_last_error());
    for (int k = 0; k < n_in; k++)
        if (in[k]) in[k]->grad = NULL;
    qkv_ctx_free(ctx);
    return ok;
}

void at_compare_kernels(const char *what, tu_forward_fn f, qkv_tensor **in, int n_in, void *user) {
    at_compare_kernels_tol(what, f, in, n_in, user, 1e-5);
}

void at_compare_kernels_tol(const char *what, tu_forward_fn f, qkv_tensor **in, int n_in,
                            void *user, double float_tol) {
    const double tol = sizeof(qkv_real) == 4 ? float_tol : 1e-12;
    const int saved = qkv_get_num_threads();
    at_result ref, one, two;
    memset(&ref, 0, sizeof ref);
    memset(&one, 0, sizeof one);
    memset(&two, 0, sizeof two);
    bool ok = run_once(QKV_KERNELS_REF, saved, f, in, n_in, user, &ref) &&
              run_once(QKV_KERNELS_FAST, 1, f, in, n_in, user, &one) &&
              run_once(QKV_KERNELS_FAST, 2, f, in, n_in, user, &two);
    qkv_set_num_threads(saved);
    if (ok) {
        double d = tu_max_rel_diff(one.out, ref.out, ref.n_out);
        CHECK_MSG(d <= tol, "%s: fast forward differs from reference by %g", what, d);
        CHECK_MSG(memcmp(one.out, two.out, sizeof(qkv_real) * (size_t)ref.n_out) == 0,
                  "%s: forward differs between 1 and 2 threads", what);
        for (int k = 0; k < n_in; k++) {
            if (!ref.grad[k]) continue;
            int64_t n = qkv_tensor_numel(in[k]);
            d = tu_max_rel_diff(one.grad[k], ref.grad[k], n);
            CHECK_MSG(d <= tol, "%s: fast gradient of input %d differs from reference by %g", what,
                      k, d);
            CHECK_MSG(memcmp(one.grad[k], two.grad[k], sizeof(qkv_real) * (size_t)n) == 0,
                      "%s: gradient of input %d differs between 1 and 2 threads", what, k);
        }
    }
    result_free(&ref);
    result_free(&one);
    result_free(&two);
}

void at_gradcheck(const char *what, tu_forward_fn f, qkv_tensor **in, int n_in, void *user,
                  const tu_gradcheck_opts *opts) {
    const qkv_kernels saved = qkv_test_kernels;
    char label[256];
    for (int r = 0; r < 2; r++) {
        qkv_test_kernels = r ? QKV_KERNELS_REF : QKV_KERNELS_FAST;
        snprintf(label, sizeof label, "%s [%s kernels]", what, r ? "ref" : "fast");
        tu_gradcheck(label, f, in, n_in, user, opts);
    }
    qkv_test_kernels = saved;
}
