/* layout_ref.c: the layout family's reference kernels (kernels/layout.h): one element at a time,
 * in element order. */
#include "layout.h"

#include <string.h>

static void copy(size_t es, const void *src, const qkv_view4 *s, void *dst, const qkv_view4 *d) {
    const int64_t rows = s->shape[0] * s->shape[1] * s->shape[2], L = s->shape[3];
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < L; i++)
            memcpy((unsigned char *)dst + (size_t)(qkv__view_row(d, r) + i * d->stride[3]) * es,
                   (const unsigned char *)src + (size_t)(qkv__view_row(s, r) + i * s->stride[3]) * es, es);
}

static void add(const qkv_real *src, const qkv_view4 *s, qkv_real *dst, const qkv_view4 *d) {
    const int64_t rows = s->shape[0] * s->shape[1] * s->shape[2], L = s->shape[3];
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < L; i++)
            dst[qkv__view_row(d, r) + i * d->stride[3]] += src[qkv__view_row(s, r) + i * s->stride[3]];
}

const qkv_layout_kernels qkv_layout_ref = {copy,
                                           add,
                                           qkv__layout_swap,
                                           qkv__layout_gather,
                                           qkv__layout_windows,
                                           qkv__layout_windows_bwd};
