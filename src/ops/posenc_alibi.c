/*
 * posenc_alibi.c: ALiBi, attention with linear biases (Press et al. 2022).
 *
 * Head h adds -m_h |i - j| to the score of query i and key j. The slopes are the geometric
 * sequence of the paper's reference code (get_slopes in github.com/ofirpress/attention_with_
 * linear_biases):
 *   H a power of two:  m_h = 2^(-8 (h+1) / H)            (H = 8: 1/2, 1/4, ..., 1/256)
 *   otherwise:         n = 2^floor(log2 H); slopes(n) followed by slopes(2n)[0::2][:H-n],
 *                      i.e. m_{n+k} = 2^(-8 (2k+1) / (2n)) for k < H - n.
 * Each slope is exp2 of its exponent in double, rounded once (the reference code's
 * start * ratio**i gives the same values up to the last double bit).
 *
 * i is the query index (the T rows), j the key index (the S columns); with qkv_alibi_bias_at,
 * query i sits at position query_offset + i (incremental decoding: query_offset = S - T). In a
 * causal model only j <= i is used, where -m (i - j) = m j - m i and the row constant -m i
 * cancels in the softmax; the symmetric |i - j| form also serves bidirectional encoders.
 * A constant: nothing is recorded and the output never requires a gradient.
 */
#include "../core/internal.h"
#include "../kernels/backend.h"

#include <math.h>

qkv_status qkv_alibi_slopes(int64_t H, qkv_real *slopes) {
    if (H < 1 || !slopes)
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "alibi_slopes: need H >= 1 heads and a slopes array "
                         "(H = %lld, slopes %s)",
                         (long long)H, slopes ? "given" : "NULL");
    int64_t n = 1; /* the largest power of two <= H */
    while (n <= H / 2)
        n *= 2;
    for (int64_t h = 0; h < n; h++)
        slopes[h] = (qkv_real)exp2(-8.0 * (double)(h + 1) / (double)n);
    for (int64_t k = 0; k < H - n; k++) /* slopes(2n) at even indices 2k: exponent 8 (2k+1) / 2n */
        slopes[n + k] = (qkv_real)exp2(-8.0 * (double)(2 * k + 1) / (double)(2 * n));
    return QKV_OK;
}

qkv_tensor *qkv_alibi_bias_at(qkv_ctx *ctx, int64_t H, int64_t T, int64_t S, int64_t query_offset) {
    if (!ctx) return QKV_ERROR(QKV_ERR_INVALID_ARG, "alibi_bias: context is NULL"), NULL;
    if (ctx->status) return NULL;
    if (H < 1 || T < 0 || S < 0 || query_offset < 0 || query_offset > INT64_MAX - T)
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG,
                        "alibi_bias: need H >= 1 and T, S, query_offset >= 0; got H = %lld, "
                        "T = %lld, S = %lld, query_offset = %lld",
                        (long long)H, (long long)T, (long long)S, (long long)query_offset);
    qkv_tensor *bias = qkv__alloc(ctx, QKV_REAL, 3, (int64_t[]){H, T, S}); /* (H, T, S) */
    qkv_real *m = qkv__scratch(ctx, sizeof(qkv_real) * (size_t)H);
    if (!bias || !m) return NULL;
    qkv_alibi_slopes(H, m);
    ctx->backend->posenc->alibi(H, T, S, query_offset, m, qkv__data(bias));
    return bias;
}

qkv_tensor *qkv_alibi_bias(qkv_ctx *ctx, int64_t H, int64_t T, int64_t S) {
    return qkv_alibi_bias_at(ctx, H, T, S, 0);
}
