/*
 * posenc_sincos_2d.c: the fixed 2-D sin-cos position table of image patches (Chen, Xie and He
 * 2021, "An Empirical Study of Training Self-Supervised Vision Transformers" (MoCo v3); He et
 * al. 2022, MAE): half the channels encode the row of a cell, half its column, each with the
 * 1-D table of Vaswani et al. in the concatenated [sin | cos] layout. Q = C / 4:
 *
 *   w_k = 10000^(-k / Q),  k = 0 .. Q-1
 *   pe[r cols + c] = [sin(r w) | cos(r w) | sin(c w) | cos(c w)]   (each block Q wide)
 *
 * computed in double (as MoCo v3's omega = 1 / 10000^(k / Q)) and rounded once. A constant
 * table: nothing is recorded and the output never requires a gradient.
 */
#include "../core/internal.h"
#include "../kernels/backend.h"

#include <math.h>

qkv_tensor *qkv_sincos_2d_pe(qkv_ctx *ctx, int64_t rows, int64_t cols, int64_t C) {
    if (!ctx) return QKV_ERROR(QKV_ERR_INVALID_ARG, "sincos_2d_pe: context is NULL"), NULL;
    if (ctx->status) return NULL;
    if (rows < 0 || cols < 0 || (cols > 0 && rows > INT64_MAX / cols))
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "sincos_2d_pe: grid %lld x %lld is invalid",
                        (long long)rows, (long long)cols);
    if (C <= 0 || C % 4)
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG,
                        "sincos_2d_pe: C = %lld must be a positive multiple of 4 (sin and cos of "
                        "the row and of the column)",
                        (long long)C);
    qkv_tensor *pe = qkv__alloc(ctx, QKV_REAL, 2, (int64_t[]){rows * cols, C}); /* (N, C) */
    if (!pe) return NULL;
    ctx->backend->posenc->sincos_2d(rows, cols, C, qkv__data(pe));
    return pe;
}
