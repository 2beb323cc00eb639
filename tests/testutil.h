/*
 * testutil.h: helpers shared by the tests: standalone (malloc'd) tensors that survive
 * qkv_ctx_reset, random fills, array comparison, model files round-tripped through a temporary
 * file, and finite-difference gradient checks.
 *
 * Gradient check (the proof behind every op's backward):
 *   analytic:  g = d/dx sum(f(x) * dy) by qkv_backward_from with a random dy;
 *   numeric:   (L(x + eps e_j) - L(x - eps e_j)) / (2 eps) for every element j;
 *   pass when |g_j - n_j| <= atol + rtol * max(|g_j|, |n_j|).
 * Run in the double build (eps 1e-6, rtol 1e-6): in float the check is skipped.
 */
#ifndef QKV_TESTUTIL_H
#define QKV_TESTUTIL_H

#include "harness.h"

#include <stdlib.h>
#include <string.h>

/* m saved to a temporary file and loaded back (the file removed): what a model file holds. NULL
 * (with a failed CHECK) when saving or loading fails. */
qkv_model *tu_model_roundtrip(const qkv_model *m);

/* A tensor owned by the test (malloc'd, not in the arena), data filled uniform in [lo, hi). */
qkv_tensor *tu_tensor(qkv_dtype dt, int ndim, const int64_t *shape);
qkv_tensor *tu_rand(int ndim, const int64_t *shape, double lo, double hi, uint64_t seed);
qkv_tensor *tu_ids(int ndim, const int64_t *shape, int32_t lo, int32_t hi, uint64_t seed);
void tu_free(qkv_tensor *t);
void tu_fill_uniform(qkv_real *x, int64_t n, double lo, double hi, uint64_t seed);

/* A new context with the run's kernel set (harness --kernels) and seed 1234. */
qkv_ctx *tu_ctx(void);

/* max_i |a_i - b_i| / max(1, |b_i|) */
double tu_max_rel_diff(const qkv_real *a, const qkv_real *b, int64_t n);

typedef qkv_tensor *(*tu_forward_fn)(qkv_ctx *ctx, qkv_tensor **in, void *user);

typedef struct tu_gradcheck_opts {
    double eps, rtol, atol;
    bool training; /* run the forward in training mode (dropout on) */
} tu_gradcheck_opts;

tu_gradcheck_opts tu_gradcheck_default(void);

/* Check the gradients of every input with QKV_REQUIRES_GRAD (tu tensors or parameters).
 * Reports mismatches through CHECK; returns true when all match. `what` names the case. */
bool tu_gradcheck(const char *what, tu_forward_fn f, qkv_tensor **in, int n_in, void *user,
                  const tu_gradcheck_opts *opts);

/* Whether f is smooth at the inputs on the finite-difference scale: along a random direction over
 * every input that requires a gradient, the central differences with steps eps and 2 eps agree to
 * rtol. ReLU kinks and near-zero denominators within a few eps of the point make them disagree;
 * tests that cannot place their inputs by hand use this to pick a point where the check is valid. */
bool tu_smooth_at(tu_forward_fn f, qkv_tensor **in, int n_in, void *user, double eps, double rtol);

/* An op call that must fail: NULL result, the context's status st, and a message containing both
 * n1 and n2 (typically the op name and the offending shape); the context is reset afterwards. */
#define TU_EXPECT_FAIL(ctx, call, st, n1, n2)                                                     \
    do {                                                                                          \
        CHECK((call) == NULL);                                                                    \
        CHECK_ERR(qkv_ctx_status(ctx), st, n1);                                                   \
        CHECK_MSG(strstr(qkv_last_error(), n2), "message '%s' lacks '%s'", qkv_last_error(), n2); \
        qkv_ctx_reset(ctx);                                                                       \
    } while (0)

/* Skip the calling test in the float build. */
#ifdef QKV_DOUBLE
#define TU_NEED_DOUBLE() ((void)0)
#else
#define TU_NEED_DOUBLE() SKIP("finite differences run in the double build")
#endif

#endif
