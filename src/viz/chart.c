/*
 * chart.c: a line chart as SVG (training curves: x = step, y = loss or a metric).
 *
 * Layout (user units): 760 wide; the plot box from x 70 to 560 and y 36 to 286; the title at
 * y 20; x tick labels under the box, the x label under them; the y label rotated at the left;
 * the legend from x 580, one 18-unit row per series. Height 330, more when the legend needs it.
 *
 * Axes. Linear: the data range (padded when flat) widened to multiples of a "nice" step, 1, 2 or
 * 5 times a power of ten, the smallest giving at most 6 intervals; ticks and grid lines at every
 * step. Logarithmic y: whole decades around the positive data, a labelled tick at every decade
 * (every k-th when there are more than 8), unlabelled grid lines at 2..9 times a power of ten
 * when there are at most 4 decades.
 *
 * Points that cannot be drawn (non-finite, |v| > 1e300, y <= 0 on a log axis) leave a gap. Within
 * one pixel column only the first, lowest, highest and last point of a run are kept, in their
 * order: the drawn polyline covers the same pixels, and a million steps make a small file.
 * A run of one point is drawn as a dot. Series colours are matplotlib's "tab10" cycle; series 10
 * and later are dashed.
 */
#include "viz_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define W 760
#define X0 70
#define X1 560
#define Y0 36
#define Y1 286
#define LEGEND_X 580
#define ROW_H 18
#define MAX_ABS 1e300

static const char *const palette[10] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                        "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

qkv_status vz_check_chart(const char *fn, const qkv_chart *c, int i) {
    if (!c) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: chart %d is NULL", fn, i);
    const char *t = c->title ? c->title : "";
    if (c->n_series < 0 || c->n_series > QKV_VIZ_MAX_SERIES)
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "%s: chart %d \"%.60s\": n_series = %d is outside 0 .. %d", fn, i, t,
                         c->n_series, QKV_VIZ_MAX_SERIES);
    if (c->n_series > 0 && !c->series)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: chart %d \"%.60s\": series is NULL", fn, i, t);
    for (int s = 0; s < c->n_series; s++) {
        const qkv_series *q = &c->series[s];
        if (q->n < 0 || q->n > QKV_VIZ_MAX_POINTS)
            return QKV_ERROR(QKV_ERR_INVALID_ARG,
                             "%s: chart %d \"%.60s\", series %d: n = %lld is outside 0 .. %d", fn,
                             i, t, s, (long long)q->n, QKV_VIZ_MAX_POINTS);
        if (q->n > 0 && (!q->step || !q->value))
            return QKV_ERROR(QKV_ERR_INVALID_ARG,
                             "%s: chart %d \"%.60s\", series %d: step or value is NULL", fn, i, t,
                             s);
    }
    return QKV_OK;
}

static bool drawable(const qkv_chart *c, double x, double y) {
    return isfinite(x) && isfinite(y) && fabs(x) <= MAX_ABS && fabs(y) <= MAX_ABS &&
           (!c->log_y || y > 0);
}

typedef struct {
    double lo, hi;  /* axis range (log axis: exponents) */
    double step;    /* tick step (log axis: decades per labelled tick) */
    int64_t k0, k1; /* ticks at k * step, k = k0 .. k1 */
    bool log;
} axis;

static void linear_axis(axis *a, double lo, double hi) {
    if (!(hi > lo)) { /* flat data: a window around it */
        double d = lo != 0 ? fabs(lo) * 0.1 : 1;
        lo -= d, hi += d;
    }
    /* the smallest of 1, 2, 5 times 10^e (from the magnitude of a sixth of the range up) whose
     * widened range has at most 6 intervals */
    double mag = pow(10, floor(log10((hi - lo) / 6)));
    static const double mult[3] = {1, 2, 5};
    double step = mag;
    for (int i = 0; i < 12; i++) {
        step = mult[i % 3] * mag * pow(10, i / 3);
        a->k0 = (int64_t)floor(lo / step + 1e-9);
        a->k1 = (int64_t)ceil(hi / step - 1e-9);
        if (a->k1 - a->k0 <= 6) break;
    }
    if (a->k1 == a->k0) a->k1++;
    a->step = step;
    a->lo = (double)a->k0 * step;
    a->hi = (double)a->k1 * step;
    a->log = false;
}

static void log_axis(axis *a, double lo, double hi) {
    double e0 = floor(log10(lo)), e1 = ceil(log10(hi));
    if (e1 <= e0) e1 = e0 + 1;
    a->lo = e0, a->hi = e1;
    a->step = ceil((e1 - e0) / 8);
    a->k0 = (int64_t)ceil(e0 / a->step), a->k1 = (int64_t)floor(e1 / a->step);
    a->log = true;
}

static double to_px(const axis *a, double v, double p0, double p1) {
    double t = a->log ? log10(v) : v;
    return p0 + (t - a->lo) / (a->hi - a->lo) * (p1 - p0);
}

/* Tick label of linear tick k or log tick k into buf[64]. */
static const char *tick_label(char *buf, const axis *a, int64_t k) {
    if (a->log) {
        int e = (int)((double)k * a->step);
        if (e >= -4 && e <= 5) return vz_fmt(buf, pow(10, e), e < 0 ? -e : 0, 'f');
        snprintf(buf, 64, "1e%d", e);
        return buf;
    }
    double v = (double)k * a->step;
    double big = fmax(fabs(a->lo), fabs(a->hi));
    if (big >= 1e6 || a->step < 1e-4) return vz_fmt(buf, v, 3, 'g');
    int dec = (int)-floor(log10(a->step) + 1e-9);
    return vz_fmt(buf, v, dec > 0 ? dec : 0, 'f');
}

/* ---- series ---------------------------------------------------------------------------------- */

typedef struct {
    vz_buf *path, *dots;
    const axis *ax, *ay;
    bool open;      /* a pixel-column group is pending */
    int64_t col;    /* its pixel column */
    int64_t idx[4]; /* first, lowest, highest, last point */
    double py_min, py_max;
    int64_t run; /* points emitted in the current run */
    double last_px, last_py;
} tracer;

static void emit(tracer *t, double px, double py) {
    vz_putc(t->path, t->run ? 'L' : 'M');
    vz_put_coord(t->path, px);
    vz_putc(t->path, ' ');
    vz_put_coord(t->path, py);
    t->run++;
    t->last_px = px, t->last_py = py;
}

static void flush_group(tracer *t, const qkv_series *s) {
    if (!t->open) return;
    t->open = false;
    int64_t v[4];
    memcpy(v, t->idx, sizeof v);
    for (int i = 1; i < 4; i++) /* sort the four indices */
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            int64_t x = v[j];
            v[j] = v[j - 1], v[j - 1] = x;
        }
    for (int i = 0; i < 4; i++)
        if (i == 0 || v[i] != v[i - 1])
            emit(t, to_px(t->ax, s->step[v[i]], X0, X1), to_px(t->ay, s->value[v[i]], Y1, Y0));
}

static void end_run(tracer *t, const qkv_series *s, const char *color) {
    flush_group(t, s);
    if (t->run == 1) {
        vz_puts(t->dots, "<circle cx=\"");
        vz_put_coord(t->dots, t->last_px);
        vz_puts(t->dots, "\" cy=\"");
        vz_put_coord(t->dots, t->last_py);
        vz_printf(t->dots, "\" r=\"2.5\" fill=\"%s\"/>\n", color);
    }
    t->run = 0;
}

static void draw_series(vz_buf *b, const qkv_chart *c, int si, const axis *ax, const axis *ay) {
    const qkv_series *s = &c->series[si];
    const char *color = palette[si % 10];
    vz_buf path = {0}, dots = {0};
    tracer t = {.path = &path, .dots = &dots, .ax = ax, .ay = ay};
    for (int64_t j = 0; j < s->n; j++) {
        double x = s->step[j], y = s->value[j];
        if (!drawable(c, x, y)) {
            end_run(&t, s, color);
            continue;
        }
        double px = to_px(ax, x, X0, X1), py = to_px(ay, y, Y1, Y0);
        int64_t col = (int64_t)floor(px);
        if (t.open && col == t.col) {
            if (py < t.py_min) t.py_min = py, t.idx[1] = j;
            if (py > t.py_max) t.py_max = py, t.idx[2] = j;
            t.idx[3] = j;
        } else {
            flush_group(&t, s);
            t.open = true;
            t.col = col;
            t.idx[0] = t.idx[1] = t.idx[2] = t.idx[3] = j;
            t.py_min = t.py_max = py;
        }
    }
    end_run(&t, s, color);
    if (path.n) {
        vz_puts(b, "<path d=\"");
        vz_put(b, path.p, path.n);
        vz_printf(
            b, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" stroke-linejoin=\"round\"%s>",
            color, si >= 10 ? " stroke-dasharray=\"6 3\"" : "");
        vz_puts(b, "<title>");
        if (s->name)
            vz_put_text(b, s->name, 200, VZ_XML);
        else
            vz_printf(b, "series %d", si);
        vz_puts(b, "</title></path>\n");
    }
    vz_put(b, dots.p, dots.n);
    if (path.oom || dots.oom) b->oom = true;
    vz_free(&path);
    vz_free(&dots);
}

/* ---- the chart ------------------------------------------------------------------------------- */

/* Grid lines at every tick (and, on a log axis of at most 4 decades, fainter ones at 2..9 times
 * each power of ten), the tick labels under and left of the plot box, then the box itself. */
static void draw_grid_and_ticks(vz_buf *b, const axis *ax, const axis *ay) {
    char buf[64];
    vz_puts(b, "<g stroke=\"#e5e5e5\" shape-rendering=\"crispEdges\">\n");
    if (ay->log && ay->hi - ay->lo <= 4)
        for (double e = ay->lo; e < ay->hi; e++)
            for (int m = 2; m <= 9; m++) {
                double py = to_px(ay, m * pow(10, e), Y1, Y0);
                vz_printf(b, "<line x1=\"%d\" x2=\"%d\" y1=\"", X0, X1);
                vz_put_coord(b, py);
                vz_puts(b, "\" y2=\"");
                vz_put_coord(b, py);
                vz_puts(b, "\" stroke=\"#f2f2f2\"/>\n");
            }
    for (int64_t k = ax->k0; k <= ax->k1; k++) {
        double px = to_px(ax, (double)k * ax->step, X0, X1);
        vz_puts(b, "<line x1=\"");
        vz_put_coord(b, px);
        vz_puts(b, "\" x2=\"");
        vz_put_coord(b, px);
        vz_printf(b, "\" y1=\"%d\" y2=\"%d\"/>\n", Y0, Y1);
    }
    for (int64_t k = ay->k0; k <= ay->k1; k++) {
        double v = (double)k * ay->step;
        double py = to_px(ay, ay->log ? pow(10, v) : v, Y1, Y0);
        vz_printf(b, "<line x1=\"%d\" x2=\"%d\" y1=\"", X0, X1);
        vz_put_coord(b, py);
        vz_puts(b, "\" y2=\"");
        vz_put_coord(b, py);
        vz_puts(b, "\"/>\n");
    }
    vz_puts(b, "</g>\n<g text-anchor=\"middle\">\n");
    for (int64_t k = ax->k0; k <= ax->k1; k++) {
        vz_puts(b, "<text x=\"");
        vz_put_coord(b, to_px(ax, (double)k * ax->step, X0, X1));
        vz_printf(b, "\" y=\"%d\">%s</text>\n", Y1 + 16, tick_label(buf, ax, k));
    }
    vz_puts(b, "</g>\n<g text-anchor=\"end\">\n");
    for (int64_t k = ay->k0; k <= ay->k1; k++) {
        double v = (double)k * ay->step;
        vz_printf(b, "<text x=\"%d\" y=\"", X0 - 6);
        vz_put_coord(b, to_px(ay, ay->log ? pow(10, v) : v, Y1, Y0) + 4);
        vz_printf(b, "\">%s</text>\n", tick_label(buf, ay, k));
    }
    vz_puts(b, "</g>\n");
    vz_printf(b,
              "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
              "stroke=\"#888888\" shape-rendering=\"crispEdges\"/>\n",
              X0, Y0, X1 - X0, Y1 - Y0);
}

/* One row per series from LEGEND_X: a line in the series' colour and dash, then its name cut to
 * 22 columns (the whole name as a tooltip when cut), or "series <i>" for an unnamed one. */
static void draw_legend(vz_buf *b, const qkv_chart *c) {
    for (int s = 0; s < c->n_series; s++) {
        int y = Y0 + 8 + ROW_H * s;
        vz_printf(b,
                  "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"%s\" "
                  "stroke-width=\"2\"%s/>\n",
                  LEGEND_X, LEGEND_X + 20, y, y, palette[s % 10],
                  s >= 10 ? " stroke-dasharray=\"6 3\"" : "");
        vz_printf(b, "<text x=\"%d\" y=\"%d\">", LEGEND_X + 26, y + 4);
        const char *name = c->series[s].name;
        if (name) {
            vz_put_text(b, name, 22, VZ_XML);
            if (vz_text_cols(name, 23, VZ_XML) > 22) {
                vz_puts(b, "<title>");
                vz_put_text(b, name, 200, VZ_XML);
                vz_puts(b, "</title>");
            }
        } else {
            vz_printf(b, "series %d", s);
        }
        vz_puts(b, "</text>\n");
    }
}

void vz_svg_chart(vz_buf *b, const qkv_chart *c, bool standalone) {
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (int s = 0; s < c->n_series; s++)
        for (int64_t j = 0; j < c->series[s].n; j++) {
            double x = c->series[s].step[j], y = c->series[s].value[j];
            if (!drawable(c, x, y)) continue;
            xlo = fmin(xlo, x), xhi = fmax(xhi, x), ylo = fmin(ylo, y), yhi = fmax(yhi, y);
        }
    bool any = xlo <= xhi;
    int64_t H = 330;
    if (Y0 + ROW_H * (int64_t)c->n_series + 10 > H) H = Y0 + ROW_H * (int64_t)c->n_series + 10;

    if (standalone) vz_puts(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    vz_printf(b,
              "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%lld\" "
              "viewBox=\"0 0 %d %lld\" font-family=\"sans-serif\" font-size=\"11\" role=\"img\">\n",
              W, (long long)H, W, (long long)H);
    vz_puts(b, "<title>");
    vz_put_text(b, c->title ? c->title : "chart", 200, VZ_XML);
    vz_puts(b, "</title>\n");
    vz_printf(b, "<rect width=\"%d\" height=\"%lld\" fill=\"#ffffff\"/>\n", W, (long long)H);
    vz_printf(b, "<text x=\"%d\" y=\"20\" font-size=\"13\" font-weight=\"bold\">", X0);
    vz_put_text(b, c->title ? c->title : "", 80, VZ_XML);
    vz_puts(b, c->log_y ? " (log scale)</text>\n" : "</text>\n");
    vz_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", (X0 + X1) / 2, Y1 + 36);
    vz_put_text(b, c->x_label ? c->x_label : "step", 60, VZ_XML);
    vz_puts(b, "</text>\n");
    if (c->y_label) {
        vz_printf(b, "<text transform=\"translate(16,%d) rotate(-90)\" text-anchor=\"middle\">",
                  (Y0 + Y1) / 2);
        vz_put_text(b, c->y_label, 40, VZ_XML);
        vz_puts(b, "</text>\n");
    }

    if (!any) {
        vz_printf(b,
                  "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
                  "stroke=\"#888888\"/>\n",
                  X0, Y0, X1 - X0, Y1 - Y0);
        vz_printf(b,
                  "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#666666\">(no data)"
                  "</text>\n</svg>\n",
                  (X0 + X1) / 2, (Y0 + Y1) / 2);
        return;
    }
    axis ax, ay;
    linear_axis(&ax, xlo, xhi);
    if (c->log_y)
        log_axis(&ay, ylo, yhi);
    else
        linear_axis(&ay, ylo, yhi);

    draw_grid_and_ticks(b, &ax, &ay);
    for (int s = 0; s < c->n_series && !b->oom; s++)
        draw_series(b, c, s, &ax, &ay);
    draw_legend(b, c);
    vz_puts(b, "</svg>\n");
}

qkv_status qkv_chart_svg(const qkv_chart *c, char **svg, size_t *len) {
    static const char fn[] = "qkv_chart_svg";
    if (!svg) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL output pointer", fn);
    *svg = NULL;
    if (len) *len = 0;
    qkv_status st = vz_check_chart(fn, c, 0);
    if (st != QKV_OK) return st;
    vz_buf b = {0};
    vz_svg_chart(&b, c, true);
    return vz_finish(&b, fn, svg, len);
}
