/*
 * nat_loss.c: the training objective of a non-autoregressive (conditional masked LM) model:
 * which target tokens a step masks, and the loss over them (qkv_train.h).
 *
 * Ghazvininejad, Levy, Liu & Zettlemoyer (2019), "Mask-Predict: Parallel Decoding of Conditional
 * Masked Language Models", section 3.1: for a target Y of L tokens, sample n uniformly from
 * 1 .. L, mask n positions chosen uniformly, and predict the masked tokens Y_mask from the source
 * X and the observed tokens Y_obs:
 *
 *   L_tok = - sum_{b, t masked} CE_eps(p(. | X_b, Y_obs,b), y_bt) / #masked   (label smoothing eps)
 *   L_len = - (1 / B) sum_b log p_len(L_b | X_b)
 *   loss  = L_tok + length_weight * L_len
 *
 * as fairseq's cmlm_transformer + nat_loss (word_ins with label smoothing, length factor 0.1).
 * The sampler is fairseq's _random_mask in counter-based form: n_b = 1 + floor(u_b L_b) and the
 * n_b positions of smallest random key, every number a Philox draw at the trainer's (seed, step),
 * so the masks are a pure function of the batch and the RNG position.
 *
 * Dims: B batch, S source length, T target width, V target vocabulary.
 */
#include "trainer_internal.h"

#include <stdlib.h>

#define NAT_COUNT_STREAM 0x4E41u /* n_b */
#define NAT_KEY_STREAM 0x4E42u   /* position keys */

/* The number of tokens of a NAT target row (tokens then padding), or -1 when it has none or a
 * token follows padding (*bad: that position). */
static int32_t row_length(const int32_t *row, int32_t T, int32_t pad, int32_t *bad) {
    int32_t L = 0;
    while (L < T && row[L] != pad)
        L++;
    for (int32_t t = L; t < T; t++)
        if (row[t] != pad) {
            *bad = t;
            return -1;
        }
    *bad = 0;
    return L > 0 ? L : -1;
}

qkv_status qkv_nat_sample_mask(const int32_t *tgt, int32_t B, int32_t T, int32_t pad_id,
                               uint64_t seed, uint64_t step, bool *masked) {
    if (!tgt || !masked) return QKV_ERROR(QKV_ERR_INVALID_ARG, "nat_sample_mask: NULL array");
    if (B < 1 || T < 1)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "nat_sample_mask: empty batch (%d x %d)", B, T);
    float *key = malloc(sizeof(float) * (size_t)T);
    if (!key) return QKV_ERROR(QKV_ERR_OOM, "nat_sample_mask: out of memory");
    qkv_status st = QKV_OK;
    for (int32_t b = 0; b < B && !st; b++) {
        const int32_t *row = tgt + (int64_t)b * T;
        bool *mk = masked + (int64_t)b * T;
        int32_t bad = 0;
        const int32_t L = row_length(row, T, pad_id, &bad);
        if (L < 0) {
            st = QKV_ERROR(QKV_ERR_INVALID_ARG, "nat_sample_mask: target row %d %s", b,
                           bad ? "has a token after padding" : "has no tokens");
            break;
        }
        const double u = qkv_rng_uniform(seed, step, NAT_COUNT_STREAM, (uint64_t)b);
        const int32_t n = 1 + (int32_t)(u * L); /* u < 1: 1 .. L */
        for (int32_t t = 0; t < L; t++)
            key[t] = qkv_rng_uniform(seed, step, NAT_KEY_STREAM, (uint64_t)b << 32 | (uint64_t)t);
        for (int32_t t = 0; t < T; t++) {
            /* the rank of position t among the row's keys, ties to the lower position */
            int32_t rank = 0;
            for (int32_t s = 0; t < L && s < L && rank < n; s++)
                rank += key[s] < key[t] || (key[s] == key[t] && s < t);
            mk[t] = t < L && rank < n;
        }
    }
    free(key);
    return st;
}

qkv_tensor *qkv_nat_loss(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *src, qkv_tensor *tgt,
                         const bool *masked, double label_smoothing, double length_weight,
                         qkv_tensor **token_ce_out, qkv_tensor **length_ce_out) {
    if (token_ce_out) *token_ce_out = NULL;
    if (length_ce_out) *length_ce_out = NULL;
    if (!QKV_OP_BEGIN(ctx, "nat_loss", src, tgt)) return NULL;
    if (!m || !m->cfg.nat)
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG,
                        "nat_loss: needs a non-autoregressive model (nat)");
    if (!masked) return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "nat_loss: masked is NULL");
    if (!qkv__check_i32(ctx, "nat_loss", tgt, "tgt") ||
        !qkv__check_i32(ctx, "nat_loss", src, "src"))
        return NULL;
    char b0[96], b1[96];
    if (tgt->ndim != 2 || src->ndim != 2 || tgt->shape[0] != src->shape[0] || tgt->shape[1] < 1)
        return QKV_FAIL(
            ctx, QKV_ERR_SHAPE, "nat_loss: tgt %s and src %s are not (B, T) and (B, S) batches",
            qkv_tensor_shape_str(tgt, b0, sizeof b0), qkv_tensor_shape_str(src, b1, sizeof b1));
    const int32_t pad = m->cfg.pad_id, mask_id = m->cfg.mask_id;
    const int64_t B = tgt->shape[0], T = tgt->shape[1], N = B * T;
    qkv_tensor *tgt_in =
        qkv__alloc(ctx, QKV_I32, 2, (int64_t[]){B, T});    /* observed tokens and masks */
    qkv_tensor *targets = qkv__alloc(ctx, QKV_I32, 1, &N); /* masked tokens, else pad */
    qkv_tensor *lengths = qkv__alloc(ctx, QKV_I32, 1, &B); /* L_b */
    if (!tgt_in || !targets || !lengths) return NULL;
    for (int64_t b = 0; b < B; b++) {
        const int32_t *row = qkv__idata(tgt) + b * T;
        int32_t bad = 0;
        const int32_t L = row_length(row, (int32_t)T, pad, &bad);
        if (L < 0)
            return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "nat_loss: target row %lld %s", (long long)b,
                            bad ? "has a token after padding" : "has no tokens");
        for (int64_t t = 0; t < T; t++) {
            const bool mk = masked[b * T + t];
            if (row[t] == mask_id)
                return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG,
                                "nat_loss: target row %lld, position %lld holds mask_id %d",
                                (long long)b, (long long)t, mask_id);
            if (mk && t >= L)
                return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG,
                                "nat_loss: row %lld masks padding position %lld", (long long)b,
                                (long long)t);
            qkv__idata(tgt_in)[b * T + t] = mk ? mask_id : row[t];
            qkv__idata(targets)[b * T + t] = mk ? row[t] : pad;
        }
        qkv__idata(lengths)[b] = L;
    }
    qkv_tensor *memory = qkv_model_encode(ctx, m, src, NULL);
    qkv_tensor *logits = qkv_model_decode(ctx, m, tgt_in, memory, src, NULL, NULL); /* (B, T, V) */
    const int64_t V = m->cfg.tgt_vocab;
    qkv_tensor *token_ce = qkv_cross_entropy(ctx, qkv_reshape(ctx, logits, 2, (int64_t[]){N, V}),
                                             targets, pad, label_smoothing);
    qkv_tensor *length_ce =
        qkv_cross_entropy(ctx, qkv_model_length_logits(ctx, m, memory, src), lengths, -1, 0);
    qkv_tensor *loss = qkv_add(ctx, token_ce, qkv_scale(ctx, length_ce, length_weight));
    if (!loss) return NULL;
    if (token_ce_out) *token_ce_out = token_ce;
    if (length_ce_out) *length_ce_out = length_ce;
    return loss;
}
