/*
 * attn_png.c: one attention map as a PNG image.
 *
 * Pixels: cell (r, c) is the N x N block at (M + c N, M + r N), N = opts.png_cell, in its viridis
 * colour; a NaN cell is hatched with diagonal stripes of greys #c8c8c8 and #969696 (2 px wide,
 * x + y mod 4 < 2 dark). With ticks, M = 6: a white margin along the top and the left with a
 * dark grey (#404040) tick in the middle of every column (row), 6 px long (the whole margin)
 * at every 5th index starting from 0 and 3 px at the others, which are left out when N < 3 so
 * the long ticks stay countable. Without ticks M = 0. An empty map is the margin alone (at least
 * 1 x 1 white pixel).
 */
#include "viz_internal.h"

#include <stdlib.h>
#include <string.h>

#define TICK_MARGIN 6

static void set_px(unsigned char *rgb, int64_t w, int64_t x, int64_t y, vz_rgb c) {
    unsigned char *p = rgb + 3 * (y * w + x);
    p[0] = c.r, p[1] = c.g, p[2] = c.b;
}

qkv_status vz_check_png_size(const char *fn, const qkv_attn_map *m, const qkv_viz_opts *o) {
    const int64_t N = o->png_cell, M = o->png_ticks ? TICK_MARGIN : 0;
    int64_t w = M + m->cols * N, h = M + m->rows * N;
    if (w <= QKV_VIZ_MAX_PNG_SIDE && h <= QKV_VIZ_MAX_PNG_SIDE && w * h <= QKV_VIZ_MAX_PNG_PIXELS)
        return QKV_OK;
    char title[80];
    return QKV_ERROR(QKV_ERR_INVALID_ARG,
                     "%s: map \"%s\": an image of %lld x %lld pixels exceeds the limit of %d per "
                     "side and %d in all; lower png_cell (now %lld)",
                     fn, qkv_attn_map_title(m, title, sizeof title), (long long)w, (long long)h,
                     QKV_VIZ_MAX_PNG_SIDE, QKV_VIZ_MAX_PNG_PIXELS, (long long)N);
}

qkv_status vz_png_map(const char *fn, const qkv_attn_map *m, const qkv_viz_opts *o, vz_buf *out) {
    qkv_status st = vz_check_png_size(fn, m, o);
    if (st != QKV_OK) return st;
    const int64_t N = o->png_cell, M = o->png_ticks ? TICK_MARGIN : 0;
    int64_t w = M + m->cols * N, h = M + m->rows * N;
    if (w < 1) w = 1;
    if (h < 1) h = 1;
    unsigned char *rgb = malloc((size_t)(w * h * 3));
    if (!rgb)
        return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory for %lld x %lld pixels", fn, (long long)w,
                         (long long)h);
    memset(rgb, 255, (size_t)(w * h * 3));
    const vz_rgb light = {200, 200, 200}, dark = {150, 150, 150}, tick = {64, 64, 64};
    for (int64_t r = 0; r < m->rows; r++)
        for (int64_t c = 0; c < m->cols; c++) {
            double v = vz_weight(m, r, c);
            bool nan = v != v;
            vz_rgb col = nan ? light : vz_viridis(v);
            for (int64_t y = M + r * N; y < M + (r + 1) * N; y++)
                for (int64_t x = M + c * N; x < M + (c + 1) * N; x++)
                    set_px(rgb, w, x, y, nan && (x + y) % 4 < 2 ? dark : col);
        }
    if (M > 0) {
        for (int64_t c = 0; c < m->cols; c++) {
            int64_t len = c % 5 == 0 ? M : N >= 3 ? M / 2 : 0;
            for (int64_t y = M - len; y < M; y++)
                set_px(rgb, w, M + c * N + (N - 1) / 2, y, tick);
        }
        for (int64_t r = 0; r < m->rows; r++) {
            int64_t len = r % 5 == 0 ? M : N >= 3 ? M / 2 : 0;
            for (int64_t x = M - len; x < M; x++)
                set_px(rgb, w, x, M + r * N + (N - 1) / 2, tick);
        }
    }
    bool ok = vz_png_encode(out, rgb, (int)w, (int)h, o->png_stored);
    free(rgb);
    return ok ? QKV_OK : QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", fn);
}

qkv_status qkv_attn_png(const qkv_attn_map *m, const qkv_viz_opts *o, unsigned char **png,
                        size_t *len) {
    static const char fn[] = "qkv_attn_png";
    if (!png) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL output pointer", fn);
    *png = NULL;
    if (len) *len = 0;
    qkv_status st = vz_check_map(fn, m, -1);
    if (st != QKV_OK) return st;
    qkv_viz_opts opts = vz_opts(o);
    vz_buf b = {0};
    st = vz_png_map(fn, m, &opts, &b);
    if (st != QKV_OK) {
        vz_free(&b);
        return st;
    }
    char *p;
    st = vz_finish(&b, fn, &p, len);
    if (st == QKV_OK) *png = (unsigned char *)p;
    return st;
}

qkv_status qkv_attn_png_write(const char *path, const qkv_attn_map *m, const qkv_viz_opts *o) {
    static const char fn[] = "qkv_attn_png_write";
    qkv_status st = vz_check_map(fn, m, -1);
    if (st != QKV_OK) return st;
    qkv_viz_opts opts = vz_opts(o);
    vz_buf b = {0};
    st = vz_png_map(fn, m, &opts, &b);
    if (st == QKV_OK && b.oom) st = QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", fn);
    if (st == QKV_OK) st = qkv__write_file_atomic(fn, path, b.p, b.n);
    vz_free(&b);
    return st;
}
