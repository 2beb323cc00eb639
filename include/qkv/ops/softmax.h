/* ops/softmax.h: softmax, log-softmax and argmax over the last dim; fused softmax +
 * cross-entropy. */
#ifndef QKV_OPS_SOFTMAX_H
#define QKV_OPS_SOFTMAX_H
#include "../qkv_tensor.h"
#ifdef __cplusplus
extern "C" {
#endif

/* Over the last dim of x (..., C), with the row max subtracted (stable). A row whose elements
 * are all -inf (fully masked) gives softmax 0 and log_softmax -inf, with a zero gradient (PyTorch
 * gives NaN); a NaN or +inf in a row makes that row NaN. */
QKV_API qkv_tensor *qkv_softmax(qkv_ctx *ctx, qkv_tensor *x);
QKV_API qkv_tensor *qkv_log_softmax(qkv_ctx *ctx, qkv_tensor *x);
/* Index of the largest element of each row of x (..., C), C >= 1 -> I32 (...). Ties go to the
 * lowest index; NaN counts as the largest (the first NaN wins), as torch.argmax. Not
 * differentiable: an error when x requires a gradient and gradients are enabled. */
QKV_API qkv_tensor *qkv_argmax(qkv_ctx *ctx, qkv_tensor *x);

/* Mean cross-entropy of logits (N, V) against targets I32 (N), as torch.nn.functional
 * .cross_entropy(logits, targets, ignore_index, label_smoothing): rows whose target equals
 * ignore_index are skipped, the mean is over the remaining rows; with smoothing eps in [0, 1]
 * the target distribution is (1 - eps) one-hot + eps / V. -> scalar.
 * When no row remains the loss is 0 with zero gradients (PyTorch gives NaN).
 * A target outside [0, V) that is not ignore_index is an error naming the row and the value. */
QKV_API qkv_tensor *qkv_cross_entropy(qkv_ctx *ctx, qkv_tensor *logits, qkv_tensor *targets,
                                      int32_t ignore_index, double label_smoothing);

#ifdef __cplusplus
}
#endif
#endif
