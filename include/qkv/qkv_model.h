/*
 * qkv_model.h: whole Transformer models: encoder-decoder (Vaswani et al. 2017), encoder-only with
 * a per-token head (sequence labelling) or a pooled head (sequence classification), and a
 * decoder-only language model. A model owns its parameter table; forward functions are forward
 * code only (the tape gives the backward).
 *
 * Parameter names mirror a PyTorch module, so a qkv model file loads into it with
 * load_state_dict and gives the same outputs (tests/models/test_torch_parity.c proves it):
 *
 *   encoder-decoder (scripts/gen_reference.py: Seq2SeqTransformer)
 *     src_embed.weight (Vs, C)          tgt_embed.weight (Vt, C)
 *     transformer.encoder.layers.<i>.*  transformer.encoder.norm.{weight,bias}
 *     transformer.decoder.layers.<i>.*  transformer.decoder.norm.{weight,bias}   (nn.Transformer)
 *     generator.{weight,bias} (Vt, C)   (generator.weight absent when tied to tgt_embed)
 *                                       (tgt_embed.weight absent when shared with src_embed)
 *   encoder-only:  embed.weight, encoder.layers.<i>.*, encoder.norm.*, head.{weight,bias}
 *   decoder-only:  embed.weight, layers.<i>.* (encoder layers with a causal mask), norm.*,
 *                  lm_head.{weight,bias}
 *   learned absolute positions add <prefix>pos.weight (max_len, C) next to each embedding.
 *   image encoder (ViT-style; src/nn/patch_embed.c, docs/images.md): patch_embed.proj.{weight,bias}
 *                  (C, P*P*Ch), class_token (1, 1, C), pos_embedding (1, L, C), then the
 *                  encoder-only names (encoder.layers.<i>.*, encoder.norm.*, head.*).
 *   non-autoregressive (nat) encoder-decoders add length_head.{weight,bias} (max_len + 1, C).
 *   encoder-only with feature inputs: embed_features.<k>.weight (V_k, C), k = 0 .. n_features-1
 *
 * Feature inputs (encoder-only): besides its token id, each position may carry n_features more
 * ids, one per feature table (e.g. the suffix and the shape of a word, qkv_word_feature); their
 * embeddings are summed with the token's, x_s = E[src_s] + sum_k E_k[f_sk], before the sqrt(C)
 * scale and the positions, as BERT sums token and segment embeddings (the feature tables start
 * F times smaller in variance, so all features together weigh what the token does). With
 * spelling features a tagger can place a word it never saw (spaCy's MultiHashEmbed; Huang, Xu &
 * Yu 2015).
 *
 * Input embeddings are scaled by sqrt(C) (as the 2017 paper and PyTorch's translation tutorial)
 * when scale_embeddings is set; absolute positions (sinusoidal or learned) are added, then
 * dropout. Relative positions (Shaw, T5, RoPE, ALiBi) are chosen in the attention configs.
 *
 * Dims: B batch, S source length, T target length, C d_model, V vocabulary, K classes.
 */
#ifndef QKV_MODEL_H
#define QKV_MODEL_H

#include "qkv_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* qkv_arch, qkv_abs_pos, qkv_head_kind: qkv_enums.h lists their values. */

/* Image input of an encoder-only model (a ViT-style classifier): the input is a batch of images
 * (B, H_img, W_img, Ch) of real values instead of token ids. They are cut into non-overlapping
 * P x P patches, N = (H_img / P) (W_img / P) of them in raster order, each flattened to P*P*Ch
 * values (row in the patch, column, channel) and projected to C by patch_embed.proj; an optional
 * learned [CLS] token goes first; absolute positions are added; the encoder stack runs without
 * a mask; the head reads the [CLS] output, or the mean over the patches. All zero: token ids. */
typedef struct qkv_image_config {
    int32_t height, width, channels; /* H_img, W_img, Ch */
    int32_t patch_size;              /* P, dividing height and width; 1: every pixel is a token */
    int32_t window;                  /* K: each token reads the K x K window centred on its patch
                                      * (zero padding; P <= K <= 3 P, K - P even); 0: the patch */
    bool class_token;                /* prepend a learned [CLS] token and classify from it */
} qkv_image_config;
#define QKV_MODEL_MAX_FEATURES 16

typedef struct qkv_model_config {
    qkv_arch arch;
    int32_t src_vocab;     /* encoder input vocabulary (encoder-decoder, encoder-only) */
    int32_t tgt_vocab;     /* decoder vocabulary; encoder-only: number of tags / classes */
    int32_t d_model, n_heads, dim_feedforward;
    int32_t n_encoder_layers, n_decoder_layers;
    int32_t max_len;       /* longest sequence accepted (and the learned position table size) */
    qkv_abs_pos pos;       /* absolute positions added to the embeddings */
    bool scale_embeddings; /* multiply embeddings by sqrt(C) (default true) */
    bool norm_first;       /* pre-LN layers (default false: post-LN, the 2017 paper) */
    bool final_norm;       /* LayerNorm after each stack (nn.Transformer has them; default true) */
    bool tie_embeddings;   /* output projection weight = target embedding (default false) */
    bool share_embeddings; /* encoder-decoder: one embedding for source and target (src_embed.weight;
                              src_vocab = tgt_vocab, one joint vocabulary; Press and Wolf 2017;
                              default false) */
    qkv_activation activation;
    double dropout;        /* embeddings, residuals, feed-forward, attention weights */
    double layer_norm_eps;
    qkv_head_kind head;    /* encoder-only */
    int32_t pad_id;        /* padding token id (masked as a key; ignored in losses) */
    /* Models with a decoder: the first decoder input (encoder-decoder) and the token that ends a
     * sequence, target ids other than pad_id (default 2 and 3, the ids of <bos> and <eos> in every
     * qkv_vocab; -1: not recorded, as in model files written before they were stored). Stored in
     * model files; decoding takes them from here (qkv_decode_params), and training checks that
     * teacher forcing starts from bos_id. */
    int32_t bos_id, eos_id;
    int32_t n_features;    /* encoder-only: feature ids per position (0: none) */
    int32_t feature_vocab[QKV_MODEL_MAX_FEATURES]; /* sizes of the feature tables */
    /* attention variants; d_model and n_heads are filled in from the fields above */
    qkv_mha_config self_attn;  /* encoder self-attention (and decoder-only) */
    qkv_mha_config dec_self_attn; /* encoder-decoder: the decoder's masked self-attention */
    qkv_mha_config cross_attn; /* encoder-decoder: cross-attention */
    /* encoder-only image models (src_vocab 0, head pooled, scale_embeddings false) */
    qkv_image_config image;
    /* Non-autoregressive encoder-decoder (conditional masked LM, Ghazvininejad et al. 2019;
     * src/nn/nat.c, docs/decoding.md): the decoder's self-attention has no causal mask, its input
     * is the target with some tokens replaced by mask_id, and length_head predicts the target
     * length from the mean of the encoder states. Trained by qkv_train.h's NAT mode, decoded by
     * QKV_DECODE_MASK_PREDICT. */
    bool nat;        /* default false */
    int32_t mask_id; /* nat: the <mask> id of the target vocabulary (not pad_id); else -1 */
} qkv_model_config;

/* nn.Transformer's defaults at a given size: post-LN, ReLU, dropout 0.1, eps 1e-5, final norms,
 * sinusoidal positions, scaled embeddings, scaled-dot softmax attention, pad id 0. */
QKV_API qkv_model_config qkv_model_default_config(qkv_arch arch, int32_t d_model, int32_t n_heads,
                                                  int32_t n_layers);
/* QKV_OK or QKV_ERR_INVALID_ARG with a message naming the bad field. */
QKV_API qkv_status qkv_model_config_check(const qkv_model_config *c);
/* The configuration as a JSON object (written into model files' metadata under "qkv.config"),
 * and back. Unknown keys are an error naming the key. */
QKV_API qkv_status qkv_model_config_to_json(const qkv_model_config *c, char *buf, size_t size);
QKV_API qkv_status qkv_model_config_from_json(const char *json, qkv_model_config *c);
/* Whether c describes an image model (any field of c->image set). */
QKV_API bool qkv_model_is_image(const qkv_model_config *c);
/* An encoder-only ViT-style image classifier with K classes: pooled head, [CLS] token, learned
 * positions, pre-LN, GELU, no embedding scale, dropout 0.1; d_model / heads / layers as given,
 * dim_feedforward 4 C, max_len the number of tokens. Check it with qkv_model_config_check. */
QKV_API qkv_model_config qkv_model_image_config(int32_t height, int32_t width, int32_t channels,
                                                int32_t patch_size, int32_t n_classes,
                                                int32_t d_model, int32_t n_heads, int32_t n_layers);

typedef struct qkv_model {
    qkv_model_config cfg;
    qkv_params *params;
    qkv_tensor *src_embed, *src_pos; /* encoder side (or the only embedding) */
    qkv_tensor *tgt_embed, *tgt_pos; /* encoder-decoder: decoder side */
    qkv_layer *encoder_layers;       /* n_encoder_layers (decoder-only: its causal stack) */
    qkv_layer *decoder_layers;       /* n_decoder_layers */
    qkv_tensor *enc_norm_w, *enc_norm_b, *dec_norm_w, *dec_norm_b;
    qkv_tensor *out_w, *out_b; /* (V or K, C), (V or K); out_w may alias tgt_embed when tied */
    qkv_tensor *patch_w, *patch_b; /* image models: (C, P*P*Ch), (C) */
    qkv_tensor *class_token;       /* image models with a [CLS] token: (1, 1, C) */
    qkv_tensor *pos_embedding;     /* image models with learned positions: (1, L, C) */
    qkv_tensor *length_w, *length_b; /* nat: length_head (max_len + 1, C), (max_len + 1) */
    qkv_tensor *feature_embed[QKV_MODEL_MAX_FEATURES]; /* (V_k, C), encoder-only */
} qkv_model; /* made by qkv_model_new / qkv_model_load, used through its pointer: a copy by value
                would share the parameters, and freeing both frees them twice */

/* Register, finalize and initialise (PyTorch's initialisations, deterministic in seed). */
QKV_API qkv_status qkv_model_new(const qkv_model_config *cfg, uint64_t seed, qkv_model **out);
QKV_API void qkv_model_free(qkv_model *m); /* accepts NULL */

/* Files: safetensors with the parameters under the names above and metadata
 * "qkv.format" = "1", "qkv.arch", "qkv.config" (JSON). Written atomically. Loading refuses a
 * configuration with more parameters than the file's tensors can hold (QKV_ERR_FORMAT) before
 * allocating them, so what a file's header asks for stays in proportion to the file. */
QKV_API qkv_status qkv_model_save(const qkv_model *m, const char *path);
QKV_API qkv_status qkv_model_load(const char *path, qkv_model **out);
/* Checkpoint averaging: out's parameters become the element-wise mean of the n models' (summed in
 * double in the order given; out may be one of them). Every model must have out's configuration
 * (QKV_ERR_SHAPE otherwise). src/train/average.c. */
QKV_API qkv_status qkv_model_average(const qkv_model *const *models, int32_t n, qkv_model *out);

/* ---- forward ------------------------------------------------------------------------------ */

/* Encoder: src I32 (B, S) -> memory (B, S, C). Keys equal to pad_id are masked. With
 * weights_out (n_encoder_layers pointers, may be NULL) every layer's self-attention weights
 * (B, H, S, S) are returned (this forces the unfused attention path). */
QKV_API qkv_tensor *qkv_model_encode(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *src,
                                     qkv_tensor **weights_out);
/* Decoder (encoder-decoder): tgt_in I32 (B, T) (BOS + target; nat: the target with masked
 * positions set to mask_id, no causal mask), memory (B, S, C), src I32 (B, S) for its padding
 * -> logits (B, T, V). self_weights_out / cross_weights_out: NULL or arrays of
 * n_decoder_layers pointers receiving (B, H, T, T) and (B, H, T, S). */
QKV_API qkv_tensor *qkv_model_decode(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *tgt_in,
                                     qkv_tensor *memory, qkv_tensor *src,
                                     qkv_tensor **self_weights_out, qkv_tensor **cross_weights_out);
/* Non-autoregressive encoder-decoder (nat): target-length logits (B, max_len + 1), class L =
 * length L, from memory (B, S, C) averaged over the non-padded positions of src I32 (B, S):
 * length_head(mean_s memory[b, s]) (src/nn/nat.c). */
QKV_API qkv_tensor *qkv_model_length_logits(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *memory,
                                            qkv_tensor *src);
/* Encoder-only: src I32 (B, S) -> logits (B, S, K) (token head) or (B, K) (pooled head). */
QKV_API qkv_tensor *qkv_model_classify(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *src,
                                       qkv_tensor **weights_out);
/* Image models: pixels (B, H_img, W_img, Ch) real -> logits (B, K). The caller scales the
 * pixels (e.g. to [0, 1]). weights_out as in qkv_model_encode: (B, H, L, L) per layer, where
 * the L = [1 +] N tokens are [CLS] then the patches in raster order. */
QKV_API qkv_tensor *qkv_model_classify_image(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *pixels,
                                             qkv_tensor **weights_out);
/* The patch vectors of pixels (B, H_img, W_img, Ch): (B, N, P*P*Ch), patch n = (r, c) in raster
 * order (n = r (W_img / P) + c) holding pixels[b, r P + i, c P + j, ch] at (i P + j) Ch + ch.
 * Differentiable (a permutation of the pixels). H_img and W_img must be multiples of P. */
QKV_API qkv_tensor *qkv_image_patches(qkv_ctx *ctx, qkv_tensor *pixels, int64_t patch_size);
/* Overlapping patch tokens: (B, N, K*K*Ch), token n = (r, c) holding pixels[b, r P + i - pad,
 * c P + j - pad, ch] (zero outside the image) at (i K + j) Ch + ch, i, j < K, pad = (K - P) / 2;
 * P <= K <= 3 P with K - P even (a window reaches at most into the neighbouring patches), at
 * most 2^24 values per token. A linear layer over them is a Conv2d(kernel K, stride P, padding
 * pad); K = P gives qkv_image_patches's vectors. Differentiable (src/ops/image_windows.c). */
QKV_API qkv_tensor *qkv_image_windows(qkv_ctx *ctx, qkv_tensor *pixels, int64_t patch_size,
                                      int64_t window);
/* The window K an image model's tokens read: image.window, or the patch size when it is 0. */
QKV_API int32_t qkv_image_config_window(const qkv_image_config *im);
/* The same for a model with feature inputs: features I32 (B, S, n_features), feature k of
 * position s in [0, feature_vocab[k]) (padded positions: any valid id, e.g. 0). NULL features
 * for a model without them is qkv_model_classify. */
QKV_API qkv_tensor *qkv_model_classify_features(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *src,
                                                qkv_tensor *features, qkv_tensor **weights_out);
/* Decoder-only: tokens I32 (B, T) -> next-token logits (B, T, V). */
QKV_API qkv_tensor *qkv_model_lm(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *tokens,
                                 qkv_tensor **weights_out);

#ifdef __cplusplus
}
#endif
#endif
