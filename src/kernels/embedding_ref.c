/* embedding_ref.c: the reference (oracle) embedding kernels: plain loops. */
#include "embedding.h"

static void fwd(int64_t n, int64_t C, const qkv_real *table, const int32_t *ids, qkv_real *y) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < C; c++)
            y[i * C + c] = table[(int64_t)ids[i] * C + c];
}

static void bwd(int64_t n, int64_t V, int64_t C, const int32_t *ids, const qkv_real *dy,
                qkv_real *dtable) {
    (void)V;
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < C; c++)
            dtable[(int64_t)ids[i] * C + c] += dy[i * C + c];
}

const qkv_embedding_kernels qkv_embedding_ref = {fwd, bwd};
