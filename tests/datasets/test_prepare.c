/* test_prepare.c: the converters (recipes/prepare_*.c) on miniature sources written here, output
 * checked byte for byte against files written out by hand from the rules of docs/data.md (FNV
 * buckets of the keys used: "a" 20, "live" 15, "read" 49, "or" 88, "us" 89, "tomato" 99,
 * "zebra" 95; "ca01.0" 64, "ca01.1" 83, "ca01.2" 2, "ca02.0" 49, "ca02.1" 30, "ca02.2" 11,
 * "ca02.3" 92; digits rows: dev 16, 19, test 3, 4, 9, 17, the rest train). Also the errors of
 * malformed sources, and the universal tag rules. */
#include "data_testutil.h"
#include "recipes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* variants out of order, a stress-only difference, an exact duplicate, a comment, an upper-case
 * key, a word with a character outside a-z ' - . (skipped) */
static const char *const mini_index_js = "/** @type {{ [word: string]: string }} */\n"
                                         "export const dictionary = {\n"
                                         "  \"zebra\": \"Z IY1 B R AH0\",\n"
                                         "  \"read\": \"R IY1 D\",\n"
                                         "  \"read(2)\": \"R EH1 D\",\n"
                                         "  \"live(3)\": \"L AY1 V\",\n"
                                         "  \"live\": \"L IH1 V\",\n"
                                         "  \"live(2)\": \"L IH0 V\",\n"
                                         "  \"or\": \"AO1 R\",\n"
                                         "  \"or(2)\": \"ER0\",\n"
                                         "  \"US\": \"AH1 S\",\n"
                                         "  \"x_ray\": \"EH1 K S R EY2\",\n"
                                         "  \"a\": \"AH0 # comment\",\n"
                                         "  \"a(2)\": \"EY1\",\n"
                                         "  \"tomato\": \"T AH0 M EY1 T OW2\",\n"
                                         "  \"tomato(2)\": \"T AH0 M EY1 T OW2\"\n"
                                         "}\n";

TEST(data_prepare_g2p_mini) {
    char *dir = dt_tmpdir();
    CHECK(dt_write(dir, "index.js", mini_index_js, -1));
    char *src = dt_join(dir, "index.js"), *out = dt_join(dir, "out/g2p"); /* created */
    qkv_prepare_counts c;
    CHECK_OK(qkv_prepare_g2p(src, out, &c));
    DT_CHECK_FILE(out, "cmudict.train.tsv",
                  "a\tAH0\na\tEY1\nlive\tL IH1 V\nlive\tL IH0 V\nlive\tL AY1 V\nread\tR IY1 D\n"
                  "read\tR EH1 D\n");
    DT_CHECK_FILE(out, "cmudict.dev.tsv", "or\tAO1 R\nor\tER0\nus\tAH1 S\n");
    DT_CHECK_FILE(out, "cmudict.test.tsv", "tomato\tT AH0 M EY1 T OW2\nzebra\tZ IY1 B R AH0\n");
    DT_CHECK_FILE(out, "cmudict.nostress.train.tsv",
                  "a\tAH\na\tEY\nlive\tL IH V\nlive\tL AY V\nread\tR IY D\nread\tR EH D\n");
    DT_CHECK_FILE(out, "cmudict.nostress.dev.tsv", "or\tAO R\nor\tER\nus\tAH S\n");
    DT_CHECK_FILE(out, "cmudict.nostress.test.tsv", "tomato\tT AH M EY T OW\nzebra\tZ IY B R AH\n");
    DT_CHECK_FILE(out, "graphemes.txt",
                  "a\t4\nb\t1\nd\t1\ne\t3\ni\t1\nl\t1\nm\t1\no\t3\nr\t3\ns\t1\nt\t2\nu\t1\nv\t1\n"
                  "z\t1\n");
    DT_CHECK_FILE(out, "phones.txt",
                  "AH0\t3\nAH1\t1\nAO1\t1\nAY1\t1\nB\t1\nD\t2\nEH1\t1\nER0\t1\nEY1\t2\nIH0\t1\n"
                  "IH1\t1\nIY1\t2\nL\t3\nM\t1\nOW2\t1\nR\t4\nS\t1\nT\t2\nV\t3\nZ\t1\n");
    DT_CHECK_FILE(out, "phones.nostress.txt",
                  "AH\t4\nAO\t1\nAY\t1\nB\t1\nD\t2\nEH\t1\nER\t1\nEY\t2\nIH\t1\nIY\t2\nL\t2\n"
                  "M\t1\nOW\t1\nR\t4\nS\t1\nT\t2\nV\t2\nZ\t1\n");
    CHECK(c.source_entries == 14 && c.skipped == 1 && c.comments == 1);
    CHECK(c.items[0] == 3 && c.items[1] == 2 && c.items[2] == 2);
    CHECK(c.units[0] == 7 && c.units[1] == 3 && c.units[2] == 2);
    CHECK(c.units_ns[0] == 6 && c.units_ns[1] == 3 && c.units_ns[2] == 2);
    CHECK(c.multi_ns[0] == 3 && c.multi_ns[1] == 1 && c.multi_ns[2] == 0);
    CHECK(c.n_src_symbols == 14 && c.n_tgt_symbols == 20 && c.n_tgt_symbols_ns == 18);
    CHECK(c.max_src_len == 6 && c.max_tgt_len == 6);
    CHECK(dt_count_tmp(out) == 0);
    /* idempotent: a second run writes the same bytes over the first */
    CHECK_OK(qkv_prepare_g2p(src, out, NULL));
    DT_CHECK_FILE(out, "cmudict.dev.tsv", "or\tAO1 R\nor\tER0\nus\tAH1 S\n");
    free(src);
    free(out);
    dt_rmtree(dir);
}

/* index.js text -> the expected error. */
static void g2p_fails(const char *js, qkv_status st, const char *needle) {
    char *dir = dt_tmpdir();
    CHECK(dt_write(dir, "index.js", js, -1));
    char *src = dt_join(dir, "index.js");
    char want[512];
    snprintf(want, sizeof want, needle, src);
    CHECK_ERR(qkv_prepare_g2p(src, dir, NULL), st, want);
    free(src);
    dt_rmtree(dir);
}

TEST(data_prepare_g2p_errors) {
    g2p_fails("module.exports = []\n", QKV_ERR_FORMAT, "%s: no 'export const dictionary");
    g2p_fails(
        "export const dictionary = {\n  \"a\": \"AH0\",\n  \"b\": \"B IY1\"\n  \"c\": \"K\"\n}\n",
        QKV_ERR_FORMAT, "%s:4: the dictionary is not valid JSON");
    g2p_fails("export const dictionary = {\n  \"a\": \"AH0\",\n  \"b\": 3\n}\n", QKV_ERR_FORMAT,
              "%s:3: the pronunciation of 'b' is a JSON integer, not a string");
    g2p_fails("export const dictionary = {\n  \"a\": \"AH0\",\n\n  \"b(2)\": \"B IY4\"\n}\n",
              QKV_ERR_FORMAT, "%s:4: unknown phone 'IY4' in the pronunciation of 'b(2)'");
    g2p_fails("export const dictionary = {\n  \"a\": \"AH\"\n}\n", QKV_ERR_FORMAT,
              "%s:2: unknown phone 'AH'"); /* vowels carry stress */
    g2p_fails("export const dictionary = {\n  \"a\": \" # nothing\"\n}\n", QKV_ERR_FORMAT,
              "%s:2: empty pronunciation for 'a'");
    g2p_fails("export const dictionary = {\"a\": \"AH0\", \"a\": \"EY1\"}\n", QKV_ERR_FORMAT,
              "%s:1: the dictionary is not valid JSON: duplicate key");
    CHECK_ERR(qkv_prepare_g2p("/nonexistent/index.js", "/tmp", NULL), QKV_ERR_IO,
              "/nonexistent/index.js: cannot open");
}

/* A Brown directory: 500 files named like the corpus (all empty but ca01, ca02) and cats.txt. */
static char *mini_brown(void) {
    char *dir = dt_tmpdir();
    const char letters[] = "abcdefghjklmnpr";
    int n = 0;
    for (int l = 0; l < 15 && n < 500; l++)
        for (int i = 1; i <= 34 && n < 500; i++, n++) {
            char name[8];
            snprintf(name, sizeof name, "c%c%02d", letters[l], i);
            CHECK(dt_write(dir, name, "", 0));
        }
    /* ca01: blank lines around sentences; a word with '/', title/headline suffixes, a foreign
     * word, a contraction, quotes, NIL */
    CHECK(dt_write(dir, "ca01",
                   "\n\n\tThe/at Fulton/np-tl County/nn-tl said/vbd ./.\n\n\n"
                   "\t1/2/cd of/in it's/pps+bez fw-bar/fw-nn ``/`` x/nil\n\n"
                   "\tHeadline/nn-hl ''/'' gonna/vbg+to\n",
                   -1));
    /* ca02: no blank lines, no final newline, stacked suffixes */
    CHECK(dt_write(dir, "ca02", "\tA/at b/nn\n\tc/cc\n\td/jj-tl-hl\n\te/wrb+bez", -1));
    CHECK(dt_write(dir, "cats.txt", "ca01 news\nca02 editorial\n", -1));
    return dir;
}

TEST(data_prepare_brown_mini) {
    char *dir = mini_brown();
    char *out = dt_join(dir, "out");
    qkv_prepare_counts c;
    CHECK_OK(qkv_prepare_brown(dir, out, &c));
    DT_CHECK_FILE(
        out, "brown.train.tsv",
        "The\tAT\tDET\nFulton\tNP-TL\tNOUN\nCounty\tNN-TL\tNOUN\nsaid\tVBD\tVERB\n.\t.\t.\n"
        "\n"
        "Headline\tNN-HL\tNOUN\n''\t''\t.\ngonna\tVBG+TO\tVERB\n\n"
        "A\tAT\tDET\nb\tNN\tNOUN\n\n"
        "c\tCC\tCONJ\n\n"
        "d\tJJ-TL-HL\tADJ\n\n");
    DT_CHECK_FILE(out, "brown.dev.tsv",
                  "1/2\tCD\tNUM\nof\tIN\tADP\nit's\tPPS+BEZ\tPRT\nfw-bar\tFW-NN\tX\n``\t``\t.\n"
                  "x\tNIL\tX\n\n");
    DT_CHECK_FILE(out, "brown.test.tsv", "e\tWRB+BEZ\tPRT\n\n");
    DT_CHECK_FILE(out, "brown.train.ids",
                  "ca01.0\tnews\nca01.2\tnews\nca02.0\teditorial\nca02.1\teditorial\n"
                  "ca02.2\teditorial\n");
    DT_CHECK_FILE(out, "brown.dev.ids", "ca01.1\tnews\n");
    DT_CHECK_FILE(out, "brown.test.ids", "ca02.3\teditorial\n");
    /* the language-model text: each sentence of the .tsv files on a line, words joined by spaces */
    DT_CHECK_FILE(out, "brown.train.txt",
                  "The Fulton County said .\nHeadline '' gonna\nA b\nc\nd\n");
    DT_CHECK_FILE(out, "brown.dev.txt", "1/2 of it's fw-bar `` x\n");
    DT_CHECK_FILE(out, "brown.test.txt", "e\n");
    DT_CHECK_FILE(out, "tags.full.txt",
                  "AT\t2\nNP-TL\t1\nNN-TL\t1\nVBD\t1\n.\t1\nCD\t1\nIN\t1\nPPS+BEZ\t1\nFW-NN\t1\n"
                  "``\t1\nNIL\t1\nNN-HL\t1\n''\t1\nVBG+TO\t1\nNN\t1\nCC\t1\nJJ-TL-HL\t1\n"
                  "WRB+BEZ\t1\n");
    DT_CHECK_FILE(
        out, "tags.universal.txt",
        "NOUN\t4\n.\t3\nDET\t2\nVERB\t2\nPRT\t2\nX\t2\nNUM\t1\nADP\t1\nCONJ\t1\nADJ\t1\n");
    DT_CHECK_FILE(out, "universal_map.tsv",
                  "''\t.\n.\t.\nAT\tDET\nCC\tCONJ\nCD\tNUM\nFW-NN\tX\nIN\tADP\nJJ-TL-HL\tADJ\n"
                  "NIL\tX\nNN\tNOUN\nNN-HL\tNOUN\nNN-TL\tNOUN\nNP-TL\tNOUN\nPPS+BEZ\tPRT\n"
                  "VBD\tVERB\nVBG+TO\tVERB\nWRB+BEZ\tPRT\n``\t.\n");
    CHECK(c.items[0] == 5 && c.items[1] == 1 && c.items[2] == 1);
    CHECK(c.units[0] == 12 && c.units[1] == 6 && c.units[2] == 1);
    CHECK(c.n_tgt_symbols == 18 && c.n_tgt_symbols_ns == 10 && c.max_src_len == 6);
    /* the output reads back with the tagged reader, both tag columns */
    char *p = dt_join(out, "brown.train.tsv");
    qkv_corpus *cp;
    qkv_read_opts o = {.tag_column = 2};
    CHECK_OK(qkv_corpus_read(QKV_CORPUS_TAGGED, p, &o, &cp));
    CHECK(qkv_corpus_size(cp) == 5);
    size_t len;
    const char *t = qkv_corpus_symbol(cp, 0, QKV_FIELD_TGT, 1, &len);
    CHECK(t && len == 4 && !memcmp(t, "NOUN", 4));
    qkv_corpus_free(cp);
    free(p);
    /* without cats.txt every genre is "?" */
    char *cats = dt_join(dir, "cats.txt");
    remove(cats);
    free(cats);
    CHECK_OK(qkv_prepare_brown(dir, out, NULL));
    DT_CHECK_FILE(out, "brown.test.ids", "ca02.3\t?\n");
    free(out);
    dt_rmtree(dir);
}

TEST(data_prepare_brown_errors) {
    char *dir = mini_brown();
    char want[512];
    CHECK(dt_write(dir, "ca02", "\tA/at b\n", -1));
    snprintf(want, sizeof want, "%s/ca02:1: token 'b' is not 'word/tag'", dir);
    CHECK_ERR(qkv_prepare_brown(dir, dir, NULL), QKV_ERR_FORMAT, want);
    CHECK(dt_write(dir, "ca02", "\tA/at\n\n\tb/\n", -1));
    snprintf(want, sizeof want, "%s/ca02:3: token 'b/' is not 'word/tag'", dir);
    CHECK_ERR(qkv_prepare_brown(dir, dir, NULL), QKV_ERR_FORMAT, want);
    CHECK(dt_write(dir, "ca02", "\tna\xc3\xafve/jj\n", -1));
    CHECK_ERR(qkv_prepare_brown(dir, dir, NULL), QKV_ERR_FORMAT, "ca02:1: non-ASCII");
    CHECK(dt_write(dir, "ca02", "", 0));
    CHECK(dt_write(dir, "cats.txt", "ca01 news extra\n", -1));
    CHECK_ERR(qkv_prepare_brown(dir, dir, NULL), QKV_ERR_FORMAT,
              "cats.txt:1: expected 'fileid genre'");
    char *extra = dt_join(dir, "cr99");
    CHECK(dt_write(dir, "cr99", "", 0));
    CHECK_ERR(qkv_prepare_brown(dir, dir, NULL), QKV_ERR_FORMAT, "expected 500 Brown files");
    CHECK_ERR(qkv_prepare_brown("/nonexistent", dir, NULL), QKV_ERR_IO, "/nonexistent");
    free(extra);
    dt_rmtree(dir);
}

TEST(data_prepare_digits_mini) {
    char *dir = dt_tmpdir();
    /* 20 rows: pixel k of row i = (i + k) % 17, label i % 10 */
    char csv[20 * 300], want[3][20 * 300];
    size_t n = 0, w[3] = {0, 0, 0};
    const int split_of_row[20] = {0, 0, 0, 2, 2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 1, 2, 0, 1};
    for (int i = 0; i < 20; i++) {
        int s = split_of_row[i];
        w[s] += (size_t)sprintf(want[s] + w[s], "%d\t", i % 10);
        for (int k = 0; k < 64; k++) {
            n += (size_t)sprintf(csv + n, "%d,", (i + k) % 17);
            w[s] += (size_t)sprintf(want[s] + w[s], k ? " %d" : "%d", (i + k) % 17);
        }
        n += (size_t)sprintf(csv + n, "%d\n", i % 10);
        w[s] += (size_t)sprintf(want[s] + w[s], "\n");
    }
    CHECK(dt_write(dir, "digits.csv", csv, (long)n));
    char *src = dt_join(dir, "digits.csv");
    qkv_prepare_counts c;
    CHECK_OK(qkv_prepare_digits(src, dir, &c));
    DT_CHECK_FILE(dir, "digits.train.tsv", want[0]);
    DT_CHECK_FILE(dir, "digits.dev.tsv", want[1]);
    DT_CHECK_FILE(dir, "digits.test.tsv", want[2]);
    CHECK(c.items[0] == 14 && c.items[1] == 2 && c.items[2] == 4 && c.source_entries == 20);
    CHECK(c.per_class[1][6] == 1 && c.per_class[1][9] == 1 && c.per_class[2][3] == 1);
    /* malformed rows */
    struct {
        const char *text, *needle;
    } bad[] = {
        {"1,2\n", ":1: 2 values, expected 65"},
        {"17,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,"
         "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1\n",
         ":1: value 1 is '17', not an integer in 0..16"},
        {"0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,"
         "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,10\n",
         ":1: value 65 is '10', not an integer in 0..9"},
        {"\n", ":1: blank line"},
        {"0.5,1\n", "value 1 is '0.5'"},
    };
    for (int i = 0; i < 5; i++) {
        CHECK(dt_write(dir, "bad.csv", bad[i].text, -1));
        char *p = dt_join(dir, "bad.csv");
        CHECK_ERR(qkv_prepare_digits(p, dir, NULL), QKV_ERR_FORMAT, bad[i].needle);
        free(p);
    }
    CHECK(dt_write(dir, "bad.csv", "\x1f\x8b\x08", 3));
    char *p = dt_join(dir, "bad.csv");
    CHECK_ERR(qkv_prepare_digits(p, dir, NULL), QKV_ERR_FORMAT, "gzip data: gunzip it first");
    free(p);
    free(src);
    dt_rmtree(dir);
}

TEST(data_universal_tags) {
    /* the rules of recipes/brown_tags.c; expected values are those of en-brown.map */
    struct {
        const char *tag, *u;
    } cases[] = {
        {"AT", "DET"},         {"NN", "NOUN"},       {"NP$", "NOUN"},    {"VB", "VERB"},
        {"VBD", "VERB"},       {"BEZ", "VERB"},      {"HVD*", "VERB"},   {"DOD*", "VERB"},
        {"MD*", "VERB"},       {"IN", "ADP"},        {"CS", "ADP"},      {"CC", "CONJ"},
        {"CD", "NUM"},         {"CD$", "NOUN"},      {"OD", "ADJ"},      {"JJ$", "PRT"},
        {"PPS", "PRON"},       {"PP$", "DET"},       {"PP$$", "PRON"},   {"RB", "ADV"},
        {"*", "ADV"},          {"TO", "PRT"},        {"UH", "PRT"},      {"EX", "PRT"},
        {"WDT", "DET"},        {"WRB", "ADV"},       {".", "."},         {"--", "."},
        {"``", "."},           {"''", "."},          {"(", "."},         {"NIL", "X"},
        {"NN-TL", "NOUN"},     {"JJ-TL-HL", "ADJ"},  {"NN-NC", "NOUN"},  {"FW-NN", "X"},
        {"FW-IN+AT", "X"},     {"PPS+BEZ", "PRT"},   {"PPSS+MD", "PRT"}, {"NN+BEZ", "PRT"},
        {"WRB+BEZ", "PRT"},    {"WRB+IN", "PRT"},    {"VB+PPO", "VERB"}, {"MD+HV", "VERB"},
        {"HV+TO", "VERB"},     {"VBG+TO", "VERB"},   {"DO+PPSS", "X"},   {"WDT+BER+PP", "X"},
        {"NN+NN", "NOUN"},     {"IN+IN", "ADP"},     {"RB+CS", "ADV"},   {"TO+VB", "PRT"},
        {"PPS+BEZ-HL", "PRT"}, {"NP+BEZ-TL", "PRT"}, {"XYZ", "X"},       {"", "X"},
        {"-HL", "X"},          {"QL", "ADV"},        {"ABN", "PRT"},     {"ABX", "DET"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *u = qkv_brown_universal_tag(cases[i].tag);
        CHECK_MSG(!strcmp(u, cases[i].u), "%s -> %s, expected %s", cases[i].tag, u, cases[i].u);
    }
}
