/*
 * layout_moves.c: the layout kernels that both tables share (kernels/layout.h): a swap, the KV
 * cache's gather through a row table, and the image windows (im2col) with their scatter-add
 * (col2im). They only move elements, and col2im adds in one fixed order, so one implementation
 * serves the reference and the fast table.
 */
#include "layout.h"

#include <string.h>

void qkv__layout_swap(int64_t n, qkv_real *a, qkv_real *b) {
    for (int64_t i = 0; i < n; i++) {
        const qkv_real x = a[i];
        a[i] = b[i];
        b[i] = x;
    }
}

void qkv__layout_gather(const qkv_real *cache, const int64_t cs[3], int64_t H, int64_t D, const int32_t *rows,
                        int64_t row_sn, int64_t row_sj, int64_t N, int64_t S, qkv_real *dst) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t j = 0; j < S; j++)
                memcpy(dst + ((n * H + h) * S + j) * D, cache + rows[n * row_sn + j * row_sj] * cs[0] + h * cs[1] + j * cs[2],
                       sizeof(qkv_real) * (size_t)D);
}

/* The row-major offset of pixel (b, h, w, 0), or -1 when (h, w) lies in the zero padding. */
static int64_t pixel_offset(const qkv_windows_geom *g, int64_t b, int64_t h, int64_t w) {
    if (h < 0 || h >= g->H || w < 0 || w >= g->W) return -1;
    return ((b * g->H + h) * g->W + w) * g->Ch;
}

void qkv__layout_windows(const qkv_windows_geom *g, const qkv_real *x, qkv_real *y) {
    for (int64_t b = 0; b < g->B; b++)
        for (int64_t r = 0; r < g->Hp; r++)
            for (int64_t c = 0; c < g->Wp; c++)
                for (int64_t i = 0; i < g->K; i++)
                    for (int64_t j = 0; j < g->K; j++, y += g->Ch) {
                        const int64_t at = pixel_offset(g, b, r * g->P + i - g->pad, c * g->P + j - g->pad);
                        if (at < 0) memset(y, 0, (size_t)g->Ch * sizeof *y);
                        else memcpy(y, x + at, (size_t)g->Ch * sizeof *y);
                    }
}

void qkv__layout_windows_bwd(const qkv_windows_geom *g, const qkv_real *dy, qkv_real *dx) {
    for (int64_t b = 0; b < g->B; b++)
        for (int64_t r = 0; r < g->Hp; r++)
            for (int64_t c = 0; c < g->Wp; c++) {
                const qkv_real *row = dy + ((b * g->Hp + r) * g->Wp + c) * g->D;
                for (int64_t i = 0; i < g->K; i++)
                    for (int64_t j = 0; j < g->K; j++) {
                        const int64_t at = pixel_offset(g, b, r * g->P + i - g->pad, c * g->P + j - g->pad);
                        if (at < 0) continue;
                        const qkv_real *src = row + (i * g->K + j) * g->Ch;
                        for (int64_t ch = 0; ch < g->Ch; ch++) dx[at + ch] += src[ch];
                    }
            }
}
