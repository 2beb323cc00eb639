/*
 * kernels/softmax.h: kernel table of the softmax family, over the last dim of x (N, C):
 *   softmax      y = exp(x - m) / s,           s = sum exp(x - m),  m = max x
 *   log_softmax  y = x - m - log s
 *   backward     softmax: dx += y (dy - sum(dy y));  log_softmax: dx += dy - exp(y) sum(dy)
 *   argmax       index of the largest element; ties go to the lowest index; NaN counts as
 *                larger than any number (the first NaN wins), as torch.argmax.
 * A row whose elements are all -inf (fully masked) gives softmax 0, log_softmax -inf and a zero
 * gradient, instead of 0/0. A NaN or +inf in a row makes the row NaN.
 */
#ifndef QKV_KERNELS_SOFTMAX_H
#define QKV_KERNELS_SOFTMAX_H

#include "../core/internal.h"

typedef struct qkv_softmax_kernels {
    void (*fwd)(bool log, int64_t N, int64_t C, const qkv_real *x, qkv_real *y);
    /* dx (N, C) += from y (the forward output) and dy */
    void (*bwd)(bool log, int64_t N, int64_t C, const qkv_real *y, const qkv_real *dy,
                qkv_real *dx);
    /* out (N) = argmax of each row of x (N, C), C >= 1 */
    void (*argmax)(int64_t N, int64_t C, const qkv_real *x, int32_t *out);
} qkv_softmax_kernels;

extern const qkv_softmax_kernels qkv_softmax_ref;
extern const qkv_softmax_kernels qkv_softmax_cpu;

/* The argmax comparison shared by both implementations: is a better than the best so far? */
static inline bool qkv__argmax_better(qkv_real a, qkv_real best) {
    return a > best || (a != a && best == best);
}

#endif
