/* test_prepare_bible.c: qkv_prepare_bible (recipes/prepare_bible.c) on a miniature pair of
 * diatheke exports written by hand in its format (tests/data/bible/{kjv,sparv}.txt: markup, a
 * psalm title repeated before a later verse, a chapter end the Spanish lacks, a verse only in the
 * Spanish), output checked byte for byte; then malformed exports, each refused with its file and
 * line and nothing written. */
#include "data_testutil.h"
#include "recipes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const train_en_es =
    "In the beginning God created the heaven and the earth.\t"
    "EN el principio cri\xc3\xb3 Dios los cielos y la tierra.\n"
    "And the earth was without form, and void; and darkness.\t"
    "Y la tierra estaba desordenada y vac\xc3\xad"
    "a.\n"
    "And all the congregation lifted up their voice, and cried.\t"
    "ENTONCES toda la congregaci\xc3\xb3n alz\xc3\xb3 grita.\n"
    "Many there be which say of my soul, There is no help for him in God. Selah.\t"
    "Muchos dicen de mi vida: No hay para \xc3\xa9l salud en Dios. (Selah.)\n"
    "The elder unto the elect lady.\tEL anciano \xc3\xa1 la se\xc3\xb1ora elegida.\n";

static const char *const dev_en_es =
    "The beginning of the gospel of Jesus Christ, the Son of God;\t"
    "PRINCIPIO del evangelio de Jesucristo, Hijo de Dios.\n"
    "As it is written in the prophets, Behold, I send my messenger.\t"
    "Como est\xc3\xa1 escrito en Isa\xc3\xad"
    "as el profeta.\n";

static const char *const test_en_es =
    "In the beginning was the Word, and the Word was with God, and the Word was God.\t"
    "EN el principio era el Verbo, y el Verbo era con Dios, y el Verbo era Dios.\n"
    "The same was in the beginning with God & man.\tEste era en el principio con Dios.\n";

/* The lines of `tsv` with their two fields swapped. */
static char *swapped(const char *tsv) {
    size_t n = strlen(tsv);
    char *out = malloc(n + 1), *o = out;
    for (const char *s = tsv; *s;) {
        const char *tab = strchr(s, '\t'), *nl = strchr(s, '\n');
        memcpy(o, tab + 1, (size_t)(nl - tab - 1));
        o += nl - tab - 1;
        *o++ = '\t';
        memcpy(o, s, (size_t)(tab - s));
        o += tab - s;
        *o++ = '\n';
        s = nl + 1;
    }
    *o = '\0';
    return out;
}

static bool exists(const char *dir, const char *name) {
    char *p = dt_join(dir, name);
    struct stat st;
    bool ok = stat(p, &st) == 0;
    free(p);
    return ok;
}

TEST(data_prepare_bible_mini) {
    char *src = dt_join(dt_repo_root(), "tests/data/bible");
    char *dir = dt_tmpdir();
    char *out = dt_join(dir, "out/bible"); /* created */
    qkv_prepare_counts c;
    CHECK_OK(qkv_prepare_bible(src, out, &c));
    DT_CHECK_FILE(out, "bible.en-es.train.tsv", train_en_es);
    DT_CHECK_FILE(out, "bible.en-es.dev.tsv", dev_en_es);
    DT_CHECK_FILE(out, "bible.en-es.test.tsv", test_en_es);
    const char *const en_es[3] = {train_en_es, dev_en_es, test_en_es};
    static const char *const es_en_name[3] = {"bible.es-en.train.tsv", "bible.es-en.dev.tsv",
                                              "bible.es-en.test.tsv"};
    for (int s = 0; s < 3; s++) {
        char *want = swapped(en_es[s]);
        DT_CHECK_FILE(out, es_en_name[s], want);
        free(want);
    }
    DT_CHECK_FILE(out, "bible.train.ref", "Gen.1.1\nGen.1.2\nNum.14.1\nPs.3.2\n2John.1.1\n");
    DT_CHECK_FILE(out, "bible.dev.ref", "Mark.1.1\nMark.1.2\n");
    DT_CHECK_FILE(out, "bible.test.ref", "John.1.1\nJohn.1.2\n");
    /* Numbers 12:16 is empty in the Spanish: Numbers 12 and 13 go; Revelation 22:20 is only in the
     * Spanish: Revelation 22 goes; Psalms 3:1 is a psalm's first verse */
    CHECK(c.verses[0] == 14 && c.verses[1] == 15);
    CHECK(c.only_in[0] == 0 && c.only_in[1] == 1 && c.empty[0] == 0 && c.empty[1] == 1);
    CHECK(c.versification == 3 && c.psalm_titles == 1);
    CHECK(c.items[0] == 5 && c.items[1] == 2 && c.items[2] == 2);
    CHECK(c.words[0][0] == 53 && c.words[0][1] == 24 && c.words[0][2] == 27);
    CHECK(c.words[1][0] == 42 && c.words[1][1] == 15 && c.words[1][2] == 24);
    CHECK(c.chars[0][0] == 272 && c.chars[1][0] == 223 && c.chars[1][1] == 91);
    CHECK(c.max_src_len == 17 && c.max_tgt_len == 17);
    CHECK(dt_count_tmp(out) == 0);
    /* the files read back as translation pairs, source and target as words */
    qkv_corpus *cp = NULL;
    CHECK_OK(dt_read_word_pairs(out, "bible.es-en.train.tsv", &cp));
    CHECK(cp && qkv_corpus_size(cp) == 5);
    qkv_corpus_free(cp);
    /* idempotent */
    CHECK_OK(qkv_prepare_bible(src, out, NULL));
    DT_CHECK_FILE(out, "bible.dev.ref", "Mark.1.1\nMark.1.2\n");
    free(out);
    free(src);
    dt_rmtree(dir);
}

/* kjv.txt (with a fixed, good sparv.txt) -> the expected QKV_ERR_FORMAT; nothing is written. */
static void bible_fails(const char *kjv, long len, const char *needle) {
    char *dir = dt_tmpdir();
    CHECK(dt_write(dir, "kjv.txt", kjv, len));
    CHECK(dt_write(dir, "sparv.txt", "Genesis 1:1: EN el principio.\n(spaRV1909eb)\n", -1));
    char want[512];
    snprintf(want, sizeof want, needle, dir);
    char *out = dt_join(dir, "out");
    CHECK_ERR(qkv_prepare_bible(dir, out, NULL), QKV_ERR_FORMAT, want);
    CHECK_MSG(!exists(dir, "out"), "%s: output written on error", needle);
    free(out);
    dt_rmtree(dir);
}

#define END "(engKJV2006eb)\n"

TEST(data_prepare_bible_errors) {
    static const struct {
        const char *kjv;
        long len;           /* -1: strlen */
        const char *needle; /* %s: the directory */
    } bad[] = {
        {"In the beginning God created.\n" END, -1,
         "%s/kjv.txt:1: no verse reference ('Book CHAPTER:VERSE: text'"},
        {"Genesis 1:1: a\nGenesys 1:2: b\n" END, -1, "%s/kjv.txt:2: no verse reference"},
        {"Genesis 1:x: a\n" END, -1, "%s/kjv.txt:1: bad chapter:verse in 'Genesis 1:x: a'"},
        {"Genesis 0:1: a\n" END, -1, "%s/kjv.txt:1: bad chapter:verse"},
        {"Genesis 1:1 a\n" END, -1, "%s/kjv.txt:1: bad chapter:verse"},
        {"Genesis 1:1:a\n" END, -1, "%s/kjv.txt:1: bad chapter:verse"},
        {"Genesis 1:1000: a\n" END, -1, "%s/kjv.txt:1: bad chapter:verse"},
        {"Genesis 1:1: caf\xe9\n" END, -1, "%s/kjv.txt:1: invalid UTF-8 (byte 0xE9 at column 17)"},
        {"Genesis 1:1: a\001b\n" END, -1, "%s/kjv.txt:1: control character 0x01 at column 15"},
        {"Genesis 1:1: a\0b\n" END, 33, "%s/kjv.txt:1: control character 0x00"},
        {"Genesis 1:2: a\nGenesis 1:1: b\n" END, -1,
         "%s/kjv.txt:2: Genesis 1:1 after Genesis 1:2: the verses must follow the "
         "canonical order, each once"},
        {"Genesis 1:1: a\nGenesis 1:1: b\n" END, -1, "%s/kjv.txt:2: Genesis 1:1 after Genesis 1:1"},
        {"Exodus 1:1: a\nGenesis 1:1: b\n" END, -1, "%s/kjv.txt:2: Genesis 1:1 after Exodus 1:1"},
        {"Genesis 1:1: a\n\nGenesis 1:2: b\n" END, -1, "%s/kjv.txt:2: blank line"},
        {"Genesis 1:1: a\n", -1,
         "%s/kjv.txt: no closing '(MODULE)' line: the export is incomplete"},
        {"Genesis 1:1: a\n" END "Genesis 1:2: b\n", -1,
         "%s/kjv.txt:3: a line after the closing '(MODULE)' line"},
        {END, -1, "%s/kjv.txt: no verses"},
        {"", 0, "%s/kjv.txt: no closing '(MODULE)' line"},
        {"Genesis 1:1: a <w savlm=\"x\"\n" END, -1,
         "%s/kjv.txt:1: unterminated tag '<w savlm=\"x\"' in Genesis 1:1"},
        {"<title>A Psalm Psalms 3:1: a\n" END, -1, "%s/kjv.txt:1: unterminated '<title>' element"},
        {"Genesis 1:1: a<note>b</not>\n" END, -1,
         "%s/kjv.txt:1: unterminated '<note>' element in Genesis 1:1"},
        {"Genesis 1:1: a &nbsp; b\n" END, -1,
         "%s/kjv.txt:1: unknown entity '&nbsp; b' in Genesis 1:1"},
        {"Genesis 1:1: a &lt;pad&gt; b\n" END, -1,
         "%s/kjv.txt:1: Genesis 1:1 has the word '<pad>', a reserved symbol"},
        {"Rome 1:1: a\n" END, -1, "no verse reference"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        bible_fails(bad[i].kjv, bad[i].len, bad[i].needle);
    /* a missing export is an I/O error naming it */
    char *dir = dt_tmpdir();
    char want[512];
    snprintf(want, sizeof want, "%s/kjv.txt: cannot open", dir);
    CHECK_ERR(qkv_prepare_bible(dir, dir, NULL), QKV_ERR_IO, want);
    CHECK(dt_write(dir, "kjv.txt", "Genesis 1:1: a\n" END, -1));
    snprintf(want, sizeof want, "%s/sparv.txt: cannot open", dir);
    CHECK_ERR(qkv_prepare_bible(dir, dir, NULL), QKV_ERR_IO, want);
    /* the Spanish export is checked the same way */
    CHECK(dt_write(dir, "sparv.txt", "Genesis 1:1: a\nGenesis 1:1: b\n(spaRV1909eb)\n", -1));
    snprintf(want, sizeof want, "%s/sparv.txt:2: Genesis 1:1 after Genesis 1:1", dir);
    CHECK_ERR(qkv_prepare_bible(dir, dir, NULL), QKV_ERR_FORMAT, want);
    dt_rmtree(dir);
}

/* Markup, blanks and the alignment rules on one-verse exports. */
static void bible_pair(const char *kjv, const char *sparv, const char *want_tsv) {
    char *dir = dt_tmpdir();
    CHECK(dt_write(dir, "kjv.txt", kjv, -1));
    CHECK(dt_write(dir, "sparv.txt", sparv, -1));
    CHECK_OK(qkv_prepare_bible(dir, dir, NULL));
    DT_CHECK_FILE(dir, "bible.en-es.train.tsv", want_tsv);
    dt_rmtree(dir);
}

TEST(data_prepare_bible_text) {
    /* tags removed, milestones and titles separate words, notes do not; entities; pilcrows;
     * USFM markers; blanks collapsed (a TAB too) */
    bible_pair(
        "Genesis 1:1: \xc2\xb6 A<w>b</w>c<l sID=\"x\"/>d<title>T</title>e\tf\r  g"
        "<note n=\"1\">N <note>M</note></note>. \\nd LORD \\wj*x &quot;&apos;&amp;&gt;\n" END,
        "Genesis 1:1: b\n(S)\n", "Abc d e f g. LORD x \"'&>\tb\n");
    /* pre-verse markup of any kind is dropped, including a heading's text */
    bible_pair(
        "<div type=\"x\"/> <title type=\"psalm\">A <w>Psalm</w></title>  Genesis 1:1: a\n" END,
        "Genesis 1:1: b\n(S)\n", "a\tb\n");
    /* a reference in the English only drops its chapter and the next one, not others */
    bible_pair("Genesis 1:1: a\nGenesis 1:2: x\nGenesis 2:1: y\nGenesis 3:1: c\n" END,
               "Genesis 1:1: b\nGenesis 2:1: z\nGenesis 3:1: d\n(S)\n", "c\td\n");
    /* an empty English verse counts as empty in the English */
    char *dir = dt_tmpdir();
    CHECK(
        dt_write(dir, "kjv.txt", "Genesis 1:1: <chapter eID=\"Gen.1\"/>\nExodus 1:1: a\n" END, -1));
    CHECK(dt_write(dir, "sparv.txt", "Genesis 1:1:\nExodus 1:1: b\n(S)\n", -1));
    qkv_prepare_counts c;
    CHECK_OK(qkv_prepare_bible(dir, dir, &c));
    CHECK(c.empty[0] == 1 && c.empty[1] == 0 && c.versification == 0 && c.items[0] == 1);
    DT_CHECK_FILE(dir, "bible.en-es.train.tsv", "a\tb\n");
    /* every verse empty (found by fuzz_bible): empty files, no pair */
    CHECK(dt_write(dir, "kjv.txt", "<w savlm=\"x\"> Psalms 1:1:\n" END, -1));
    CHECK(dt_write(dir, "sparv.txt", "Psalms 1:1: <l/>\n(S)\n", -1));
    CHECK_OK(qkv_prepare_bible(dir, dir, &c));
    CHECK(c.empty[0] == 1 && c.items[0] + c.items[1] + c.items[2] == 0);
    DT_CHECK_FILE(dir, "bible.en-es.train.tsv", "");
    DT_CHECK_FILE(dir, "bible.test.ref", "");
    dt_rmtree(dir);
}
