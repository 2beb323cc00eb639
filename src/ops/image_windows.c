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
#include "../kernels/backend.h"
#include "ops_internal.h"

/* The geometry, recomputed by the backward from the tensors' shapes and e->i. */
static qkv_windows_geom geometry(const qkv_tensor *x, int64_t P, int64_t K) {
    qkv_windows_geom g = {x->shape[0], x->shape[1], x->shape[2], x->shape[3], P, K, (K - P) / 2, 0, 0, 0};
    g.Hp = g.H / P;
    g.Wp = g.W / P;
    g.D = K * K * g.Ch;
    return g;
}

static void image_windows_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    qkv_tensor *x = e->in[0];
    qkv_real *dx = qkv__grad(ctx, x);
    if (!dx) return;
    const qkv_windows_geom g = geometry(x, e->i[0], e->i[1]);
    ctx->backend->layout->windows_bwd(&g, (const qkv_real *)e->out->grad, dx); /* dy (B, N, D) */
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
    const qkv_windows_geom g = geometry(x, P, K);
    qkv_tensor *y = qkv__alloc(ctx, QKV_REAL, 3, (int64_t[]){g.B, g.Hp * g.Wp, g.D});
    if (!y) return NULL;
    ctx->backend->layout->windows(&g, qkv__data(x), qkv__data(y));
    qkv_tape_entry *e = qkv__record(ctx, &image_windows_op, y, 1, &x);
    if (e) {
        e->i[0] = P;
        e->i[1] = K;
    }
    return y;
}
