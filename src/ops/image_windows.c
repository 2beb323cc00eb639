/*
 * image_windows.c: overlapping patch tokens (im2col) for the image front-end (docs/images.md).
 *
 * Each token of a P x P patch grid reads the K x K window centred on its patch, with zeros
 * outside the image (P <= K <= 3 P, K - P even, pad = (K - P) / 2: a window reaches at most
 * into the neighbouring patches):
 *
 *   pixels x (B, H, W, Ch), Hp = H / P, Wp = W / P, N = Hp Wp, D = K K Ch
 *   y[b, r Wp + c, (i K + j) Ch + ch] = x[b, r P + i - pad, c P + j - pad, ch]   (0 outside)
 *                                                                 i, j < K,  y (B, N, D)
 *   dx[b, h, w, ch] = sum of dy over every (token, i, j) that read (h, w)
 *
 * A linear layer over these vectors is nn.Conv2d(Ch, C, kernel_size=K, stride=P, padding=pad)
 * on the NCHW image (weight.reshape(C, K, K, Ch).permute(0, 3, 1, 2)), i.e. a convolutional
 * stem whose windows overlap by K - P pixels. K = P is qkv_image_patches. On small datasets
 * this locality helps a ViT: the tokens of neighbouring patches share pixels (Xiao et al. 2021,
 * "Early Convolutions Help Transformers See Better"; Lee et al. 2021, "Vision Transformer for
 * Small-Size Datasets", whose shifted patch tokenization with P = 2 sees the same 4 x 4 window).
 */
#include "../core/internal.h"
#include "ops_internal.h"

#include <string.h>

/* The geometry, recomputed by the backward from the tensors' shapes and e->i. */
typedef struct {
    int64_t B, H, W, Ch, P, K, pad, Hp, Wp, D;
} windows_geom;

static windows_geom geometry(const qkv_tensor *x, int64_t P, int64_t K) {
    windows_geom g = {x->shape[0], x->shape[1], x->shape[2], x->shape[3], P, K, (K - P) / 2, 0, 0, 0};
    g.Hp = g.H / P;
    g.Wp = g.W / P;
    g.D = K * K * g.Ch;
    return g;
}

/* The row-major offset of pixel (b, h, w, 0), or -1 when (h, w) lies in the zero padding. */
static int64_t pixel_offset(const windows_geom *g, int64_t b, int64_t h, int64_t w) {
    if (h < 0 || h >= g->H || w < 0 || w >= g->W) return -1;
    return ((b * g->H + h) * g->W + w) * g->Ch;
}

static void image_windows_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    qkv_tensor *x = e->in[0];
    qkv_real *dx = qkv__grad(ctx, x);
    if (!dx) return;
    const windows_geom g = geometry(x, e->i[0], e->i[1]);
    const qkv_real *dy = (const qkv_real *)e->out->grad; /* (B, N, D) */
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t r = 0; r < g.Hp; r++)
            for (int64_t c = 0; c < g.Wp; c++) {
                const qkv_real *row = dy + ((b * g.Hp + r) * g.Wp + c) * g.D;
                for (int64_t i = 0; i < g.K; i++)
                    for (int64_t j = 0; j < g.K; j++) {
                        const int64_t at = pixel_offset(&g, b, r * g.P + i - g.pad, c * g.P + j - g.pad);
                        if (at < 0) continue;
                        const qkv_real *src = row + (i * g.K + j) * g.Ch;
                        for (int64_t ch = 0; ch < g.Ch; ch++) dx[at + ch] += src[ch];
                    }
            }
}

static const qkv_op_desc image_windows_op = {"image_windows", image_windows_backward};

bool qkv__check_patch_grid(qkv_ctx *ctx, const char *op, const qkv_tensor *pixels, int64_t patch_size) {
    if (!qkv__check_real(ctx, op, pixels, "pixels")) return false;
    char buf[96];
    if (pixels->ndim != 4 || qkv_tensor_numel(pixels) == 0) {
        QKV_FAIL(ctx, QKV_ERR_SHAPE, "%s: pixels %s are not a (B, height, width, channels) batch of images", op,
                 qkv_tensor_shape_str(pixels, buf, sizeof buf));
        return false;
    }
    const int64_t H = pixels->shape[1], W = pixels->shape[2], P = patch_size;
    if (P < 1 || H % P || W % P) {
        QKV_FAIL(ctx, QKV_ERR_SHAPE, "%s: a %lld x %lld image is not divisible into %lld x %lld patches", op,
                 (long long)H, (long long)W, (long long)P, (long long)P);
        return false;
    }
    return true;
}

qkv_tensor *qkv_image_windows(qkv_ctx *ctx, qkv_tensor *pixels, int64_t patch_size, int64_t window) {
    if (!QKV_OP_BEGIN(ctx, "image_windows", pixels)) return NULL;
    if (!qkv__check_patch_grid(ctx, "image_windows", pixels, patch_size)) return NULL;
    const int64_t P = patch_size, K = window;
    if (K < P || (K - P) % 2 || K > 3 * P)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE,
                        "image_windows: window %lld must be at least the patch size %lld, exceed "
                        "it by an even number and by at most twice it (3 x the patch size)",
                        (long long)K, (long long)P);
    const int64_t D = K * K * pixels->shape[3];
    if (D > (int64_t)1 << 24)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "image_windows: windows of %lld values are too large (at most 2^24)",
                        (long long)D);
    qkv_tensor *x = qkv__contig(ctx, pixels);
    if (!x) return NULL;
    const windows_geom g = geometry(x, P, K);
    qkv_tensor *y = qkv__alloc(ctx, QKV_REAL, 3, (int64_t[]){g.B, g.Hp * g.Wp, g.D});
    if (!y) return NULL;
    const qkv_real *src = qkv__data(x);
    qkv_real *dst = qkv__data(y);
    for (int64_t b = 0; b < g.B; b++)
        for (int64_t r = 0; r < g.Hp; r++)
            for (int64_t c = 0; c < g.Wp; c++)
                for (int64_t i = 0; i < g.K; i++)
                    for (int64_t j = 0; j < g.K; j++, dst += g.Ch) {
                        const int64_t at = pixel_offset(&g, b, r * g.P + i - g.pad, c * g.P + j - g.pad);
                        if (at < 0) memset(dst, 0, (size_t)g.Ch * sizeof *dst);
                        else memcpy(dst, src + at, (size_t)g.Ch * sizeof *dst);
                    }
    qkv_tape_entry *e = qkv__record(ctx, &image_windows_op, y, 1, &x);
    if (e) {
        e->i[0] = P;
        e->i[1] = K;
    }
    return y;
}
