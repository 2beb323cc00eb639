/*
 * viz_internal.h (internal): what the writers of src/viz share: a growable output buffer, UTF-8
 * label sanitising and escaping, locale-independent number formatting, the colour map, the zlib
 * stream writer, atomic file writes, and the checks and accessors of qkv_attn_map.
 */
#ifndef QKV_VIZ_INTERNAL_H
#define QKV_VIZ_INTERNAL_H

#include "qkv/qkv_viz.h"
#include "../core/internal.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- output buffer (buf.c) ------------------------------------------------------------------- */

/* Bytes appended at the end; on allocation failure `oom` is set and later appends are ignored,
 * so writers check once at the end. */
typedef struct vz_buf {
    char *p;
    size_t n, cap;
    bool oom;
} vz_buf;

void vz_put(vz_buf *b, const void *s, size_t n);
void vz_puts(vz_buf *b, const char *s);
void vz_putc(vz_buf *b, char c);
/* printf into the buffer: for integers and strings only (floats go through vz_fmt_*). */
void vz_printf(vz_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void vz_free(vz_buf *b);
/* Hand the bytes (NUL-terminated) to the caller: *out, *len; QKV_ERR_OOM after a failed append
 * (the buffer is freed either way). */
qkv_status vz_finish(vz_buf *b, const char *fn, char **out, size_t *len);

/* ---- text (text.c) --------------------------------------------------------------------------- */

typedef enum vz_text_mode {
    VZ_XML,       /* escaped for XML/HTML text and attribute values */
    VZ_TERM_UTF8, /* raw UTF-8 for a terminal */
    VZ_TERM_ASCII /* printable ASCII only */
} vz_text_mode;

/* The next code point of s at *i (advancing *i); invalid or truncated sequences, overlong forms,
 * surrogates and values above U+10FFFF yield U+FFFD and advance by one byte. */
uint32_t vz_utf8_next(const char *s, size_t *i);
/* What a code point of a label is shown as: controls as control pictures (U+2400 + c, DEL as
 * U+2421), C1 controls and U+FFFE/U+FFFF as U+FFFD; every other code point as itself. */
uint32_t vz_visible(uint32_t cp);
/* Terminal columns of a visible code point: 0 combining marks and zero-width characters,
 * 2 East Asian wide and fullwidth characters and emoji, 1 otherwise. */
int vz_cp_width(uint32_t cp);
/* Append s as shown in mode: at most max_cols columns (characters in VZ_XML mode, where width
 * is not known), cut with an ellipsis ("…", "~" in ASCII) that takes the last column.
 * Returns the columns written. s NULL: nothing. */
int vz_put_text(vz_buf *b, const char *s, int max_cols, vz_text_mode mode);
/* Columns (characters in VZ_XML mode) vz_put_text would write; stops counting at max_cols. */
int vz_text_cols(const char *s, int max_cols, vz_text_mode mode);

/* ---- numbers (text.c) ------------------------------------------------------------------------ */

/* The shortest decimal (%.{1..17}g) that reads back to v as a float (single) or double:
 * "0.1", "1", "2.5e-07"; "NaN", "inf", "-inf". buf holds 32 bytes. */
const char *vz_fmt_exact(char *buf, double v, bool single);
/* printf("%.{prec}{conv}") with '.' as the decimal point whatever the locale; buf 64 bytes. */
const char *vz_fmt(char *buf, double v, int prec, char conv);
/* A coordinate with one decimal ("12.5", "-3", "40"), rounded half away from zero; |v| < 1e15. */
void vz_put_coord(vz_buf *b, double v);

/* ---- colours (colormap.c) -------------------------------------------------------------------- */

typedef struct vz_rgb {
    unsigned char r, g, b;
} vz_rgb;

/* viridis at v clamped to [0, 1] (+inf: 1, -inf: 0); v must not be NaN. */
vz_rgb vz_viridis(double v);
/* "#rrggbb" (lowercase) into buf[8]. */
const char *vz_hex(char *buf, vz_rgb c);
/* The xterm-256 palette index (16 .. 255: 6x6x6 cube and grey ramp) nearest to c in RGB. */
int vz_xterm256(vz_rgb c);

#define VZ_NAN_FILL "#c8c8c8"   /* grey of a NaN cell */
#define VZ_NAN_STROKE "#808080" /* its cross */

/* ---- zlib stream (deflate.c) ----------------------------------------------------------------- */

uint32_t vz_crc32(uint32_t crc, const void *p, size_t n);     /* start with crc = 0 */
uint32_t vz_adler32(uint32_t adler, const void *p, size_t n); /* start with adler = 1 */
/* Append an RFC 1950 zlib stream of data (header 78 01, deflate data, Adler-32): stored blocks
 * of at most 65535 bytes, or one fixed-Huffman block with greedy LZ77 matches (32 KiB window,
 * hash chains of at most 64 candidates). Deterministic. false when out of memory. */
bool vz_zlib(vz_buf *out, const unsigned char *data, size_t n, bool stored);

/* ---- PNG (png.c) ----------------------------------------------------------------------------- */

/* A PNG file (IHDR 8-bit RGB, IDAT chunks of at most 1 MiB, IEND) of a w x h image, rows top to
 * bottom of 3 * w bytes; each row is filtered with the PNG filter (none, sub, up, average,
 * Paeth) of least sum of absolute signed bytes. false when out of memory. */
bool vz_png_encode(vz_buf *out, const unsigned char *rgb, int w, int h, bool stored);

/* ---- files (file.c) -------------------------------------------------------------------------- */

/* Create directory dir unless it exists as a directory. */
qkv_status vz_make_dir(const char *fn, const char *dir);

/* ---- attention maps (attn_map.c) ------------------------------------------------------------- */

/* Options with defaults filled in and values clamped to their ranges. */
qkv_viz_opts vz_opts(const qkv_viz_opts *o);
/* Check a map description; the message starts with fn and names the map (index i when >= 0). */
qkv_status vz_check_map(const char *fn, const qkv_attn_map *m, int64_t i);
/* Weight at (r, c) as a double. */
double vz_weight(const qkv_attn_map *m, int64_t r, int64_t c);
/* Label of query r (axis 0) or key c (axis 1): the caller's string or the index in tmp[24]. */
const char *vz_label(const qkv_attn_map *m, int axis, int64_t i, char *tmp);
/* "self", "masked self", "cross" (titles) and "self-attention" ... (headings). */
const char *vz_kind_name(qkv_attn_kind k);
const char *vz_kind_heading(qkv_attn_kind k);

/* The PNG of one map appended to out (attn_png.c); QKV_ERR_INVALID_ARG when the image would
 * exceed the size limits (vz_check_png_size tells beforehand). */
qkv_status vz_png_map(const char *fn, const qkv_attn_map *m, const qkv_viz_opts *o, vz_buf *out);
qkv_status vz_check_png_size(const char *fn, const qkv_attn_map *m, const qkv_viz_opts *o);
/* The SVG of one map appended to b; standalone adds the XML declaration. (svg_heatmap.c) */
void vz_svg_heatmap(vz_buf *b, const qkv_attn_map *m, const qkv_viz_opts *o, bool standalone);
/* The SVG of one chart appended to b (chart.c); the chart was checked by vz_check_chart. */
void vz_svg_chart(vz_buf *b, const qkv_chart *c, bool standalone);
qkv_status vz_check_chart(const char *fn, const qkv_chart *c, int i);
/* The document head (doctype, charset, title, the shared CSS) and the opening <body> with an
 * <h1> of the title (html.c). */
void vz_html_begin(vz_buf *b, const char *title);
/* The same, reloading itself every refresh_s seconds when refresh_s > 0. */
void vz_html_begin_refresh(vz_buf *b, const char *title, int refresh_s);
void vz_html_end(vz_buf *b);

#endif
