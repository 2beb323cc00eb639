/*
 * terminal.c: an attention map as text, for `qkv attn --terminal`.
 *
 *   encoder layer 0, head 0 (self)          the title, cut to the width
 *          0 1 2                            key indices: ones digits, under a line of tens
 *                                           digits (mod 10) when a block reaches key 10
 *   The   │  ░░██│                          query label (cut and padded), two shade characters
 *   cat   │▓▓    │                          per key between borders
 *   keys: 0=The  1=cat  2=sat               the key labels, wrapped to the width
 *   shades: " " [0,.2)  "░" [.2,.4) ...     the legend
 *
 * Shades (value clamped to [0, 1]): " ░▒▓█" (ASCII " .:*#") for [0, .2), [.2, .4), [.4, .6),
 * [.6, .8), [.8, 1]; NaN "??". COLOR draws each cell as two blanks on the xterm-256 background
 * nearest to its viridis colour (an escape only where the colour changes, reset at the end of
 * every row). Keys that do not fit the width go to further blocks of rows, each with its own
 * index header. Labels are made safe (control characters shown, never sent) by vz_put_text.
 */
#include "viz_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEY_LABEL_COLS 16

static const char *const shade_utf8[5] = {" ", "\xE2\x96\x91", "\xE2\x96\x92", "\xE2\x96\x93",
                                          "\xE2\x96\x88"}; /* U+2591 U+2592 U+2593 U+2588 */
static const char shade_ascii[5] = {' ', '.', ':', '*', '#'};

static int level(double v) {
    return v >= 0.8 ? 4 : v >= 0.6 ? 3 : v >= 0.4 ? 2 : v >= 0.2 ? 1 : 0;
}

static qkv_term_style pick_style(FILE *f, qkv_term_style s) {
    if (s != QKV_TERM_AUTO) return s;
    const char *no_color = getenv("NO_COLOR"), *term = getenv("TERM");
    int fd = fileno(f);
    bool tty = fd >= 0 && isatty(fd);
    bool color_ok = !(no_color && no_color[0]) && term && term[0] && strcmp(term, "dumb") != 0;
    return tty && color_ok ? QKV_TERM_COLOR : QKV_TERM_BLOCKS;
}

static int pick_width(int w) {
    if (w <= 0) {
        const char *cols = getenv("COLUMNS");
        w = cols ? atoi(cols) : 0;
        if (w <= 0) w = 80;
    }
    return w < 20 ? 20 : w > 1000 ? 1000 : w;
}

static void spaces(vz_buf *b, int n) {
    for (int i = 0; i < n; i++)
        vz_putc(b, ' ');
}

static void put_cell(vz_buf *b, double v, qkv_term_style style, int *bg) {
    bool nan = v != v;
    if (style == QKV_TERM_COLOR) {
        int want = nan ? -1 : vz_xterm256(vz_viridis(v));
        if (want != *bg) {
            if (want < 0)
                vz_puts(b, "\x1b[0m");
            else
                vz_printf(b, "\x1b[48;5;%dm", want);
            *bg = want;
        }
        vz_puts(b, nan ? "??" : "  ");
        return;
    }
    if (nan) {
        vz_puts(b, "??");
    } else if (style == QKV_TERM_ASCII) {
        vz_putc(b, shade_ascii[level(v)]);
        vz_putc(b, shade_ascii[level(v)]);
    } else {
        vz_puts(b, shade_utf8[level(v)]);
        vz_puts(b, shade_utf8[level(v)]);
    }
}

/* A list of items after a label, separated by two spaces and wrapped to W columns; continuation
 * lines are indented under the first item. */
typedef struct {
    vz_buf *b;
    int W, indent, col;
    bool first;
} wrap;

static void wrap_start(wrap *w, vz_buf *b, int W, const char *label) {
    vz_puts(b, label);
    *w = (wrap){b, W, (int)strlen(label), (int)strlen(label), true};
}

static void wrap_item(wrap *w, const vz_buf *item, int cols) {
    int sep = w->first ? 1 : 2;
    if (!w->first && w->col + sep + cols > w->W) {
        vz_putc(w->b, '\n');
        spaces(w->b, w->indent);
        w->col = w->indent;
        sep = 1;
    }
    spaces(w->b, sep);
    vz_put(w->b, item->p, item->n);
    w->col += sep + cols;
    w->first = false;
}

static void render(vz_buf *b, const qkv_attn_map *m, qkv_term_style style, int W) {
    const vz_text_mode mode = style == QKV_TERM_ASCII ? VZ_TERM_ASCII : VZ_TERM_UTF8;
    const char *border = style == QKV_TERM_ASCII ? "|" : "\xE2\x94\x82"; /* U+2502 */
    char title[512], tmp[24];
    vz_put_text(b, qkv_attn_map_title(m, title, sizeof title), W, mode);
    vz_putc(b, '\n');
    if (m->rows == 0 || m->cols == 0) {
        vz_printf(b, "(empty map: %lld x %lld)\n", (long long)m->rows, (long long)m->cols);
        return;
    }
    int cap = W / 3 < 24 ? W / 3 : 24, lw = 1;
    for (int64_t r = 0; r < m->rows; r++) {
        int k = vz_text_cols(vz_label(m, 0, r, tmp), cap, mode);
        if (k > lw) lw = k;
    }
    int64_t per_block = (W - lw - 3) / 2;
    if (per_block < 1) per_block = 1;
    for (int64_t c0 = 0; c0 < m->cols; c0 += per_block) {
        int64_t c1 = c0 + per_block < m->cols ? c0 + per_block : m->cols;
        if (c0 > 0) vz_putc(b, '\n');
        if (c1 > 10) { /* tens digits over the ones digits, from key 10 on */
            spaces(b, lw + 2);
            for (int64_t c = c0; c < c1; c++)
                vz_printf(b, c >= 10 ? " %d" : "  ", (int)(c / 10 % 10));
            vz_putc(b, '\n');
        }
        spaces(b, lw + 2);
        for (int64_t c = c0; c < c1; c++)
            vz_printf(b, " %d", (int)(c % 10));
        vz_putc(b, '\n');
        for (int64_t r = 0; r < m->rows && !b->oom; r++) {
            int k = vz_put_text(b, vz_label(m, 0, r, tmp), lw, mode);
            spaces(b, lw - k + 1);
            vz_puts(b, border);
            int bg = -1;
            for (int64_t c = c0; c < c1; c++)
                put_cell(b, vz_weight(m, r, c), style, &bg);
            if (bg >= 0) vz_puts(b, "\x1b[0m");
            vz_puts(b, border);
            vz_putc(b, '\n');
        }
    }
    /* key legend and shade legend, wrapped to the width */
    wrap w;
    wrap_start(&w, b, W, "keys:");
    vz_buf item = {0};
    for (int64_t c = 0; c < m->cols && !b->oom; c++) {
        item.n = 0;
        vz_printf(&item, "%lld=", (long long)c);
        int cols = (int)item.n + vz_put_text(&item, vz_label(m, 1, c, tmp), KEY_LABEL_COLS, mode);
        wrap_item(&w, &item, cols);
    }
    if (item.oom) b->oom = true;
    vz_putc(b, '\n');
    if (style == QKV_TERM_COLOR) {
        wrap_start(&w, b, W, "colours:");
        item.n = 0;
        vz_puts(&item, "0 ");
        int bg = -1;
        for (int i = 0; i < 5; i++)
            put_cell(&item, (i + 0.5) / 5, style, &bg);
        vz_puts(&item, "\x1b[0m 1");
        wrap_item(&w, &item, 14);
    } else {
        wrap_start(&w, b, W, "shades:");
        static const char *const range[5] = {"[0,.2)", "[.2,.4)", "[.4,.6)", "[.6,.8)", "[.8,1]"};
        for (int i = 0; i < 5; i++) {
            item.n = 0;
            vz_putc(&item, '"');
            if (style == QKV_TERM_ASCII)
                vz_putc(&item, shade_ascii[i]);
            else
                vz_puts(&item, shade_utf8[i]);
            vz_printf(&item, "\" %s", range[i]);
            wrap_item(&w, &item, 4 + (int)strlen(range[i]));
        }
    }
    item.n = 0;
    vz_puts(&item, "\"??\" NaN");
    wrap_item(&w, &item, 7);
    vz_putc(b, '\n');
    if (item.oom) b->oom = true;
    vz_free(&item);
}

qkv_status qkv_attn_terminal(FILE *f, const qkv_attn_map *m, const qkv_term_opts *opts) {
    static const char fn[] = "qkv_attn_terminal";
    if (!f) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL stream", fn);
    qkv_status st = vz_check_map(fn, m, -1);
    if (st != QKV_OK) return st;
    qkv_term_style style = pick_style(f, opts ? opts->style : QKV_TERM_AUTO);
    if ((int)style < 0 || (int)style > QKV_TERM_ASCII)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: unknown style %d", fn, (int)style);
    vz_buf b = {0};
    render(&b, m, style, pick_width(opts ? opts->width : 0));
    if (b.oom) {
        vz_free(&b);
        return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", fn);
    }
    errno = 0;
    size_t wrote = fwrite(b.p, 1, b.n, f);
    bool ok = wrote == b.n && fflush(f) == 0 && !ferror(f);
    int e = errno;
    vz_free(&b);
    if (!ok)
        return QKV_ERROR(QKV_ERR_IO, "%s: write failed: %s", fn, e ? strerror(e) : "stream error");
    return QKV_OK;
}
