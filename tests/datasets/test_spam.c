/* test_spam.c: the spam-vs-ham converter (recipes/mail_text.c, mail_tokens.c, prepare_spam.c)
 * against outputs written out by hand from the rules of docs/data.md, "Spam vs ham" (and equal to
 * those of the independent scripts/spam_reference.py): message text (headers, Subject, MIME,
 * transfer encodings, HTML), tokens (placeholders, numbers, punctuation, bytes), and a miniature
 * corpus of five folders written here (empty message skipped, duplicates dropped, truncation,
 * split by FNV-1a of the key, counts), plus the errors of bad sources. */
#include "data_testutil.h"

#include "data/data_internal.h"
#include "recipes.h"
#include "mail.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The tokens of text (all of them) joined by spaces; *count the number of tokens. */
static char *tokens_of(const char *text, size_t len, int64_t max, int64_t *count) {
    qkv__buf b = {0};
    int64_t n = qkv_mail_tokens(text, len, max, &b);
    if (count) *count = n;
    qkv__buf_ch(&b, '\0');
    return b.p;
}

static void check_tokens(const char *text, size_t len, const char *want) {
    char *got = tokens_of(text, len, 1000, NULL);
    CHECK_MSG(got && !strcmp(got, want), "tokens of '%s':\n  got  '%s'\n  want '%s'", text,
              got ? got : "(null)", want);
    free(got);
}

TEST(data_spam_tokens) {
    /* URLs: any case, not glued to a preceding letter or digit, up to an excluded character */
    check_tokens("Visit WWW.Example.COM/x, HTTPS://a.b/c?d=e&f. or ftp://h/x>y", 61,
                 "visit <url> <url> or <url> y");
    check_tokens("awww.x.com 1http://x", 20, "awww x com 1http x");
    /* e-mail addresses: the domain needs a '.', its trailing '.' and '-' are not part of it */
    check_tokens("a@b c@d.e f@g.com- -x.y@z.org. @a.b x@.y", 40,
                 "a b <email> <email> <email> a b x y");
    /* numbers: 1-2 plain digits kept, longer or with separators <num>, glued to letters a word */
    check_tokens("3.5mb 1. 2,3 1,000.50 007 12 123abc abc123 4th", 46,
                 "3 5mb 1 <num> <num> <num> 12 123abc abc123 4th");
    /* apostrophes trimmed at the ends, kept inside */
    check_tokens("'hi' x' '123' ''' rock'n'roll", 29, "hi x <num> rock'n'roll");
    /* ! $ ?: at most 3 per run; NUL, control, DEL and non-ASCII bytes separate */
    check_tokens("$$$$$ !? ?\?!! a\0b\001c\377d\177e", 23, "$ $ $ ! ? ? ? ! ! a b c d e");
    check_tokens("Mixed CASE Words <tag> a_b a-b a/b", 34, "mixed case words tag a b a b a b");
    check_tokens("", 0, "");
    check_tokens(" --- *** \xe4\xf6 ", 12, "");
    /* a word longer than the internal copy buffer (64) comes out whole */
    char longw[201];
    memset(longw, 'Q', 200);
    longw[200] = '\0';
    char *lw = tokens_of(longw, 200, 10, NULL);
    CHECK(lw && strlen(lw) == 200 && lw[0] == 'q' && lw[199] == 'q');
    free(lw);
    /* truncation: the first max tokens are written, all are counted */
    int64_t n;
    char *cut = tokens_of("one two! three 4444 five", 24, 3, &n);
    CHECK_MSG(cut && !strcmp(cut, "one two !") && n == 6, "'%s' %lld", cut, (long long)n);
    free(cut);
}

/* The text of a message, NUL-terminated. */
static char *text_of(const char *msg) {
    qkv__buf b = {0};
    qkv_mail_text(msg, strlen(msg), &b);
    qkv__buf_ch(&b, '\0');
    return b.p;
}

static void check_text(const char *msg, const char *want) {
    char *got = text_of(msg);
    CHECK_MSG(got && !strcmp(got, want), "text of '%s':\n  got  '%s'\n  want '%s'", msg,
              got ? got : "(null)", want);
    free(got);
}

TEST(data_spam_mail_text) {
    /* HTML: literal '<', tags become spaces, references decoded but not re-parsed, a reference
     * without ';' stays, style / script / comments (even unclosed) removed */
    check_text("Content-Type: text/html\n\na < b <b>bold</b>&lt;i&gt; &copy; &#8217;x&#X41;&#65 "
               "&unknown; <STYLE type=x>h{}</style>y<scriptx>z <!-- c --> w <!-- open",
               "a < b  bold <i>    xA&#65    y z   w  \n");
    check_text("Content-Type: text/html\n\n<script>never closed", " \n");
    /* non-text parts give nothing; the Subject is kept */
    check_text("Subject: s\nContent-Type: application/octet-stream\n\nbinary", " s\n");
    /* RFC 2047: Q ('_' a space) and B words; the space between two words dropped, the one
     * before plain text kept; an unknown encoding stays as it is */
    check_text("Subject: =?utf-8?q?a_b?==?UTF-8?B?Yw==?= =?x?Q?d?=\tplain =?bad?X?e?=\n\nbody",
               " a bcd\tplain =?bad?X?e?=\nbody\n");
    /* header names and values case-insensitive, values trimmed; base64 stops at '=' */
    check_text("X-Header: no subject\nContent-type: Text/Plain\nContent-Transfer-Encoding:  "
               "BASE64 \n\naGVs\nbG8gd29y\nbGQ=\nignored",
               "hello world\n");
    /* alternative without text/plain: the first part */
    check_text("Content-Type: multipart/alternative; boundary=\"b\"\n\n--b\nContent-Type: "
               "text/html\n\n<i>first</i>\n--b\nContent-Type: text/html\n\nsecond\n--b--\n",
               " first \n");
    /* delimiters: "--b" + spaces; "--bx" is not one; "--b--..." closes; preamble, epilogue out */
    check_text("Content-Type: multipart/mixed; boundary=b\n\n--bx\nnot a delimiter\n--b "
               "\nContent-Type: text/plain\n\npart one\n--b--trailing\nepilogue",
               "part one\n");
    /* an empty boundary is none: the body is read as plain text */
    check_text("Content-Type: multipart/mixed; boundary=\"\"\n\nempty boundary",
               "empty boundary\n");
    /* no empty line: all headers, empty body; an empty message */
    check_text("Subject: only headers", " only headers\n\n");
    check_text("", "\n");
    /* CRLF read as LF: the header block still ends, QP soft breaks still join */
    check_text("Subject: x\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\na=\r\nb =3d\r",
               " x\nab =\n");
    /* nesting deeper than 8 multiparts is dropped */
    char deep[2048] = "";
    for (int k = 0; k < 10; k++)
        snprintf(deep + strlen(deep), sizeof deep - strlen(deep),
                 "Content-Type: multipart/mixed; boundary=b%d\n\n--b%d\n", k, k);
    snprintf(deep + strlen(deep), sizeof deep - strlen(deep), "\ndeep text\n");
    char *d = text_of(deep);
    CHECK_MSG(d && !strcmp(d, ""), "'%s'", d);
    free(d);
    deep[0] = '\0';
    for (int k = 0; k < 8; k++)
        snprintf(deep + strlen(deep), sizeof deep - strlen(deep),
                 "Content-Type: multipart/mixed; boundary=b%d\n\n--b%d\n", k, k);
    snprintf(deep + strlen(deep), sizeof deep - strlen(deep), "\ndepth 8 text\n");
    d = text_of(deep);
    CHECK_MSG(d && !strcmp(d, "depth 8 text\n\n"), "'%s'", d);
    free(d);
}

/* ---- the miniature corpus -------------------------------------------------------------------
 * Keys and FNV-1a buckets (computed with the formula, checked below): easy-ham-1/00001.a 15
 * train, easy-ham-1/00002.l 85 dev, easy-ham-2/00001.k 92 test, hard-ham-1/00001.a (empty:
 * skipped), hard-ham-1/00002.b 60 train, spam-1/00001.a (same tokens as easy-ham-2/00001.k:
 * dropped, other label), spam-1/00002.c 88 dev, spam-2/00001.a (same tokens as spam-1/00002.c:
 * dropped), spam-2/00002.k 97 test, spam-2/00003.c 26 train, spam-2/00004.d 82 dev (its first 5
 * tokens equal those of spam-2/00003.c). */

/* base64 of: <html><head><style>p {color: red}</style></head><body>Cheap &amp; fast<br>
 * V&#105;agra&nbsp;now <!-- hidden comment --> <script type="x">var x = 1;</script>done</body>
 * </html> */
#define HTML_B64                                                                                   \
    "PGh0bWw+PGhlYWQ+PHN0eWxlPnAge2NvbG9yOiByZWR9PC9zdHlsZT48L2hlYWQ+PGJvZHk+Q2hl\n"               \
    "YXAgJmFtcDsgZmFzdDxicj5WJiMxMDU7YWdyYSZuYnNwO25vdyA8IS0tIGhpZGRlbiBjb21tZW50\n"               \
    "IC0tPiA8c2NyaXB0IHR5cGU9IngiPnZhciB4ID0gMTs8L3NjcmlwdD5kb25lPC9ib2R5PjwvaHRt\n"               \
    "bD4=\n"

static const struct {
    const char *path, *text;
    long len; /* -1: strlen */
} mini[] = {
    {"easy-ham-1/00001.a.txt",
     "From someone@example.com  Thu Aug 22 12:36:23 2002\nReceived: from x (x [1.2.3.4])\n"
     "\tby relay; Thu, 22 Aug 2002\nSubject: Re: Meeting\n at 10\nContent-Type: text/plain\n\n"
     "Hello Bob, see http://www.example.com/a?b=1 or mail bob.smith@example.co.uk.\n"
     "Call 555-1234 now!!!! It's $1,000 'quoted' don't 42 7 100\n",
     -1},
    {"easy-ham-1/00002.l.txt",
     "Subject: =?iso-8859-1?Q?Caf=E9_prices?= =?utf-8?B?aGVsbG8=?=\r\n"
     "Content-Type: text/plain; charset=iso-8859-1\r\n"
     "Content-Transfer-Encoding: quoted-printable\r\n\r\nSoft=\r\nbreak and caf=E9 na\xefve =3D "
     "end=\r\n",
     -1},
    {"easy-ham-2/00001.k.txt",
     "Subject: parts\nContent-Type: multipart/mixed; boundary=\"OUTER\"\n\npreamble ignored\n"
     "--OUTER\nContent-Type: multipart/alternative; boundary=INNER\n\n--INNER\n"
     "Content-Type: text/html\n\n<p>html version</p>\n--INNER\nContent-Type: text/plain\n\n"
     "plain version\n--INNER--\n--OUTER\nContent-Type: image/gif\n"
     "Content-Transfer-Encoding: base64\n\nR0lGODlhAQABAAAAACw=\n--OUTER\n"
     "Content-Type: text/html; charset=us-ascii\nContent-Transfer-Encoding: base64\n\n" HTML_B64
     "--OUTER--\nepilogue ignored\n",
     -1},
    {"hard-ham-1/00001.a.txt", "From: nobody\n\n\xe4\xf6\xfc --- ***\n", -1},
    {"hard-ham-1/00002.b.txt",
     "Subject: odd\nContent-Type: multipart/mixed\n\nContent-Type: text/plain\n\nhello world\n",
     -1},
    {"spam-1/00001.a.txt",
     "Subject: parts\nContent-Type: multipart/mixed; boundary=\"OUTER\"\n\n--OUTER\n"
     "Content-Type: text/plain\n\nplain version\n--OUTER\nContent-Type: text/plain\n\n"
     "cheap fast viagra now done\n--OUTER--\n",
     -1},
    {"spam-1/00002.c.txt",
     "Subject: WIN\nContent-Type: text/html\n\n<html><body><a href=\"http://x.com\">CLICK "
     "HERE</a> to WIN $$$$ FREE!!!</body></html>\n",
     -1},
    {"spam-2/00001.a.txt",
     "From: other@spam.example\nSubject: WIN\nContent-Type: TEXT/HTML\n\n<HTML><BODY><A "
     "HREF=\"http://y.com\">CLICK HERE</A> to WIN $$$$ FREE!!!</BODY></HTML>\n",
     -1},
    {"spam-2/00002.k.txt",
     "Subject: Fwd: offer\nContent-Type: multipart/mixed; boundary=XYZ\n\n--XYZ\n"
     "Content-Type: message/rfc822\n\nSubject: secret\nContent-Type: text/plain\n\n"
     "inner body text\n",
     -1},
    {"spam-2/00003.c.txt", "Subject: FREE\n\nwin win win win win win win win win win \n", -1},
    {"spam-2/00004.d.txt", "Subject: FREE\n\nwin win win win lose\n", -1},
    {"spam-2/00003.c.json", "{\"ignored\": true}\n", -1}, /* not a message */
    {"spam-2/README", "not a message either\n", -1},
};

static const char *const folder_names[5] = {"easy-ham-1", "easy-ham-2", "hard-ham-1", "spam-1",
                                            "spam-2"};

/* The miniature corpus in a fresh directory (returned; dt_rmtree it). */
static char *write_mini(void) {
    char *dir = dt_tmpdir();
    for (int f = 0; f < 5; f++) {
        char *p = dt_join(dir, folder_names[f]);
        mkdir(p, 0777);
        free(p);
    }
    for (size_t k = 0; k < sizeof mini / sizeof mini[0]; k++)
        CHECK(dt_write(dir, mini[k].path, mini[k].text, mini[k].len));
    return dir;
}

TEST(data_prepare_spam_mini) {
    /* the split keys, bucket by the formula of docs/data.md (not by qkv_split_of) */
    static const struct {
        const char *key;
        uint32_t hash;
        int bucket;
    } keys[] = {{"easy-ham-1/00001.a", 0x1bf7efcfu, 15}, {"easy-ham-1/00002.l", 0x9736d4fdu, 85},
                {"easy-ham-2/00001.k", 0x3d9a2244u, 92}, {"hard-ham-1/00002.b", 0x89cea82cu, 60},
                {"spam-1/00002.c", 0x3e1eb938u, 88},     {"spam-2/00002.k", 0x48661a11u, 97},
                {"spam-2/00003.c", 0xe4f3221au, 26},     {"spam-2/00004.d", 0x2ec65efeu, 82}};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        uint32_t h = 0x811C9DC5u;
        for (const char *p = keys[k].key; *p; p++)
            h = (h ^ (unsigned char)*p) * 0x01000193u;
        CHECK(h == keys[k].hash && (int)(h % 100) == keys[k].bucket);
        CHECK(qkv_fnv1a32(keys[k].key, strlen(keys[k].key)) == keys[k].hash);
    }
    char *dir = write_mini();
    char *out = dt_join(dir, "out/spam"); /* created */
    qkv_prepare_counts c;
    CHECK_OK(qkv_prepare_spam(dir, out, 256, &c));
    DT_CHECK_FILE(
        out, "spam.train.tsv",
        "ham\tre meeting at 10 hello bob see <url> or mail <email> call <num> <num> now ! "
        "! ! it's $ <num> quoted don't 42 7 <num>\n"
        "ham\todd content type text plain hello world\n"
        "spam\tfree win win win win win win win win win win\n");
    DT_CHECK_FILE(out, "spam.dev.tsv",
                  "ham\tcaf priceshello softbreak and caf na ve end\n"
                  "spam\twin click here to win $ $ $ free ! ! !\n"
                  "spam\tfree win win win win lose\n");
    DT_CHECK_FILE(out, "spam.test.tsv",
                  "ham\tparts plain version cheap fast viagra now done\n"
                  "spam\tfwd offer inner body text\n");
    DT_CHECK_FILE(out, "spam.train.ids",
                  "easy-ham-1/00001.a\nhard-ham-1/00002.b\nspam-2/00003.c\n");
    DT_CHECK_FILE(out, "spam.dev.ids", "easy-ham-1/00002.l\nspam-1/00002.c\nspam-2/00004.d\n");
    DT_CHECK_FILE(out, "spam.test.ids", "easy-ham-2/00001.k\nspam-2/00002.k\n");
    CHECK(c.source_entries == 11 && c.skipped == 1 && c.duplicates == 2 && c.dup_conflicts == 1);
    CHECK(c.items[0] == 3 && c.items[1] == 3 && c.items[2] == 2 && c.truncated == 0);
    CHECK(c.per_class[0][0] == 2 && c.per_class[0][1] == 1 && c.per_class[1][0] == 1 &&
          c.per_class[1][1] == 2 && c.per_class[2][0] == 1 && c.per_class[2][1] == 1);
    CHECK(c.units[0] == 26 + 7 + 11 && c.units[1] == 8 + 12 + 6 && c.units[2] == 8 + 5);
    /* lengths 5 6 7 8 8 11 12 26: element floor(p 8 / 100) */
    CHECK(c.length_pct[0] == 5 && c.length_pct[1] == 7 && c.length_pct[2] == 8 &&
          c.length_pct[3] == 12 && c.length_pct[4] == 26 && c.length_pct[5] == 26);
    CHECK(c.max_src_len == 26);
    CHECK(dt_count_tmp(out) == 0);
    /* the output reads back as a labeled corpus */
    char *p = dt_join(out, "spam.train.tsv");
    qkv_corpus *cp;
    CHECK_OK(qkv_corpus_read(QKV_CORPUS_LABELED, p, NULL, &cp));
    CHECK(qkv_corpus_size(cp) == 3 && qkv_corpus_length(cp, 0, QKV_FIELD_SRC) == 26);
    qkv_corpus_free(cp);
    free(p);
    /* 5 tokens: 6 messages cut; spam-2/00004.d becomes a copy of spam-2/00003.c and is dropped;
     * the files are written over the previous ones */
    CHECK_OK(qkv_prepare_spam(dir, out, 5, &c));
    DT_CHECK_FILE(out, "spam.train.tsv",
                  "ham\tre meeting at 10 hello\nham\todd content type text plain\n"
                  "spam\tfree win win win win\n");
    DT_CHECK_FILE(out, "spam.dev.tsv",
                  "ham\tcaf priceshello softbreak and caf\n"
                  "spam\twin click here to win\n");
    DT_CHECK_FILE(out, "spam.test.tsv",
                  "ham\tparts plain version cheap fast\n"
                  "spam\tfwd offer inner body text\n");
    DT_CHECK_FILE(out, "spam.dev.ids", "easy-ham-1/00002.l\nspam-1/00002.c\n");
    CHECK(c.truncated == 6 && c.duplicates == 3 && c.dup_conflicts == 1 && c.items[1] == 2);
    CHECK(c.units[0] == 15 && c.max_src_len == 26);
    CHECK(dt_count_tmp(out) == 0);
    free(out);
    dt_rmtree(dir);
}

/* qkv_prepare_spam on dir fails with st and a message containing `needle` (may be NULL). */
static void spam_fails(const char *dir, int64_t max_tokens, qkv_status st, const char *needle) {
    char *out = dt_join(dir, "out");
    qkv_status got = qkv_prepare_spam(dir, out, max_tokens, NULL);
    CHECK_MSG(got == st, "status %d, want %d (%s)", (int)got, (int)st, qkv_last_error());
    if (needle)
        CHECK_MSG(strstr(qkv_last_error(), needle), "'%s' lacks '%s'", qkv_last_error(), needle);
    free(out);
}

TEST(data_prepare_spam_errors) {
    char *dir = write_mini();
    spam_fails(dir, 0, QKV_ERR_INVALID_ARG, "max_tokens is 0, must be at least 1");
    CHECK(qkv_prepare_spam(NULL, dir, 5, NULL) == QKV_ERR_INVALID_ARG);
    /* a message that cannot be read (a directory named like one) */
    char *bad = dt_join(dir, "spam-1/00003.x.txt");
    mkdir(bad, 0777);
    char want[512];
    snprintf(want, sizeof want, "%s: is a directory, not a regular file", bad);
    spam_fails(dir, 256, QKV_ERR_IO, want);
    rmdir(bad);
    free(bad);
    /* a folder without messages */
    char *h = dt_join(dir, "hard-ham-1");
    char *e1 = dt_join(h, "00001.a.txt"), *e2 = dt_join(h, "00002.b.txt");
    remove(e1);
    remove(e2);
    snprintf(want, sizeof want, "no messages (*.txt files) in %s", h);
    spam_fails(dir, 256, QKV_ERR_FORMAT, want);
    /* a missing folder */
    rmdir(h);
    snprintf(want, sizeof want, "cannot open the directory %s", h);
    spam_fails(dir, 256, QKV_ERR_IO, want);
    free(e1);
    free(e2);
    free(h);
    /* nothing was written by the failed runs */
    char *out = dt_join(dir, "out");
    struct stat s;
    CHECK(stat(out, &s) != 0);
    free(out);
    dt_rmtree(dir);
}
