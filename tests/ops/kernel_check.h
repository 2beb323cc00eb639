/*
 * kernel_check.h: fast kernels against the reference kernels, and fast kernels with 1 thread
 * against 2 threads, for one op (forward output and every input gradient).
 *
 *   kc_check("layernorm", fn, in, n_in, user);
 * runs fn three times (reference / 1 thread, fast / 1 thread, fast / 2 threads) on the same
 * inputs with the same random upstream gradient dy, then checks
 *   fast vs reference:  max relative difference <= 1e-5 (float) or 1e-12 (double);
 *   1 vs 2 threads:     bit-identical output and gradients.
 * The op's output must be real; inputs that require a gradient are compared.
 */
#ifndef QKV_TEST_KERNEL_CHECK_H
#define QKV_TEST_KERNEL_CHECK_H

#include "testutil.h"

#define KC_MAX_IN 6

typedef struct {
    qkv_real *y;
    int64_t ny;
    qkv_real *g[KC_MAX_IN]; /* NULL for inputs without a gradient */
    int64_t ng[KC_MAX_IN];
} kc_result;

static inline qkv_real *kc_copy(const void *src, int64_t n) {
    qkv_real *d = calloc((size_t)(n ? n : 1), sizeof(qkv_real));
    if (src) memcpy(d, src, sizeof(qkv_real) * (size_t)n);
    return d;
}

static inline kc_result kc_run(tu_forward_fn f, qkv_tensor **in, int n_in, void *user,
                               qkv_kernels kernels, int threads) {
    kc_result r;
    memset(&r, 0, sizeof r);
    const int saved_threads = qkv_get_num_threads();
    qkv_set_num_threads(threads);
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_kernels(ctx, kernels);
    for (int k = 0; k < n_in; k++)
        if (in[k]) in[k]->grad = NULL;
    qkv_tensor *y = f(ctx, in, user);
    if (!y || qkv_ctx_status(ctx) != QKV_OK) {
        qkv_test_fail(__FILE__, __LINE__, "kc_run: forward failed: %s", qkv_last_error());
    } else {
        qkv_tensor *yc = qkv_contiguous(ctx, y);
        r.ny = qkv_tensor_numel(yc);
        r.y = kc_copy(yc->data, r.ny);
        qkv_real *dy = kc_copy(NULL, r.ny);
        tu_fill_uniform(dy, r.ny, -1, 1, 4243);
        qkv_tensor *dyt = qkv_tensor_from(ctx, QKV_REAL, yc->ndim, yc->shape, dy);
        free(dy);
        qkv_status st = qkv_backward_from(ctx, yc, dyt);
        if (st != QKV_OK)
            qkv_test_fail(__FILE__, __LINE__, "kc_run: backward failed: %s", qkv_last_error());
        for (int k = 0; k < n_in && k < KC_MAX_IN; k++) {
            if (!in[k] || !(in[k]->flags & QKV_REQUIRES_GRAD)) continue;
            r.ng[k] = qkv_tensor_numel(in[k]);
            r.g[k] = kc_copy(in[k]->grad, r.ng[k]);
        }
    }
    for (int k = 0; k < n_in; k++)
        if (in[k]) in[k]->grad = NULL; /* it lived in the arena freed below */
    qkv_ctx_free(ctx);
    qkv_set_num_threads(saved_threads);
    return r;
}

static inline void kc_free(kc_result *r) {
    free(r->y);
    for (int k = 0; k < KC_MAX_IN; k++)
        free(r->g[k]);
}

static inline void kc_check(const char *what, tu_forward_fn f, qkv_tensor **in, int n_in,
                            void *user) {
    const double tol = sizeof(qkv_real) == 4 ? 1e-5 : 1e-12;
    kc_result ref = kc_run(f, in, n_in, user, QKV_KERNELS_REF, 1);
    kc_result f1 = kc_run(f, in, n_in, user, QKV_KERNELS_FAST, 1);
    kc_result f2 = kc_run(f, in, n_in, user, QKV_KERNELS_FAST, 2);
    if (ref.y && f1.y && f2.y) {
        double d = tu_max_rel_diff(f1.y, ref.y, ref.ny);
        CHECK_MSG(d <= tol, "%s: fast output differs from reference by %g", what, d);
        CHECK_MSG(memcmp(f1.y, f2.y, sizeof(qkv_real) * (size_t)f1.ny) == 0,
                  "%s: output differs between 1 and 2 threads", what);
        for (int k = 0; k < n_in && k < KC_MAX_IN; k++) {
            if (!ref.g[k]) continue;
            d = tu_max_rel_diff(f1.g[k], ref.g[k], ref.ng[k]);
            CHECK_MSG(d <= tol, "%s: fast gradient of input %d differs from reference by %g", what,
                      k, d);
            CHECK_MSG(memcmp(f1.g[k], f2.g[k], sizeof(qkv_real) * (size_t)f1.ng[k]) == 0,
                      "%s: gradient of input %d differs between 1 and 2 threads", what, k);
        }
    }
    kc_free(&ref);
    kc_free(&f1);
    kc_free(&f2);
}

#endif
