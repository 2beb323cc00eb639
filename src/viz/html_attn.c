/*
 * html_attn.c: the attention page (every map of a model on one input, inline SVG) and the export
 * of a directory with the page and one SVG and one PNG per map.
 *
 * Grouping: maps with the same (stack, layer, kind) form a group, shown as a <details> section
 * (open; a click on its summary folds it, no script needed); groups come in the order their
 * first map appears in the array, maps within a group in array order.
 */
#include "viz_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const qkv_attn_map *m;
    int64_t i;     /* index in the page's array */
    int64_t group; /* group number, in order of first appearance */
} entry;

static const char *stack_of(const qkv_attn_map *m) {
    return m->stack ? m->stack : "";
}

static int by_group_key(const void *pa, const void *pb) {
    const entry *a = pa, *b = pb;
    int c = strcmp(stack_of(a->m), stack_of(b->m));
    if (c) return c;
    if (a->m->layer != b->m->layer) return a->m->layer < b->m->layer ? -1 : 1;
    if (a->m->kind != b->m->kind) return a->m->kind < b->m->kind ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

static int by_group_then_index(const void *pa, const void *pb) {
    const entry *a = pa, *b = pb;
    if (a->group != b->group) return a->group < b->group ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

static bool same_group(const qkv_attn_map *a, const qkv_attn_map *b) {
    return !strcmp(stack_of(a), stack_of(b)) && a->layer == b->layer && a->kind == b->kind;
}

/* The entries in display order, with group numbers; NULL when out of memory. */
static entry *order_maps(const qkv_attn_page *p) {
    int64_t n = p->n_maps;
    entry *e = malloc((size_t)(n ? n : 1) * sizeof *e);
    int64_t *first = malloc((size_t)(n ? n : 1) * sizeof *first);
    if (!e || !first) {
        free(e);
        free(first);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        e[i] = (entry){&p->maps[i], i, 0};
    qsort(e, (size_t)n, sizeof *e, by_group_key);
    /* runs of one key: the run's first entry has its smallest index; number the runs by it */
    for (int64_t i = 0; i < n; i++)
        first[i] = i > 0 && same_group(e[i - 1].m, e[i].m) ? first[i - 1] : e[i].i;
    for (int64_t i = 0; i < n; i++)
        e[i].group = first[i];
    free(first);
    qsort(e, (size_t)n, sizeof *e, by_group_then_index);
    return e;
}

static void group_heading(vz_buf *b, const qkv_attn_map *m) {
    bool any = false;
    if (m->stack && m->stack[0]) {
        vz_put_text(b, m->stack, 60, VZ_XML);
        any = true;
    }
    if (m->layer >= 0) {
        vz_printf(b, "%slayer %d", any ? " " : "", m->layer);
        any = true;
    }
    vz_printf(b, "%s%s", any ? " \xC2\xB7 " : "", vz_kind_heading(m->kind)); /* U+00B7 */
}

static void token_list(vz_buf *b, const char *heading, const char *const *tok, int64_t n) {
    if (n <= 0) return;
    vz_printf(b, "<h2>%s (%lld)</h2>\n<div class=\"toks\">", heading, (long long)n);
    for (int64_t i = 0; i < n; i++) {
        vz_printf(b, "<span class=\"tok\"><sub>%lld</sub>", (long long)i);
        vz_put_text(b, tok[i] ? tok[i] : "", 200, VZ_XML);
        vz_puts(b, "</span>");
    }
    vz_puts(b, "</div>\n");
}

static qkv_status check_page(const char *fn, const qkv_attn_page *p) {
    if (!p) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL page", fn);
    if (p->n_maps < 0 || p->n_maps > QKV_VIZ_MAX_MAPS)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: n_maps = %lld is outside 0 .. %d", fn,
                         (long long)p->n_maps, QKV_VIZ_MAX_MAPS);
    if (p->n_maps > 0 && !p->maps)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: maps is NULL with n_maps = %lld", fn,
                         (long long)p->n_maps);
    const char *what[2] = {"input", "output"};
    const int64_t n_tok[2] = {p->n_input, p->n_output};
    const void *toks[2] = {p->input_tokens, p->output_tokens};
    for (int k = 0; k < 2; k++) {
        if (n_tok[k] < 0 || n_tok[k] > QKV_VIZ_MAX_TOKENS_LISTED)
            return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: n_%s = %lld is outside 0 .. %d", fn, what[k],
                             (long long)n_tok[k], QKV_VIZ_MAX_TOKENS_LISTED);
        if (n_tok[k] > 0 && !toks[k])
            return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: %s_tokens is NULL with n_%s = %lld", fn,
                             what[k], what[k], (long long)n_tok[k]);
    }
    int64_t cells = 0;
    for (int64_t i = 0; i < p->n_maps; i++) {
        qkv_status st = vz_check_map(fn, &p->maps[i], i);
        if (st != QKV_OK) return st;
        cells += p->maps[i].rows * p->maps[i].cols;
        if (cells > QKV_VIZ_MAX_PAGE_CELLS)
            return QKV_ERROR(QKV_ERR_INVALID_ARG,
                             "%s: maps 0 .. %lld hold more than %d cells, the limit of one page",
                             fn, (long long)i, QKV_VIZ_MAX_PAGE_CELLS);
    }
    return QKV_OK;
}

/* The page into b; p was checked. links[i]: the file name stem of map i, or links NULL. */
static qkv_status page(vz_buf *b, const char *fn, const qkv_attn_page *p, const qkv_viz_opts *o,
                       char *const *links) {
    entry *e = order_maps(p);
    if (!e) return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", fn);
    vz_html_begin(b, p->title ? p->title : "Attention maps");
    token_list(b, "Input tokens", p->input_tokens, p->n_input);
    token_list(b, "Output tokens", p->output_tokens, p->n_output);
    vz_puts(b, "<p class=\"note\">Rows are queries, columns are keys. Colour: the attention "
               "weight from 0 (dark purple) to 1 (yellow), viridis; grey crossed cells are NaN. "
               "Hover a cell for its exact weight.</p>\n");
    int64_t n_groups = 0;
    for (int64_t k = 0; k < p->n_maps; k++)
        n_groups += k == 0 || e[k].group != e[k - 1].group;
    vz_printf(b, "<p class=\"note\">%lld maps in %lld groups", (long long)p->n_maps,
              (long long)n_groups);
    for (int64_t k = 0, g = 0; k < p->n_maps; k++)
        if (k == 0 || e[k].group != e[k - 1].group) {
            vz_printf(b, "%s<a href=\"#g%lld\">", g ? ", " : ": ", (long long)g);
            group_heading(b, e[k].m);
            vz_puts(b, "</a>");
            g++;
        }
    vz_puts(b, ".</p>\n");
    for (int64_t k = 0, g = 0; k < p->n_maps && !b->oom; k++) {
        if (k == 0 || e[k].group != e[k - 1].group) {
            int64_t size = 0;
            while (k + size < p->n_maps && e[k + size].group == e[k].group)
                size++;
            vz_printf(b, "<details open id=\"g%lld\"><summary>", (long long)g++);
            group_heading(b, e[k].m);
            vz_printf(b, " (%lld map%s)</summary>\n<div class=\"maps\">\n", (long long)size,
                      size == 1 ? "" : "s");
        }
        vz_puts(b, "<figure>\n");
        vz_svg_heatmap(b, e[k].m, o, false);
        vz_puts(b, "<figcaption>");
        char title[512];
        vz_put_text(b, qkv_attn_map_title(e[k].m, title, sizeof title), 200, VZ_XML);
        if (links) {
            const char *l = links[e[k].i];
            vz_puts(b, " \xC2\xB7 <a href=\"");
            vz_put_text(b, l, 200, VZ_XML);
            vz_puts(b, ".svg\">SVG</a> \xC2\xB7 <a href=\"");
            vz_put_text(b, l, 200, VZ_XML);
            vz_puts(b, ".png\">PNG</a>");
        }
        vz_puts(b, "</figcaption>\n</figure>\n");
        if (k + 1 == p->n_maps || e[k + 1].group != e[k].group) vz_puts(b, "</div>\n</details>\n");
    }
    if (p->n_maps == 0) vz_puts(b, "<p class=\"note\">(no maps)</p>\n");
    vz_html_end(b);
    free(e);
    return QKV_OK;
}

/* The checked page into b (emptied again on an error). */
static qkv_status render_page(const char *fn, const qkv_attn_page *p, const qkv_viz_opts *o, vz_buf *b) {
    qkv_status st = check_page(fn, p);
    if (st != QKV_OK) return st;
    qkv_viz_opts opts = vz_opts(o);
    st = page(b, fn, p, &opts, NULL);
    if (st != QKV_OK) vz_free(b);
    return st;
}

qkv_status qkv_attn_html(const qkv_attn_page *p, const qkv_viz_opts *o, char **html, size_t *len) {
    static const char fn[] = "qkv_attn_html";
    if (!html) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL output pointer", fn);
    *html = NULL;
    if (len) *len = 0;
    vz_buf b = {0};
    qkv_status st = render_page(fn, p, o, &b);
    return st != QKV_OK ? st : vz_finish(&b, fn, html, len);
}

static qkv_status write_buf(const char *fn, const char *path, vz_buf *b) {
    qkv_status st = b->oom ? QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", fn)
                           : qkv__write_file_atomic(fn, path, b->p, b->n);
    vz_free(b);
    return st;
}

qkv_status qkv_attn_html_write(const char *path, const qkv_attn_page *p, const qkv_viz_opts *o) {
    static const char fn[] = "qkv_attn_html_write";
    vz_buf b = {0};
    qkv_status st = render_page(fn, p, o, &b);
    return st != QKV_OK ? st : write_buf(fn, path, &b);
}

/* "007-encoder-layer2-head3-masked-self" into buf (at most 96 bytes with the NUL). */
static void file_stem(char *buf, int64_t i, const qkv_attn_map *m) {
    static const char *const kind[3] = {"self", "masked-self", "cross"};
    size_t k = (size_t)snprintf(buf, 96, "%03lld", (long long)i);
    if (m->stack && m->stack[0]) {
        buf[k++] = '-';
        for (const char *s = m->stack; *s && k < 50; s++) {
            char c = *s;
            bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '.' || c == '-';
            buf[k++] = ok ? c : '_';
        }
        buf[k] = '\0';
    }
    if (m->layer >= 0) k += (size_t)snprintf(buf + k, 96 - k, "-layer%d", m->layer);
    if (m->head >= 0) k += (size_t)snprintf(buf + k, 96 - k, "-head%d", m->head);
    snprintf(buf + k, 96 - k, "-%s", kind[m->kind]);
}

qkv_status qkv_attn_export(const char *dir, const qkv_attn_page *p, const qkv_viz_opts *o) {
    static const char fn[] = "qkv_attn_export";
    if (!dir || !dir[0]) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL or empty directory", fn);
    if (strlen(dir) > 3800)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: directory name is too long", fn);
    qkv_status st = check_page(fn, p);
    if (st != QKV_OK) return st;
    qkv_viz_opts opts = vz_opts(o);
    for (int64_t i = 0; i < p->n_maps; i++) /* refuse before anything is written */
        if ((st = vz_check_png_size(fn, &p->maps[i], &opts)) != QKV_OK) return st;
    st = vz_make_dir(fn, dir);
    if (st != QKV_OK) return st;

    int64_t n = p->n_maps;
    char **stems = calloc((size_t)(n ? n : 1), sizeof *stems);
    char *path = malloc(strlen(dir) + 128);
    if (!stems || !path) st = QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", fn);
    for (int64_t i = 0; i < n && st == QKV_OK; i++) {
        stems[i] = malloc(96);
        if (!stems[i]) {
            st = QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", fn);
            break;
        }
        file_stem(stems[i], i, &p->maps[i]);
        vz_buf b = {0};
        sprintf(path, "%s/%s.svg", dir, stems[i]);
        vz_svg_heatmap(&b, &p->maps[i], &opts, true);
        st = write_buf(fn, path, &b);
        if (st != QKV_OK) break;
        sprintf(path, "%s/%s.png", dir, stems[i]);
        st = vz_png_map(fn, &p->maps[i], &opts, &b);
        if (st == QKV_OK)
            st = write_buf(fn, path, &b);
        else
            vz_free(&b);
    }
    if (st == QKV_OK) {
        vz_buf b = {0};
        st = page(&b, fn, p, &opts, stems);
        sprintf(path, "%s/index.html", dir);
        if (st == QKV_OK)
            st = write_buf(fn, path, &b);
        else
            vz_free(&b);
    }
    for (int64_t i = 0; stems && i < n; i++)
        free(stems[i]);
    free(stems);
    free(path);
    return st;
}
