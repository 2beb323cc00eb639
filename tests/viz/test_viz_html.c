/* test_viz_html.c: the attention page and export (src/viz/html_attn.c), the line charts
 * (src/viz/chart.c) and the training report (src/viz/html_train.c).
 *
 * Expected tick values and path coordinates were computed by hand from the rules in chart.c
 * (plot box x 70..560, y 286..36; steps 1, 2, 5 x 10^e giving at most 6 intervals; decades on a
 * log axis). */
#include "viz/viz_internal.h"
#include "viz_testutil.h"

#define CHECK_HAS(hay, needle) CHECK_MSG((hay) && strstr((hay), (needle)), "missing: %s", (needle))

/* 7 maps given out of order: groups must come in order of first appearance. */
typedef struct {
    float w[7][16];
    qkv_attn_map maps[7];
    qkv_attn_page page;
} demo_page;

static const char *src_tok[4] = {"<s>", "Le", "chat", "</s>"};
static const char *tgt_tok[3] = {"<s>", "The & \"cat\"", "caf\xC3\xA9"};

static void make_page(demo_page *d) {
    static const struct {
        const char *stack;
        int layer, head;
        qkv_attn_kind kind;
    } spec[7] = {
        {"encoder", 0, 0, QKV_ATTN_SELF},  {"encoder", 1, 0, QKV_ATTN_SELF},
        {"encoder", 0, 1, QKV_ATTN_SELF},  {"decoder", 0, 0, QKV_ATTN_MASKED_SELF},
        {"decoder", 0, 0, QKV_ATTN_CROSS}, {"decoder", 0, 1, QKV_ATTN_MASKED_SELF},
        {"decoder", 0, 1, QKV_ATTN_CROSS},
    };
    for (int k = 0; k < 7; k++) {
        bool enc = k < 3;
        int64_t rows = enc ? 4 : 3, cols = spec[k].kind == QKV_ATTN_MASKED_SELF ? 3 : 4;
        for (int i = 0; i < 16; i++)
            d->w[k][i] = (float)((i * 7 + k) % 10) / 9.0f;
        d->maps[k] = (qkv_attn_map){.stack = spec[k].stack,
                                    .layer = spec[k].layer,
                                    .head = spec[k].head,
                                    .kind = spec[k].kind,
                                    .rows = rows,
                                    .cols = cols,
                                    .dtype = QKV_F32,
                                    .weights = d->w[k],
                                    .row_labels = enc ? src_tok : tgt_tok,
                                    .col_labels = cols == 4 ? src_tok : tgt_tok};
    }
    d->page = (qkv_attn_page){.title = "Attention <demo>",
                              .input_tokens = src_tok,
                              .n_input = 4,
                              .output_tokens = tgt_tok,
                              .n_output = 3,
                              .maps = d->maps,
                              .n_maps = 7};
}

static const char *const titles_in_order[7] = {
    "encoder layer 0, head 0 (self)",        "encoder layer 0, head 1 (self)",
    "encoder layer 1, head 0 (self)",        "decoder layer 0, head 0 (masked self)",
    "decoder layer 0, head 1 (masked self)", "decoder layer 0, head 0 (cross)",
    "decoder layer 0, head 1 (cross)"};

TEST(viz_html_page_groups_and_is_well_formed) {
    demo_page d;
    make_page(&d);
    char *html = NULL, *again = NULL;
    size_t n = 0, n2 = 0;
    CHECK_OK(qkv_attn_html(&d.page, NULL, &html, &n));
    CHECK_OK(qkv_attn_html(&d.page, NULL, &again, &n2));
    CHECK(html && again && n == n2 && !memcmp(html, again, n)); /* deterministic */
    char why[256] = "";
    CHECK_MSG(vt_markup_ok(html, false, why), "page: %s", why);
    CHECK(!strncmp(html, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">",
                   60));
    CHECK_HAS(html, "<title>Attention &lt;demo&gt;</title>");
    /* every map once as an inline SVG, its title as the SVG title and the caption */
    CHECK(vt_count(html, "<svg ") == 7);
    const char *prev = html;
    for (int k = 0; k < 7; k++) {
        char cap[128];
        snprintf(cap, sizeof cap, "<figcaption>%s</figcaption>", titles_in_order[k]);
        const char *at = strstr(html, cap);
        CHECK_MSG(at && at > prev, "caption %d (%s) missing or out of order", k,
                  titles_in_order[k]);
        if (at) prev = at;
        char svg_title[128];
        snprintf(svg_title, sizeof svg_title, "<title>%s</title>", titles_in_order[k]);
        CHECK_HAS(html, svg_title);
    }
    /* the four groups, in order of first appearance, with their sizes */
    const char *groups[4] = {
        "<details open id=\"g0\"><summary>encoder layer 0 \xC2\xB7 self-attention (2 "
        "maps)</summary>",
        "<details open id=\"g1\"><summary>encoder layer 1 \xC2\xB7 self-attention (1 "
        "map)</summary>",
        "<details open id=\"g2\"><summary>decoder layer 0 \xC2\xB7 masked self-attention (2 maps)"
        "</summary>",
        "<details open id=\"g3\"><summary>decoder layer 0 \xC2\xB7 cross-attention (2 maps)"
        "</summary>"};
    prev = html;
    for (int g = 0; g < 4; g++) {
        const char *at = strstr(html, groups[g]);
        CHECK_MSG(at && at > prev, "group %d missing or out of order", g);
        if (at) prev = at;
    }
    CHECK(vt_count(html, "<details") == 4 && vt_count(html, "</details>") == 4);
    CHECK_HAS(html, "7 maps in 4 groups: <a href=\"#g0\">encoder layer 0");
    /* the token lists, escaped */
    CHECK_HAS(html,
              "<h2>Input tokens (4)</h2>\n<div class=\"toks\"><span class=\"tok\"><sub>0</sub>"
              "&lt;s&gt;</span><span class=\"tok\"><sub>1</sub>Le</span>");
    CHECK_HAS(html, "<h2>Output tokens (3)</h2>");
    CHECK_HAS(html, "<sub>1</sub>The &amp; &quot;cat&quot;</span><span class=\"tok\"><sub>2</sub>"
                    "caf\xC3\xA9</span>");
    /* self-contained: no script, no external resource (the only URL is the SVG namespace) */
    CHECK(!strstr(html, "<script") && !strstr(html, "src=") && !strstr(html, "<link"));
    CHECK(vt_count(html, "http") == vt_count(html, "http://www.w3.org/2000/svg"));
    CHECK(!strstr(html, "<?xml")); /* inline SVG carries no XML declaration */
    qkv_viz_free(html);
    qkv_viz_free(again);
}

TEST(viz_html_page_without_maps_or_tokens) {
    qkv_attn_page p = {0};
    char *html = NULL;
    CHECK_OK(qkv_attn_html(&p, NULL, &html, NULL));
    char why[256] = "";
    CHECK_MSG(vt_markup_ok(html, false, why), "%s", why);
    CHECK_HAS(html, "<h1>Attention maps</h1>");
    CHECK_HAS(html, "(no maps)");
    CHECK(!strstr(html, "tokens ("));
    qkv_viz_free(html);
}

TEST(viz_attn_export_writes_every_file) {
    demo_page d;
    make_page(&d);
    d.maps[1].stack = "my stack/../x"; /* reduced to [A-Za-z0-9_.-] in file names */
    char *dir = vt_tmp_dir();
    char out[512];
    snprintf(out, sizeof out, "%s/maps", dir); /* created by the export */
    CHECK_OK(qkv_attn_export(out, &d.page, NULL));
    CHECK(vt_count_files(out, ".svg") == 7 && vt_count_files(out, ".png") == 7);
    CHECK(vt_count_files(out, "index.html") == 1 && vt_count_files(out, ".tmp.") == 0);
    static const char *const stems[7] = {
        "000-encoder-layer0-head0-self",  "001-my_stack_.._x-layer1-head0-self",
        "002-encoder-layer0-head1-self",  "003-decoder-layer0-head0-masked-self",
        "004-decoder-layer0-head0-cross", "005-decoder-layer0-head1-masked-self",
        "006-decoder-layer0-head1-cross"};
    size_t n;
    char path[768];
    snprintf(path, sizeof path, "%s/index.html", out);
    char *html = (char *)vt_read_file(path, &n);
    CHECK(html != NULL);
    char why[256] = "";
    CHECK_MSG(html && vt_markup_ok(html, false, why), "index.html: %s", why);
    for (int k = 0; k < 7; k++) {
        snprintf(path, sizeof path, "%s/%s.svg", out, stems[k]);
        char *svg = (char *)vt_read_file(path, &n);
        CHECK_MSG(svg && vt_markup_ok(svg, true, why), "%s: %s", path, svg ? why : "missing");
        free(svg);
        snprintf(path, sizeof path, "%s/%s.png", out, stems[k]);
        unsigned char *png = vt_read_file(path, &n);
        vt_image img;
        const char *pwhy = "missing";
        bool ok = png && vt_png_decode(png, n, &img, &pwhy);
        CHECK_MSG(ok, "%s: %s", path, pwhy);
        if (ok) {
            int64_t rows = d.maps[k].rows, cols = d.maps[k].cols;
            CHECK(img.w == 6 + 8 * cols && img.h == 6 + 8 * rows);
            free(img.rgb);
        }
        free(png);
        char link[160];
        snprintf(link, sizeof link, "<a href=\"%s.png\">PNG</a>", stems[k]);
        CHECK_MSG(html && strstr(html, link), "index.html lacks %s", link);
    }
    free(html);
    /* a second export over the first replaces the files */
    CHECK_OK(qkv_attn_export(out, &d.page, NULL));
    CHECK(vt_count_files(out, ".png") == 7 && vt_count_files(out, ".tmp.") == 0);
    vt_tmp_clean(dir);
}

/* ---- charts and the training report ---------------------------------------------------------- */

static const double xs[5] = {0, 100, 200, 300, 400};
static const double ys[5] = {3, 1, 0.5, 0.2, 0.1};

static char *chart_svg(const qkv_chart *c) {
    char *svg = NULL;
    CHECK_OK(qkv_chart_svg(c, &svg, NULL));
    char why[256] = "";
    CHECK_MSG(svg && vt_markup_ok(svg, true, why), "chart: %s", why);
    return svg;
}

TEST(viz_chart_linear_axes_and_path) {
    qkv_series s = {"train <loss>", xs, ys, 5};
    qkv_chart c = {.title = "loss", .y_label = "nats", .series = &s, .n_series = 1};
    char *svg = chart_svg(&c);
    /* x: step 100 (4 intervals), y: step 0.5 from 0 to 3 (6 intervals) */
    static const char *const xt[5] = {">0<", ">100<", ">200<", ">300<", ">400<"};
    for (int i = 0; i < 5; i++)
        CHECK_HAS(svg, xt[i]);
    CHECK_HAS(svg, "<text x=\"70\" y=\"302\">0</text>");      /* first x tick, under the box */
    CHECK_HAS(svg, "<text x=\"560\" y=\"302\">400</text>");   /* last x tick */
    CHECK_HAS(svg, "<text x=\"64\" y=\"290\">0.0</text>");    /* y = 0 at the bottom */
    CHECK_HAS(svg, "<text x=\"64\" y=\"40\">3.0</text>");     /* y = 3 at the top */
    CHECK_HAS(svg, "<text x=\"64\" y=\"206.7\">1.0</text>");  /* 286 - 250 / 3, + 4 */
    CHECK(vt_count(svg, "</text>") == 2 + 5 + 7 + 1 + 0 + 1); /* title, labels, ticks, legend */
    /* (0, 3), (100, 1), (200, 0.5), (300, 0.2), (400, 0.1) */
    CHECK_HAS(svg, "<path d=\"M70 36L192.5 202.7L315 244.3L437.5 269.3L560 277.7\" fill=\"none\" "
                   "stroke=\"#1f77b4\"");
    CHECK_HAS(svg, "<title>train &lt;loss&gt;</title></path>");
    CHECK_HAS(svg, ">train &lt;loss&gt;</text>"); /* legend */
    CHECK_HAS(svg, "rotate(-90)\" text-anchor=\"middle\">nats</text>");
    CHECK(!strstr(svg, "<circle"));
    qkv_viz_free(svg);
}

TEST(viz_chart_log_axis) {
    qkv_series s = {"loss", xs, ys, 5};
    qkv_chart c = {.title = "loss", .log_y = true, .series = &s, .n_series = 1};
    char *svg = chart_svg(&c);
    /* decades 0.1 .. 10: 3 labelled ticks, 2 decades of minor grid lines (2..9) */
    CHECK_HAS(svg, "<text x=\"64\" y=\"290\">0.1</text>");
    CHECK_HAS(svg, "<text x=\"64\" y=\"165\">1</text>");
    CHECK_HAS(svg, "<text x=\"64\" y=\"40\">10</text>");
    CHECK(vt_count(svg, "stroke=\"#f2f2f2\"") == 16);
    CHECK_HAS(svg, "loss (log scale)</text>");
    /* log10(3) = 0.4771 -> 286 - 250 (0.4771 + 1) / 2 = 101.4; 1 -> 161; 0.5 -> 198.6;
     * 0.2 -> 248.4; 0.1 -> 286 */
    CHECK_HAS(svg, "<path d=\"M70 101.4L192.5 161L315 198.6L437.5 248.4L560 286\"");
    qkv_viz_free(svg);
    /* many decades: a labelled tick every second decade (1e-9 .. 1e6: 15 decades, stride 2) */
    double big_x[2] = {0, 1}, big_y[2] = {1e-9, 1e6};
    qkv_series s2 = {"wide", big_x, big_y, 2};
    qkv_chart c2 = {.title = "wide", .log_y = true, .series = &s2, .n_series = 1};
    svg = chart_svg(&c2);
    CHECK_HAS(svg, ">1e-8</text>");
    CHECK_HAS(svg, ">1e6</text>");
    CHECK_HAS(svg, ">0.0001</text>");
    CHECK_HAS(svg, ">100</text>");
    CHECK(!strstr(svg, ">1e-9</text>") && !strstr(svg, ">0.001</text>"));
    CHECK(!strstr(svg, "#f2f2f2"));
    qkv_viz_free(svg);
}

/* Move and line commands in the first <path> of svg. */
static void path_ops(const char *svg, int *moves, int *lines) {
    *moves = *lines = 0;
    const char *d = strstr(svg, "<path d=\"");
    if (!d) return;
    for (const char *p = d + 9; *p && *p != '"'; p++)
        *moves += *p == 'M', *lines += *p == 'L';
}

TEST(viz_chart_gaps_dots_and_decimation) {
    double x[6] = {0, 1, 2, 3, 4, 5}, y[6] = {1, NAN, 2, 3, INFINITY, 4};
    qkv_series s = {NULL, x, y, 6};
    qkv_chart c = {.title = "gaps", .series = &s, .n_series = 1};
    char *svg = chart_svg(&c);
    CHECK(vt_count(svg, "<circle") == 2);      /* the runs {1} and {4} */
    CHECK_HAS(svg, "<title>series 0</title>"); /* a NULL name */
    int moves, lines;
    path_ops(svg, &moves, &lines);
    CHECK_MSG(moves == 3 && lines == 1, "M %d, L %d", moves, lines);
    qkv_viz_free(svg);
    /* log axis: zero and negative values are gaps too */
    double y2[4] = {1, 0, -1, 10};
    qkv_series s2 = {"log", x, y2, 4};
    qkv_chart c2 = {.title = "log", .log_y = true, .series = &s2, .n_series = 1};
    svg = chart_svg(&c2);
    CHECK(vt_count(svg, "<circle") == 2);
    qkv_viz_free(svg);
    /* 200000 points over 490 pixel columns: at most 4 points per column and run */
    int64_t n = 200000;
    double *bx = malloc((size_t)n * sizeof *bx), *by = malloc((size_t)n * sizeof *by);
    for (int64_t i = 0; i < n; i++)
        bx[i] = (double)i, by[i] = sin((double)i * 0.001) + 0.001 * (double)(i % 7);
    qkv_series s3 = {"dense", bx, by, n};
    qkv_chart c3 = {.title = "dense", .series = &s3, .n_series = 1};
    size_t len = 0;
    char *big = NULL;
    CHECK_OK(qkv_chart_svg(&c3, &big, &len));
    path_ops(big, &moves, &lines);
    CHECK_MSG(moves == 1 && lines + 1 <= 4 * 491, "M %d, L %d", moves, lines);
    CHECK_MSG(len < 40000, "%zu bytes for 200000 points", len);
    qkv_viz_free(big);
    free(bx);
    free(by);
}

TEST(viz_chart_without_data) {
    qkv_chart c = {.title = "empty"};
    char *svg = chart_svg(&c);
    CHECK_HAS(svg, "(no data)");
    qkv_viz_free(svg);
    double x[2] = {0, 1}, y[2] = {NAN, NAN};
    qkv_series s = {"nan", x, y, 2};
    qkv_chart c2 = {.title = "all NaN", .series = &s, .n_series = 1};
    svg = chart_svg(&c2);
    CHECK_HAS(svg, "(no data)");
    qkv_viz_free(svg);
    double one_x = 5, one_y = 2; /* a single point: flat ranges are widened */
    qkv_series s3 = {"one", &one_x, &one_y, 1};
    qkv_chart c3 = {.title = "one", .series = &s3, .n_series = 1};
    svg = chart_svg(&c3);
    CHECK(vt_count(svg, "<circle") == 1);
    qkv_viz_free(svg);
}

TEST(viz_train_report) {
    qkv_series loss[2] = {{"train", xs, ys, 5}, {"valid & test", xs, ys, 3}};
    double acc[5] = {0.1, 0.5, 0.7, 0.8, 0.85};
    qkv_series metric = {"accuracy", xs, acc, 5};
    qkv_chart charts[2] = {{.title = "loss", .log_y = true, .series = loss, .n_series = 2},
                           {.title = "accuracy <top-1>", .series = &metric, .n_series = 1}};
    const char *keys[2] = {"model", "lr"}, *vals[2] = {"enc<2>", "0.001"};
    qkv_train_report r = {.title = "run 1",
                          .info_keys = keys,
                          .info_values = vals,
                          .n_info = 2,
                          .charts = charts,
                          .n_charts = 2};
    char *html = NULL;
    CHECK_OK(qkv_train_report_html(&r, &html, NULL));
    char why[256] = "";
    CHECK_MSG(vt_markup_ok(html, false, why), "report: %s", why);
    CHECK_HAS(html, "<h1>run 1</h1>");
    CHECK_HAS(html, "<tr><th>model</th><td>enc&lt;2&gt;</td></tr>");
    CHECK_HAS(html, "<h2>loss</h2>");
    CHECK_HAS(html, "<h2>accuracy &lt;top-1&gt;</h2>");
    CHECK(vt_count(html, "<svg ") == 2);
    /* summary: first, last, min, max as value @ step */
    CHECK_HAS(html, "<tr><td>train</td><td class=\"num\">5</td><td class=\"num\">3 @ 0</td>"
                    "<td class=\"num\">0.1 @ 400</td><td class=\"num\">0.1 @ 400</td>"
                    "<td class=\"num\">3 @ 0</td></tr>");
    CHECK_HAS(html, "<tr><td>valid &amp; test</td><td class=\"num\">3</td>");
    CHECK_HAS(html, "<td class=\"num\">0.85 @ 400</td>");
    CHECK(!strstr(html, "<script"));
    CHECK(!strstr(html, "http-equiv")); /* a final report does not reload itself */
    /* a report in progress reloads itself, still without a script */
    r.refresh_s = 10;
    char *live = NULL;
    CHECK_OK(qkv_train_report_html(&r, &live, NULL));
    CHECK_MSG(vt_markup_ok(live, false, why), "report in progress: %s", why);
    CHECK_HAS(live, "<head>\n<meta charset=\"utf-8\">\n");
    CHECK_HAS(live, "<meta http-equiv=\"refresh\" content=\"10\">\n<title>run 1</title>");
    qkv_viz_free(live);
    r.refresh_s = -1;
    CHECK_ERR(qkv_train_report_html(&r, &live, NULL), QKV_ERR_INVALID_ARG, "refresh_s = -1");
    r.refresh_s = 0;
    char *dir = vt_tmp_dir();
    char path[256];
    snprintf(path, sizeof path, "%s/report.html", dir);
    CHECK_OK(qkv_train_report_write(path, &r));
    size_t n;
    char *file = (char *)vt_read_file(path, &n);
    CHECK(file && !strcmp(file, html));
    free(file);
    vt_tmp_clean(dir);
    qkv_viz_free(html);
}
