/* test_viz_terminal.c: the terminal view (src/viz/terminal.c). The expected screens were written
 * by hand from the format in terminal.c and the shade bins of qkv_viz.h. */
#define _XOPEN_SOURCE 700 /* posix_openpt, grantpt, unlockpt, ptsname */
#include "viz/viz_internal.h"
#include "viz_testutil.h"

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

/* What qkv_attn_terminal writes for m, as a malloc'd string. */
static char *screen(const qkv_attn_map *m, qkv_term_style style, int width) {
    FILE *f = tmpfile();
    qkv_term_opts o = {style, width};
    CHECK_OK(qkv_attn_terminal(f, m, &o));
    long n = ftell(f);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

static const float w3[9] = {0.0f, 0.3f, 0.7f, 0.5f, 0.9f, NAN, 0.19f, 0.2f, 1.0f};
static const char *tok3[3] = {"The", "cat", "sat"};

static qkv_attn_map map3(void) {
    return (qkv_attn_map){.stack = "encoder",
                          .layer = 0,
                          .head = 1,
                          .kind = QKV_ATTN_SELF,
                          .rows = 3,
                          .cols = 3,
                          .dtype = QKV_F32,
                          .weights = w3,
                          .row_labels = tok3,
                          .col_labels = tok3};
}

TEST(viz_terminal_3x3_blocks) {
    qkv_attn_map m = map3();
    char *s = screen(&m, QKV_TERM_BLOCKS, 80);
    static const char want[] =
        "encoder layer 0, head 1 (self)\n"
        "      0 1 2\n"
        "The \xE2\x94\x82  \xE2\x96\x91\xE2\x96\x91\xE2\x96\x93\xE2\x96\x93\xE2\x94\x82\n"
        "cat \xE2\x94\x82\xE2\x96\x92\xE2\x96\x92\xE2\x96\x88\xE2\x96\x88??\xE2\x94\x82\n"
        "sat \xE2\x94\x82  \xE2\x96\x91\xE2\x96\x91\xE2\x96\x88\xE2\x96\x88\xE2\x94\x82\n"
        "keys: 0=The  1=cat  2=sat\n"
        "shades: \" \" [0,.2)  \"\xE2\x96\x91\" [.2,.4)  \"\xE2\x96\x92\" [.4,.6)  "
        "\"\xE2\x96\x93\" "
        "[.6,.8)  \"\xE2\x96\x88\" [.8,1]  \"??\" NaN\n";
    CHECK_MSG(!strcmp(s, want), "got:\n%s", s);
    free(s);
}

TEST(viz_terminal_3x3_ascii) {
    qkv_attn_map m = map3();
    char *s = screen(&m, QKV_TERM_ASCII, 80);
    static const char want[] = "encoder layer 0, head 1 (self)\n"
                               "      0 1 2\n"
                               "The |  ..**|\n"
                               "cat |::##??|\n"
                               "sat |  ..##|\n"
                               "keys: 0=The  1=cat  2=sat\n"
                               "shades: \" \" [0,.2)  \".\" [.2,.4)  \":\" [.4,.6)  \"*\" [.6,.8)  "
                               "\"#\" [.8,1]  \"??\" NaN\n";
    CHECK_MSG(!strcmp(s, want), "got:\n%s", s);
    free(s);
}

TEST(viz_terminal_3x3_color) {
    qkv_attn_map m = map3();
    char *s = screen(&m, QKV_TERM_COLOR, 80);
    /* 0 -> xterm 53 (95,0,95), 1 -> 220 (255,215,0); NaN resets the background; every row
     * with a background ends with a reset before the border */
    CHECK_MSG(strstr(s, "The \xE2\x94\x82\x1b[48;5;53m  \x1b[48;5;"), "got:\n%s", s);
    CHECK(strstr(s, "\x1b[0m??\xE2\x94\x82\n"));
    CHECK(strstr(s, "\x1b[48;5;220m  \x1b[0m\xE2\x94\x82\n"));
    CHECK(vt_count(s, "\x1b[0m") == 3 + 1); /* rows 1 and 3, the NaN, the legend */
    CHECK(strstr(s, "colours: 0 \x1b[48;5;"));
    free(s);
}

TEST(viz_terminal_wraps_columns_and_cuts_labels) {
    float w[2 * 30];
    for (int i = 0; i < 60; i++)
        w[i] = (float)(i % 30) / 29.0f;
    const char *rows[2] = {"abcdefghijklmnopqrstuvwxyz0123", "z"};
    qkv_attn_map m = {
        .title = "wide", .rows = 2, .cols = 30, .dtype = QKV_F32, .weights = w, .row_labels = rows};
    char *s = screen(&m, QKV_TERM_ASCII, 40);
    /* labels cut to 40 / 3 = 13 columns; cells per block (40 - 13 - 3) / 2 = 12 */
    /* weights c / 29: keys 0..5 below 0.2, 6..11 in [0.2, 0.4) */
    CHECK_MSG(strstr(s, "\nabcdefghijkl~ |            ............|\n"), "got:\n%s", s);
    CHECK(strstr(s, "\nz             |            ............|\n"));
    /* blocks 2 (keys 12..23) and 3 (24..29); legends wrapped; no line wider than 40 */
    CHECK(strstr(s, "\n                                    1 1\n"
                    "                0 1 2 3 4 5 6 7 8 9 0 1\n"));
    CHECK(strstr(s, "\n                1 1 1 1 1 1 1 1 2 2 2 2\n"
                    "                2 3 4 5 6 7 8 9 0 1 2 3\n"));
    CHECK(strstr(s, "\n                2 2 2 2 2 2\n"
                    "                4 5 6 7 8 9\n"));
    CHECK(strstr(s, "\nkeys: 0=0  1=1  2=2  3=3  4=4  5=5  6=6\n      7=7  8=8"));
    CHECK(strstr(s, "\nshades: \" \" [0,.2)  \".\" [.2,.4)\n        \":\" [.4,.6)  \"*\" [.6,.8)\n"
                    "        \"#\" [.8,1]  \"??\" NaN\n"));
    for (const char *line = s; *line;) {
        const char *nl = strchr(line, '\n');
        CHECK_MSG(nl && nl - line <= 40, "line longer than 40: %.60s", line);
        if (!nl) break;
        line = nl + 1;
    }
    free(s);
    /* in UTF-8 the cut label ends with an ellipsis */
    s = screen(&m, QKV_TERM_BLOCKS, 40);
    CHECK(strstr(s, "\nabcdefghijkl\xE2\x80\xA6 \xE2\x94\x82"));
    free(s);
}

TEST(viz_terminal_never_sends_control_characters) {
    const char *rows[2] = {"\x1b]0;pwned\x07", "x\xC2\x9B"
                                               "31m"}; /* OSC title, C1 CSI */
    float w[2] = {0.5f, 0.5f};
    qkv_attn_map m = {.title = "t\x1b[2J",
                      .rows = 2,
                      .cols = 1,
                      .dtype = QKV_F32,
                      .weights = w,
                      .row_labels = rows,
                      .col_labels = rows};
    for (int style = QKV_TERM_BLOCKS; style <= QKV_TERM_ASCII; style++) {
        char *s = screen(&m, (qkv_term_style)style, 80);
        for (const char *p = s; *p; p++) {
            unsigned char c = (unsigned char)*p;
            bool is_color_escape = style == QKV_TERM_COLOR && c == 0x1b &&
                                   (!strncmp(p, "\x1b[48;5;", 7) || !strncmp(p, "\x1b[0m", 4));
            CHECK_MSG(c >= 0x20 || c == '\n' || is_color_escape, "style %d: byte 0x%02x", style, c);
        }
        CHECK(!strstr(s, "\xC2\x9B"));
        if (style == QKV_TERM_BLOCKS) CHECK(strstr(s, "t\xE2\x90\x9B[2J\n")); /* U+241B */
        if (style == QKV_TERM_ASCII) CHECK(strstr(s, "\n?]0;pwned? |"));
        free(s);
    }
}

TEST(viz_terminal_empty_and_errors) {
    qkv_attn_map m = {.title = "none", .rows = 0, .cols = 5};
    char *s = screen(&m, QKV_TERM_BLOCKS, 80);
    CHECK(!strcmp(s, "none\n(empty map: 0 x 5)\n"));
    free(s);
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        qkv_attn_map m3 = map3();
        qkv_term_opts o = {QKV_TERM_BLOCKS, 80};
        CHECK_ERR(qkv_attn_terminal(full, &m3, &o), QKV_ERR_IO, "write failed");
        fclose(full);
    }
    CHECK_ERR(qkv_attn_terminal(NULL, &m, NULL), QKV_ERR_INVALID_ARG, "NULL stream");
    qkv_term_opts bad = {(qkv_term_style)9, 80};
    CHECK_ERR(qkv_attn_terminal(stdout, &m, &bad), QKV_ERR_INVALID_ARG, "unknown style 9");
}

/* AUTO on a pseudo-terminal: colour unless NO_COLOR is set (non-empty) or TERM is dumb. */
TEST(viz_terminal_auto_style_respects_no_color) {
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) || unlockpt(master)) {
        if (master >= 0) close(master);
        SKIP("no pseudo-terminal");
    }
    const char *name = ptsname(master);
    FILE *tty = name ? fopen(name, "w") : NULL;
    if (!tty) {
        close(master);
        SKIP("cannot open the pseudo-terminal");
    }
    const char *saved_nc = getenv("NO_COLOR"), *saved_term = getenv("TERM");
    char *nc = saved_nc ? strdup(saved_nc) : NULL, *term = saved_term ? strdup(saved_term) : NULL;
    struct {
        const char *no_color, *term;
        bool color;
    } cases[] = {{NULL, "xterm-256color", true},
                 {"", "xterm-256color", true}, /* empty NO_COLOR does not count */
                 {"1", "xterm-256color", false},
                 {NULL, "dumb", false}};
    qkv_attn_map m = map3();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (cases[i].no_color)
            setenv("NO_COLOR", cases[i].no_color, 1);
        else
            unsetenv("NO_COLOR");
        setenv("TERM", cases[i].term, 1);
        qkv_term_opts o = {QKV_TERM_AUTO, 80};
        CHECK_OK(qkv_attn_terminal(tty, &m, &o));
        /* the line discipline may hand the output over in pieces: read up to the last line */
        char buf[8192];
        size_t n = 0;
        buf[0] = '\0';
        while (!strstr(buf, "\"??\" NaN") && n < sizeof buf - 1) {
            struct pollfd pfd = {master, POLLIN, 0};
            if (poll(&pfd, 1, 5000) <= 0) break;
            ssize_t r = read(master, buf + n, sizeof buf - 1 - n);
            if (r <= 0) break;
            n += (size_t)r;
            buf[n] = '\0';
        }
        CHECK_MSG((strstr(buf, "\x1b[48;5;") != NULL) == cases[i].color, "case %zu", i);
        CHECK_MSG(n > 0 && strstr(buf, "keys: 0=The"), "case %zu: nothing read", i);
    }
    /* a stream that is not a terminal: blocks, whatever the environment */
    unsetenv("NO_COLOR");
    setenv("TERM", "xterm-256color", 1);
    char *s = screen(&m, QKV_TERM_AUTO, 80);
    CHECK(!strchr(s, '\x1b') && strstr(s, "\xE2\x96\x91"));
    free(s);
    if (nc)
        setenv("NO_COLOR", nc, 1);
    else
        unsetenv("NO_COLOR");
    if (term)
        setenv("TERM", term, 1);
    else
        unsetenv("TERM");
    free(nc);
    free(term);
    fclose(tty);
    close(master);
}
