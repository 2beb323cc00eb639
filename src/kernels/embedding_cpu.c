/*
 * embedding_cpu.c: fast embedding kernels.
 *
 * Forward: OpenMP over tokens, one row copy each.
 * Backward: two tokens may share an id, so threads never split the tokens; they split the
 * columns into fixed blocks of EMB_COLS, and each block runs over every token in order. No two
 * threads write the same element, and every element sums its contributions in token order,
 * exactly as the reference does (the results are bit-identical to it).
 */
#include "embedding.h"

#define EMB_GRAIN 16384 /* elements below which a loop stays on one thread */
#define EMB_COLS 64     /* columns per backward block */

static void fwd(int64_t n, int64_t C, const qkv_real *table, const int32_t *ids, qkv_real *y) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (n * C > EMB_GRAIN)
#endif
    for (int64_t i = 0; i < n; i++)
        memcpy(y + i * C, table + (int64_t)ids[i] * C, sizeof(qkv_real) * (size_t)C);
}

static void bwd(int64_t n, int64_t C, const int32_t *ids, const qkv_real *dy, qkv_real *dtable) {
    const int64_t blocks = (C + EMB_COLS - 1) / EMB_COLS;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (n * C > EMB_GRAIN && blocks > 1)
#endif
    for (int64_t blk = 0; blk < blocks; blk++) {
        const int64_t c0 = blk * EMB_COLS, nc = C - c0 < EMB_COLS ? C - c0 : EMB_COLS;
        for (int64_t i = 0; i < n; i++) {
            qkv_real *dst = dtable + (int64_t)ids[i] * C + c0;
            const qkv_real *src = dy + i * C + c0;
            for (int64_t j = 0; j < nc; j++)
                dst[j] += src[j];
        }
    }
}

const qkv_embedding_kernels qkv_embedding_cpu = {fwd, bwd};
