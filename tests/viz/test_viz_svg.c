/* test_viz_svg.c: the SVG heatmap (src/viz/svg_heatmap.c) and the label/number helpers under it
 * (src/viz/text.c, colormap.c).
 *
 * The byte-exact snippets were worked out by hand from the layout documented in svg_heatmap.c
 * (label widths 7 px per character + 8, title band 22, cell 20) and the escaping rules of
 * qkv_viz.h; the colours of 0, 0.25 and 1 are matplotlib's viridis (#440154, #3b528b, #fde725);
 * the tooltip numbers are Python's repr() of the same float/double (shortest round trip). */
#include "viz/viz_internal.h"
#include "viz_testutil.h"

static char *svg_of(const qkv_attn_map *m, const qkv_viz_opts *o) {
    char *svg = NULL;
    size_t len = 0;
    CHECK_OK(qkv_attn_svg(m, o, &svg, &len));
    CHECK(svg && strlen(svg) == len);
    return svg;
}

#define CHECK_HAS(hay, needle) CHECK_MSG((hay) && strstr((hay), (needle)), "missing: %s", (needle))

TEST(viz_svg_2x2_byte_exact) {
    const float w[4] = {0.0f, 1.0f, 0.25f, NAN};
    const char *rows[2] = {"a<b", "x&y"};
    const char *cols[2] = {"\"q\"", "caf\xC3\xA9"};
    qkv_attn_map m = {.title = "t<1> & 'u'",
                      .rows = 2,
                      .cols = 2,
                      .dtype = QKV_F32,
                      .weights = w,
                      .row_labels = rows,
                      .col_labels = cols};
    char *svg = svg_of(&m, NULL);
    /* gx = 10 + 7*3 + 8 = 39; gy = 10 + 22 + 7*4 + 8 = 68; bar at x 39 + 40 + 16 = 95, 100 tall;
     * width 95 + 12 + 4 + 21 + 10 = 142, height 68 + 100 + 10 = 178 */
    static const char head[] =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"142\" height=\"178\" "
        "viewBox=\"0 0 142 178\" font-family=\"sans-serif\" font-size=\"11\" "
        "role=\"img\">\n<title>t&lt;1&gt; &amp; &#39;u&#39;</title>\n"
        "<rect width=\"142\" height=\"178\" fill=\"#ffffff\"/>\n";
    CHECK(!strncmp(svg, head, strlen(head)));
    CHECK_HAS(svg, "<text x=\"10\" y=\"23\" font-size=\"13\" font-weight=\"bold\">"
                   "t&lt;1&gt; &amp; &#39;u&#39;</text>\n");
    CHECK_HAS(svg, "<g text-anchor=\"end\">\n<text x=\"35\" y=\"82\">a&lt;b</text>\n"
                   "<text x=\"35\" y=\"102\">x&amp;y</text>\n</g>\n");
    CHECK_HAS(svg, "<text transform=\"translate(53,64) rotate(-90)\">&quot;q&quot;</text>\n"
                   "<text transform=\"translate(73,64) rotate(-90)\">caf\xC3\xA9</text>\n");
    CHECK_HAS(svg, "<rect x=\"39\" y=\"68\" width=\"20\" height=\"20\" fill=\"#440154\">"
                   "<title>a&lt;b (0) \xE2\x86\x92 &quot;q&quot; (0): 0</title></rect>\n");
    CHECK_HAS(svg, "<rect x=\"59\" y=\"68\" width=\"20\" height=\"20\" fill=\"#fde725\">"
                   "<title>a&lt;b (0) \xE2\x86\x92 caf\xC3\xA9 (1): 1</title></rect>\n");
    CHECK_HAS(svg, "<rect x=\"39\" y=\"88\" width=\"20\" height=\"20\" fill=\"#3b528b\">"
                   "<title>x&amp;y (1) \xE2\x86\x92 &quot;q&quot; (0): 0.25</title></rect>\n");
    CHECK_HAS(svg, "<rect x=\"59\" y=\"88\" width=\"20\" height=\"20\" fill=\"#c8c8c8\">"
                   "<title>x&amp;y (1) \xE2\x86\x92 caf\xC3\xA9 (1): NaN</title></rect>"
                   "<path d=\"M59 88l20 20m-20 0l20 -20\" stroke=\"#808080\" "
                   "pointer-events=\"none\"/>\n");
    CHECK_HAS(svg, "<rect x=\"95\" y=\"68\" width=\"12\" height=\"100\" fill=\"none\" "
                   "stroke=\"#444444\"/>\n");
    CHECK_HAS(svg, "<text x=\"111\" y=\"72\">1</text>\n<text x=\"111\" y=\"122\">0.5</text>\n"
                   "<text x=\"111\" y=\"172\">0</text>\n</svg>\n");
    CHECK(vt_count(svg, "<rect x=\"") == 4 + 50 + 1); /* cells, bar bands, bar frame */
    char why[256] = "";
    CHECK_MSG(vt_markup_ok(svg, true, why), "not well-formed: %s", why);
    /* nothing unescaped from the labels made it through */
    CHECK(!strstr(svg, "a<b") && !strstr(svg, "x&y") && !strstr(svg, "\"q\""));
    qkv_viz_free(svg);
}

TEST(viz_svg_is_deterministic_and_options_apply) {
    double w[6] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6};
    qkv_attn_map m = {.stack = "decoder",
                      .layer = 1,
                      .head = 2,
                      .kind = QKV_ATTN_CROSS,
                      .rows = 2,
                      .cols = 3,
                      .dtype = QKV_F64,
                      .weights = w};
    char *a = svg_of(&m, NULL), *b = svg_of(&m, NULL);
    CHECK(a && b && !strcmp(a, b));
    CHECK_HAS(a, "<title>decoder layer 1, head 2 (cross)</title>");
    /* NULL labels: the indices; default cell 20 */
    CHECK_HAS(a, "width=\"20\" height=\"20\"");
    CHECK_HAS(a, "<title>1 (1) \xE2\x86\x92 2 (2): 0.6</title>");
    qkv_viz_opts o = qkv_viz_default_opts();
    o.svg_cell = 7;
    char *c = svg_of(&m, &o);
    CHECK_HAS(c, "width=\"7\" height=\"7\"");
    o.svg_cell = 1000; /* clamped to 64 */
    char *d = svg_of(&m, &o);
    CHECK_HAS(d, "width=\"64\" height=\"64\"");
    qkv_viz_free(a);
    qkv_viz_free(b);
    qkv_viz_free(c);
    qkv_viz_free(d);
}

TEST(viz_svg_tooltips_show_the_exact_value) {
    struct {
        qkv_dtype dt;
        double v;
        const char *text; /* Python: repr(v) or repr(numpy.float32(v)) */
    } cases[] = {
        {QKV_F32, 0.1, "0.1"},
        {QKV_F64, 0.1, "0.1"},
        {QKV_F32, 1.0 / 3, "0.33333334"},
        {QKV_F64, 1.0 / 3, "0.3333333333333333"},
        {QKV_F64, 1e-7, "1e-07"},
        {QKV_F64, -0.0, "-0"},
        {QKV_F64, INFINITY, "inf"},
        {QKV_F64, -INFINITY, "-inf"},
        {QKV_F64, 2.5, "2.5"},
        {QKV_F32, 0.7f, "0.7"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        float f = (float)cases[i].v;
        double d = cases[i].v;
        qkv_attn_map m = {.title = "",
                          .rows = 1,
                          .cols = 1,
                          .dtype = cases[i].dt,
                          .weights = cases[i].dt == QKV_F32 ? (const void *)&f : (const void *)&d};
        char *svg = svg_of(&m, NULL);
        char want[64];
        snprintf(want, sizeof want, "(0): %s</title>", cases[i].text);
        CHECK_MSG(svg && strstr(svg, want), "case %zu: no '%s'", i, want);
        qkv_viz_free(svg);
    }
    /* clamping: -3 is drawn as 0, 7 and +inf as 1, while the tooltip keeps the value */
    double w[3] = {-3, 7, INFINITY};
    qkv_attn_map m = {.title = "", .rows = 1, .cols = 3, .dtype = QKV_F64, .weights = w};
    char *svg = svg_of(&m, NULL);
    CHECK_HAS(svg, "fill=\"#440154\"><title>0 (0) \xE2\x86\x92 0 (0): -3</title>");
    CHECK_HAS(svg, "fill=\"#fde725\"><title>0 (0) \xE2\x86\x92 1 (1): 7</title>");
    CHECK_HAS(svg, "fill=\"#fde725\"><title>0 (0) \xE2\x86\x92 2 (2): inf</title>");
    qkv_viz_free(svg);
}

TEST(viz_svg_labels_are_cut_sanitised_and_escaped) {
    char long_label[31];
    memset(long_label, 'x', 30);
    long_label[30] = '\0';
    const char *cjk = "\xE7\x8C\xAB\xE7\x8C\xAB\xE7\x8C\xAB\xE7\x8C\xAB\xE7\x8C\xAB\xE7\x8C\xAB"
                      "\xE7\x8C\xAB\xE7\x8C\xAB\xE7\x8C\xAB\xE7\x8C\xAB\xE7\x8C\xAB\xE7\x8C\xAB"
                      "\xE7\x8C\xAB"; /* 13 x U+732B: 26 columns */
    const char *rows[4] = {long_label, cjk, "bad\xFF\xC0\xAF", "nl\n\x1b[31m\x7f"};
    float w[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    qkv_attn_map m = {
        .title = "", .rows = 4, .cols = 1, .dtype = QKV_F32, .weights = w, .row_labels = rows};
    char *svg = svg_of(&m, NULL);
    /* 23 x and the ellipsis, then the whole label in a <title> */
    CHECK_HAS(svg, ">xxxxxxxxxxxxxxxxxxxxxxx\xE2\x80\xA6<title>xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                   "</title></text>");
    /* 11 wide characters (22 columns) and the ellipsis fit in 24 columns */
    CHECK_HAS(svg,
              ">\xE7\x8C\xAB\xE7\x8C\xAB\xE7\x8C\xAB\xE7\x8C\xAB\xE7\x8C\xAB\xE7\x8C\xAB"
              "\xE7\x8C\xAB\xE7\x8C\xAB\xE7\x8C\xAB\xE7\x8C\xAB\xE7\x8C\xAB\xE2\x80\xA6<title>");
    /* invalid UTF-8: one U+FFFD per bad byte (0xC0 0xAF is an overlong '/') */
    CHECK_HAS(svg, ">bad\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD</text>");
    /* controls become control pictures: U+240A, U+241B, U+2421 */
    CHECK_HAS(svg, ">nl\xE2\x90\x8A\xE2\x90\x9B[31m\xE2\x90\xA1</text>");
    CHECK(!strchr(svg, '\x1b') && !strchr(svg, '\x7f'));
    char why[256] = "";
    CHECK_MSG(vt_markup_ok(svg, true, why), "not well-formed: %s", why);
    qkv_viz_free(svg);
}

TEST(viz_svg_empty_and_degenerate_maps) {
    qkv_attn_map m = {.stack = "encoder", .layer = 0, .head = 0, .rows = 0, .cols = 0};
    char *svg = svg_of(&m, NULL);
    CHECK_HAS(svg, "(empty map: 0 x 0)");
    char why[256] = "";
    CHECK_MSG(vt_markup_ok(svg, true, why), "0x0: %s", why);
    qkv_viz_free(svg);
    m.rows = 3; /* 3 x 0: labels of the rows, no cells */
    svg = svg_of(&m, NULL);
    CHECK_HAS(svg, "(empty map: 3 x 0)");
    CHECK(vt_count(svg, "<title>") == 1);
    qkv_viz_free(svg);
    float one = 0.5f;
    qkv_attn_map m1 = {
        .rows = 1, .cols = 1, .dtype = QKV_F32, .weights = &one, .layer = -1, .head = -1};
    svg = svg_of(&m1, NULL);
    CHECK_HAS(svg, "<title>self-attention</title>"); /* no stack, layer or head */
    CHECK_MSG(vt_markup_ok(svg, true, why), "1x1: %s", why);
    qkv_viz_free(svg);
}

TEST(viz_svg_ld_selects_a_window) {
    /* a 2 x 2 window of a 2 x 3 array (row stride 3) */
    double w[6] = {0, 1, 0.123, 1, 0, 0.456};
    qkv_attn_map m = {.title = "", .rows = 2, .cols = 2, .dtype = QKV_F64, .weights = w, .ld = 3};
    char *svg = svg_of(&m, NULL);
    CHECK_HAS(svg, "1 (1) \xE2\x86\x92 0 (0): 1</title>");
    CHECK(!strstr(svg, "0.123") && !strstr(svg, "0.456"));
    qkv_viz_free(svg);
}

/* ---- helpers --------------------------------------------------------------------------------- */

TEST(viz_utf8_decoder_follows_rfc3629) {
    struct {
        const char *s;
        uint32_t cp;
        size_t len;
    } cases[] = {
        {"A", 'A', 1},
        {"\xC3\xA9", 0xE9, 2},
        {"\xE2\x82\xAC", 0x20AC, 3},
        {"\xF0\x9F\x98\x80", 0x1F600, 4},
        {"\xF4\x8F\xBF\xBF", 0x10FFFF, 4},
        {"\xC0\x80", 0xFFFD, 1},         /* overlong NUL */
        {"\xE0\x80\xAF", 0xFFFD, 1},     /* overlong */
        {"\xED\xA0\x80", 0xFFFD, 1},     /* surrogate D800 */
        {"\xF4\x90\x80\x80", 0xFFFD, 1}, /* above U+10FFFF */
        {"\xF5\x80\x80\x80", 0xFFFD, 1},
        {"\x80", 0xFFFD, 1},     /* lone continuation */
        {"\xE2\x82", 0xFFFD, 1}, /* truncated by the NUL */
        {"\xFF", 0xFFFD, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t at = 0;
        uint32_t cp = vz_utf8_next(cases[i].s, &at);
        CHECK_MSG(cp == cases[i].cp && at == cases[i].len, "case %zu: U+%04X after %zu bytes", i,
                  (unsigned)cp, at);
    }
}

TEST(viz_viridis_matches_matplotlib) {
    /* matplotlib's _viridis_data at indices 0, 32, 64, 100, 128, 160, 200, 230, 255; v = i / 255 */
    struct {
        int i;
        double r, g, b;
    } ref[] = {{0, 0.267004, 0.004874, 0.329415},   {32, 0.278826, 0.175490, 0.483397},
               {64, 0.229739, 0.322361, 0.545706},  {100, 0.166617, 0.463708, 0.558119},
               {128, 0.127568, 0.566949, 0.550556}, {160, 0.157851, 0.683765, 0.501686},
               {200, 0.440137, 0.811138, 0.340967}, {230, 0.741388, 0.873449, 0.149561},
               {255, 0.993248, 0.906157, 0.143936}};
    for (size_t k = 0; k < sizeof ref / sizeof *ref; k++) {
        vz_rgb c = vz_viridis(ref[k].i / 255.0);
        CHECK_NEAR(c.r, ref[k].r * 255, 2.0);
        CHECK_NEAR(c.g, ref[k].g * 255, 2.0);
        CHECK_NEAR(c.b, ref[k].b * 255, 2.0);
    }
    char hex[8];
    CHECK(!strcmp(vz_hex(hex, vz_viridis(0)), "#440154"));
    CHECK(!strcmp(vz_hex(hex, vz_viridis(1)), "#fde725"));
    CHECK(!strcmp(vz_hex(hex, vz_viridis(-INFINITY)), "#440154"));
    CHECK(!strcmp(vz_hex(hex, vz_viridis(INFINITY)), "#fde725"));
    /* monotone in lightness along the map: green rises from 0 to 1 */
    for (int i = 1; i <= 100; i++)
        CHECK(vz_viridis(i / 100.0).g >= vz_viridis((i - 1) / 100.0).g);
    /* xterm: (68,1,84) is nearest cube colour (95,0,95) = 53; (253,231,37) -> (255,215,0) = 220 */
    CHECK(vz_xterm256(vz_viridis(0)) == 53);
    CHECK(vz_xterm256(vz_viridis(1)) == 220);
    CHECK(vz_xterm256((vz_rgb){128, 128, 128}) == 244); /* grey ramp 8 + 10 * 12 */
}

TEST(viz_numbers_ignore_the_locale_decimal_point) {
    char buf[64];
    vz_buf b = {0};
    vz_put_coord(&b, 12.54);
    vz_putc(&b, ' ');
    vz_put_coord(&b, -3.0);
    vz_putc(&b, ' ');
    vz_put_coord(&b, -0.05); /* rounds half away from zero */
    vz_putc(&b, ' ');
    vz_put_coord(&b, 40);
    vz_putc(&b, '\0');
    CHECK(!b.oom && !strcmp(b.p, "12.5 -3 -0.1 40"));
    vz_free(&b);
    CHECK(!strcmp(vz_fmt(buf, 0.125, 2, 'f'), "0.12") || !strcmp(buf, "0.13"));
    CHECK(!strcmp(vz_fmt(buf, 2.5, 1, 'f'), "2.5"));
    CHECK(!strcmp(vz_fmt_exact(buf, 0.1, false), "0.1"));
}
