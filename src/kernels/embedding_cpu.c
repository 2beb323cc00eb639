/*
 * embedding_cpu.c: fast embedding kernels.
 *
 * Forward: OpenMP over tokens, one row copy each.
 * Backward: two tokens may share an id, so threads never split the tokens; they split the
 * table: each thread owns a range of table rows and scans all ids (cheap: 4 bytes a token),
 * adding the dy rows of the tokens that hit its range. No two threads write the same row, and
 * every row sums its contributions in token order, exactly as the reference does (the result is
 * bit-identical to it for any thread count). Skewed id distributions can unbalance the threads,
 * never the result.
 */
#include "embedding.h"
#include "rowreduce.h"

#ifdef QKV_WITH_OPENMP
#include <omp.h>
#endif

#define EMB_GRAIN 16384 /* elements below which a loop stays on one thread */

static void fwd(int64_t n, int64_t C, const qkv_real *table, const int32_t *ids, qkv_real *y) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (n * C > EMB_GRAIN)
#endif
    for (int64_t i = 0; i < n; i++)
        memcpy(y + i * C, table + (int64_t)ids[i] * C, sizeof(qkv_real) * (size_t)C);
}

/* dst[c] += src[c], c < C: one token's dy into its table row */
QKV_ROW_INLINE void add_row(int64_t C, const qkv_real *restrict src, qkv_real *restrict dst) {
    QKV_LANE_LOOP(c, C, dst[c] += src[c];);
}

static void bwd(int64_t n, int64_t V, int64_t C, const int32_t *ids, const qkv_real *dy,
                qkv_real *dtable) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel if (n * C > EMB_GRAIN)
#endif
    {
        int64_t t = 0, nt = 1;
#ifdef QKV_WITH_OPENMP
        t = omp_get_thread_num();
        nt = omp_get_num_threads();
#endif
        /* this thread owns table rows [v0, v1) and scans every token, in order */
        const int64_t v0 = V * t / nt, v1 = V * (t + 1) / nt;
        for (int64_t i = 0; i < n; i++)
            if (ids[i] >= v0 && ids[i] < v1) add_row(C, dy + i * C, dtable + (int64_t)ids[i] * C);
    }
}

const qkv_embedding_kernels qkv_embedding_cpu = {fwd, bwd};
