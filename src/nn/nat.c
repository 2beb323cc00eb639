/*
 * nat.c: the parts of a non-autoregressive encoder-decoder (qkv_model_config.nat) that the
 * autoregressive model does not have: the target-length head, its parameters and their
 * initialisation. (The decoder itself is model.c's, with the causal mask off.)
 *
 * Length prediction from mean-pooled encoder states, as fairseq's NAT models do it
 * (NATransformerModel.forward_length, which its CMLM / Mask-Predict implementation inherits):
 *
 *   h_b = (1 / S_b) sum_{s < S_b} memory[b, s]          (S_b: the non-padded source positions)
 *   length_logits[b] = W h_b + c                        W (max_len + 1, C), c (max_len + 1)
 *
 * class L is target length L (0 .. max_len; 0 is never a target). Ghazvininejad et al. (2019)
 * instead prepend a LENGTH token to the encoder input and read its final state. Pooling keeps the
 * encoder exactly the autoregressive model's (same inputs, positions and attention; any encoder
 * front-end works unchanged) and is differentiable through every encoder state; the gradient of
 * the length loss reaches the encoder, as in fairseq's default (sg_length_pred off).
 * Parameters: length_head.weight, length_head.bias (PyTorch nn.Linear(C, max_len + 1)),
 * initialised as the generator: weight U(-1/sqrt(C), 1/sqrt(C)), bias 0.
 *
 * Dims: B batch, S source length, C d_model, K = max_len + 1 length classes.
 */
#include "nn_internal.h"

#include <math.h>

qkv_status qkv__nat_register(qkv_model *m) {
    const int64_t C = m->cfg.d_model, K = (int64_t)m->cfg.max_len + 1;
    qkv_status st =
        qkv_params_add(m->params, "length_head.weight", 2, (int64_t[]){K, C}, &m->length_w);
    if (!st) st = qkv_params_add(m->params, "length_head.bias", 1, (int64_t[]){K}, &m->length_b);
    return st;
}

void qkv__nat_init(qkv_model *m, uint64_t seed) {
    const double a = 1 / sqrt((double)m->cfg.d_model);
    qkv_init_uniform(m->length_w, -a, a, seed, 1005);
    qkv_init_constant(m->length_b, 0);
}

qkv_tensor *qkv_model_length_logits(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *memory,
                                    qkv_tensor *src) {
    if (!QKV_OP_BEGIN(ctx, "model_length_logits", memory, src)) return NULL;
    if (!m || !m->cfg.nat || !m->length_w)
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG,
                        "model_length_logits: needs a non-autoregressive model (nat)");
    if (!qkv__check_i32(ctx, "model_length_logits", src, "src")) return NULL;
    char b0[96], b1[96];
    if (src->ndim != 2 || memory->ndim != 3 || memory->shape[0] != src->shape[0] ||
        memory->shape[1] != src->shape[1] || memory->shape[2] != m->cfg.d_model)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE,
                        "model_length_logits: memory %s does not match src %s and d_model %d",
                        qkv_tensor_shape_str(memory, b0, sizeof b0),
                        qkv_tensor_shape_str(src, b1, sizeof b1), m->cfg.d_model);
    const int64_t B = src->shape[0], S = src->shape[1];
    /* (B, 1, S) weights: 1 / S_b on the non-padded positions of row b, 0 elsewhere */
    qkv_tensor *w = qkv__alloc(ctx, QKV_REAL, 3, (int64_t[]){B, 1, S});
    if (!w) return NULL;
    const int32_t *id = qkv__idata(src);
    for (int64_t b = 0; b < B; b++) {
        int64_t len = 0;
        for (int64_t s = 0; s < S; s++)
            len += id[b * S + s] != m->cfg.pad_id;
        for (int64_t s = 0; s < S; s++)
            qkv__data(w)[b * S + s] =
                id[b * S + s] == m->cfg.pad_id ? 0 : (qkv_real)(1.0 / (double)len);
    }
    qkv_tensor *pooled = qkv_reshape(ctx, qkv_matmul(ctx, w, memory, false, false), 2,
                                     (int64_t[]){B, m->cfg.d_model});
    return qkv__finite_output(ctx, "model_length_logits",
                              qkv_linear(ctx, pooled, m->length_w, m->length_b)); /* (B, max_len + 1) */
}
