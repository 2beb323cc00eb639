/* test_viz_png.c: the zlib writer (src/viz/deflate.c), the PNG encoder (src/viz/png.c) and the
 * attention-map PNGs (src/viz/attn_png.c).
 *
 * Every PNG is read back by an independent decoder (viz_testutil.c: its own RFC 1951 inflater,
 * bitwise CRC-32 and Adler-32, PNG unfiltering) and, when python3 is installed, by Python's zlib
 * (a different inflate implementation) through a small script; pixels are compared with images
 * built from the documented layout, not from the writer. */
#include "viz/viz_internal.h"
#include "viz_testutil.h"

static unsigned char *noise(size_t n, uint64_t seed) {
    unsigned char *p = malloc(n ? n : 1);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = (unsigned char)(x >> 24);
    }
    return p;
}

TEST(viz_checksums_known_values) {
    CHECK(vz_crc32(0, "123456789", 9) == 0xCBF43926u); /* the CRC-32 check value */
    CHECK(vz_crc32(0, "", 0) == 0);
    CHECK(vz_adler32(1, "Wikipedia", 9) == 0x11E60398u); /* the example of the Adler-32 article */
    CHECK(vz_adler32(1, "", 0) == 1);
    unsigned char *d = noise(100003, 7);
    CHECK(vz_crc32(0, d, 100003) == vt_crc32(d, 100003));
    CHECK(vz_adler32(1, d, 100003) == vt_adler32(d, 100003));
    /* incremental use equals one call */
    CHECK(vz_crc32(vz_crc32(0, d, 777), d + 777, 100003 - 777) == vt_crc32(d, 100003));
    CHECK(vz_adler32(vz_adler32(1, d, 6000), d + 6000, 100003 - 6000) == vt_adler32(d, 100003));
    memset(d, 255, 100003); /* the worst case for the deferred modulo */
    CHECK(vz_adler32(1, d, 100003) == vt_adler32(d, 100003));
    free(d);
}

static void check_zlib(const char *what, const unsigned char *d, size_t n, bool stored,
                       size_t *z_size) {
    vz_buf z = {0};
    CHECK(vz_zlib(&z, d, n, stored));
    const unsigned char *u = (const unsigned char *)z.p;
    CHECK_MSG(z.n >= 6 && u[0] == 0x78 && u[1] == 0x01, "%s: zlib header", what);
    size_t out_n = 0;
    const char *why = NULL;
    unsigned char *back = vt_inflate(u + 2, z.n - 6, &out_n, &why);
    CHECK_MSG(back, "%s (%s): inflate failed: %s", what, stored ? "stored" : "fixed", why);
    if (back) CHECK_MSG(out_n == n && !memcmp(back, d, n), "%s: inflated data differ", what);
    uint32_t a = (uint32_t)u[z.n - 4] << 24 | (uint32_t)u[z.n - 3] << 16 |
                 (uint32_t)u[z.n - 2] << 8 | u[z.n - 1];
    CHECK_MSG(a == vt_adler32(d, n), "%s: Adler-32 trailer", what);
    if (stored) { /* 2 header + per block (1 + 4) + data + 4 trailer */
        size_t blocks = n ? (n + 65534) / 65535 : 1;
        CHECK_MSG(z.n == 2 + 5 * blocks + n + 4, "%s: stored size %zu", what, z.n);
    }
    *z_size = z.n;
    free(back);
    vz_free(&z);
}

TEST(viz_zlib_round_trips) {
    size_t zs;
    unsigned char one = 'x';
    check_zlib("empty", &one, 0, true, &zs);
    check_zlib("empty", &one, 0, false, &zs);
    check_zlib("one byte", &one, 1, true, &zs);
    check_zlib("one byte", &one, 1, false, &zs);
    unsigned char *zeros = calloc(100000, 1);
    check_zlib("zeros", zeros, 100000, true, &zs);
    check_zlib("zeros", zeros, 100000, false, &zs);
    CHECK_MSG(zs < 1000, "100000 zero bytes compress to %zu bytes", zs);
    free(zeros);
    unsigned char *rnd = noise(200000, 3);
    check_zlib("noise", rnd, 200000, true, &zs); /* 4 stored blocks, the last one short */
    check_zlib("noise", rnd, 200000, false, &zs);
    /* period 32768: every match is at the largest distance; period 40000: out of the window
     * for the first copy, so only short chance matches */
    for (size_t period = 32768; period <= 40000; period += 40000 - 32768) {
        unsigned char *p = malloc(100000);
        for (size_t i = 0; i < 100000; i++)
            p[i] = rnd[i % period];
        check_zlib("periodic", p, 100000, false, &zs);
        if (period == 32768) CHECK_MSG(zs < 60000, "period 32768: %zu bytes", zs);
        free(p);
    }
    /* text with repeats of every length 3 .. 258 and more */
    vz_buf t = {0};
    for (int i = 0; i < 400; i++)
        vz_printf(&t, "attention %d is all you need; %.*s|", i % 37, i % 300,
                  "abcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabca"
                  "bcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcab"
                  "cabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabc"
                  "abcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcab");
    check_zlib("text", (unsigned char *)t.p, t.n, false, &zs);
    CHECK(zs < t.n / 4);
    vz_free(&t);
    free(rnd);
}

/* ---- attention-map PNG ----------------------------------------------------------------------- */

/* The 2 x 3 map {0, 1, NaN; 1, 0, 0.5} at N = 3 with ticks, pixel by pixel from the layout in
 * attn_png.c: 6 px margin; column ticks at x = 6 + 3c + 1 (c = 0: y 0..5, else y 3..5); row ticks
 * at y = 6 + 3r + 1 (r = 0: x 0..5, else x 3..5); NaN hatched 150 where (x + y) mod 4 < 2, else
 * 200. The 0.5 cell is matplotlib's viridis(0.5) = #21918c within 2 units. */
static bool expected_px(int x, int y, int rgb[3], bool *approx) {
    static const double w[2][3] = {{0, 1, NAN}, {1, 0, 0.5}};
    *approx = false;
    if (x < 6 || y < 6) {
        bool tick = false;
        for (int c = 0; c < 3; c++)
            tick |= y < 6 && x == 6 + 3 * c + 1 && y >= (c == 0 ? 0 : 3);
        for (int r = 0; r < 2; r++)
            tick |= x < 6 && y == 6 + 3 * r + 1 && x >= (r == 0 ? 0 : 3);
        int v = tick ? 64 : 255;
        rgb[0] = rgb[1] = rgb[2] = v;
        return true;
    }
    double v = w[(y - 6) / 3][(x - 6) / 3];
    if (v != v) {
        rgb[0] = rgb[1] = rgb[2] = (x + y) % 4 < 2 ? 150 : 200;
    } else if (v == 0) {
        rgb[0] = 0x44, rgb[1] = 0x01, rgb[2] = 0x54;
    } else if (v == 1) {
        rgb[0] = 0xfd, rgb[1] = 0xe7, rgb[2] = 0x25;
    } else {
        rgb[0] = 0x21, rgb[1] = 0x91, rgb[2] = 0x8c;
        *approx = true;
    }
    return true;
}

static void check_pixels(const char *what, const vt_image *img) {
    CHECK_MSG(img->w == 15 && img->h == 12, "%s: %d x %d, expected 15 x 12", what, img->w, img->h);
    if (img->w != 15 || img->h != 12) return;
    int bad = 0;
    for (int y = 0; y < 12; y++)
        for (int x = 0; x < 15; x++) {
            int e[3];
            bool approx;
            expected_px(x, y, e, &approx);
            const unsigned char *p = img->rgb + 3 * (y * 15 + x);
            for (int k = 0; k < 3; k++)
                if (approx ? abs(p[k] - e[k]) > 2 : p[k] != e[k]) {
                    if (bad++ < 5)
                        CHECK_MSG(false, "%s: pixel (%d, %d) = %d %d %d, expected %d %d %d", what,
                                  x, y, p[0], p[1], p[2], e[0], e[1], e[2]);
                    break;
                }
        }
    CHECK_MSG(bad == 0, "%s: %d pixels differ", what, bad);
}

TEST(viz_png_pixels_match_the_layout) {
    float w[6] = {0, 1, NAN, 1, 0, 0.5f};
    const char *labels[3] = {"a", "b", "c"};
    qkv_attn_map m = {.title = "t",
                      .rows = 2,
                      .cols = 3,
                      .dtype = QKV_F32,
                      .weights = w,
                      .row_labels = labels,
                      .col_labels = labels};
    char *dir = vt_tmp_dir();
    for (int stored = 0; stored < 2; stored++) {
        qkv_viz_opts o = qkv_viz_default_opts();
        o.png_cell = 3;
        o.png_stored = stored;
        unsigned char *png = NULL;
        size_t n = 0;
        CHECK_OK(qkv_attn_png(&m, &o, &png, &n));
        vt_image img;
        const char *why;
        bool ok = vt_png_decode(png, n, &img, &why);
        CHECK_MSG(ok, "%s: own decoder: %s", stored ? "stored" : "fixed", why);
        if (ok) check_pixels(stored ? "stored, own decoder" : "fixed, own decoder", &img);
        free(img.rgb);
        /* the same bytes through the file writer, then Python's zlib */
        char path[256];
        snprintf(path, sizeof path, "%s/map%d.png", dir, stored);
        CHECK_OK(qkv_attn_png_write(path, &m, &o));
        size_t fn_len = 0;
        unsigned char *file = vt_read_file(path, &fn_len);
        CHECK(file && fn_len == n && !memcmp(file, png, n));
        free(file);
        char pwhy[256] = "";
        int rc = vt_python_png(path, &img, pwhy);
        CHECK_MSG(rc != -1, "python3 rejected %s: %s", path, pwhy);
        if (rc == 1) check_pixels(stored ? "stored, python zlib" : "fixed, python zlib", &img);
        free(img.rgb);
        qkv_viz_free(png);
    }
    vt_tmp_clean(dir);
}

/* rgb (w x h) through vz_png_encode (stored or compressed blocks) into b, and back through the
 * tests' own decoder into img (img->rgb to free; NULL when it did not decode): true when the
 * pixels came back unchanged. */
static bool encode_and_decode(const unsigned char *rgb, int w, int h, int stored, vz_buf *b, vt_image *img) {
    CHECK(vz_png_encode(b, rgb, w, h, stored));
    const char *why = "";
    img->rgb = NULL;
    const bool ok = vt_png_decode((unsigned char *)b->p, b->n, img, &why);
    CHECK_MSG(ok, "own decoder: %s", why);
    const bool same = ok && img->w == w && img->h == h && !memcmp(img->rgb, rgb, (size_t)w * h * 3);
    CHECK_MSG(!ok || same, "the decoded %d x %d image differs from the encoded one", w, h);
    return same;
}

TEST(viz_png_encoder_round_trips_any_image) {
    /* noise with flat patches and repeated rows, so every filter type gets chosen somewhere */
    const int w = 61, h = 47;
    unsigned char *rgb = noise((size_t)w * h * 3, 11);
    for (int y = 10; y < 20; y++)
        memset(rgb + (size_t)y * w * 3, 17 * y, (size_t)w * 3);
    for (int y = 25; y < 35; y++)
        memcpy(rgb + (size_t)y * w * 3, rgb + 24 * (size_t)w * 3, (size_t)w * 3);
    for (int y = 38; y < 47; y++) /* smooth ramps favour average and Paeth */
        for (int x = 0; x < w * 3; x++)
            rgb[(size_t)y * w * 3 + x] = (unsigned char)(x + 2 * y);
    char *dir = vt_tmp_dir();
    for (int stored = 0; stored < 2; stored++) {
        vz_buf b = {0};
        vt_image img;
        if (encode_and_decode(rgb, w, h, stored, &b, &img))
            CHECK_MSG(img.filters_used & 1 << 2, "up filter never chosen (mask %x)", img.filters_used);
        free(img.rgb);
        char path[256];
        snprintf(path, sizeof path, "%s/noise%d.png", dir, stored);
        FILE *f = fopen(path, "wb");
        fwrite(b.p, 1, b.n, f);
        fclose(f);
        char pwhy[256] = "";
        int rc = vt_python_png(path, &img, pwhy);
        CHECK_MSG(rc != -1, "python3 rejected the image: %s", pwhy);
        if (rc == 1) CHECK(img.w == w && img.h == h && !memcmp(img.rgb, rgb, (size_t)w * h * 3));
        free(img.rgb);
        vz_free(&b);
    }
    vt_tmp_clean(dir);
    free(rgb);
}

TEST(viz_png_large_image_spans_several_idat_chunks) {
    const int w = 600, h = 600; /* 1,080,600 filtered bytes: more than one 1 MiB chunk */
    unsigned char *rgb = noise((size_t)w * h * 3, 5);
    for (int stored = 0; stored < 2; stored++) {
        vz_buf b = {0};
        vt_image img;
        if (encode_and_decode(rgb, w, h, stored, &b, &img)) CHECK_MSG(img.n_idat == 2, "%d IDAT chunks", img.n_idat);
        free(img.rgb);
        vz_free(&b);
    }
    free(rgb);
}

TEST(viz_png_sizes_ticks_and_empty_maps) {
    float w[12];
    for (int i = 0; i < 12; i++)
        w[i] = (float)i / 11;
    qkv_attn_map m = {.rows = 3, .cols = 4, .dtype = QKV_F32, .weights = w};
    struct {
        int64_t rows, cols;
        int cell;
        bool ticks;
        int w, h;
    } cases[] = {
        {3, 4, 5, false, 20, 15}, {3, 4, 5, true, 26, 21}, {3, 4, 0, true, 6 + 32, 6 + 24},
        {1, 1, 1, false, 1, 1},   {0, 0, 8, true, 6, 6},   {0, 0, 8, false, 1, 1},
        {0, 4, 2, false, 8, 1},   {3, 0, 2, true, 6, 12},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        m.rows = cases[i].rows, m.cols = cases[i].cols;
        qkv_viz_opts o = qkv_viz_default_opts();
        o.png_cell = cases[i].cell;
        o.png_ticks = cases[i].ticks;
        unsigned char *png = NULL;
        size_t n = 0;
        CHECK_OK(qkv_attn_png(&m, &o, &png, &n));
        vt_image img;
        const char *why;
        bool ok = png && vt_png_decode(png, n, &img, &why);
        CHECK_MSG(ok, "case %zu: %s", i, why);
        if (ok)
            CHECK_MSG(img.w == cases[i].w && img.h == cases[i].h, "case %zu: %d x %d", i, img.w,
                      img.h);
        /* the same input gives the same bytes */
        unsigned char *again = NULL;
        size_t n2 = 0;
        CHECK_OK(qkv_attn_png(&m, &o, &again, &n2));
        CHECK(again && n2 == n && !memcmp(png, again, n));
        if (ok) free(img.rgb);
        qkv_viz_free(png);
        qkv_viz_free(again);
    }
}

TEST(viz_png_refuses_absurd_sizes) {
    static float w[4096];
    qkv_attn_map m = {.title = "wide", .rows = 1, .cols = 4096, .dtype = QKV_F32, .weights = w};
    qkv_viz_opts o = qkv_viz_default_opts();
    o.png_cell = 64; /* 6 + 4096 * 64 pixels wide */
    unsigned char *png = (unsigned char *)"not touched";
    size_t n = 1;
    CHECK_ERR(qkv_attn_png(&m, &o, &png, &n), QKV_ERR_INVALID_ARG, "262150 x 70 pixels");
    CHECK(strstr(qkv_last_error(), "png_cell") && strstr(qkv_last_error(), "\"wide\""));
    CHECK(png == NULL && n == 0);
    o.png_cell = 4; /* 16390 wide: still above 16384 */
    CHECK_ERR(qkv_attn_png(&m, &o, &png, &n), QKV_ERR_INVALID_ARG, "exceeds the limit");
    o.png_cell = 3;
    CHECK_OK(qkv_attn_png(&m, &o, &png, &n));
    qkv_viz_free(png);
}
