/*
 * layout_cpu.c: the layout family's fast kernels (kernels/layout.h): rows over the threads when
 * the copy is large (a copy is bound by memory bandwidth: below ~64 K elements the threads' start
 * costs more than the second core brings), whole rows by memcpy where both views are dense along
 * the last dim, and copies of constant size (the compiler inlines them) otherwise.
 */
#include "layout.h"

#include <string.h>

enum { COPY_PARALLEL_MIN = 1 << 16 };

/* Whether the view maps distinct indices to distinct elements, by a sufficient test: with the
 * dims of more than one element ordered by |stride|, each stride exceeds the farthest offset the
 * smaller ones reach. Every view qkv makes (permute, narrow, reshape) passes; a caller-built
 * header that overlaps itself (a zero stride, or shape (2, 2) with strides (1, 1)) does not, and
 * an add into it then runs serially, in element order. */
#ifdef QKV_WITH_OPENMP
static bool one_to_one(const qkv_view4 *v) {
    int64_t size[4], stride[4];
    int n = 0;
    for (int d = 0; d < 4; d++)
        if (v->shape[d] > 1) {
            const int64_t a = v->stride[d] < 0 ? -v->stride[d] : v->stride[d];
            int at = n++;
            for (; at > 0 && stride[at - 1] > a; at--) { /* insertion by |stride| */
                stride[at] = stride[at - 1];
                size[at] = size[at - 1];
            }
            stride[at] = a;
            size[at] = v->shape[d];
        }
    int64_t reach = 0; /* the largest offset the smaller dims reach */
    for (int i = 0; i < n; i++) {
        if (stride[i] <= reach) return false;
        reach += (size[i] - 1) * stride[i];
    }
    return true;
}
#endif

static void copy(size_t es, const void *src, const qkv_view4 *s, void *dst, const qkv_view4 *d) {
    const int64_t rows = s->shape[0] * s->shape[1] * s->shape[2], L = s->shape[3];
    const int64_t ss = s->stride[3], ds = d->stride[3];
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (rows * L > COPY_PARALLEL_MIN)
#endif
    for (int64_t r = 0; r < rows; r++) {
        const unsigned char *from = (const unsigned char *)src + (size_t)qkv__view_row(s, r) * es;
        unsigned char *to = (unsigned char *)dst + (size_t)qkv__view_row(d, r) * es;
        if ((ss == 1 && ds == 1) || L == 1) {
            memcpy(to, from, (size_t)L * es);
        } else if (es == 4) {
            for (int64_t i = 0; i < L; i++) memcpy(to + (size_t)(i * ds) * 4, from + (size_t)(i * ss) * 4, 4);
        } else if (es == 8) {
            for (int64_t i = 0; i < L; i++) memcpy(to + (size_t)(i * ds) * 8, from + (size_t)(i * ss) * 8, 8);
        } else {
            for (int64_t i = 0; i < L; i++) memcpy(to + (size_t)(i * ds) * es, from + (size_t)(i * ss) * es, es);
        }
    }
}

static void add(const qkv_real *src, const qkv_view4 *s, qkv_real *dst, const qkv_view4 *d) {
    const int64_t rows = s->shape[0] * s->shape[1] * s->shape[2], L = s->shape[3];
    const int64_t ss = s->stride[3], ds = d->stride[3];
    /* when the destination is one-to-one each element receives one addition, so rows in parallel
     * add exactly what the serial loop adds */
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (rows * L > COPY_PARALLEL_MIN && one_to_one(d))
#endif
    for (int64_t r = 0; r < rows; r++) {
        const qkv_real *from = src + qkv__view_row(s, r);
        qkv_real *to = dst + qkv__view_row(d, r);
        if (ss == 1 && ds == 1) {
            for (int64_t i = 0; i < L; i++) to[i] += from[i];
        } else {
            for (int64_t i = 0; i < L; i++) to[i * ds] += from[i * ss];
        }
    }
}

const qkv_layout_kernels qkv_layout_cpu = {copy,
                                           add,
                                           qkv__layout_swap,
                                           qkv__layout_gather,
                                           qkv__layout_windows,
                                           qkv__layout_windows_bwd};
