/* ops/embedding.h: table lookup (gather rows); backward scatter-adds into the table. */
#ifndef QKV_OPS_EMBEDDING_H
#define QKV_OPS_EMBEDDING_H
#include "../qkv_tensor.h"
#ifdef __cplusplus
extern "C" {
#endif

/* table (V, C), ids I32 (...) with at most 3 dims and 0 <= id < V  ->  (..., C). An id out of
 * range is an error naming the id and its flat position. ids never carry a gradient (an error if
 * marked so); the table's gradient is a scatter-add, deterministic for any thread count.
 * Also the learned absolute positional encoding: ids = 0..T-1. */
QKV_API qkv_tensor *qkv_embedding(qkv_ctx *ctx, qkv_tensor *table, qkv_tensor *ids);
/* I32 tensor (n) holding start, start+1, ..., start+n-1 (positions for learned encodings);
 * n >= 0 and every value within I32. No gradient. */
QKV_API qkv_tensor *qkv_arange(qkv_ctx *ctx, int64_t start, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
