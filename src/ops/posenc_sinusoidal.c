/*
 * posenc_sinusoidal.c: the fixed sinusoidal position table (Vaswani et al. 2017, section 3.5).
 *
 *   pe[t, 2i]   = sin(p w_i),  pe[t, 2i+1] = cos(p w_i),  p = offset + t,
 *   w_i = exp(2i * (-ln(10000) / C))
 * written as the PyTorch tutorial's PositionalEncoding computes div_term, but in double and
 * rounded once. For odd C the last column 2i = C-1 has no partner: it is sin(p w_{(C-1)/2}).
 * A constant table: nothing is recorded and the output never requires a gradient; add it to the
 * token embeddings (usually after scaling them by sqrt(C)).
 */
#include "../core/internal.h"
#include "../kernels/backend.h"

#include <math.h>

qkv_tensor *qkv_sinusoidal_pe(qkv_ctx *ctx, int64_t T, int64_t C, int64_t offset) {
    if (!ctx) return QKV_ERROR(QKV_ERR_INVALID_ARG, "sinusoidal_pe: context is NULL"), NULL;
    if (ctx->status) return NULL;
    if (T < 0 || C < 0 || offset < 0 || offset > INT64_MAX - T)
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG,
                        "sinusoidal_pe: T = %lld, C = %lld, offset = %lld must be >= 0 (and "
                        "offset + T representable)",
                        (long long)T, (long long)C, (long long)offset);
    qkv_tensor *pe = qkv__alloc(ctx, QKV_REAL, 2, (int64_t[]){T, C}); /* (T, C) */
    if (!pe) return NULL;
    ctx->backend->posenc->sinusoidal(T, C, offset, qkv__data(pe));
    return pe;
}
