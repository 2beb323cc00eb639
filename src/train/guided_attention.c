/*
 * guided_attention.c: the guided attention loss of Tachibana, Uenoyama & Aihara (2018), "Efficiently
 * trainable text-to-speech system based on deep convolutional networks with guided attention":
 *
 *   W_ts = 1 - exp(-(s / S_b - t / T_b)^2 / (2 g^2)),   loss = mean_{maps, heads, valid t, s} A_ts W_ts
 *
 * for cross-attention maps A (B, H, T, S) and true lengths S_b, T_b. W is a constant (no
 * gradient); the loss is composed from qkv_mul and qkv_sum, so its gradient comes from the tape.
 * Cells outside the true lengths (padding) get weight 0.
 */
#include "../core/internal.h"

#include <math.h>

qkv_tensor *qkv_guided_attention_loss(qkv_ctx *ctx, qkv_tensor *const *maps, int n_maps, const int32_t *src_len,
                                      const int32_t *tgt_len, double sigma) {
    if (!ctx || ctx->status) return NULL;
    if (!maps || n_maps < 1 || !src_len || !tgt_len || !(sigma > 0))
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "guided_attention: needs maps, lengths and sigma > 0 (got %g)", sigma);
    if (!qkv__op_begin(ctx, "guided_attention", __FILE__, __LINE__, n_maps, maps)) return NULL;
    const qkv_tensor *a0 = maps[0];
    char buf[96];
    if (a0->ndim != 4)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "guided_attention: map %s is not (B, H, T, S)", qkv_tensor_shape_str(a0, buf, sizeof buf));
    const int64_t B = a0->shape[0], H = a0->shape[1], T = a0->shape[2], S = a0->shape[3];
    for (int k = 1; k < n_maps; k++)
        if (!qkv_tensor_same_shape(maps[k], a0))
            return QKV_FAIL(ctx, QKV_ERR_SHAPE, "guided_attention: map %d %s differs from map 0", k,
                            qkv_tensor_shape_str(maps[k], buf, sizeof buf));
    int64_t cells = 0;
    for (int64_t b = 0; b < B; b++) {
        if (src_len[b] < 0 || src_len[b] > S || tgt_len[b] < 0 || tgt_len[b] > T)
            return QKV_FAIL(ctx, QKV_ERR_SHAPE, "guided_attention: row %lld lengths (%d, %d) exceed the map (%lld, %lld)",
                            (long long)b, tgt_len[b], src_len[b], (long long)T, (long long)S);
        cells += (int64_t)src_len[b] * tgt_len[b];
    }
    qkv_tensor *w = qkv__alloc(ctx, QKV_REAL, 4, (int64_t[]){B, 1, T, S}); /* W / normaliser */
    if (!w) return NULL;
    const double g2 = 2 * sigma * sigma, norm = cells ? 1.0 / ((double)cells * (double)H * n_maps) : 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t s = 0; s < S; s++) {
                const bool valid = t < tgt_len[b] && s < src_len[b];
                const double d = valid ? (double)s / src_len[b] - (double)t / tgt_len[b] : 0;
                qkv__data(w)[(b * T + t) * S + s] = valid ? (qkv_real)((1 - exp(-d * d / g2)) * norm) : 0;
            }
    qkv_tensor *sum = NULL;
    for (int k = 0; k < n_maps; k++) {
        qkv_tensor *term = qkv_sum(ctx, qkv_mul(ctx, maps[k], w));
        sum = sum ? qkv_add(ctx, sum, term) : term;
    }
    return sum;
}
