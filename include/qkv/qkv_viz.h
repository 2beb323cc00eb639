/*
 * qkv_viz.h: rendering of attention maps and training curves. Plain arrays in, files out; no
 * model code, no tensors, no dependencies beyond libc.
 *
 * Attention maps (one query-by-key weight matrix per layer, head and kind of attention):
 *   - SVG: a heatmap with the query tokens down the left and the key tokens (rotated) across the
 *     top, a colour bar, and a tooltip (<title>) per cell with the query, the key and the exact
 *     weight;
 *   - PNG: every cell an N x N block of pixels, optional text-free tick marks (8-bit RGB, written
 *     from scratch: zlib stream with fixed-Huffman LZ77 or stored deflate blocks, CRC-32,
 *     Adler-32);
 *   - HTML: one self-contained page (inline SVG and CSS, no script, no external resource) with
 *     the input and output tokens and every map, grouped by stack, layer and kind;
 *   - terminal: a shaded view (Unicode blocks, 256-colour backgrounds, or ASCII).
 * Training curves: an HTML report with one SVG line chart per metric (several series, linear or
 * logarithmic y axis) and a summary table.
 *
 * Colours: weights are clamped to [0, 1] (+inf to 1, -inf to 0) and mapped through viridis
 * (matplotlib's perceptually uniform map, 33 samples interpolated linearly in sRGB: 0 is
 * #440154, 1 is #fde725). NaN cells are grey and crossed (SVG), grey and hatched (PNG), "??"
 * (terminal). Tooltips show the value itself: the shortest decimal that reads back to the same
 * float (F32) or double (F64), "NaN", "inf", "-inf".
 *
 * Labels are UTF-8. Invalid bytes become U+FFFD; C0 controls and DEL become their visible
 * Unicode "control pictures" (newline shows as U+240A), C1 controls and the non-characters
 * U+FFFE, U+FFFF become U+FFFD, so no label can break the XML or send escape codes to a
 * terminal. Markup characters are escaped (&amp; &lt; &gt; &quot; &#39;). Labels are cut to
 * max_label_chars characters with a trailing "…" (tooltips keep up to 200).
 *
 * Output is deterministic: the same input gives the same bytes (no time stamps, no hash order,
 * numbers formatted independently of the C locale's decimal point).
 *
 * Files are written to "<path>.tmp.<pid>.<n>", flushed with fsync and renamed over <path>, so a
 * reader never sees half a file; on failure the temporary file is removed and the status is
 * QKV_ERR_IO with "<function>: <path>: <what> failed: <strerror>". Sizes are bounded (the limits
 * below); beyond them, and for malformed descriptions, calls return QKV_ERR_INVALID_ARG with a
 * message naming the map and the field. No input makes a call crash: empty maps render as an
 * empty frame with their title, NULL labels render as the token indices.
 */
#ifndef QKV_VIZ_H
#define QKV_VIZ_H

#include "qkv.h"

#include <stdbool.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define QKV_VIZ_MAX_TOKENS 4096          /* rows or columns of one map */
#define QKV_VIZ_MAX_CELLS (1 << 20)      /* rows * columns of one map */
#define QKV_VIZ_MAX_PAGE_CELLS (1 << 23) /* cells of all maps on one HTML page */
#define QKV_VIZ_MAX_MAPS 65536           /* maps on one page */
#define QKV_VIZ_MAX_PNG_SIDE 16384       /* PNG width or height in pixels */
#define QKV_VIZ_MAX_PNG_PIXELS (1 << 25) /* PNG width * height */
#define QKV_VIZ_MAX_SERIES 64            /* series of one chart */
#define QKV_VIZ_MAX_CHARTS 256           /* charts of one report */
#define QKV_VIZ_MAX_POINTS (1 << 24)     /* points of one series */
#define QKV_VIZ_MAX_TOKENS_LISTED 100000 /* input or output tokens listed on a page */

/* ---- attention maps ------------------------------------------------------------------------ */

typedef enum qkv_attn_kind {
    QKV_ATTN_SELF = 0,        /* encoder self-attention */
    QKV_ATTN_MASKED_SELF = 1, /* decoder (causal) self-attention */
    QKV_ATTN_CROSS = 2        /* decoder queries over encoder keys */
} qkv_attn_kind;

typedef struct qkv_attn_map {
    /* Shown above the map. NULL: made from the fields below, "encoder layer 2, head 3 (self)"
     * (parts with a negative number or a NULL stack are left out). */
    const char *title;
    const char *stack; /* "encoder", "decoder", ... (grouping and file names); NULL: none */
    int layer, head;   /* as the caller numbers them (qkv uses 0-based); negative: none */
    qkv_attn_kind kind;
    int64_t rows, cols;  /* T query tokens, S key tokens; 0 is allowed (an empty map) */
    qkv_dtype dtype;     /* QKV_F32 or QKV_F64 (QKV_REAL for a qkv_real array) */
    const void *weights; /* row r, column c at weights[r * ld + c]; may be NULL when empty */
    int64_t ld;          /* row stride in elements, >= cols; 0 means cols */
    const char *const *row_labels; /* rows query tokens; NULL (or a NULL entry): the index */
    const char *const *col_labels; /* cols key tokens; NULL (or a NULL entry): the index */
} qkv_attn_map;

/* Writer options. Integer fields: 0 (or less) selects the default, other values are clamped to
 * the range given. */
typedef struct qkv_viz_opts {
    int svg_cell;        /* side of an SVG cell in px, 4 .. 64 (default 20) */
    int png_cell;        /* N: a cell is an N x N pixel block, 1 .. 64 (default 8) */
    bool png_ticks;      /* a 6 px white margin on the top and left with a tick mark at every
                            cell, full length every 5th cell (default true) */
    bool png_stored;     /* stored (uncompressed) deflate blocks instead of fixed-Huffman LZ77
                            (default false) */
    int max_label_chars; /* labels on the axes are cut to this many characters (a wide CJK
                            character counts two), 1 .. 200 (default 24) */
} qkv_viz_opts;

/* The defaults above. Every function taking opts accepts NULL for them. */
QKV_API qkv_viz_opts qkv_viz_default_opts(void);

/* The title a map shows (its title, or the one made from its fields) into buf (always
 * NUL-terminated when size > 0); returns buf. */
QKV_API const char *qkv_attn_map_title(const qkv_attn_map *m, char *buf, size_t size);

/* An SVG document for one map (malloc'd, NUL-terminated; free with qkv_viz_free). */
QKV_API qkv_status qkv_attn_svg(const qkv_attn_map *m, const qkv_viz_opts *o, char **svg,
                                size_t *len);
QKV_API qkv_status qkv_attn_svg_write(const char *path, const qkv_attn_map *m,
                                      const qkv_viz_opts *o);

/* A PNG image of one map (malloc'd; free with qkv_viz_free). Width M + cols * N, height
 * M + rows * N (M = 6 with ticks, else 0; at least 1 pixel each way). */
QKV_API qkv_status qkv_attn_png(const qkv_attn_map *m, const qkv_viz_opts *o, unsigned char **png,
                                size_t *len);
QKV_API qkv_status qkv_attn_png_write(const char *path, const qkv_attn_map *m,
                                      const qkv_viz_opts *o);

/* What one HTML page shows. */
typedef struct qkv_attn_page {
    const char *title;               /* NULL: "Attention maps" */
    const char *const *input_tokens; /* the source sequence (encoder input); may be NULL */
    int64_t n_input;
    const char *const *output_tokens; /* the target sequence (decoder input); may be NULL */
    int64_t n_output;
    const qkv_attn_map *maps;
    int64_t n_maps;
} qkv_attn_page;

/* The page: the token lists, then one collapsible section (<details>) per (stack, layer, kind)
 * in the order the groups first appear in maps, each holding its maps in their order. */
QKV_API qkv_status qkv_attn_html(const qkv_attn_page *p, const qkv_viz_opts *o, char **html,
                                 size_t *len);
QKV_API qkv_status qkv_attn_html_write(const char *path, const qkv_attn_page *p,
                                       const qkv_viz_opts *o);

/* Everything at once into directory dir (created if missing; its parent must exist): per map i
 * "<i>-<stack>-layer<L>-head<H>-<kind>.svg" and ".png" (i zero-padded to 3 digits, parts as in
 * the title; kind "self", "masked-self", "cross"; the stack reduced to [A-Za-z0-9_.-]), and
 * "index.html", the page above with a link to each map's files. The page is written last. */
QKV_API qkv_status qkv_attn_export(const char *dir, const qkv_attn_page *p, const qkv_viz_opts *o);

/* ---- terminal ------------------------------------------------------------------------------ */

typedef enum qkv_term_style {
    QKV_TERM_AUTO = 0, /* COLOR when the stream is a terminal, NO_COLOR is unset or empty and
                          TERM is not "dumb"; BLOCKS otherwise */
    QKV_TERM_BLOCKS,   /* shades " ░▒▓█" for [0,.2) [.2,.4) [.4,.6) [.6,.8) [.8,1] */
    QKV_TERM_COLOR,    /* xterm 256-colour backgrounds (viridis), labels as in BLOCKS */
    QKV_TERM_ASCII     /* shades " .:*#", labels reduced to ASCII ('?' for other characters) */
} qkv_term_style;

typedef struct qkv_term_opts {
    qkv_term_style style;
    int width; /* columns; 0: $COLUMNS if set, else 80; clamped to 20 .. 1000 */
} qkv_term_opts;

/* The map as text: the title, a header of key indices (tens and ones digits), one line per query
 * token (its label cut to fit, then two characters per key), the key tokens as "index=label" lines,
 * and the shade legend. Keys that do not fit the width go to further blocks below. opts may be
 * NULL (AUTO, width from the environment). QKV_ERR_IO when writing fails. */
QKV_API qkv_status qkv_attn_terminal(FILE *f, const qkv_attn_map *m, const qkv_term_opts *opts);

/* ---- training report ----------------------------------------------------------------------- */

typedef struct qkv_series {
    const char *name;    /* legend; NULL: "series <i>" */
    const double *step;  /* x values (the training step), n of them */
    const double *value; /* y values; a point with a non-finite x or y, |x| or |y| > 1e300, or
                            y <= 0 on a log axis is not drawn and leaves a gap */
    int64_t n;
} qkv_series;

typedef struct qkv_chart {
    const char *title;   /* "loss" */
    const char *x_label; /* NULL: "step" */
    const char *y_label; /* NULL: none */
    bool log_y;          /* logarithmic y axis */
    const qkv_series *series;
    int n_series;
} qkv_chart;

typedef struct qkv_train_report {
    const char *title;            /* NULL: "Training report" */
    const char *const *info_keys; /* a key/value table under the title (settings) */
    const char *const *info_values;
    int n_info;
    const qkv_chart *charts;
    int n_charts;
    int refresh_s; /* > 0: the page reloads itself every refresh_s seconds (a report of a run in
                      progress, <meta http-equiv="refresh">); 0: a final report. At most 86400. */
} qkv_train_report;

/* One chart as an SVG document: axes with "nice" ticks (1, 2, 5 times a power of ten; powers of
 * ten on a log axis), grid lines, a legend; series drawn as lines, reduced to first, min, max and
 * last point per pixel column (which draws the same picture), isolated points as dots. */
QKV_API qkv_status qkv_chart_svg(const qkv_chart *c, char **svg, size_t *len);

/* The report: title, settings table, and per chart its SVG and a table (points, first, last,
 * min, max per series). */
QKV_API qkv_status qkv_train_report_html(const qkv_train_report *r, char **html, size_t *len);
QKV_API qkv_status qkv_train_report_write(const char *path, const qkv_train_report *r);

/* Frees what the functions above return (accepts NULL). */
QKV_API void qkv_viz_free(void *p);

#ifdef __cplusplus
}
#endif

#endif
