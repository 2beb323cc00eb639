/*
 * attn_mask.c: the attention mask rule and its validation.
 *
 * A query/key pair (b, i, j) is allowed when every active rule allows it:
 *   causal        j <= i                       (torch is_causal, top-left aligned when T != S)
 *   window        i - left <= j <= i + right   (a negative bound is unlimited; Longformer-style
 *                                               local attention, Beltagy et al. 2020)
 *   key_padding   key_padding[b, j] == 0       (torch key_padding_mask: nonzero = padded)
 *   allowed       allowed[(b,) i, j] != 0      (an arbitrary graph adjacency, as in GAT /
 *                                               Graph Transformers)
 * qkv_mask_allows is the reference statement of this rule; the fast kernels use an equivalent
 * band-plus-lookup form (kernels/attention.h: qkv__mask_row) that the tests compare against it.
 * Mask tensors are read through their strides, so views are fine.
 */
#include "../kernels/attention.h"

qkv_mask qkv_mask_none(void) {
    return (qkv_mask){.causal = false,
                      .window_left = -1,
                      .window_right = -1,
                      .key_padding = NULL,
                      .allowed = NULL};
}

bool qkv_mask_allows(const qkv_mask *m, int64_t b, int64_t i, int64_t j) {
    if (!m) return true;
    if (m->causal && j > i) return false;
    if (m->window_left >= 0 && j < i - m->window_left) return false;
    if (m->window_right >= 0 && j > i + m->window_right) return false;
    if (m->key_padding) {
        const qkv_tensor *p = m->key_padding; /* (B, S) */
        if (((const int32_t *)p->data)[b * p->stride[0] + j * p->stride[1]] != 0) return false;
    }
    if (m->allowed) {
        const qkv_tensor *a = m->allowed; /* (T, S) or (B, T, S) */
        int64_t off = i * a->stride[a->ndim - 2] + j * a->stride[a->ndim - 1];
        if (a->ndim == 3) off += b * a->stride[0];
        if (((const int32_t *)a->data)[off] == 0) return false;
    }
    return true;
}

bool qkv__mask_check(qkv_ctx *ctx, const char *op, const qkv_mask *m, int64_t B, int64_t T,
                     int64_t S) {
    if (!m) return true;
    char buf[96];
    const qkv_tensor *p = m->key_padding, *a = m->allowed;
    if (p) {
        if (!p->data && B * S > 0) {
            QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "%s: mask.key_padding has no data", op);
            return false;
        }
        if (p->dtype != QKV_I32 || p->ndim != 2 || p->shape[0] != B || p->shape[1] != S) {
            QKV_FAIL(ctx, QKV_ERR_SHAPE,
                     "%s: mask.key_padding %s must be I32 (B, S) = (%lld, %lld) for these scores",
                     op, qkv_tensor_shape_str(p, buf, sizeof buf), (long long)B, (long long)S);
            return false;
        }
    }
    if (a) {
        if (!a->data && T * S > 0) {
            QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "%s: mask.allowed has no data", op);
            return false;
        }
        bool ok = a->dtype == QKV_I32 && (a->ndim == 2 || (a->ndim == 3 && a->shape[0] == B)) &&
                  a->shape[a->ndim - 2] == T && a->shape[a->ndim - 1] == S;
        if (!ok) {
            QKV_FAIL(ctx, QKV_ERR_SHAPE,
                     "%s: mask.allowed %s must be I32 (T, S) = (%lld, %lld) or (B, T, S) = "
                     "(%lld, %lld, %lld) for these scores",
                     op, qkv_tensor_shape_str(a, buf, sizeof buf), (long long)T, (long long)S,
                     (long long)B, (long long)T, (long long)S);
            return false;
        }
    }
    return true;
}
