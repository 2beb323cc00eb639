/*
 * attn_map.c: the qkv_attn_map description: option defaults, argument checks (every writer
 * calls vz_check_map before it touches a map), weight and label access, titles.
 */
#include "viz_internal.h"

#include <stdio.h>
#include <string.h>

qkv_viz_opts qkv_viz_default_opts(void) {
    return (qkv_viz_opts){.svg_cell = 20,
                          .png_cell = 8,
                          .png_ticks = true,
                          .png_stored = false,
                          .max_label_chars = 24};
}

static int clamp_opt(int v, int def, int lo, int hi) {
    if (v <= 0) return def;
    return v < lo ? lo : v > hi ? hi : v;
}

qkv_viz_opts vz_opts(const qkv_viz_opts *o) {
    qkv_viz_opts d = qkv_viz_default_opts();
    if (!o) return d;
    qkv_viz_opts r = *o;
    r.svg_cell = clamp_opt(o->svg_cell, d.svg_cell, 4, 64);
    r.png_cell = clamp_opt(o->png_cell, d.png_cell, 1, 64);
    r.max_label_chars = clamp_opt(o->max_label_chars, d.max_label_chars, 1, 200);
    return r;
}

const char *vz_kind_name(qkv_attn_kind k) {
    switch (k) {
    case QKV_ATTN_SELF:
        return "self";
    case QKV_ATTN_MASKED_SELF:
        return "masked self";
    case QKV_ATTN_CROSS:
        return "cross";
    }
    return "?";
}

const char *vz_kind_heading(qkv_attn_kind k) {
    switch (k) {
    case QKV_ATTN_SELF:
        return "self-attention";
    case QKV_ATTN_MASKED_SELF:
        return "masked self-attention";
    case QKV_ATTN_CROSS:
        return "cross-attention";
    }
    return "?";
}

const char *qkv_attn_map_title(const qkv_attn_map *m, char *buf, size_t size) {
    if (!buf || size == 0) return buf;
    buf[0] = '\0';
    if (!m) return buf;
    if (m->title) {
        snprintf(buf, size, "%s", m->title);
        return buf;
    }
    size_t k = 0;
#define APPEND(...)                                                                                \
    do {                                                                                           \
        if (k < size) k += (size_t)snprintf(buf + k, size - k, __VA_ARGS__);                       \
    } while (0)
    if (m->stack && m->stack[0]) APPEND("%s", m->stack);
    if (m->layer >= 0) APPEND("%slayer %d", k ? " " : "", m->layer);
    if (m->head >= 0) APPEND("%shead %d", k ? ", " : "", m->head);
    if (k)
        APPEND(" (%s)", vz_kind_name(m->kind));
    else
        APPEND("%s", vz_kind_heading(m->kind));
#undef APPEND
    return buf;
}

qkv_status vz_check_map(const char *fn, const qkv_attn_map *m, int64_t i) {
    char where[48] = "";
    if (i >= 0) snprintf(where, sizeof where, " %lld", (long long)i);
    if (!m) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: map%s is NULL", fn, where);
    char title[80];
    qkv_attn_map_title(m, title, sizeof title);
#define BAD(...)                                                                                   \
    do {                                                                                           \
        char why_[160];                                                                            \
        snprintf(why_, sizeof why_, __VA_ARGS__);                                                  \
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: map%s \"%s\": %s", fn, where, title, why_);     \
    } while (0)
    if ((int)m->kind < 0 || (int)m->kind > 2)
        BAD("kind %d is not QKV_ATTN_SELF, _MASKED_SELF or _CROSS", (int)m->kind);
    if (m->rows < 0 || m->cols < 0)
        BAD("negative size %lld x %lld", (long long)m->rows, (long long)m->cols);
    if (m->rows > QKV_VIZ_MAX_TOKENS || m->cols > QKV_VIZ_MAX_TOKENS)
        BAD("%lld x %lld tokens exceed the limit of %d per axis", (long long)m->rows,
            (long long)m->cols, QKV_VIZ_MAX_TOKENS);
    if (m->rows * m->cols > QKV_VIZ_MAX_CELLS)
        BAD("%lld x %lld = %lld cells exceed the limit of %d", (long long)m->rows,
            (long long)m->cols, (long long)(m->rows * m->cols), QKV_VIZ_MAX_CELLS);
    if (m->rows * m->cols == 0) return QKV_OK; /* nothing is read */
    if (m->dtype != QKV_F32 && m->dtype != QKV_F64)
        BAD("dtype %d: weights must be QKV_F32 or QKV_F64", (int)m->dtype);
    if (!m->weights) BAD("weights is NULL");
    if (m->ld != 0 && m->ld < m->cols)
        BAD("row stride ld = %lld is less than cols = %lld", (long long)m->ld, (long long)m->cols);
    if (m->ld > INT64_MAX / 8 / m->rows) BAD("row stride ld = %lld is too large", (long long)m->ld);
#undef BAD
    return QKV_OK;
}

double vz_weight(const qkv_attn_map *m, int64_t r, int64_t c) {
    int64_t ld = m->ld ? m->ld : m->cols;
    int64_t k = r * ld + c;
    return m->dtype == QKV_F32 ? (double)((const float *)m->weights)[k]
                               : ((const double *)m->weights)[k];
}

const char *vz_label(const qkv_attn_map *m, int axis, int64_t i, char *tmp) {
    const char *const *labels = axis == 0 ? m->row_labels : m->col_labels;
    if (labels && labels[i]) return labels[i];
    snprintf(tmp, 24, "%lld", (long long)i);
    return tmp;
}
