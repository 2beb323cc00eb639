/* ops/softmax.h: softmax and log-softmax over the last dim; fused softmax + cross-entropy. */
#ifndef QKV_OPS_SOFTMAX_H
#define QKV_OPS_SOFTMAX_H
#include "../qkv_graph.h"
#ifdef __cplusplus
extern "C" {
#endif

QKV_API qkv_tensor *qkv_softmax(qkv_ctx *ctx, qkv_tensor *x);
QKV_API qkv_tensor *qkv_log_softmax(qkv_ctx *ctx, qkv_tensor *x);

/* Mean cross-entropy of logits (N, V) against targets I32 (N), as torch.nn.functional
 * .cross_entropy(logits, targets, ignore_index, label_smoothing): rows whose target equals
 * ignore_index are skipped, the mean is over the remaining rows (0 when none remain); with
 * smoothing eps the target distribution is (1 - eps) one-hot + eps / V. -> scalar.
 * A target outside [0, V) that is not ignore_index is an error naming the row. */
QKV_API qkv_tensor *qkv_cross_entropy(qkv_ctx *ctx, qkv_tensor *logits, qkv_tensor *targets,
                                      int32_t ignore_index, double label_smoothing);

#ifdef __cplusplus
}
#endif
#endif
