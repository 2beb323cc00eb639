/* test_bleu.c: corpus BLEU as sacreBLEU 2.x defines it (include/qkv/qkv_mt_metrics.h,
 * src/data/bleu.c). Expected values come from outside the C code: cases worked by hand (in the
 * comments), the expected scores of sacreBLEU's own tests and README (test/test_bleu.py,
 * test/test_sentence_bleu.py and README.md of github.com/mjpost/sacrebleu, 2.0.0), NLTK's
 * corpus_bleu on the corpora of tests/data/bleu_nltk.tsv (scripts/bleu_reference.py nltk), and
 * the 13a tokenization by Python's re.sub (scripts/bleu_reference.py tok13a); then properties
 * (a corpus against itself scores 100, the order of the sentences does not matter), the
 * bootstrap, and refusals of bad input. */
#include "data_testutil.h"
#include "qkv/qkv_registry.h"

#include <stdlib.h>
#include <string.h>

#define MAX_SENTS 64

/* Corpus BLEU of hyps[i] against refs[r][i] (r < n_refs; NULL entries stand for ""), the
 * per-sentence statistics into sent (may be NULL). */
static qkv_status corpus(const qkv_bleu_opts *o, const char *const *hyps, int n,
                         const char *const (*refs)[MAX_SENTS], int n_refs, qkv_bleu_stats *stats,
                         qkv_bleu_stats *sent) {
    *stats = (qkv_bleu_stats){0};
    for (int i = 0; i < n; i++) {
        const char *r[8];
        size_t l[8];
        for (int k = 0; k < n_refs; k++) {
            r[k] = refs[k][i] ? refs[k][i] : "";
            l[k] = strlen(r[k]);
        }
        qkv_status st =
            qkv_bleu_add(stats, o, hyps[i], strlen(hyps[i]), r, l, n_refs, sent ? &sent[i] : NULL);
        if (st) return st;
    }
    return QKV_OK;
}

static double bleu_of(const qkv_bleu_opts *o, const char *const *hyps, int n,
                      const char *const (*refs)[MAX_SENTS], int n_refs) {
    qkv_bleu_stats s;
    qkv_bleu_result r = {0};
    qkv_status st = corpus(o, hyps, n, refs, n_refs, &s, NULL);
    if (st == QKV_OK) st = qkv_bleu_compute(&s, o, &r);
    CHECK_MSG(st == QKV_OK, "%s", qkv_last_error());
    return st == QKV_OK ? r.score : -1.0;
}

/* One sentence. */
static double sentence(const qkv_bleu_opts *o, const char *hyp, const char *ref) {
    const char *h[1] = {hyp};
    const char *const r[1][MAX_SENTS] = {{ref}};
    return bleu_of(o, h, 1, r, 1);
}

/* The README example of sacreBLEU 2.0.0 ("Using SacreBLEU from Python") and test_bleu.py. */
static const char *const readme_hyps[3] = {"The dog bit the man.", "It wasn't surprising.",
                                           "The man had just bitten him."};
static const char *const readme_refs[2][MAX_SENTS] = {
    {"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
    {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."}};

TEST(bleu_sacrebleu_readme_example) {
    qkv_bleu_opts o = qkv_bleu_opts_default();
    qkv_bleu_stats s;
    qkv_bleu_result r;
    CHECK_OK(corpus(&o, readme_hyps, 3, readme_refs, 2, &s, NULL));
    CHECK_OK(qkv_bleu_compute(&s, &o, &r));
    /* "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)",
     * "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.0.0"; test_bleu.py: 48.530827 */
    CHECK_NEAR(r.score, 48.530827, 1e-6);
    CHECK(s.hyp_len == 17 && s.ref_len == 18 && s.sentences == 3);
    /* by hand: 13a gives "The dog bit the man ." (6), "It wasn't surprising ." (4),
     * "The man had just bitten him ." (7); 1-grams: 6 + 2 (It, .) + 6 (all but just) = 14 / 17 =
     * 82.4 */
    CHECK(s.correct[0] == 14 && s.total[0] == 17);
    char sig[256], line[512];
    CHECK_OK(qkv_bleu_signature(&o, &s, NULL, sig, sizeof sig));
    CHECK(strcmp(sig, "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.0.0") == 0);
    CHECK_OK(qkv_bleu_format(&r, NULL, NULL, 2, line, sizeof line));
    CHECK_MSG(strcmp(line, "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = "
                           "17 ref_len = 18)") == 0,
              "%s", line);
    CHECK_OK(qkv_bleu_format(&r, sig, NULL, 1, line, sizeof line));
    CHECK_MSG(strcmp(line, "BLEU|nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.0.0 = 48.5 "
                           "82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = "
                           "18)") == 0,
              "%s", line);
    /* a buffer too small is refused, not overrun */
    CHECK_ERR(qkv_bleu_format(&r, sig, NULL, 1, line, 20), QKV_ERR_INVALID_ARG, "does not fit");
    CHECK(line[0] == '\0');
}

TEST(bleu_sacrebleu_variable_references) {
    /* README "Variable Number of References": the first sentence's first reference is "" */
    const char *const refs[2][MAX_SENTS] = {
        {"", "It was not unexpected.", "The man bit him first."},
        {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."}};
    qkv_bleu_opts o = qkv_bleu_opts_default();
    qkv_bleu_stats s;
    qkv_bleu_result r;
    CHECK_OK(corpus(&o, readme_hyps, 3, refs, 2, &s, NULL));
    CHECK_OK(qkv_bleu_compute(&s, &o, &r));
    char sig[256], line[512];
    CHECK_OK(qkv_bleu_format(&r, NULL, NULL, 2, line, sizeof line));
    CHECK_MSG(strcmp(line, "BLEU = 29.44 82.4/42.9/27.3/12.5 (BP = 0.889 ratio = 0.895 hyp_len = "
                           "17 ref_len = 19)") == 0,
              "%s", line);
    CHECK_OK(qkv_bleu_signature(&o, &s, NULL, sig, sizeof sig));
    CHECK(strcmp(sig, "nrefs:var|case:mixed|eff:no|tok:13a|smooth:exp|version:2.0.0") == 0);
    CHECK(s.min_refs == 1 && s.max_refs == 2);
}

TEST(bleu_sacrebleu_test_bleu_cases) {
    /* test_bleu.py test_corpus_bleu */
    qkv_bleu_opts o = qkv_bleu_opts_default();
    const char *const empty[3] = {"", "", ""};
    CHECK_NEAR(bleu_of(&o, empty, 3, readme_refs, 2), 0.0, 0); /* empty hypotheses kept */
    o.tokenizer = QKV_BLEU_TOK_NONE;
    CHECK_NEAR(bleu_of(&o, readme_hyps, 3, readme_refs, 2), 49.1919566, 1e-6);
    o = qkv_bleu_opts_default();
    o.smooth = QKV_BLEU_SMOOTH_NONE;
    CHECK_NEAR(bleu_of(&o, readme_hyps, 3, readme_refs, 2), 48.530827, 1e-6);
    /* test_max_ngram_order: f"{score:.2f}" */
    const char *want[6] = {"77.65", "60.50", "53.93", "48.53", "46.14", "43.28"};
    for (int n = 1; n <= 6; n++) {
        o = qkv_bleu_opts_default();
        o.max_order = n;
        char got[32];
        snprintf(got, sizeof got, "%.2f", bleu_of(&o, readme_hyps, 3, readme_refs, 2));
        CHECK_MSG(strcmp(got, want[n - 1]) == 0, "max_order %d: %s, sacreBLEU %s", n, got,
                  want[n - 1]);
    }
    /* test_raw_bleu, test_effective_order: raw_corpus_bleu = tokenizer none, floor 0.01,
     * effective order */
    o = qkv_bleu_opts_default();
    o.tokenizer = QKV_BLEU_TOK_NONE;
    o.smooth = QKV_BLEU_SMOOTH_FLOOR;
    o.smooth_value = 0.01;
    o.effective_order = true;
    const char *h2[2] = {"this is a test", "another test"};
    const char *const r2[1][MAX_SENTS] = {{"ref1", "ref2"}};
    CHECK_NEAR(bleu_of(&o, h2, 2, r2, 1), 0.0, 0); /* no match at all: 0 (#141) */
    CHECK_NEAR(sentence(&o, "this is a test", "this is a test"), 100.0, 1e-12);
    /* by hand: p = 3/4, 2/3, 1/2, 0.01/1: (0.0025)^(1/4) = 0.2236 */
    CHECK_NEAR(sentence(&o, "this is a fest", "this is a test") / 100, 0.223606797749979, 1e-8);
    /* "test" / "a test": p1 = 1, no 2-grams: N = 1; BP = exp(1 - 2/1) = e^-1 */
    CHECK_NEAR(sentence(&o, "test", "a test") / 100, 0.3678794411714425, 1e-8);
    CHECK_NEAR(sentence(&o, "a test", "a test") / 100, 1.0, 1e-8);
    /* p = 2/3, 0.01/2, 0.01/1, N = 3: (3.33e-5)^(1/3) */
    CHECK_NEAR(sentence(&o, "a little test", "a test") / 100, 0.03218297948685433, 1e-8);
    /* test_statistics, test_offset: by hand, hyp "am I am a character sequence" (6 tokens) and
     * ref "I am a symbol string sequence a a" (8): 1-grams am (min 2, 1), I, a, sequence = 4;
     * 2-grams "I am", "am a" = 2; 3-gram "I am a" = 1; totals 6, 5, 4, 3 */
    qkv_bleu_stats s = {0};
    const char *ref = "I am a symbol string sequence a a";
    const size_t len = strlen(ref);
    CHECK_OK(qkv_bleu_add(&s, &o, "am I am a character sequence", 28, &ref, &len, 1, NULL));
    CHECK(s.correct[0] == 4 && s.correct[1] == 2 && s.correct[2] == 1 && s.correct[3] == 0);
    CHECK(s.total[0] == 6 && s.total[1] == 5 && s.total[2] == 4 && s.total[3] == 3);
    qkv_bleu_result r;
    o.smooth_value = -1; /* floor's default 0.1: p4 = 0.1 / 3, BP = exp(1 - 8/6) */
    CHECK_OK(qkv_bleu_compute(&s, &o, &r));
    CHECK_NEAR(r.score / 100, 0.1555722182, 1e-8);
    o.smooth_value = 0.0;
    CHECK_OK(qkv_bleu_compute(&s, &o, &r));
    CHECK(r.score == 0.0);
}

/* sacreBLEU's BLEU.compute_bleu on given statistics (test_bleu.py test_scoring and
 * test_degenerate_statistics). */
static double from_stats(const int64_t correct[4], const int64_t total[4], int64_t sys_len,
                         int64_t ref_len, qkv_bleu_smooth smooth, double value) {
    qkv_bleu_stats s = {.max_order = 4,
                        .sentences = 1,
                        .hyp_len = sys_len,
                        .ref_len = ref_len,
                        .min_refs = 1,
                        .max_refs = 1};
    for (int k = 0; k < 4; k++)
        s.correct[k] = correct[k], s.total[k] = total[k];
    qkv_bleu_opts o = qkv_bleu_opts_default();
    o.smooth = smooth;
    o.smooth_value = value;
    qkv_bleu_result r;
    CHECK_OK(qkv_bleu_compute(&s, &o, &r));
    return r.score / 100;
}

TEST(bleu_compute_from_statistics) {
    /* test_scoring: (9/10 7/8 5/6 3/4)^(1/4) = 0.8375922397 */
    CHECK_NEAR(from_stats((int64_t[]){9, 7, 5, 3}, (int64_t[]){10, 8, 6, 4}, 11, 11,
                          QKV_BLEU_SMOOTH_NONE, -1),
               0.8375922397, 1e-8);
    /* test_degenerate_statistics (floor): all 0.0 exactly */
    CHECK(from_stats((int64_t[]){0, 0, 0, 0}, (int64_t[]){4, 4, 2, 1}, 0, 1, QKV_BLEU_SMOOTH_FLOOR,
                     0.0) == 0.0);
    CHECK(from_stats((int64_t[]){0, 0, 0, 0}, (int64_t[]){10, 11, 12, 0}, 14, 10,
                     QKV_BLEU_SMOOTH_FLOOR, 0.0) == 0.0);
    CHECK(from_stats((int64_t[]){0, 0, 0, 0}, (int64_t[]){0, 0, 0, 0}, 0, 0, QKV_BLEU_SMOOTH_FLOOR,
                     0.0) == 0.0);
    CHECK(from_stats((int64_t[]){6, 5, 4, 0}, (int64_t[]){6, 5, 4, 3}, 6, 6, QKV_BLEU_SMOOTH_FLOOR,
                     0.0) == 0.0);
    CHECK(from_stats((int64_t[]){0, 0, 0, 0}, (int64_t[]){0, 0, 0, 0}, 0, 0, QKV_BLEU_SMOOTH_FLOOR,
                     0.1) == 0.0);
    CHECK(from_stats((int64_t[]){0, 0, 0, 0}, (int64_t[]){0, 0, 0, 0}, 1, 5, QKV_BLEU_SMOOTH_FLOOR,
                     0.01) == 0.0);
    /* exp smoothing by hand: p = 6/6, 5/5, 4/4, then the first order without a match gets
     * 100 / (2 * 3): BLEU = (1 * 1 * 1 * 1/6)^(1/4) */
    CHECK_NEAR(
        from_stats((int64_t[]){6, 5, 4, 0}, (int64_t[]){6, 5, 4, 3}, 6, 6, QKV_BLEU_SMOOTH_EXP, -1),
        pow(1.0 / 6, 0.25), 1e-15);
    /* two orders without a match: 100 / (2 * 4) and 100 / (4 * 2) */
    CHECK_NEAR(
        from_stats((int64_t[]){4, 3, 0, 0}, (int64_t[]){4, 3, 4, 2}, 4, 4, QKV_BLEU_SMOOTH_EXP, -1),
        pow(1.0 / 8 * 1.0 / 8, 0.25), 1e-15);
    /* add-k (k = 1) from order 2: (2/4 * 2/4 * 1/3 * 1/2)^(1/4), BP = exp(1 - 5/4) */
    CHECK_NEAR(from_stats((int64_t[]){2, 1, 0, 0}, (int64_t[]){4, 3, 2, 1}, 4, 5,
                          QKV_BLEU_SMOOTH_ADD_K, -1),
               exp(-0.25) * pow(0.5 * 0.5 * (1.0 / 3) * 0.5, 0.25), 1e-15);
    /* brevity: no hypothesis words, BP 0 */
    CHECK(from_stats((int64_t[]){0, 0, 0, 0}, (int64_t[]){0, 0, 0, 0}, 0, 3, QKV_BLEU_SMOOTH_EXP,
                     -1) == 0.0);
}

TEST(bleu_sacrebleu_sentence_bleu_cases) {
    /* test_sentence_bleu.py (issue #98), effective order, EPSILON 1e-3 */
    const char *ref = "produc\xC5\xA3ia de zah\xC4\x83r brut se exprim\xC4\x83 \xC3\xAEn "
                      "zah\xC4\x83r alb;";
    const char *sys = "Produc\xC8\x9Bia de zah\xC4\x83r prim\xC4\x83 va fi exprimat\xC4\x83 "
                      "\xC3\xAEn ceea ce prive\xC8\x99te zah\xC4\x83rul alb;";
    const struct {
        qkv_bleu_smooth smooth;
        double value;
        qkv_bleu_tokenizer tok;
        double want;
    } cases[] = {
        {QKV_BLEU_SMOOTH_EXP, -1, QKV_BLEU_TOK_13A, 8.493},
        {QKV_BLEU_SMOOTH_NONE, -1, QKV_BLEU_TOK_13A, 0.0},
        {QKV_BLEU_SMOOTH_FLOOR, -1, QKV_BLEU_TOK_13A, 4.51688},
        {QKV_BLEU_SMOOTH_FLOOR, 0.1, QKV_BLEU_TOK_13A, 4.51688},
        {QKV_BLEU_SMOOTH_FLOOR, 0.5, QKV_BLEU_TOK_13A, 10.10},
        {QKV_BLEU_SMOOTH_ADD_K, -1, QKV_BLEU_TOK_13A, 14.882},
        {QKV_BLEU_SMOOTH_ADD_K, 1, QKV_BLEU_TOK_13A, 14.882},
        {QKV_BLEU_SMOOTH_ADD_K, 2, QKV_BLEU_TOK_13A, 21.389},
        {QKV_BLEU_SMOOTH_EXP, -1, QKV_BLEU_TOK_NONE, 7.347},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        qkv_bleu_opts o = qkv_bleu_opts_default();
        o.smooth = cases[i].smooth;
        o.smooth_value = cases[i].value;
        o.tokenizer = cases[i].tok;
        o.effective_order = true;
        const double got = sentence(&o, sys, ref);
        CHECK_MSG(fabs(got - cases[i].want) < 1e-3, "case %zu: %.6f, sacreBLEU %.6f", i, got,
                  cases[i].want);
    }
    /* issue #141: no match at all is 0 whatever the smoothing */
    for (int sm = 0; sm < 4; sm++) {
        qkv_bleu_opts o = qkv_bleu_opts_default();
        o.smooth = (qkv_bleu_smooth)sm;
        o.effective_order = true;
        CHECK(sentence(&o, "this is a cat", "okay thanks") == 0.0);
    }
}

/* The 13a tokenization by Python's re.sub of mteval-v13a's expressions (scripts/bleu_reference.py
 * tok13a): input, tokens, tokens of the lower-cased input. */
static const char *const tok13a_cases[][3] = {
    {"Hello, world!", "Hello , world !", "hello , world !"},
    {"It's 3.5 or 1,000.00 items.", "It's 3.5 or 1,000.00 items .", "it's 3.5 or 1,000.00 items ."},
    {"a-b 1-2 x--y 3- -4", "a-b 1 - 2 x--y 3 - -4", "a-b 1 - 2 x--y 3 - -4"},
    {"&quot;quoted&quot; &amp;lt; &lt;tag&gt; &AMP;", "\" quoted \" < < tag > & AMP ;",
     "\" quoted \" < < tag > &"},
    {"line-\nbreak two\nlines", "linebreak two lines", "linebreak two lines"},
    {"<skipped> word <skip>", "word < skip >", "word < skip >"},
    {"U.S.A. e.g. etc... a..b .5 5. ,a 1.a a.1 1,a",
     "U . S . A . e . g . etc . . . a . . b . 5 5 . , a 1 . a a . 1 1 , a",
     "u . s . a . e . g . etc . . . a . . b . 5 5 . , a 1 . a a . 1 1 , a"},
    {"$5.00, 50% (approx.) [x]{y}|z~w^v_u`t",
     "$ 5.00 , 50 % ( approx . ) [ x ] { y } | z ~ w ^ v _ u ` t",
     "$ 5.00 , 50 % ( approx . ) [ x ] { y } | z ~ w ^ v _ u ` t"},
    /* U+00A0, U+3000, U+2028 separate words as Python's str.split() does */
    {"tab\tand\xC2\xA0nbsp\xE3\x80\x80ideographic\xE2\x80\xA8sep  ", "tab and nbsp ideographic sep",
     "tab and nbsp ideographic sep"},
    {"caf\xC3\xA9. na\xC3\xAFve, \xC2\xAB\xC2\xA0guillemets\xC2\xA0\xC2\xBB \xE2\x80\x94 dash",
     "caf\xC3\xA9 . na\xC3\xAFve , \xC2\xAB guillemets \xC2\xBB \xE2\x80\x94 dash",
     "caf\xC3\xA9 . na\xC3\xAFve , \xC2\xAB guillemets \xC2\xBB \xE2\x80\x94 dash"},
    /* str.lower(): \xC3\x89 -> \xC3\xA9, sharp s kept, the final sigma (U+03C2) at the end of
     * OΔOΣ, U+0130 -> "i" U+0307 */
    {"\xC3\x89"
     "COLE Stra\xC3\x9F"
     "e \xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3 \xC4\xB0stanbul",
     "\xC3\x89"
     "COLE Stra\xC3\x9F"
     "e \xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3 \xC4\xB0stanbul",
     "\xC3\xA9"
     "cole stra\xC3\x9F"
     "e \xCE\xBF\xCE\xB4\xCE\xBF\xCF\x82 i\xCC\x87stanbul"},
    {"", "", ""},
    {"   ", "", ""},
};

TEST(bleu_tokenizer_13a) {
    for (size_t i = 0; i < sizeof tok13a_cases / sizeof tok13a_cases[0]; i++) {
        for (int lc = 0; lc < 2; lc++) {
            char *out = NULL;
            size_t n = 0;
            const char *in = tok13a_cases[i][0];
            CHECK_OK(qkv_bleu_tokenize(in, strlen(in), QKV_BLEU_TOK_13A, lc, &out, &n));
            CHECK_MSG(out && strcmp(out, tok13a_cases[i][1 + lc]) == 0 && n == strlen(out),
                      "case %zu%s: '%s', Python '%s'", i, lc ? " lower-cased" : "",
                      out ? out : "(null)", tok13a_cases[i][1 + lc]);
            free(out);
        }
    }
    /* tokenizer none: whitespace only; Σ inside a word stays σ, at its end becomes ς */
    char *out = NULL;
    const char *in = " Hello,  \xCE\xA3\xCE\xA3 world. ";
    CHECK_OK(qkv_bleu_tokenize(in, strlen(in), QKV_BLEU_TOK_NONE, true, &out, NULL));
    CHECK(out && strcmp(out, "hello, \xCF\x83\xCF\x82 world.") == 0);
    free(out);
    /* NUL is an ordinary character */
    CHECK_OK(qkv_bleu_tokenize("a\0b c", 5, QKV_BLEU_TOK_13A, false, &out, NULL));
    CHECK(out && memcmp(out, "a\0b c", 6) == 0);
    free(out);
}

/* A line of tab-separated fields: pointers into line (modified). */
static int split_tabs(char *line, char **f, int max) {
    int n = 0;
    line[strcspn(line, "\r\n")] = '\0';
    for (char *p = line; n < max;) {
        f[n++] = p;
        char *t = strchr(p, '\t');
        if (!t) break;
        *t = '\0';
        p = t + 1;
    }
    return n;
}

TEST(bleu_matches_nltk_corpus_bleu) {
    char path[1024], line[4096];
    snprintf(path, sizeof path, "%s/bleu_nltk.tsv", qkv_test_data_dir());
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    if (!f) return;
    int corpora = 0;
    double want = -1;
    long want_sents = 0;
    qkv_bleu_stats s13a = {0}, snone = {0};
    qkv_bleu_opts o13a = qkv_bleu_opts_default(), onone = o13a;
    onone.tokenizer = QKV_BLEU_TOK_NONE;
    for (;;) {
        const bool eof = !fgets(line, sizeof line, f);
        char *fld[8];
        const int n = eof ? 0 : split_tabs(line, fld, 8);
        if (eof || (n > 0 && strcmp(fld[0], "corpus") == 0)) {
            if (want >= 0) { /* close the previous corpus */
                qkv_bleu_result a, b;
                CHECK_OK(qkv_bleu_compute(&snone, &onone, &a));
                CHECK_OK(qkv_bleu_compute(&s13a, &o13a, &b));
                CHECK_MSG(fabs(a.score / 100 - want) <= 1e-13 &&
                              fabs(b.score / 100 - want) <= 1e-13,
                          "corpus %d: %.17g (13a %.17g), NLTK %.17g", corpora - 1, a.score / 100,
                          b.score / 100, want);
                CHECK(snone.sentences == want_sents);
            }
            if (eof) break;
            CHECK(n == 5);
            want = strtod(fld[2], NULL);
            want_sents = strtol(fld[3], NULL, 10);
            s13a = snone = (qkv_bleu_stats){0};
            corpora++;
        } else if (n >= 4 && strcmp(fld[0], "sent") == 0) {
            size_t len[8];
            for (int k = 3; k < n; k++)
                len[k] = strlen(fld[k]);
            CHECK_OK(qkv_bleu_add(&snone, &onone, fld[2], strlen(fld[2]),
                                  (const char *const *)fld + 3, len + 3, n - 3, NULL));
            CHECK_OK(qkv_bleu_add(&s13a, &o13a, fld[2], strlen(fld[2]),
                                  (const char *const *)fld + 3, len + 3, n - 3, NULL));
        }
    }
    fclose(f);
    CHECK_MSG(corpora == 24, "%d corpora", corpora);
}

TEST(bleu_properties) {
    /* a corpus against itself: 100, whatever the options */
    const char *const refs[1][MAX_SENTS] = {
        {readme_refs[1][0], readme_refs[1][1], readme_refs[1][2]}};
    for (int lc = 0; lc < 2; lc++)
        for (int tok = 0; tok < 2; tok++) {
            qkv_bleu_opts o = qkv_bleu_opts_default();
            o.lowercase = lc;
            o.tokenizer = (qkv_bleu_tokenizer)tok;
            CHECK_NEAR(bleu_of(&o, refs[0], 3, refs, 1), 100.0, 1e-12);
        }
    /* the order of the sentences does not matter: all six permutations give the same bits */
    const int perm[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    qkv_bleu_opts o = qkv_bleu_opts_default();
    const double base = bleu_of(&o, readme_hyps, 3, readme_refs, 2);
    for (int p = 0; p < 6; p++) {
        const char *h[3];
        const char *r[2][MAX_SENTS];
        for (int i = 0; i < 3; i++) {
            h[i] = readme_hyps[perm[p][i]];
            r[0][i] = readme_refs[0][perm[p][i]];
            r[1][i] = readme_refs[1][perm[p][i]];
        }
        CHECK(bleu_of(&o, h, 3, (const char *const(*)[MAX_SENTS])r, 2) == base);
    }
    /* swapping the reference streams does not matter either */
    const char *const swapped[2][MAX_SENTS] = {
        {readme_refs[1][0], readme_refs[1][1], readme_refs[1][2]},
        {readme_refs[0][0], readme_refs[0][1], readme_refs[0][2]}};
    CHECK(bleu_of(&o, readme_hyps, 3, swapped, 2) == base);
    /* closest reference length, ties to the shorter: hyp 3 tokens, refs of 2 and 4 -> 2 */
    qkv_bleu_stats s = {0};
    const char *r2[2] = {"a b c d", "a b"};
    const size_t l2[2] = {7, 3};
    o.tokenizer = QKV_BLEU_TOK_NONE;
    CHECK_OK(qkv_bleu_add(&s, &o, "a b c", 5, r2, l2, 2, NULL));
    CHECK(s.ref_len == 2 && s.hyp_len == 3);
    /* the merged statistics of single sentences equal the corpus statistics */
    qkv_bleu_stats all, sent[3], sum = {0};
    CHECK_OK(corpus(&o, readme_hyps, 3, readme_refs, 2, &all, sent));
    for (int i = 0; i < 3; i++)
        CHECK_OK(qkv_bleu_stats_merge(&sum, &sent[i]));
    CHECK(memcmp(&sum, &all, sizeof sum) == 0);
}

TEST(bleu_bootstrap) {
    qkv_bleu_opts o = qkv_bleu_opts_default();
    qkv_bleu_stats all, sent[3];
    CHECK_OK(corpus(&o, readme_hyps, 3, readme_refs, 2, &all, sent));
    qkv_bootstrap_ci a, b, c;
    CHECK_OK(qkv_bleu_bootstrap(sent, 3, &o, 1000, 12345, &a));
    CHECK_OK(qkv_bleu_bootstrap(sent, 3, &o, 1000, 12345, &b));
    CHECK_OK(qkv_bleu_bootstrap(sent, 3, &o, 1000, 54321, &c));
    CHECK(memcmp(&a, &b, sizeof a) == 0); /* deterministic in the seed */
    CHECK(a.mean != c.mean || a.half_width != c.half_width);
    CHECK(a.resamples == 1000 && a.seed == 12345);
    CHECK(a.lower <= a.mean && a.mean <= a.upper && a.half_width == 0.5 * (a.upper - a.lower));
    CHECK(a.lower >= 0 && a.upper <= 100 + 1e-12); /* exp(log 100) may round up */
    /* one sentence: every resample is the corpus itself */
    CHECK_OK(qkv_bleu_bootstrap(sent, 1, &o, 50, 7, &c));
    qkv_bleu_result r0;
    CHECK_OK(qkv_bleu_compute(&sent[0], &o, &r0));
    CHECK(c.lower == r0.score && c.upper == r0.score && c.half_width == 0);
    char sig[256], line[512];
    CHECK_OK(qkv_bleu_signature(&o, &all, &a, sig, sizeof sig));
    CHECK(strcmp(sig, "nrefs:2|bs:1000|seed:12345|case:mixed|eff:no|tok:13a|smooth:exp|"
                      "version:2.0.0") == 0);
    qkv_bleu_result r;
    CHECK_OK(qkv_bleu_compute(&all, &o, &r));
    CHECK_OK(qkv_bleu_format(&r, NULL, &a, 3, line, sizeof line));
    char want[256];
    snprintf(want, sizeof want, "BLEU = 48.531 (\xCE\xBC = %.3f \xC2\xB1 %.3f) 82.4/50.0/45.5/37.5",
             a.mean, a.half_width);
    CHECK_MSG(strncmp(line, want, strlen(want)) == 0, "%s", line);
    CHECK_ERR(qkv_bleu_bootstrap(sent, 0, &o, 10, 1, &a), QKV_ERR_INVALID_ARG, "0 sentences");
    CHECK_ERR(qkv_bleu_bootstrap(sent, 3, &o, 0, 1, &a), QKV_ERR_INVALID_ARG, "0 resamples");
}

TEST(bleu_bootstrap_draws_are_uniform) {
    /* unigram BLEU of sentence 0 ("a" for "a": a match) and sentence 1 ("b" for "c": none): a
     * resample that drew sentence 0 k times (k = 0, 1, 2 with probabilities 1/4, 1/2, 1/4 when
     * the draws are uniform) scores 50 k (p1 = k / 2, BP = 1). Over 4000 resamples the mean is 50
     * (standard error sqrt(1250 / 4000) = 0.56), s_100 = 0 and s_3899 = 100. */
    qkv_bleu_opts o = qkv_bleu_opts_default();
    o.tokenizer = QKV_BLEU_TOK_NONE;
    o.smooth = QKV_BLEU_SMOOTH_NONE;
    o.max_order = 1;
    qkv_bleu_stats sent[2];
    const char *hyps[2] = {"a", "b"}, *refs[2] = {"a", "c"};
    const size_t len = 1;
    for (int i = 0; i < 2; i++)
        CHECK_OK(qkv_bleu_add(NULL, &o, hyps[i], 1, &refs[i], &len, 1, &sent[i]));
    qkv_bootstrap_ci ci;
    CHECK_OK(qkv_bleu_bootstrap(sent, 2, &o, 4000, 99, &ci));
    CHECK_NEAR(ci.mean, 50.0, 3.0);
    CHECK(ci.lower == 0.0);
    CHECK_NEAR(ci.upper, 100.0, 1e-12);
    CHECK_NEAR(ci.half_width, 50.0, 1e-12);
}

TEST(bleu_refuses_bad_input) {
    qkv_bleu_opts o = qkv_bleu_opts_default();
    qkv_bleu_stats s = {0};
    const char *ref = "a b";
    size_t len = 3;
    CHECK_ERR(qkv_bleu_add(&s, &o, "a\xFF", 2, &ref, &len, 1, NULL), QKV_ERR_FORMAT,
              "the hypothesis is not UTF-8: byte 1 (0xFF)");
    const char *bad = "ok \xC0\xAF";
    size_t bad_len = strlen(bad);
    CHECK_ERR(qkv_bleu_add(&s, &o, "a", 1, &bad, &bad_len, 1, NULL), QKV_ERR_FORMAT,
              "reference 0 is not UTF-8");
    const char *sur = "\xED\xA0\x80";
    size_t sur_len = 3;
    CHECK_ERR(qkv_bleu_add(&s, &o, "a", 1, &sur, &sur_len, 1, NULL), QKV_ERR_FORMAT, "not UTF-8");
    CHECK_ERR(qkv_bleu_add(&s, &o, NULL, 1, &ref, &len, 1, NULL), QKV_ERR_INVALID_ARG, "NULL");
    CHECK_ERR(qkv_bleu_add(&s, &o, "a", 1, &ref, &len, 0, NULL), QKV_ERR_INVALID_ARG,
              "0 references");
    const char *empty = "";
    size_t zero = 0;
    CHECK_ERR(qkv_bleu_add(&s, &o, "a", 1, &empty, &zero, 1, NULL), QKV_ERR_INVALID_ARG,
              "all 1 references are empty");
    CHECK(s.sentences == 0); /* nothing was added by the refusals */
    o.max_order = 0;
    CHECK_ERR(qkv_bleu_add(&s, &o, "a", 1, &ref, &len, 1, NULL), QKV_ERR_INVALID_ARG, "max_order");
    o = qkv_bleu_opts_default();
    o.smooth = (qkv_bleu_smooth)9;
    CHECK_ERR(qkv_bleu_add(&s, &o, "a", 1, &ref, &len, 1, NULL), QKV_ERR_INVALID_ARG,
              "unknown smoothing");
    /* statistics of another order */
    o = qkv_bleu_opts_default();
    CHECK_OK(qkv_bleu_add(&s, &o, "a", 1, &ref, &len, 1, NULL));
    o.max_order = 3;
    CHECK_ERR(qkv_bleu_add(&s, &o, "a", 1, &ref, &len, 1, NULL), QKV_ERR_INVALID_ARG,
              "max_order 4, the options 3");
    qkv_bleu_result r;
    CHECK_ERR(qkv_bleu_compute(&s, &o, &r), QKV_ERR_INVALID_ARG, "max_order 4, the options 3");
    char sig[64];
    qkv_bleu_stats none = {0};
    CHECK_ERR(qkv_bleu_signature(&o, &none, NULL, sig, sizeof sig), QKV_ERR_INVALID_ARG,
              "no sentence");
    /* names */
    int v = -1;
    CHECK_OK(qkv_registry_parse(QKV_REGISTRY_BLEU_TOKENIZER, "13a", &v));
    CHECK(v == QKV_BLEU_TOK_13A);
    CHECK_ERR(qkv_registry_parse(QKV_REGISTRY_BLEU_TOKENIZER, "intl", &v), QKV_ERR_INVALID_ARG, "13a, none");
    CHECK_OK(qkv_registry_parse(QKV_REGISTRY_BLEU_SMOOTH, "add-k", &v));
    CHECK(v == QKV_BLEU_SMOOTH_ADD_K);
    CHECK(strcmp(qkv_registry_name(QKV_REGISTRY_BLEU_SMOOTH, QKV_BLEU_SMOOTH_FLOOR), "floor") == 0);
    CHECK(qkv_registry_name(QKV_REGISTRY_BLEU_SMOOTH, 4) == NULL);
}

TEST(bleu_signature_options) {
    qkv_bleu_opts o = qkv_bleu_opts_default();
    o.lowercase = true;
    o.tokenizer = QKV_BLEU_TOK_NONE;
    o.smooth = QKV_BLEU_SMOOTH_FLOOR;
    qkv_bleu_stats s = {0};
    const char *ref = "x";
    size_t len = 1;
    CHECK_OK(qkv_bleu_add(&s, &o, "x", 1, &ref, &len, 1, NULL));
    char sig[256];
    CHECK_OK(qkv_bleu_signature(&o, &s, NULL, sig, sizeof sig));
    CHECK_MSG(strcmp(sig, "nrefs:1|case:lc|eff:no|tok:none|smooth:floor[0.10]|version:2.0.0") == 0,
              "%s", sig);
    o.smooth = QKV_BLEU_SMOOTH_ADD_K;
    o.smooth_value = 2;
    o.effective_order = true;
    CHECK_OK(qkv_bleu_signature(&o, &s, NULL, sig, sizeof sig));
    CHECK_MSG(strcmp(sig, "nrefs:1|case:lc|eff:yes|tok:none|smooth:add-k[2.00]|version:2.0.0") == 0,
              "%s", sig);
}
