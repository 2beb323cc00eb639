/*
 * patch_embed.c: the image front-end of a ViT-style encoder (Dosovitskiy et al. 2021, "An Image
 * is Worth 16x16 Words"): patches, their linear projection, the [CLS] token, absolute positions,
 * and the pooling that feeds the head (qkv_model.h, docs/images.md).
 *
 * pixels x (B, H_img, W_img, Ch), patch size P, a grid of Hp = H_img / P rows and Wp = W_img / P
 * columns, N = Hp Wp patches, D = P P Ch, L = N (+ 1 with [CLS]):
 *   patch n = (r, c), n = r Wp + c:   u_n[(i P + j) Ch + ch] = x[r P + i, c P + j, ch]      (D)
 *   z_n = W u_n + b                   W = patch_embed.proj.weight (C, D), b = .bias (C)
 *   z = [class_token; z_1 .. z_N] + pos
 *       pos = pos_embedding (1, L, C)                       learned (ViT)
 *             [0; sincos_2d(Hp, Wp)]                        fixed 2-D (qkv_sincos_2d_pe; [CLS] 0)
 *             sinusoidal(0 .. L-1)                          fixed 1-D over the token order
 * With a window K > P (image.window), u_n is instead the K x K window centred on the patch,
 * zero-padded (qkv_image_windows, src/ops/image_windows.c), D = K K Ch: a convolutional stem
 * nn.Conv2d(Ch, C, K, stride=P, padding=(K - P) / 2) whose windows overlap.
 *   z = dropout(z), then the encoder stack (no mask: every image has all its tokens), then the
 *   head reads h_0 ([CLS]) or the mean of h_1 .. h_N.
 *
 * PyTorch equivalence: W u_n + b is nn.Conv2d(Ch, C, kernel_size=P, stride=P) on the NCHW image
 * with conv.weight = W.reshape(C, P, P, Ch).permute(0, 3, 1, 2) and conv.bias = b, whose output
 * .flatten(2).transpose(1, 2) lists the patches in the same raster order (torchvision's
 * conv_proj, timm's patch_embed.proj); with a Linear, as stored here, it is vit-pytorch's
 * Rearrange('b (h p1) (w p2) c -> b (h w) (p1 p2 c)') + nn.Linear(D, C) on channels-last
 * images. scripts/gen_reference.py (vit_fixture) checks qkv against both forms.
 *
 * Initialisation: W ~ N(0, 1 / D) and b = 0 (torchvision's conv_proj, without its truncation),
 * class_token and pos_embedding ~ N(0, 0.02^2) (MAE, timm). Every image has the same L tokens,
 * so the layers run with no mask and the fused attention path applies.
 */
#include "nn_internal.h"

#include <math.h>

qkv_tensor *qkv_image_patches(qkv_ctx *ctx, qkv_tensor *pixels, int64_t patch_size) {
    if (!QKV_OP_BEGIN(ctx, "image_patches", pixels)) return NULL;
    if (!qkv__check_patch_grid(ctx, "image_patches", pixels, patch_size)) return NULL;
    const int64_t B = pixels->shape[0], H = pixels->shape[1], W = pixels->shape[2];
    const int64_t Ch = pixels->shape[3], P = patch_size;
    /* (B, H, W, Ch) = (B Hp, P, Wp, P Ch) -> (B Hp, Wp, P, P Ch) = (B, N, D) */
    qkv_tensor *rows =
        qkv_reshape(ctx, qkv__contig(ctx, pixels), 4, (int64_t[]){B * (H / P), P, W / P, P * Ch});
    qkv_tensor *grid = qkv_contiguous(ctx, qkv_permute(ctx, rows, (int[]){0, 2, 1, 3}));
    return qkv_reshape(ctx, grid, 3, (int64_t[]){B, (H / P) * (W / P), P * P * Ch});
}

/* ---- parameters ---------------------------------------------------------------------------- */

qkv_status qkv__image_register(qkv_model *m) {
    const qkv_model_config *c = &m->cfg;
    const qkv_image_config *im = &c->image;
    const int64_t C = c->d_model, P = im->patch_size, K = qkv_image_config_window(im);
    const int64_t D = K * K * im->channels;
    const int64_t L = (im->height / P) * (im->width / P) + im->class_token;
    qkv_status st =
        qkv_params_add(m->params, "patch_embed.proj.weight", 2, (int64_t[]){C, D}, &m->patch_w);
    if (!st)
        st = qkv_params_add(m->params, "patch_embed.proj.bias", 1, (int64_t[]){C}, &m->patch_b);
    if (!st && im->class_token)
        st = qkv_params_add(m->params, "class_token", 3, (int64_t[]){1, 1, C}, &m->class_token);
    if (!st && c->pos == QKV_POS_LEARNED)
        st = qkv_params_add(m->params, "pos_embedding", 3, (int64_t[]){1, L, C}, &m->pos_embedding);
    return st;
}

void qkv__image_init(qkv_model *m, uint64_t seed) {
    const int64_t D = m->patch_w->shape[1];
    qkv_init_normal(m->patch_w, 0, sqrt(1.0 / (double)D), seed, 1010);
    qkv_init_constant(m->patch_b, 0);
    if (m->class_token) qkv_init_normal(m->class_token, 0, 0.02, seed, 1011);
    if (m->pos_embedding) qkv_init_normal(m->pos_embedding, 0, 0.02, seed, 1012);
}

/* ---- forward ------------------------------------------------------------------------------- */

qkv_tensor *qkv__image_embed(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *pixels) {
    const qkv_model_config *c = &m->cfg;
    const qkv_image_config *im = &c->image;
    if (!qkv__check_real(ctx, "model_classify_image", pixels, "pixels")) return NULL;
    char buf[96];
    if (pixels->ndim != 4 || pixels->shape[0] < 1 || pixels->shape[1] != im->height ||
        pixels->shape[2] != im->width || pixels->shape[3] != im->channels)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE,
                        "model_classify_image: pixels %s do not match the model's images (B, %d, "
                        "%d, %d) (B >= 1)",
                        qkv_tensor_shape_str(pixels, buf, sizeof buf), im->height, im->width,
                        im->channels);
    const int64_t B = pixels->shape[0], C = c->d_model, P = im->patch_size;
    const int64_t Hp = im->height / P, Wp = im->width / P, L = Hp * Wp + im->class_token;
    const int64_t K = qkv_image_config_window(im);
    qkv_tensor *tokens = K == P ? qkv_image_patches(ctx, pixels, P) : qkv_image_windows(ctx, pixels, P, K);
    qkv_tensor *x = qkv_linear(ctx, tokens, m->patch_w, m->patch_b); /* (B, N, C) */
    if (c->pos == QKV_POS_SINCOS_2D) x = qkv_add(ctx, x, qkv_sincos_2d_pe(ctx, Hp, Wp, C));
    if (m->class_token) { /* [CLS] first; with sincos_2d its position is the zero vector */
        qkv_tensor *zeros = qkv_tensor_zeros(ctx, QKV_REAL, 3, (int64_t[]){B, 1, C});
        qkv_tensor *cls = qkv_add(ctx, zeros, m->class_token); /* (B, 1, C) */
        x = qkv_concat(ctx, (qkv_tensor *[]){cls, x}, 2, 1);
    }
    if (c->pos == QKV_POS_LEARNED) x = qkv_add(ctx, x, m->pos_embedding);
    if (c->pos == QKV_POS_SINUSOIDAL) x = qkv_add(ctx, x, qkv_sinusoidal_pe(ctx, L, C, 0));
    return qkv_dropout(ctx, x, c->dropout); /* (B, L, C) */
}

qkv_tensor *qkv__image_pool(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *h) {
    if (!h) return NULL; /* the sticky error is set */
    const int64_t B = h->shape[0], L = h->shape[1], C = m->cfg.d_model;
    if (m->class_token) { /* h[:, 0] */
        qkv_tensor *cls = qkv_contiguous(ctx, qkv_narrow(ctx, h, 1, 0, 1));
        return qkv_reshape(ctx, cls, 2, (int64_t[]){B, C});
    }
    /* mean over the patches: (B, 1, N) weights 1/N times h (B, N, C) */
    qkv_tensor *w = qkv_full(ctx, 3, (int64_t[]){B, 1, L}, 1.0 / (double)L);
    return qkv_reshape(ctx, qkv_matmul(ctx, w, h, false, false), 2, (int64_t[]){B, C});
}
