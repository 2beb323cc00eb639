/* test_viz_errors.c: argument checks, size limits, file errors (atomic writes leave no temporary
 * file and keep the old content) and a randomised robustness run of every writer over odd maps
 * (empty, 1 x 1, NaN/inf/huge values, invalid UTF-8, controls, huge labels). */
#include "viz/viz_internal.h"
#include "viz_testutil.h"

#include <sys/stat.h>

static const float one[1] = {0.5f};

TEST(viz_bad_maps_are_refused_with_a_message) {
    char *svg = (char *)"x";
    qkv_attn_map ok = {.title = "m", .rows = 1, .cols = 1, .dtype = QKV_F32, .weights = one};
    qkv_attn_map m;
#define REFUSED(field_change, needle)                                                              \
    do {                                                                                           \
        m = ok;                                                                                    \
        field_change;                                                                              \
        CHECK_ERR(qkv_attn_svg(&m, NULL, &svg, NULL), QKV_ERR_INVALID_ARG, needle);                \
        CHECK(svg == NULL);                                                                        \
        CHECK(strstr(qkv_last_error(), "qkv_attn_svg: map \"m\""));                                \
    } while (0)
    REFUSED(m.rows = -1, "negative size -1 x 1");
    REFUSED(m.cols = 4097, "1 x 4097 tokens exceed the limit of 4096 per axis");
    REFUSED((m.rows = 1024, m.cols = 1025), "1024 x 1025 = 1049600 cells exceed the limit");
    REFUSED(m.weights = NULL, "weights is NULL");
    REFUSED(m.dtype = QKV_I32, "weights must be QKV_F32 or QKV_F64");
    REFUSED((m.cols = 3, m.ld = 2), "row stride ld = 2 is less than cols = 3");
    REFUSED(m.kind = (qkv_attn_kind)7, "kind 7 is not");
#undef REFUSED
    CHECK_ERR(qkv_attn_svg(NULL, NULL, &svg, NULL), QKV_ERR_INVALID_ARG, "map is NULL");
    CHECK_ERR(qkv_attn_svg(&ok, NULL, NULL, NULL), QKV_ERR_INVALID_ARG, "NULL output pointer");
    unsigned char *png = NULL;
    CHECK_ERR(qkv_attn_png(&ok, NULL, NULL, NULL), QKV_ERR_INVALID_ARG, "NULL output pointer");
    m = ok;
    m.rows = -2;
    CHECK_ERR(qkv_attn_png(&m, NULL, &png, NULL), QKV_ERR_INVALID_ARG, "qkv_attn_png: map");
    CHECK_ERR(qkv_attn_terminal(stdout, &m, NULL), QKV_ERR_INVALID_ARG, "qkv_attn_terminal: map");
    CHECK_ERR(qkv_attn_svg_write("/tmp/never.svg", &m, NULL), QKV_ERR_INVALID_ARG,
              "qkv_attn_svg_write: map");
    /* an empty map needs no weights, dtype or stride */
    m = (qkv_attn_map){.rows = 0, .cols = 7, .dtype = (qkv_dtype)99, .ld = -5};
    CHECK_OK(qkv_attn_svg(&m, NULL, &svg, NULL));
    qkv_viz_free(svg);
}

TEST(viz_bad_pages_and_charts_are_refused) {
    static float w[1];
    qkv_attn_map maps[9];
    for (int i = 0; i < 9; i++) /* 9 x 1M cells: above the page limit of 8M */
        maps[i] = (qkv_attn_map){.rows = 1024, .cols = 1024, .dtype = QKV_F32, .weights = w};
    qkv_attn_page p = {.maps = maps, .n_maps = 9};
    char *html = NULL;
    CHECK_ERR(qkv_attn_html(&p, NULL, &html, NULL), QKV_ERR_INVALID_ARG,
              "maps 0 .. 8 hold more than 8388608 cells");
    p.n_maps = -1;
    CHECK_ERR(qkv_attn_html(&p, NULL, &html, NULL), QKV_ERR_INVALID_ARG, "n_maps = -1");
    p.n_maps = 2;
    p.maps = NULL;
    CHECK_ERR(qkv_attn_html(&p, NULL, &html, NULL), QKV_ERR_INVALID_ARG, "maps is NULL");
    p = (qkv_attn_page){.n_input = 3};
    CHECK_ERR(qkv_attn_html(&p, NULL, &html, NULL), QKV_ERR_INVALID_ARG,
              "input_tokens is NULL with n_input = 3");
    maps[1].rows = 5000;
    p = (qkv_attn_page){.maps = maps, .n_maps = 2};
    CHECK_ERR(qkv_attn_html(&p, NULL, &html, NULL), QKV_ERR_INVALID_ARG,
              "qkv_attn_html: map 1 \"layer 0, head 0 (self)\": 5000 x 1024 tokens exceed");
    CHECK_ERR(qkv_attn_html(NULL, NULL, &html, NULL), QKV_ERR_INVALID_ARG, "NULL page");
    CHECK(html == NULL);

    double x[1] = {0};
    qkv_series s = {"s", x, NULL, 1};
    qkv_chart c = {.title = "c", .series = &s, .n_series = 1};
    char *svg = NULL;
    CHECK_ERR(qkv_chart_svg(&c, &svg, NULL), QKV_ERR_INVALID_ARG,
              "series 0: step or value is NULL");
    s.n = -4;
    CHECK_ERR(qkv_chart_svg(&c, &svg, NULL), QKV_ERR_INVALID_ARG, "n = -4 is outside");
    c.n_series = 65;
    CHECK_ERR(qkv_chart_svg(&c, &svg, NULL), QKV_ERR_INVALID_ARG,
              "n_series = 65 is outside 0 .. 64");
    qkv_train_report r = {.n_charts = 1, .charts = &c};
    CHECK_ERR(qkv_train_report_html(&r, &html, NULL), QKV_ERR_INVALID_ARG,
              "qkv_train_report_html: chart 0 \"c\": n_series = 65");
    r = (qkv_train_report){.n_info = 2};
    CHECK_ERR(qkv_train_report_html(&r, &html, NULL), QKV_ERR_INVALID_ARG,
              "info_keys or info_values is NULL");
    CHECK_ERR(qkv_train_report_write("/tmp/never.html", NULL), QKV_ERR_INVALID_ARG, "NULL report");
}

TEST(viz_file_errors_name_the_path_and_leave_nothing_behind) {
    char *dir = vt_tmp_dir();
    qkv_attn_map m = {.title = "m", .rows = 1, .cols = 1, .dtype = QKV_F32, .weights = one};
    char path[512];
    /* a directory that does not exist */
    snprintf(path, sizeof path, "%s/missing/map.svg", dir);
    CHECK_ERR(qkv_attn_svg_write(path, &m, NULL), QKV_ERR_IO, "No such file or directory");
    CHECK(strstr(qkv_last_error(), "qkv_attn_svg_write: ") && strstr(qkv_last_error(), path));
    /* a "directory" that is a regular file (EACCES cannot be provoked reliably: tests may run
     * as root, which writes anywhere) */
    char file[512];
    snprintf(file, sizeof file, "%s/plain", dir);
    FILE *f = fopen(file, "w");
    fputs("x", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/plain/map.png", dir);
    CHECK_ERR(qkv_attn_png_write(path, &m, NULL), QKV_ERR_IO, "Not a directory");
    CHECK(strstr(qkv_last_error(), path) != NULL);
    qkv_attn_page p = {.maps = &m, .n_maps = 1};
    CHECK_ERR(qkv_attn_html_write(path, &p, NULL), QKV_ERR_IO, "Not a directory");
    qkv_train_report r = {0};
    CHECK_ERR(qkv_train_report_write(path, &r), QKV_ERR_IO, "Not a directory");
    /* the rename fails when the target is a non-empty directory: the temporary file goes */
    snprintf(path, sizeof path, "%s/sub", dir);
    mkdir(path, 0777);
    char inner[600];
    snprintf(inner, sizeof inner, "%s/keep", path);
    f = fopen(inner, "w");
    fclose(f);
    CHECK_ERR(qkv_attn_svg_write(path, &m, NULL), QKV_ERR_IO, "rename failed");
    CHECK(vt_count_files(dir, ".tmp.") == 0);
    /* export: into a regular file, under a missing parent */
    CHECK_ERR(qkv_attn_export(file, &p, NULL), QKV_ERR_IO, "exists and is not a directory");
    snprintf(path, sizeof path, "%s/no/such/dir", dir);
    CHECK_ERR(qkv_attn_export(path, &p, NULL), QKV_ERR_IO, "cannot create directory");
    CHECK_ERR(qkv_attn_svg_write("", &m, NULL), QKV_ERR_INVALID_ARG, "empty path");
    CHECK_ERR(qkv_attn_svg_write(NULL, &m, NULL), QKV_ERR_INVALID_ARG, "empty path");
    /* a refused write keeps the old file */
    snprintf(path, sizeof path, "%s/map.png", dir);
    CHECK_OK(qkv_attn_png_write(path, &m, NULL));
    size_t n0, n1;
    unsigned char *before = vt_read_file(path, &n0);
    static float wide[4096];
    qkv_attn_map big = {.title = "big", .rows = 1, .cols = 4096, .dtype = QKV_F32, .weights = wide};
    qkv_viz_opts o = qkv_viz_default_opts();
    o.png_cell = 64;
    CHECK_ERR(qkv_attn_png_write(path, &big, &o), QKV_ERR_INVALID_ARG, "exceeds the limit");
    unsigned char *after = vt_read_file(path, &n1);
    CHECK(before && after && n0 == n1 && !memcmp(before, after, n0));
    /* and export refuses before it writes anything */
    snprintf(path, sizeof path, "%s/export", dir);
    qkv_attn_page bp = {.maps = &big, .n_maps = 1};
    CHECK_ERR(qkv_attn_export(path, &bp, &o), QKV_ERR_INVALID_ARG, "png_cell");
    struct stat st;
    CHECK(stat(path, &st) != 0);
    free(before);
    free(after);
    CHECK(vt_count_files(dir, ".tmp.") == 0);
    vt_tmp_clean(dir);
}

/* ---- robustness ------------------------------------------------------------------------------ */

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return rng_state;
}

/* A random label: empty, ASCII with markup characters, random bytes (mostly invalid UTF-8), or
 * valid multi-byte text. */
static void random_label(char *buf, size_t cap) {
    static const char *const pieces[] = {
        "<",  ">",    "&", "\"", "'",       "\xC3\xA9", "\xE7\x8C\xAB", "\xF0\x9F\x98\x80",
        "\n", "\x1b", "a", " ",  "\xCC\x81"};
    size_t n = rnd() % 12, k = 0;
    int kind = (int)(rnd() % 3);
    for (size_t i = 0; i < n && k + 5 < cap; i++) {
        if (kind == 0) {
            char c = (char)(rnd() % 255 + 1);
            buf[k++] = c;
        } else {
            const char *p = pieces[rnd() % (sizeof pieces / sizeof *pieces)];
            size_t l = strlen(p);
            memcpy(buf + k, p, l);
            k += l;
        }
    }
    buf[k] = '\0';
}

TEST(viz_every_writer_survives_odd_maps) {
    static const double specials[] = {0,        1,         0.5,   -1,     2,      NAN,
                                      INFINITY, -INFINITY, 1e308, -1e308, 5e-324, -0.0};
    char labels[2][8][64];
    const char *rows[8], *cols[8];
    double w[64];
    char why[256];
    for (int iter = 0; iter < 60; iter++) {
        int64_t R = (int64_t)(rnd() % 7), K = (int64_t)(rnd() % 7);
        for (int i = 0; i < 8; i++) {
            random_label(labels[0][i], 64);
            random_label(labels[1][i], 64);
            rows[i] = rnd() % 5 ? labels[0][i] : NULL;
            cols[i] = labels[1][i];
        }
        for (int i = 0; i < 64; i++)
            w[i] = rnd() % 2 ? specials[rnd() % 12] : (double)(rnd() % 1000) / 999;
        char title[64];
        random_label(title, sizeof title);
        qkv_attn_map m = {.title = rnd() % 2 ? title : NULL,
                          .stack = rnd() % 2 ? title : NULL,
                          .layer = (int)(rnd() % 3) - 1,
                          .head = (int)(rnd() % 3) - 1,
                          .kind = (qkv_attn_kind)(rnd() % 3),
                          .rows = R,
                          .cols = K,
                          .dtype = QKV_F64,
                          .weights = w,
                          .ld = K + (int64_t)(rnd() % 2),
                          .row_labels = rnd() % 4 ? rows : NULL,
                          .col_labels = cols};
        qkv_viz_opts o = {.svg_cell = (int)(rnd() % 80) - 5,
                          .png_cell = (int)(rnd() % 5),
                          .png_ticks = rnd() % 2,
                          .png_stored = rnd() % 2,
                          .max_label_chars = (int)(rnd() % 30) - 2};
        char *svg = NULL;
        CHECK_OK(qkv_attn_svg(&m, &o, &svg, NULL));
        CHECK_MSG(svg && vt_markup_ok(svg, true, why), "iteration %d, svg: %s", iter, why);
        qkv_viz_free(svg);
        unsigned char *png = NULL;
        size_t n = 0;
        CHECK_OK(qkv_attn_png(&m, &o, &png, &n));
        vt_image img;
        const char *pwhy = "no PNG";
        bool ok = png && vt_png_decode(png, n, &img, &pwhy);
        CHECK_MSG(ok, "iteration %d, png: %s", iter, pwhy);
        if (ok) free(img.rgb);
        qkv_viz_free(png);
        qkv_attn_page p = {.title = title,
                           .input_tokens = rows,
                           .n_input = R,
                           .output_tokens = cols,
                           .n_output = K,
                           .maps = &m,
                           .n_maps = 1};
        char *html = NULL;
        CHECK_OK(qkv_attn_html(&p, &o, &html, NULL));
        CHECK_MSG(html && vt_markup_ok(html, false, why), "iteration %d, html: %s", iter, why);
        qkv_viz_free(html);
        for (int style = QKV_TERM_BLOCKS; style <= QKV_TERM_ASCII; style++) {
            FILE *f = tmpfile();
            qkv_term_opts to = {(qkv_term_style)style, (int)(rnd() % 120)};
            CHECK_OK(qkv_attn_terminal(f, &m, &to));
            fclose(f);
        }
        if (qkv_test_failures()) break;
    }
}

TEST(viz_huge_labels_stay_bounded) {
    size_t big = 1 << 20;
    char *label = malloc(big + 1);
    for (size_t i = 0; i < big; i++) /* combining acute accents: zero width each */
        label[i] = i % 2 ? (char)0x81 : (char)0xCC;
    label[big] = '\0';
    const char *labels[1] = {label};
    qkv_attn_map m = {.title = label,
                      .rows = 1,
                      .cols = 1,
                      .dtype = QKV_F32,
                      .weights = one,
                      .row_labels = labels,
                      .col_labels = labels};
    char *svg = NULL;
    size_t n = 0;
    CHECK_OK(qkv_attn_svg(&m, NULL, &svg, &n));
    CHECK_MSG(n < 20000, "%zu bytes", n);
    qkv_viz_free(svg);
    memset(label, 'x', big); /* plain characters */
    CHECK_OK(qkv_attn_svg(&m, NULL, &svg, &n));
    CHECK_MSG(n < 10000, "%zu bytes", n);
    CHECK(strstr(svg, "xxxxxxxxxxxxxxxxxxxxxxx\xE2\x80\xA6<title>"));
    qkv_viz_free(svg);
    FILE *f = tmpfile();
    qkv_term_opts to = {QKV_TERM_BLOCKS, 80};
    CHECK_OK(qkv_attn_terminal(f, &m, &to));
    CHECK(ftell(f) < 2000);
    fclose(f);
    free(label);
}
