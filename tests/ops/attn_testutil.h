/*
 * attn_testutil.h: helpers shared by the attention tests (test_attention_*.c): a catalogue of
 * masks covering every rule, inputs kept away from ReLU kinks, and the reference-vs-fast /
 * 1-vs-2-threads comparison of an op's forward and backward.
 */
#ifndef QKV_ATTN_TESTUTIL_H
#define QKV_ATTN_TESTUTIL_H

#include "testutil.h"

/* One mask of the catalogue, with the I32 tensors it owns (malloc'd, survive ctx resets). */
typedef struct at_mask {
    const char *name;
    bool use; /* false: the op gets mask = NULL */
    qkv_mask m;
    qkv_tensor *padding, *allowed;
} at_mask;

/* Kinds: 0 NULL, 1 qkv_mask_none(), 2 causal, 3 window left 1 / right 0, 4 window right 1
 * only, 5 diagonal window (0, 0), 6 key padding (odd batches fully padded: masked rows),
 * 7 allowed (T, S) with row 0 empty, 8 allowed (B, T, S), 9 all rules combined. */
#define AT_MASK_KINDS 10
at_mask at_mask_make(int kind, int64_t B, int64_t T, int64_t S, uint64_t seed);
void at_mask_free(at_mask *m);
static inline const qkv_mask *at_mask_ptr(const at_mask *m) {
    return m->use ? &m->m : NULL;
}

/* Uniform with |x| in [0.1, 1.1), random sign: away from the ReLU kink at 0. */
qkv_tensor *at_rand_away(int ndim, const int64_t *shape, uint64_t seed);

/* Run f with the reference and the fast kernels (forward, then backward from a fixed random dy)
 * and compare output and input gradients (float 1e-5, double 1e-12 relative); run the fast
 * kernels with 1 and 2 threads and require bit-identical results. */
void at_compare_kernels(const char *what, tu_forward_fn f, qkv_tensor **in, int n_in, void *user);
/* The same with another float tolerance (the double one stays 1e-12). */
void at_compare_kernels_tol(const char *what, tu_forward_fn f, qkv_tensor **in, int n_in,
                            void *user, double float_tol);

/* tu_gradcheck with the fast and then the reference kernels (both are proven against finite
 * differences, not only against each other). */
void at_gradcheck(const char *what, tu_forward_fn f, qkv_tensor **in, int n_in, void *user,
                  const tu_gradcheck_opts *opts);

/* An op call that must return NULL with status st and a message containing needle. */
#define AT_EXPECT_FAIL(ctx, call, st, needle)                                                      \
    do {                                                                                           \
        qkv_ctx_reset(ctx);                                                                        \
        qkv_tensor *at_r_ = (call);                                                                \
        CHECK_MSG(at_r_ == NULL && qkv_ctx_status(ctx) == (st) &&                                  \
                      strstr(qkv_last_error(), (needle)) != NULL,                                  \
                  "%s: got %s, status '%s', message '%s'; expected '%s' containing '%s'", #call,   \
                  at_r_ ? "a tensor" : "NULL", qkv_status_str(qkv_ctx_status(ctx)),                \
                  qkv_last_error(), qkv_status_str(st), (needle));                                 \
    } while (0)

#endif
