/*
 * qkv_train.h: training a qkv_model: one optimiser step over a batch (teacher forcing with
 * label-smoothed cross-entropy, dropout, gradient accumulation, clipping, AdamW with a schedule),
 * scheduled sampling, guided attention, a moving average of the weights (ema_decay), and
 * checkpoints that resume bit-identically.
 *
 * A batch is plain padded I32 arrays (pad = the model's pad_id):
 *   encoder-decoder  src (B, S), tgt_in (B, T) = BOS + target, tgt_out (B, T) = target + EOS
 *   encoder, token   src (B, S), labels (B, S) (QKV_NO_LABEL where there is no label)
 *   encoder, pooled  src (B, S), labels (B)
 *                    (either with feature inputs: features (B, S, n_features), qkv_model.h)
 *   decoder-only     tokens (B, T) in src; the targets are the tokens shifted left (tgt_out)
 *   image encoder    pixels (B, H_img, W_img, Ch) real (no src), image_shape, labels (B)
 *   non-autoregressive encoder-decoder (model nat)
 *                    src (B, S), tgt_out (B, T) = the target alone (no BOS, no EOS), each row's
 *                    tokens first and pad_id after them (the padding gives the true length);
 *                    tgt_in is not read (may be NULL)
 *
 * Non-autoregressive training (conditional masked LM, Ghazvininejad et al. 2019, section 3.1;
 * src/train/nat_loss.c): per sentence b with L_b target tokens, n_b is drawn uniformly from
 * 1 .. L_b and n_b positions uniformly without replacement (qkv_nat_sample_mask, from the
 * trainer's Philox position, so steps stay deterministic and resume bit-identically); the decoder
 * reads the target with those positions set to mask_id and the loss is
 *   label-smoothed cross-entropy over the masked positions of the batch
 *   + length_weight x cross-entropy of the length logits against L_b (mean over sentences).
 *
 * Scheduled sampling (Bengio et al. 2015) in the two-pass form of Mihaylova & Martins (2019):
 * pass 1 decodes the batch with teacher forcing and no gradient; pass 2 decodes again where each
 * decoder input token after BOS is, with probability 1 - p_gold(step), replaced by pass 1's
 * prediction for that position (argmax); the loss is pass 2's. p_gold follows
 *   linear            max(min_gold, 1 - step / decay_steps)
 *   exponential       max(min_gold, k^step)             (k < 1)
 *   inverse sigmoid   k / (k + exp(step / k))           (k >= 1)
 * With p_gold = 1 it is exactly teacher forcing (the test checks bit equality).
 *
 * Guided attention (Tachibana et al. 2018): for every cross-attention map A (B, H, T, S) of the
 * decoder, loss_ga = mean over heads and valid (t, s) of A_ts W_ts with
 * W_ts = 1 - exp(-(s/S_b - t/T_b)^2 / (2 g^2)), S_b, T_b the true lengths of row b; added to the
 * loss with a weight. W is 0 on the diagonal, so a perfectly diagonal map costs 0.
 */
#ifndef QKV_TRAIN_H
#define QKV_TRAIN_H

#include "qkv_model.h"
#include "qkv_optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* qkv_ss_kind: qkv_enums.h lists its values. */

typedef struct qkv_train_config {
    qkv_optim_config optim;
    qkv_lr_schedule schedule;
    double clip_norm;       /* global gradient-norm clipping; <= 0 disables */
    double label_smoothing; /* eps of the cross-entropy targets */
    int32_t accum_steps;    /* batches per optimiser step (gradient accumulation), >= 1 */
    uint64_t seed;          /* dropout and sampling */
    /* scheduled sampling (encoder-decoder only) */
    qkv_ss_kind ss_kind;
    double ss_k;            /* exponential: k < 1; inverse sigmoid: k >= 1 */
    int64_t ss_decay_steps; /* linear: steps until p_gold reaches min_gold */
    double ss_min_gold;
    /* guided attention (encoder-decoder only) */
    double guided_weight;   /* 0 disables */
    double guided_sigma;    /* g, default 0.2 */
    /* non-autoregressive models (nat): weight of the length loss (default 0.1, fairseq's
     * length_loss_factor) */
    double length_weight;
    /* Exponential moving average of the parameters (src/train/ema.c): after step t,
     * ema = d_t ema + (1 - d_t) theta with d_t = min(ema_decay, (1 + t) / (10 + t)), starting
     * from the initial weights; qkv_trainer_swap_ema puts it into the model (to evaluate or save
     * it). 0 (the default): off. In [0, 1). */
    double ema_decay;
} qkv_train_config;

/* AdamW (betas 0.9, 0.98, eps 1e-9, weight decay 0.01), warm-up 4000 + inverse square root,
 * clipping at 1, label smoothing 0.1, no accumulation, no scheduled sampling or guidance, length
 * weight 0.1. */
QKV_API qkv_train_config qkv_train_default_config(void);
/* The probability of feeding the gold token at optimiser step `step` (1 for QKV_SS_NONE). */
QKV_API double qkv_ss_gold_probability(const qkv_train_config *c, int64_t step);

#define QKV_NO_LABEL (-1) /* encoder-only labels: position without a label (padding) */

typedef struct qkv_train_batch {
    int32_t batch;         /* B */
    int32_t src_len;       /* S */
    int32_t tgt_len;       /* T (encoder-decoder, decoder-only) */
    const int32_t *src;    /* (B, S) */
    const int32_t *tgt_in; /* (B, T) encoder-decoder */
    const int32_t *tgt_out;/* (B, T) encoder-decoder, decoder-only */
    const int32_t *labels; /* encoder-only: (B, S) token head, (B) pooled head */
    const qkv_real *pixels;  /* image models: (B, H_img, W_img, Ch), scaled by the caller */
    int32_t image_shape[3];  /* (H_img, W_img, Ch) of pixels: must equal the model's image */
    const int32_t *features; /* encoder-only with feature inputs: (B, S, n_features) */
} qkv_train_batch;

/* The guided attention term for n_maps cross-attention maps (B, H, T, S): mean over the maps,
 * heads and valid cells (t < tgt_len[b], s < src_len[b]) of A_ts W_ts (see above) -> scalar. */
QKV_API qkv_tensor *qkv_guided_attention_loss(qkv_ctx *ctx, qkv_tensor *const *maps, int n_maps,
                                              const int32_t *src_len, const int32_t *tgt_len,
                                              double sigma);

/* The masks of non-autoregressive training for a target batch tgt (B, T) (each row: L_b >= 1
 * tokens, then pad_id): row b masks n_b = 1 + floor(u_b L_b) positions, u_b =
 * qkv_rng_uniform(seed, step, 0x4E41, b), namely the n_b positions t < L_b with the smallest keys
 * qkv_rng_uniform(seed, step, 0x4E42, b << 32 | t) (ties: the lower position). So n_b is uniform
 * on 1 .. L_b up to the 2^-24 grain of u_b, the set is uniform given n_b, and a row's mask does not
 * depend on the batch's other rows or width. masked (B, T) receives true at masked positions.
 * Errors (QKV_ERR_INVALID_ARG): NULL arrays, B or T < 1, a row without tokens or with a token
 * after padding. */
QKV_API qkv_status qkv_nat_sample_mask(const int32_t *tgt, int32_t B, int32_t T, int32_t pad_id,
                                       uint64_t seed, uint64_t step, bool *masked);

/* The non-autoregressive loss of src I32 (B, S) and target tgt I32 (B, T) (as a NAT batch above)
 * under the mask masked (B, T) (true only at token positions): the decoder reads tgt with masked
 * positions set to mask_id;
 *   token_ce  = mean over the masked positions of the label-smoothed cross-entropy,
 *   length_ce = mean over rows of -log softmax(length logits)[L_b]     (no smoothing),
 *   result    = token_ce + length_weight * length_ce                   -> scalar.
 * token_ce_out / length_ce_out (may be NULL) receive the two terms. Forward code: errors set the
 * context's sticky status (a target holding mask_id, a masked padding position, a row without
 * tokens or with a token after padding, a model that is not nat) and return NULL. */
QKV_API qkv_tensor *qkv_nat_loss(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *src, qkv_tensor *tgt,
                                 const bool *masked, double label_smoothing, double length_weight,
                                 qkv_tensor **token_ce_out, qkv_tensor **length_ce_out);

typedef struct qkv_trainer qkv_trainer;

/* The trainer keeps a reference to m (which must outlive it) and owns its context. */
QKV_API qkv_status qkv_trainer_new(qkv_model *m, const qkv_train_config *c, qkv_trainer **out);
QKV_API void qkv_trainer_free(qkv_trainer *t); /* accepts NULL */

/* What made a training step non-finite (qkv_step_stats.nonfinite). */
typedef enum qkv_nonfinite {
    QKV_FINITE = 0,          /* nothing: the step's loss and gradient norm are finite */
    QKV_NONFINITE_LOSS = 1,  /* the loss of a batch (with its guided / length terms) */
    QKV_NONFINITE_GRAD = 2   /* the gradient norm of the accumulated batches */
} qkv_nonfinite;

typedef struct qkv_step_stats {
    double loss;          /* mean cross-entropy of the batch (what is logged; NAT: over the masked
                             positions) */
    double length_loss;   /* NAT: the length cross-entropy before its weight (0 otherwise) */
    double guided_loss;   /* guided attention term before its weight (0 when off) */
    int64_t tokens;       /* target tokens that counted (non-pad; NAT: the masked ones) */
    double grad_norm;     /* before clipping; NaN until an optimiser step ran */
    double lr;            /* rate used by the optimiser step (0 when only accumulating) */
    double gold_probability; /* scheduled sampling's p_gold this step */
    bool stepped;         /* an optimiser step was taken (every accum_steps batches) */
    qkv_nonfinite nonfinite; /* with QKV_ERR_NONFINITE: what was NaN or infinite */
} qkv_step_stats;

/* Forward, backward and (every accum_steps calls) clip + optimiser step. Gradients of the
 * accumulated batches are averaged. Malformed batches (ids outside the vocabulary, lengths over
 * max_len, shapes that do not fit the model) are errors with a message; the model is unchanged.
 *
 * Non-finite steps are never applied. When a batch's loss is NaN or infinite (checked before the
 * backward), or the gradient norm of the accumulated batches is (checked before clipping and the
 * optimiser step), the call returns QKV_ERR_NONFINITE with a message naming the optimiser step
 * (qkv_trainer_steps() + 1), the quantity and, for the gradient, the first parameter holding a
 * non-finite gradient element; stats (when not NULL) is filled as far as it was computed (loss,
 * grad_norm, stepped = false, nonfinite saying which). The parameters, the optimiser moments, the
 * parameter average and the step count are as before the call, and the batches of the current
 * accumulation are dropped. The caller stops (what the CLI does by default), or skips the step by
 * calling again with the next batch, as mixed-precision trainers do after an overflow (the RNG
 * position has moved on, so a skip is deterministic but not a no-op for the bits that follow). */
QKV_API qkv_status qkv_trainer_step(qkv_trainer *t, const qkv_train_batch *b, qkv_step_stats *stats);
/* Loss of a batch without training (no dropout, no gradient). NAT: the masked cross-entropy under
 * the mask qkv_nat_sample_mask draws at the trainer's next RNG step (which it does not move). */
QKV_API qkv_status qkv_trainer_eval_loss(qkv_trainer *t, const qkv_train_batch *b, double *loss, int64_t *tokens);

/* Exchange the model's parameters with their moving average (ema_decay > 0; else QKV_ERR_STATE):
 * after one call the model holds the average (evaluate it, qkv_model_save it), after the next
 * the training weights again, bit for bit. Training steps and checkpoints are refused while the
 * model holds the average. */
QKV_API qkv_status qkv_trainer_swap_ema(qkv_trainer *t);
/* Whether the trainer keeps a parameter average (ema_decay > 0). */
QKV_API bool qkv_trainer_has_ema(const qkv_trainer *t);

/* QKV_OK when every parameter (and the parameter average) is finite; else QKV_ERR_NONFINITE
 * naming the first parameter and element that is not. One pass over the parameters. */
QKV_API qkv_status qkv_trainer_check_finite(const qkv_trainer *t);

/* Optimiser steps taken so far. */
QKV_API int64_t qkv_trainer_steps(const qkv_trainer *t);
QKV_API qkv_ctx *qkv_trainer_ctx(qkv_trainer *t);

/* Checkpoints: parameters ("model.<name>"), optimiser moments ("optim.m.<name>",
 * "optim.v.<name>"), the parameter average with ema_decay > 0 ("ema.<name>"), the step, the RNG position and the caller's data position (epoch, batch and
 * a fingerprint of the data and batching options, e.g. qkv_batch_pos) in metadata, the model
 * configuration; written to a temporary file and renamed. Resuming from a checkpoint and
 * continuing gives bit-identical parameters to never having stopped. Saving between the batches
 * of an accumulation is refused (QKV_ERR_STATE), and so are non-finite parameters
 * (QKV_ERR_NONFINITE, qkv_trainer_check_finite): a checkpoint is never a diverged model. */
QKV_API qkv_status qkv_trainer_save(const qkv_trainer *t, const char *path, int64_t data_epoch,
                                    int64_t data_batch, uint64_t data_fingerprint);
/* Load into a trainer whose model has the checkpoint's configuration. The outputs may be NULL. */
QKV_API qkv_status qkv_trainer_load(qkv_trainer *t, const char *path, int64_t *data_epoch,
                                    int64_t *data_batch, uint64_t *data_fingerprint);

#ifdef __cplusplus
}
#endif
#endif
