/*
 * html_train.c: the training report, one self-contained HTML page: the title, a table of
 * settings (key/value), then for every chart its SVG (chart.c) and a table with, per series,
 * the number of points and the first, last, lowest and highest finite value with their steps.
 * The report of a run in progress reloads itself every refresh_s seconds.
 */
#include "viz_internal.h"

#include <math.h>

static qkv_status check_report(const char *fn, const qkv_train_report *r) {
    if (!r) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL report", fn);
    if (r->n_charts < 0 || r->n_charts > QKV_VIZ_MAX_CHARTS)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: n_charts = %d is outside 0 .. %d", fn,
                         r->n_charts, QKV_VIZ_MAX_CHARTS);
    if (r->n_charts > 0 && !r->charts)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: charts is NULL with n_charts = %d", fn,
                         r->n_charts);
    if (r->n_info < 0 || r->n_info > 10000)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: n_info = %d is outside 0 .. 10000", fn,
                         r->n_info);
    if (r->refresh_s < 0 || r->refresh_s > 86400)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: refresh_s = %d is outside 0 .. 86400", fn,
                         r->refresh_s);
    if (r->n_info > 0 && (!r->info_keys || !r->info_values))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: info_keys or info_values is NULL", fn);
    for (int i = 0; i < r->n_charts; i++) {
        qkv_status st = vz_check_chart(fn, &r->charts[i], i);
        if (st != QKV_OK) return st;
    }
    return QKV_OK;
}

/* "<td>value @ step</td>" with 6 significant digits. */
static void value_at(vz_buf *b, const qkv_series *s, int64_t j) {
    char v[64], x[64];
    if (j < 0) {
        vz_puts(b, "<td class=\"num\">-</td>");
        return;
    }
    vz_printf(b, "<td class=\"num\">%s @ %s</td>", vz_fmt(v, s->value[j], 6, 'g'),
              vz_fmt(x, s->step[j], 10, 'g'));
}

static void summary(vz_buf *b, const qkv_chart *c) {
    if (c->n_series == 0) return;
    vz_puts(b, "<table>\n<tr><th>series</th><th>points</th><th>first</th><th>last</th>"
               "<th>min</th><th>max</th></tr>\n");
    for (int si = 0; si < c->n_series; si++) {
        const qkv_series *s = &c->series[si];
        int64_t first = -1, last = -1, lo = -1, hi = -1;
        for (int64_t j = 0; j < s->n; j++) {
            if (!isfinite(s->value[j]) || !isfinite(s->step[j])) continue;
            if (first < 0) first = j;
            last = j;
            if (lo < 0 || s->value[j] < s->value[lo]) lo = j;
            if (hi < 0 || s->value[j] > s->value[hi]) hi = j;
        }
        vz_puts(b, "<tr><td>");
        if (s->name)
            vz_put_text(b, s->name, 200, VZ_XML);
        else
            vz_printf(b, "series %d", si);
        vz_printf(b, "</td><td class=\"num\">%lld</td>", (long long)s->n);
        value_at(b, s, first);
        value_at(b, s, last);
        value_at(b, s, lo);
        value_at(b, s, hi);
        vz_puts(b, "</tr>\n");
    }
    vz_puts(b, "</table>\n");
}

static void report(vz_buf *b, const qkv_train_report *r) {
    vz_html_begin_refresh(b, r->title ? r->title : "Training report", r->refresh_s);
    if (r->n_info > 0) {
        vz_puts(b, "<table>\n");
        for (int i = 0; i < r->n_info; i++) {
            vz_puts(b, "<tr><th>");
            vz_put_text(b, r->info_keys[i] ? r->info_keys[i] : "", 200, VZ_XML);
            vz_puts(b, "</th><td>");
            vz_put_text(b, r->info_values[i] ? r->info_values[i] : "", 200, VZ_XML);
            vz_puts(b, "</td></tr>\n");
        }
        vz_puts(b, "</table>\n");
    }
    for (int i = 0; i < r->n_charts && !b->oom; i++) {
        const qkv_chart *c = &r->charts[i];
        vz_puts(b, "<h2>");
        vz_put_text(b, c->title ? c->title : "chart", 200, VZ_XML);
        vz_puts(b, "</h2>\n");
        vz_svg_chart(b, c, false);
        summary(b, c);
    }
    if (r->n_charts == 0) vz_puts(b, "<p class=\"note\">(no charts)</p>\n");
    vz_html_end(b);
}

qkv_status qkv_train_report_html(const qkv_train_report *r, char **html, size_t *len) {
    static const char fn[] = "qkv_train_report_html";
    if (!html) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL output pointer", fn);
    *html = NULL;
    if (len) *len = 0;
    qkv_status st = check_report(fn, r);
    if (st != QKV_OK) return st;
    vz_buf b = {0};
    report(&b, r);
    return vz_finish(&b, fn, html, len);
}

qkv_status qkv_train_report_write(const char *path, const qkv_train_report *r) {
    static const char fn[] = "qkv_train_report_write";
    qkv_status st = check_report(fn, r);
    if (st != QKV_OK) return st;
    vz_buf b = {0};
    report(&b, r);
    st =
        b.oom ? QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", fn) : qkv__write_file_atomic(fn, path, b.p, b.n);
    vz_free(&b);
    return st;
}
