/* test_chrf.c: chrF and chrF++ as sacreBLEU 2.x defines them (include/qkv/qkv_mt_metrics.h,
 * src/data/chrf.c): the expected scores of sacreBLEU's test/test_chrf.py and README.md (2.0.0,
 * github.com/mjpost/sacrebleu), cases worked by hand in the comments, properties, the bootstrap,
 * and refusals of bad input. */
#include "data_testutil.h"

#include <stdlib.h>
#include <string.h>

/* Corpus chrF of hyps[i] against refs[r][i], r < n_refs. */
static double chrf_of(const qkv_chrf_opts *o, const char *const *hyps, int n,
                      const char *const (*refs)[8], int n_refs, qkv_chrf_stats *stats_out) {
    qkv_chrf_stats s = {0};
    for (int i = 0; i < n; i++) {
        const char *r[4];
        size_t l[4];
        for (int k = 0; k < n_refs; k++)
            r[k] = refs[k][i], l[k] = strlen(refs[k][i]);
        qkv_status st = qkv_chrf_add(&s, o, hyps[i], strlen(hyps[i]), r, l, n_refs, NULL);
        CHECK_MSG(st == QKV_OK, "%s", qkv_last_error());
        if (st) return -1;
    }
    double score = -1;
    CHECK_OK(qkv_chrf_compute(&s, o, &score));
    if (stats_out) *stats_out = s;
    return score;
}

static double one(const qkv_chrf_opts *o, const char *hyp, const char *ref) {
    const char *h[1] = {hyp};
    const char *const r[1][8] = {{ref}};
    return chrf_of(o, h, 1, r, 1, NULL);
}

TEST(chrf_sacrebleu_test_chrf_cases) {
    /* test_chrf.py: char_order 6, word_order 0, beta 3, EPSILON 1e-4 */
    qkv_chrf_opts eps = qkv_chrf_opts_default();
    eps.beta = 3;
    eps.eps_smoothing = true;
    const struct {
        const char *hyp, *ref;
        double want;
    } eps_cases[] = {
        {"abcdefg", "hijklmnop", 0.0},
        {"a", "b", 0.0},
        {"", "b", 0.0},
        {"", "ref", 0.0},
        {"", "reference", 0.0},
        /* by hand: order 1 P = R = 1/2, F = 1/2; orders 2 .. 6 F = 1e-16: 100 (1/2) / 6 */
        {"aa", "ab", 8.3333},
        {"a", "a", 16.6667},
        {"a b c", "a b c", 50.0},
        {"a b c", "abc", 50.0},
        {" risk assessment must be made of those who are qualified and expertise in the sector - "
         "these are the scientists .",
         "risk assessment has to be undertaken by those who are qualified and expert in that area "
         "- that is the scientists .",
         63.361730},
        {" Die    Beziehung zwischen  Obama und Netanjahu ist nicht gerade  freundlich. ",
         "Das Verh\xC3\xA4ltnis zwischen Obama und Netanyahu ist nicht gerade freundschaftlich.",
         64.1302698},
        {"Niemand hat die Absicht, eine Mauer zu errichten",
         "Niemand hat die Absicht, eine Mauer zu errichten", 100.0},
    };
    for (size_t i = 0; i < sizeof eps_cases / sizeof eps_cases[0]; i++) {
        const double got = one(&eps, eps_cases[i].hyp, eps_cases[i].ref);
        CHECK_MSG(fabs(got - eps_cases[i].want) < 1e-4, "eps case %zu: %.8f, sacreBLEU %.8f", i,
                  got, eps_cases[i].want);
    }
    const char *h2[2] = {"a", "b"};
    const char *const r2[1][8] = {{"a", "c"}};
    CHECK_NEAR(chrf_of(&eps, h2, 2, r2, 1, NULL), 8.3333, 1e-4);

    /* test_cases_effective_order (sacreBLEU's default) */
    qkv_chrf_opts eff = eps;
    eff.eps_smoothing = false;
    CHECK_NEAR(one(&eff, "a", "a"), 100.0, 1e-4);
    CHECK_NEAR(one(&eff, "", "reference"), 0.0, 1e-4);
    CHECK_NEAR(one(&eff, "a b c", "a b c"), 100.0, 1e-4);
    CHECK_NEAR(one(&eff, "a b c", "abc"), 100.0, 1e-4);
    CHECK_NEAR(one(&eff, "", "c"), 0.0, 1e-4);
    /* corpus: order 1 sums hyp 2, ref 2, match 1: P = R = 1/2; no other order: 50 */
    CHECK_NEAR(chrf_of(&eff, h2, 2, r2, 1, NULL), 50.0, 1e-4);
    /* by hand: order 1 P = R = 1/2, order 2 P = R = 0: means 1/4: 25 */
    CHECK_NEAR(one(&eff, "aa", "ab"), 25.0, 1e-12);

    /* test_cases_keep_whitespace (remove_whitespace=False) */
    qkv_chrf_opts ws = eff;
    ws.whitespace = true;
    CHECK_NEAR(one(&ws, "Die Beziehung zwischen Obama und Netanjahu ist nicht gerade freundlich.",
                   "Das Verh\xC3\xA4ltnis zwischen Obama und Netanyahu ist nicht gerade "
                   "freundschaftlich."),
               67.3481606, 1e-4);
    CHECK_NEAR(one(&ws,
                   "risk assessment must be made of those who are qualified and expertise in the "
                   "sector - these are the scientists .",
                   "risk assessment has to be undertaken by those who are qualified and expert in "
                   "that area - that is the scientists ."),
               65.2414427, 1e-4);

    /* test_sentence_level_chrf: sentence_chrf(eps_smoothing=True), beta 2 */
    qkv_chrf_opts sl = qkv_chrf_opts_default();
    sl.eps_smoothing = true;
    CHECK_NEAR(one(&sl,
                   "Co n\xC3\xA1s nejv\xC3\xAD"
                   "c tr\xC3\xA1p\xC3\xAD, proto\xC5\xBE"
                   "e "
                   "l\xC3\xA9ka\xC5\x99i si vyb\xC3\xADraj\xC3\xAD, kdo bude \xC5\xBE\xC3\xADt a "
                   "kdo zem\xC5\x99"
                   "e.",
                   "Nejv\xC3\xAD"
                   "ce smutn\xC3\xAD jsme z toho, \xC5\xBE"
                   "e mus\xC3\xADme "
                   "rozhodovat o tom, kdo bude \xC5\xBE\xC3\xADt a kdo zem\xC5\x99"
                   "e."),
               39.14078509, 1e-4);
    CHECK_NEAR(one(&sl,
                   "Nebo prost\xC4\x9B nemaj\xC3\xAD vybaven\xC3\xAD, kter\xC3\xA9 by jim "
                   "pomohlo, uvedli l\xC3\xA9ka\xC5\x99i.",
                   "A n\xC4\x9Bkdy nem\xC3\xA1me ani pot\xC5\x99"
                   "ebn\xC3\xBD materi\xC3\xA1l, "
                   "abychom jim pomohli, popsali l\xC3\xA9ka\xC5\x99i."),
               31.22557079, 1e-4);
    CHECK_NEAR(
        one(&sl,
            "Lapali po dechu, jejich \xC5\xBEivoty skon\xC4\x8Dily d\xC5\x99\xC3\xADv, "
            "ne\xC5\xBE skute\xC4\x8Dn\xC4\x9B za\xC4\x8D"
            "aly.",
            "Lapali po dechu a pak jejich \xC5\xBEivot skon\xC4\x8Dil - "
            "d\xC5\x99\xC3\xADv, ne\xC5\xBE skute\xC4\x8Dn\xC4\x9B mohl za\xC4\x8D\xC3\xADt, "
            "p\xC5\x99ipomn\xC4\x9Bli."),
        57.15704367, 1e-4);
}

TEST(chrf_sacrebleu_readme_example) {
    const char *hyps[3] = {"The dog bit the man.", "It wasn't surprising.",
                           "The man had just bitten him."};
    const char *const refs[2][8] = {
        {"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
        {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."}};
    qkv_chrf_opts o = qkv_chrf_opts_default();
    qkv_chrf_stats s;
    const double score = chrf_of(&o, hyps, 3, refs, 2, &s);
    char line[256], sig[256];
    /* README: "chrF2 = 59.73", signature nrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no */
    CHECK_OK(qkv_chrf_format(score, &o, NULL, NULL, 2, line, sizeof line));
    CHECK_MSG(strcmp(line, "chrF2 = 59.73") == 0, "%s", line);
    CHECK_OK(qkv_chrf_signature(&o, &s, NULL, sig, sizeof sig));
    CHECK_MSG(strcmp(sig, "nrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.0.0") == 0, "%s",
              sig);
    CHECK_OK(qkv_chrf_format(score, &o, sig, NULL, 1, line, sizeof line));
    CHECK_MSG(strcmp(line, "chrF2|nrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.0.0 = "
                           "59.7") == 0,
              "%s", line);
    /* sentence 1 matches its first reference exactly: that one is chosen, all its n-grams match */
    qkv_chrf_stats first = {0};
    const char *r[2] = {refs[0][0], refs[1][0]};
    const size_t l[2] = {strlen(r[0]), strlen(r[1])};
    CHECK_OK(qkv_chrf_add(NULL, &o, hyps[0], strlen(hyps[0]), r, l, 2, &first));
    /* "Thedogbittheman." has 16 characters: 16 - n + 1 n-grams of order n */
    for (int k = 0; k < 6; k++)
        CHECK(first.hyp[k] == 16 - k && first.ref[k] == 16 - k && first.match[k] == 16 - k);
    CHECK(first.min_refs == 2 && first.max_refs == 2);
}

TEST(chrf_plus_plus_by_hand) {
    /* words only (nc 0, nw 2), beta 2: "a b." -> a, b, . and "a c." -> a, c, .: unigrams match
     * a and . (P = R = 2/3), bigrams none (P = R = 0): means 1/3, F2 = 1/3 */
    qkv_chrf_opts o = qkv_chrf_opts_default();
    o.char_order = 0;
    o.word_order = 2;
    CHECK_NEAR(one(&o, "a b.", "a c."), 100.0 / 3, 1e-12);
    /* a word's final punctuation mark is split off before its initial one, a one-character word
     * is kept whole: "(hi)" -> "(hi" ")" (sacreBLEU issue #124), "(hi" -> "(" "hi", "." -> "." */
    CHECK_NEAR(one(&o, "(hi", "( hi"), 100.0, 1e-12);
    /* "(hi)" -> "(hi" ")" against "(" "hi" ")": unigrams P = 1/2, R = 1/3, bigrams none:
     * means 1/4, 1/6: F2 = 5 (1/4)(1/6) / (4 (1/4) + 1/6) = 5/28 */
    CHECK_NEAR(one(&o, "(hi)", "( hi )"), 100.0 * 5 / 28, 1e-12);
    /* chrF++ (nc 6, nw 2) of identical lines is 100, and its name has the pluses */
    qkv_chrf_opts pp = qkv_chrf_opts_default();
    pp.word_order = 2;
    CHECK_NEAR(one(&pp, "The cat sat, on the mat.", "The cat sat, on the mat."), 100.0, 1e-12);
    char name[16];
    CHECK_OK(qkv_chrf_name(&pp, name, sizeof name));
    CHECK(strcmp(name, "chrF2++") == 0);
    CHECK_ERR(qkv_chrf_name(&pp, name, 6), QKV_ERR_INVALID_ARG, "too small");
    /* chrF++ by hand: hyp "ab" ref "ab c": characters (whitespace removed) "ab" vs "abc":
     * order 1 P = 1, R = 2/3; order 2 P = 1, R = 1/2; orders 3 .. 6 no hypothesis n-grams.
     * Words: unigrams "ab" vs "ab", "c": P = 1, R = 1/2; bigrams: the hypothesis has none.
     * Means over the 3 effective orders: P = 1, R = (2/3 + 1/2 + 1/2) / 3 = 5/9;
     * F2 = 5 (5/9) / (4 + 5/9) = 25/41 */
    CHECK_NEAR(one(&pp, "ab", "ab c"), 100.0 * 25 / 41, 1e-12);
    qkv_chrf_stats s = {0};
    const char *ref = "ab c";
    const size_t len = 4;
    CHECK_OK(qkv_chrf_add(&s, &pp, "ab", 2, &ref, &len, 1, NULL));
    const int64_t hyp[8] = {2, 1, 0, 0, 0, 0, 1, 0}, refn[8] = {3, 2, 1, 0, 0, 0, 2, 1},
                  match[8] = {2, 1, 0, 0, 0, 0, 1, 0};
    for (int k = 0; k < 8; k++)
        CHECK_MSG(s.hyp[k] == hyp[k] && s.ref[k] == refn[k] && s.match[k] == match[k],
                  "order %d: %lld %lld %lld", k, (long long)s.hyp[k], (long long)s.ref[k],
                  (long long)s.match[k]);
}

TEST(chrf_multi_reference_and_case) {
    /* the best reference per sentence: "abc" against "xyz" and "abc" is 100 */
    qkv_chrf_opts o = qkv_chrf_opts_default();
    const char *h[1] = {"abc"};
    const char *const r[2][8] = {{"xyz"}, {"abc"}};
    CHECK_NEAR(chrf_of(&o, h, 1, r, 2, NULL), 100.0, 1e-12);
    /* an empty reference is left out; nrefs:var when the numbers differ */
    const char *h2[2] = {"abc", "abd"};
    const char *const r2[2][8] = {{"", "abd"}, {"abc", "x"}};
    qkv_chrf_stats s;
    CHECK_NEAR(chrf_of(&o, h2, 2, r2, 2, &s), 100.0, 1e-12);
    char sig[256];
    CHECK_OK(qkv_chrf_signature(&o, &s, NULL, sig, sizeof sig));
    CHECK(strncmp(sig, "nrefs:var|", 10) == 0);
    /* lowercase: Python's str.lower(), final sigma included */
    o.lowercase = true;
    CHECK_NEAR(
        one(&o, "\xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3 ABC", "\xCE\xBF\xCE\xB4\xCE\xBF\xCF\x82 abc"),
        100.0, 1e-12);
    o.lowercase = false;
    CHECK(one(&o, "ABC", "abc") == 0.0);
    o.lowercase = true;
    o.eps_smoothing = true;
    o.whitespace = true;
    o.word_order = 1;
    CHECK_OK(qkv_chrf_signature(&o, &s, NULL, sig, sizeof sig));
    CHECK_MSG(strcmp(sig, "nrefs:var|case:lc|eff:no|nc:6|nw:1|space:yes|version:2.0.0") == 0, "%s",
              sig);
}

TEST(chrf_bootstrap_and_errors) {
    qkv_chrf_opts o = qkv_chrf_opts_default();
    const char *hyps[4] = {"the cat", "a dog barks", "no match", "good morning"};
    const char *refs[4] = {"the cat", "the dog barked", "xyz", "good evening"};
    qkv_chrf_stats sent[4], all = {0};
    for (int i = 0; i < 4; i++) {
        const size_t l = strlen(refs[i]);
        CHECK_OK(qkv_chrf_add(&all, &o, hyps[i], strlen(hyps[i]), &refs[i], &l, 1, &sent[i]));
    }
    qkv_bootstrap_ci a, b;
    CHECK_OK(qkv_chrf_bootstrap(sent, 4, &o, 1000, 12345, &a));
    CHECK_OK(qkv_chrf_bootstrap(sent, 4, &o, 1000, 12345, &b));
    CHECK(memcmp(&a, &b, sizeof a) == 0);
    CHECK(a.lower <= a.mean && a.mean <= a.upper && a.lower >= 0 && a.upper <= 100 + 1e-12);
    double score;
    CHECK_OK(qkv_chrf_compute(&all, &o, &score));
    CHECK(a.lower <= score && score <= a.upper);
    char sig[256], line[256], want[256];
    CHECK_OK(qkv_chrf_signature(&o, &all, &a, sig, sizeof sig));
    CHECK(strcmp(sig, "nrefs:1|bs:1000|seed:12345|case:mixed|eff:yes|nc:6|nw:0|space:no|"
                      "version:2.0.0") == 0);
    CHECK_OK(qkv_chrf_format(score, &o, NULL, &a, 2, line, sizeof line));
    snprintf(want, sizeof want, "chrF2 = %.2f (\xCE\xBC = %.2f \xC2\xB1 %.2f)", score, a.mean,
             a.half_width);
    CHECK_MSG(strcmp(line, want) == 0, "%s", line);
    /* the sentence order does not matter */
    qkv_chrf_stats rev = {0};
    for (int i = 3; i >= 0; i--)
        CHECK_OK(qkv_chrf_stats_merge(&rev, &sent[i]));
    double score2;
    CHECK_OK(qkv_chrf_compute(&rev, &o, &score2));
    CHECK(score == score2);

    const char *ref = "abc";
    size_t len = 3;
    CHECK_ERR(qkv_chrf_add(&all, &o, "\xE2\x82", 2, &ref, &len, 1, NULL), QKV_ERR_FORMAT,
              "the hypothesis is not UTF-8");
    CHECK_ERR(qkv_chrf_add(&all, &o, "a", 1, &ref, &len, -1, NULL), QKV_ERR_INVALID_ARG,
              "-1 references");
    o.char_order = 0;
    CHECK_ERR(qkv_chrf_add(&all, &o, "a", 1, &ref, &len, 1, NULL), QKV_ERR_INVALID_ARG,
              "char_order 0 and word_order 0");
    o.char_order = 4;
    CHECK_ERR(qkv_chrf_add(&all, &o, "a", 1, &ref, &len, 1, NULL), QKV_ERR_INVALID_ARG,
              "orders 6 + 0, the options 4 + 0");
    CHECK_ERR(qkv_chrf_compute(&all, &o, &score), QKV_ERR_INVALID_ARG, "orders 6 + 0");
    CHECK(all.sentences == 4);
}
