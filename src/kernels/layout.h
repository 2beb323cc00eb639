/*
 * kernels/layout.h: kernel table of the layout family: copies between strided views, and the
 * scatter-add that is their backward. qkv_contiguous (a view made dense) and its backward,
 * qkv_concat (each input a slab of the output) and its backward, and the KV cache's writes run
 * on them.
 *
 * A view has at most 4 dims, padded in front to 4 (size 1, stride 0): element (i0, i1, i2, i3)
 * lies at sum_d i_d stride[d] (in elements) from the base pointer. Both views of a call have the
 * same shape. A copy is exact, so every implementation gives the same bytes; an add gives every
 * destination element its sum in element order (row-major over the shape), so the bits are the
 * same too: the fast kernel adds rows in parallel only when the destination view maps distinct
 * indices to distinct elements.
 */
#ifndef QKV_KERNELS_LAYOUT_H
#define QKV_KERNELS_LAYOUT_H

#include "../core/internal.h"

typedef struct qkv_view4 {
    int64_t shape[4];
    int64_t stride[4];
} qkv_view4;

/* The windows of qkv_image_windows (src/ops/image_windows.c has the math): pixels (B, H, W, Ch),
 * a Hp x Wp grid of P x P patches, each token the K x K window centred on its patch (pad on every
 * side, zeros outside the image), D = K K Ch values per token. */
typedef struct qkv_windows_geom {
    int64_t B, H, W, Ch, P, K, pad, Hp, Wp, D;
} qkv_windows_geom;

typedef struct qkv_layout_kernels {
    /* dst[d] = src[s] for every index, es bytes per element (any dtype) */
    void (*copy)(size_t es, const void *src, const qkv_view4 *s, void *dst, const qkv_view4 *d);
    /* dst[d] += src[s] for every index, in element order where indices share an element */
    void (*add)(const qkv_real *src, const qkv_view4 *s, qkv_real *dst, const qkv_view4 *d);
    /* a[i] <-> b[i] */
    void (*swap)(int64_t n, qkv_real *a, qkv_real *b);
    /* The rows of a KV cache (R, H, L, D) with element strides cs[0..2] (the last 1) as N rows
     * see their first S positions, into dst (N, H, S, D) dense: dst[n, h, j, :] =
     * cache[rows[n row_sn + j row_sj], h, j, :]. */
    void (*gather)(const qkv_real *cache, const int64_t cs[3], int64_t H, int64_t D, const int32_t *rows,
                   int64_t row_sn, int64_t row_sj, int64_t N, int64_t S, qkv_real *dst);
    /* im2col: y (B, Hp Wp, D) = the windows of x (zeros outside the image) */
    void (*windows)(const qkv_windows_geom *g, const qkv_real *x, qkv_real *y);
    /* col2im: dx (B, H, W, Ch) += dy (B, Hp Wp, D) summed over every window that read a pixel, in
     * token, then window, order */
    void (*windows_bwd)(const qkv_windows_geom *g, const qkv_real *dy, qkv_real *dx);
} qkv_layout_kernels;

/* The kernels with one implementation in both tables (layout_moves.c): they move elements
 * without reordering any sum. */
void qkv__layout_swap(int64_t n, qkv_real *a, qkv_real *b);
void qkv__layout_gather(const qkv_real *cache, const int64_t cs[3], int64_t H, int64_t D, const int32_t *rows,
                        int64_t row_sn, int64_t row_sj, int64_t N, int64_t S, qkv_real *dst);
void qkv__layout_windows(const qkv_windows_geom *g, const qkv_real *x, qkv_real *y);
void qkv__layout_windows_bwd(const qkv_windows_geom *g, const qkv_real *dy, qkv_real *dx);

/* The view of a tensor of at most 4 dims (its shape and strides, padded in front). */
static inline qkv_view4 qkv__view4(const qkv_tensor *t) {
    qkv_view4 v;
    const int pad = 4 - t->ndim;
    for (int d = 0; d < 4; d++) {
        v.shape[d] = d < pad ? 1 : t->shape[d - pad];
        v.stride[d] = d < pad ? 0 : t->stride[d - pad];
    }
    return v;
}

/* rows x len elements, rows `row_stride` apart, unit stride within a row. */
static inline qkv_view4 qkv__view_rows(int64_t rows, int64_t len, int64_t row_stride) {
    return (qkv_view4){{1, 1, rows, len}, {0, 0, row_stride, 1}};
}

/* The offset of the first element of row r (rows numbered row-major over the first three dims). */
static inline int64_t qkv__view_row(const qkv_view4 *v, int64_t r) {
    const int64_t i2 = r % v->shape[2], i01 = r / v->shape[2];
    return (i01 / v->shape[1]) * v->stride[0] + (i01 % v->shape[1]) * v->stride[1] + i2 * v->stride[2];
}

extern const qkv_layout_kernels qkv_layout_ref;
extern const qkv_layout_kernels qkv_layout_cpu;

#endif
