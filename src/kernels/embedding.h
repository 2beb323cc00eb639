/*
 * kernels/embedding.h: kernel table of the embedding family (gather rows of a table, and the
 * scatter-add back). ids are already checked to lie in [0, V).
 *   y[n, :] = table[ids[n], :]            dtable[ids[n], :] += dy[n, :]
 * Every table row receives its tokens' contributions in token order n = 0, 1, ..., in both
 * implementations: repeated ids accumulate in the same order whatever the thread count.
 */
#ifndef QKV_KERNELS_EMBEDDING_H
#define QKV_KERNELS_EMBEDDING_H

#include "../core/internal.h"

typedef struct qkv_embedding_kernels {
    /* y (n, C) = table (V, C) rows ids (n) */
    void (*fwd)(int64_t n, int64_t C, const qkv_real *table, const int32_t *ids, qkv_real *y);
    /* dtable (V, C) += scatter of dy (n, C) by ids (n) */
    void (*bwd)(int64_t n, int64_t V, int64_t C, const int32_t *ids, const qkv_real *dy,
                qkv_real *dtable);
} qkv_embedding_kernels;

extern const qkv_embedding_kernels qkv_embedding_ref;
extern const qkv_embedding_kernels qkv_embedding_cpu;

#endif
