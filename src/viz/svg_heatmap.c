/*
 * svg_heatmap.c: one attention map as an SVG heatmap.
 *
 * Layout (integer user units; C = opts.svg_cell, text 11 px sans-serif estimated at 7 px per
 * column, wide characters 14):
 *   title           baseline at y = 23, 13 px bold
 *   query labels    right-aligned at x = gx - 4, one per row, vertically centred on the row
 *   key labels      rotated -90 degrees, starting 4 px above the grid, one per column
 *   grid            origin (gx, gy) = (10 + row label width, 32 + column label height);
 *                   cell (r, c) at (gx + c C, gy + r C), C x C, viridis colour, a <title>
 *                   "query (r) → key (c): weight" that browsers show on hover
 *   colour bar      16 px right of the grid, 12 px wide, as tall as the grid (at least 100 px):
 *                   50 bands from 1 (top) to 0, labelled 1, 0.5, 0
 * Label widths: 7 px per column of the longest label after cutting to max_label_chars, + 8.
 * A cut label carries its full text (up to 200 characters) as a <title>. NaN cells are grey with
 * a cross that lets the hover through (pointer-events none).
 */
#include "viz_internal.h"

#define PAD 10
#define TITLE_H 22
#define CHAR_W 7
#define TOOLTIP_CHARS 200
#define BAR_BANDS 50

static int max_label_cols(const qkv_attn_map *m, int axis, int max_chars) {
    int64_t n = axis == 0 ? m->rows : m->cols;
    int w = 1;
    char tmp[24];
    for (int64_t i = 0; i < n; i++) {
        int k = vz_text_cols(vz_label(m, axis, i, tmp), max_chars, VZ_XML);
        if (k > w) w = k;
    }
    return w;
}

/* The label text, and a <title> with more of it when the label was cut. */
static void put_label(vz_buf *b, const char *s, int max_chars) {
    int full = vz_text_cols(s, max_chars + 1, VZ_XML);
    vz_put_text(b, s, max_chars, VZ_XML);
    if (full > max_chars) {
        vz_puts(b, "<title>");
        vz_put_text(b, s, TOOLTIP_CHARS, VZ_XML);
        vz_puts(b, "</title>");
    }
}

void vz_svg_heatmap(vz_buf *b, const qkv_attn_map *m, const qkv_viz_opts *o, bool standalone) {
    const int C = o->svg_cell, L = o->max_label_chars;
    const int64_t R = m->rows, K = m->cols;
    const bool empty = R == 0 || K == 0;
    char title[512], tmp[24], tmp2[24], num[32], hex[8];
    qkv_attn_map_title(m, title, sizeof title);

    const int64_t gx = PAD + CHAR_W * max_label_cols(m, 0, L) + 8;
    const int64_t gy = PAD + TITLE_H + CHAR_W * max_label_cols(m, 1, L) + 8;
    const int64_t bh = R * C > 100 ? R * C : 100; /* colour bar height */
    const int64_t bx = gx + K * C + 16, bw = 12;
    int64_t W = empty ? gx + 20 * CHAR_W + PAD : bx + bw + 4 + 3 * CHAR_W + PAD;
    int64_t H = empty ? gy + R * C + 24 + PAD : gy + bh + PAD;
    int64_t title_w = 2 * PAD + (CHAR_W + 1) * vz_text_cols(title, 120, VZ_XML);
    if (W < title_w) W = title_w;

    if (standalone) vz_puts(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    vz_printf(b,
              "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%lld\" height=\"%lld\" "
              "viewBox=\"0 0 %lld %lld\" font-family=\"sans-serif\" font-size=\"11\" "
              "role=\"img\">\n",
              (long long)W, (long long)H, (long long)W, (long long)H);
    vz_puts(b, "<title>");
    vz_put_text(b, title, 500, VZ_XML);
    vz_puts(b, "</title>\n");
    vz_printf(b, "<rect width=\"%lld\" height=\"%lld\" fill=\"#ffffff\"/>\n", (long long)W,
              (long long)H);
    vz_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"13\" font-weight=\"bold\">", PAD, PAD + 13);
    vz_put_text(b, title, 120, VZ_XML);
    vz_puts(b, "</text>\n");

    /* query labels (rows) */
    vz_puts(b, "<g text-anchor=\"end\">\n");
    for (int64_t r = 0; r < R; r++) {
        vz_printf(b, "<text x=\"%lld\" y=\"%lld\">", (long long)(gx - 4),
                  (long long)(gy + r * C + C / 2 + 4));
        put_label(b, vz_label(m, 0, r, tmp), L);
        vz_puts(b, "</text>\n");
    }
    vz_puts(b, "</g>\n");
    /* key labels (columns), reading upwards */
    vz_puts(b, "<g>\n");
    for (int64_t c = 0; c < K; c++) {
        vz_printf(b, "<text transform=\"translate(%lld,%lld) rotate(-90)\">",
                  (long long)(gx + c * C + C / 2 + 4), (long long)(gy - 4));
        put_label(b, vz_label(m, 1, c, tmp), L);
        vz_puts(b, "</text>\n");
    }
    vz_puts(b, "</g>\n");

    if (empty) {
        vz_printf(b,
                  "<text x=\"%lld\" y=\"%lld\" fill=\"#666666\">(empty map: %lld x %lld)</text>\n",
                  (long long)gx, (long long)(gy + R * C + 16), (long long)R, (long long)K);
        vz_puts(b, "</svg>\n");
        return;
    }

    /* cells */
    vz_puts(b, "<g shape-rendering=\"crispEdges\">\n");
    for (int64_t r = 0; r < R && !b->oom; r++) {
        const char *q = vz_label(m, 0, r, tmp);
        for (int64_t c = 0; c < K; c++) {
            double w = vz_weight(m, r, c);
            int64_t x = gx + c * C, y = gy + r * C;
            bool nan = w != w;
            vz_printf(b, "<rect x=\"%lld\" y=\"%lld\" width=\"%d\" height=\"%d\" fill=\"%s\">",
                      (long long)x, (long long)y, C, C,
                      nan ? VZ_NAN_FILL : vz_hex(hex, vz_viridis(w)));
            vz_puts(b, "<title>");
            vz_put_text(b, q, TOOLTIP_CHARS, VZ_XML);
            vz_printf(b, " (%lld) \xE2\x86\x92 ", (long long)r); /* U+2192 rightwards arrow */
            vz_put_text(b, vz_label(m, 1, c, tmp2), TOOLTIP_CHARS, VZ_XML);
            vz_printf(b, " (%lld): %s</title></rect>", (long long)c,
                      vz_fmt_exact(num, w, m->dtype == QKV_F32));
            if (nan)
                vz_printf(b,
                          "<path d=\"M%lld %lldl%d %dm%d 0l%d %d\" stroke=\"" VZ_NAN_STROKE
                          "\" pointer-events=\"none\"/>",
                          (long long)x, (long long)y, C, C, -C, C, -C);
            vz_putc(b, '\n');
        }
    }
    vz_puts(b, "</g>\n");

    /* colour bar: BAR_BANDS bands, value 1 at the top */
    vz_puts(b, "<g shape-rendering=\"crispEdges\">\n");
    for (int i = 0; i < BAR_BANDS; i++) {
        int64_t y0 = gy + (i * bh + BAR_BANDS / 2) / BAR_BANDS;
        int64_t y1 = gy + ((i + 1) * bh + BAR_BANDS / 2) / BAR_BANDS;
        double v = 1.0 - (i + 0.5) / BAR_BANDS;
        vz_printf(b, "<rect x=\"%lld\" y=\"%lld\" width=\"%lld\" height=\"%lld\" fill=\"%s\"/>\n",
                  (long long)bx, (long long)y0, (long long)bw, (long long)(y1 - y0),
                  vz_hex(hex, vz_viridis(v)));
    }
    vz_printf(b,
              "<rect x=\"%lld\" y=\"%lld\" width=\"%lld\" height=\"%lld\" fill=\"none\" "
              "stroke=\"#444444\"/>\n",
              (long long)bx, (long long)gy, (long long)bw, (long long)bh);
    vz_puts(b, "</g>\n");
    static const char *const tick_text[3] = {"1", "0.5", "0"};
    for (int i = 0; i < 3; i++)
        vz_printf(b, "<text x=\"%lld\" y=\"%lld\">%s</text>\n", (long long)(bx + bw + 4),
                  (long long)(gy + i * bh / 2 + 4), tick_text[i]);
    vz_puts(b, "</svg>\n");
}

qkv_status qkv_attn_svg(const qkv_attn_map *m, const qkv_viz_opts *o, char **svg, size_t *len) {
    static const char fn[] = "qkv_attn_svg";
    if (!svg) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL output pointer", fn);
    *svg = NULL;
    if (len) *len = 0;
    qkv_status st = vz_check_map(fn, m, -1);
    if (st != QKV_OK) return st;
    qkv_viz_opts opts = vz_opts(o);
    vz_buf b = {0};
    vz_svg_heatmap(&b, m, &opts, true);
    return vz_finish(&b, fn, svg, len);
}

qkv_status qkv_attn_svg_write(const char *path, const qkv_attn_map *m, const qkv_viz_opts *o) {
    static const char fn[] = "qkv_attn_svg_write";
    qkv_status st = vz_check_map(fn, m, -1);
    if (st != QKV_OK) return st;
    qkv_viz_opts opts = vz_opts(o);
    vz_buf b = {0};
    vz_svg_heatmap(&b, m, &opts, true);
    char *p;
    size_t n;
    st = vz_finish(&b, fn, &p, &n);
    if (st != QKV_OK) return st;
    st = qkv__write_file_atomic(fn, path, p, n);
    qkv_viz_free(p);
    return st;
}
