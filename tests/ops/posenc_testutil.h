/*
 * posenc_testutil.h: what the positional-encoding tests share: one forward + backward run with
 * a chosen kernel set and thread count (output and input gradients copied out), and the check
 * that the fast kernels match the reference ones and are bit-identical with 1 and 2 threads.
 */
#ifndef QKV_TEST_POSENC_UTIL_H
#define QKV_TEST_POSENC_UTIL_H

#include "testutil.h"

#define PE_MAX_IN 4

typedef struct pe_result {
    int n;                         /* 1 + number of inputs */
    int64_t len[1 + PE_MAX_IN];    /* element counts */
    qkv_real *data[1 + PE_MAX_IN]; /* [0]: the output, [1 + k]: gradient of input k or NULL */
} pe_result;

static inline qkv_real *pe_copy(const void *src, int64_t n) {
    qkv_real *d = malloc(sizeof(qkv_real) * (size_t)(n ? n : 1));
    if (n) memcpy(d, src, sizeof(qkv_real) * (size_t)n);
    return d;
}

/* y = f(in), then the gradients of sum(y * dy) for a fixed random dy (when an input requires
 * one). The inputs are test-owned tensors; their gradient pointers are cleared afterwards. */
static inline pe_result pe_run(tu_forward_fn f, qkv_tensor **in, int n_in, void *user,
                               qkv_kernels kernels, int threads) {
    pe_result r;
    memset(&r, 0, sizeof r);
    r.n = 1 + n_in;
    const int saved_threads = qkv_get_num_threads();
    qkv_set_num_threads(threads);
    qkv_ctx_params p = qkv_ctx_default_params();
    p.kernels = kernels;
    p.seed = 1234;
    qkv_ctx *ctx = NULL;
    CHECK_OK(qkv_ctx_new(&p, &ctx));
    for (int k = 0; k < n_in; k++)
        in[k]->grad = NULL;
    qkv_tensor *y = f(ctx, in, user);
    CHECK_MSG(y && qkv_ctx_status(ctx) == QKV_OK, "forward failed: %s", qkv_last_error());
    if (y && qkv_ctx_status(ctx) == QKV_OK) {
        r.len[0] = qkv_tensor_numel(y);
        r.data[0] = pe_copy(y->data, r.len[0]);
        if (y->flags & QKV_REQUIRES_GRAD) {
            qkv_real *dy = malloc(sizeof(qkv_real) * (size_t)(r.len[0] ? r.len[0] : 1));
            tu_fill_uniform(dy, r.len[0], -1, 1, 4242);
            qkv_tensor *dyt = qkv_tensor_from(ctx, QKV_REAL, y->ndim, y->shape, dy);
            CHECK_OK(qkv_backward_from(ctx, y, dyt));
            free(dy);
            for (int k = 0; k < n_in; k++) {
                if (!in[k]->grad) continue;
                r.len[1 + k] = qkv_tensor_numel(in[k]);
                r.data[1 + k] = pe_copy(in[k]->grad, r.len[1 + k]);
            }
        }
    }
    for (int k = 0; k < n_in; k++)
        in[k]->grad = NULL;
    qkv_ctx_free(ctx);
    qkv_set_num_threads(saved_threads);
    return r;
}

static inline void pe_free(pe_result *r) {
    for (int k = 0; k < r->n; k++)
        free(r->data[k]);
}

/* Fast vs reference, forward and every gradient, and the fast kernels bit-identical with 1 and
 * 2 threads. `reduction` is the longest sum behind a compared value (1 when none): the fast
 * kernels may sum in qkv_real (GEMM), so the tolerance grows with it as in test_dense: float
 * 1e-5 sqrt(n + 1), double 1e-12 (n + 1), relative (tu_max_rel_diff). Returns the number of
 * compared gradients. */
static inline int pe_check_kernels(const char *what, tu_forward_fn f, qkv_tensor **in, int n_in,
                                   void *user, int64_t reduction) {
    pe_result ref = pe_run(f, in, n_in, user, QKV_KERNELS_REF, 1);
    pe_result f1 = pe_run(f, in, n_in, user, QKV_KERNELS_FAST, 1);
    pe_result f2 = pe_run(f, in, n_in, user, QKV_KERNELS_FAST, 2);
    const double tol = sizeof(qkv_real) == 4 ? 1e-5 * sqrt((double)reduction + 1)
                                             : 1e-12 * (double)(reduction + 1);
    int grads = 0;
    for (int k = 0; k < ref.n; k++) {
        CHECK_MSG((ref.data[k] != NULL) == (f1.data[k] != NULL) &&
                      (f1.data[k] != NULL) == (f2.data[k] != NULL),
                  "%s: slot %d present in some runs only", what, k);
        if (!ref.data[k] || !f1.data[k] || !f2.data[k]) continue;
        grads += k > 0;
        const double d = tu_max_rel_diff(f1.data[k], ref.data[k], ref.len[k]);
        CHECK_MSG(d <= tol, "%s: %s %d: fast differs from reference by %g", what,
                  k ? "gradient of input" : "output", k - 1, d);
        CHECK_MSG(memcmp(f1.data[k], f2.data[k], sizeof(qkv_real) * (size_t)ref.len[k]) == 0,
                  "%s: %s %d differs between 1 and 2 threads", what,
                  k ? "gradient of input" : "output", k - 1);
    }
    pe_free(&ref);
    pe_free(&f1);
    pe_free(&f2);
    return grads;
}

/* A call that must fail: NULL result, the given sticky status and a message naming the op and
 * the problem. The context is reset first (clearing the sticky error), so the inputs must be
 * test-owned (tu_*) tensors. */
#define PE_CHECK_FAILS(ctx, expr, status, needle1, needle2)                                        \
    do {                                                                                           \
        qkv_ctx_reset(ctx);                                                                        \
        qkv_clear_error();                                                                         \
        const void *pe_r_ = (expr);                                                                \
        CHECK_MSG(pe_r_ == NULL, "%s returned a tensor", #expr);                                   \
        CHECK_MSG(qkv_ctx_status(ctx) == (status), "%s: status %s, expected %s", #expr,            \
                  qkv_status_str(qkv_ctx_status(ctx)), qkv_status_str(status));                    \
        CHECK_MSG(strstr(qkv_last_error(), (needle1)) && strstr(qkv_last_error(), (needle2)),      \
                  "%s: message '%s' lacks '%s' / '%s'", #expr, qkv_last_error(), (needle1),        \
                  (needle2));                                                                      \
    } while (0)

#endif
