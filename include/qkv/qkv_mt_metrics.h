/*
 * qkv_mt_metrics.h: machine-translation metrics as sacreBLEU 2.x defines them (Post 2018, "A Call
 * for Clarity in Reporting BLEU Scores"): corpus BLEU (Papineni et al. 2002) with sacreBLEU's 13a
 * tokenizer and smoothing methods, chrF and chrF++ (Popović 2015, 2017), their signatures and
 * score lines, and bootstrap confidence intervals. docs/metrics.md has the definitions.
 *
 * The inputs are UTF-8 lines (pointer and length; NUL is an ordinary character); text that is not
 * UTF-8 is refused (QKV_ERR_FORMAT). Scoring is streaming: each sentence's hypothesis and
 * references add their sufficient statistics to a plain struct (start from {0}); the score is a
 * function of the sums. Keep the per-sentence statistics (the `sentence` out-argument) for the
 * bootstrap. Like sacreBLEU, an empty reference ("", not " ") is left out, so sentences may have
 * different numbers of references (the signature then says nrefs:var); a sentence needs one.
 *
 * Agreement with sacreBLEU 2.0.0 (the version whose code and documented outputs were checked): the
 * statistics are equal, the scores are computed by the same floating-point operations in the same
 * order, and the score lines and signatures are the same bytes, for the 13a and none tokenizers,
 * with or without lower-casing (Python's str.lower of Unicode 14.0, final sigma included).
 * Bootstrap resamples come from qkv's Philox generator, not numpy's: intervals are reproducible for
 * a seed but not equal to sacreBLEU's.
 */
#ifndef QKV_MT_METRICS_H
#define QKV_MT_METRICS_H

#include "qkv_base.h"
#include "qkv_enums.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The sacreBLEU release that qkv's signatures name (their version: field). */
#define QKV_SACREBLEU_VERSION "2.0.0"

/* ---------------------------------------------------------------------------------------------
 * BLEU.
 *
 * Per sentence: the hypothesis and references are tokenized; for n = 1 .. N, total_n counts the
 * hypothesis n-grams and correct_n the clipped matches, sum over distinct n-grams g of
 * min(count_hyp(g), max over references of count_ref(g)); the reference length is that of the
 * reference closest in length to the hypothesis (ties: the shorter). Over the corpus:
 *   p_n = 100 correct_n / total_n,   BP = 1 if c >= r else exp(1 - r / c) (0 when c = 0),
 *   BLEU = BP exp(sum_n log p_n / N)
 * with c, r the summed hypothesis and reference lengths. BLEU is 0 when no n-gram of any order
 * matches. A p_n of 0 (log taken as -9999999999, so BLEU ~ 0) is smoothed by
 *   exp     the k-th order with no match gets p_n = 100 / (2^k total_n) (mteval-v13a; default)
 *   floor   p_n = 100 smooth_value / total_n (default value 0.1)
 *   add-k   n >= 2: correct_n and total_n both += smooth_value (default 1)
 *   none    no smoothing.
 * `exp` changes nothing when every order has a match, which is the usual corpus case: sacreBLEU's
 * corpus default is exp, and so is qkv's. The orders stop at the first n with total_n = 0; with
 * effective_order, N becomes the last order with total_n > 0 (sentence-level BLEU).
 * ------------------------------------------------------------------------------------------- */

#define QKV_BLEU_MAX_ORDER 8

/* qkv_bleu_tokenizer (13a, none) and qkv_bleu_smooth (exp, none, floor, add-k): qkv_enums.h; their
 * names are those of the registries "bleu_tokenizer" and "bleu_smooth" (qkv_registry.h). */

typedef struct qkv_bleu_opts {
    qkv_bleu_tokenizer tokenizer;
    bool lowercase; /* case-insensitive: Python's str.lower() first */
    qkv_bleu_smooth smooth;
    double smooth_value;  /* floor and add-k; negative: the method's default */
    int max_order;        /* N, 1 .. QKV_BLEU_MAX_ORDER */
    bool effective_order; /* N = the highest order with hypothesis n-grams */
} qkv_bleu_opts;

/* sacreBLEU's defaults: 13a, mixed case, exp, N = 4, no effective order. */
QKV_API qkv_bleu_opts qkv_bleu_opts_default(void);

/* Sufficient statistics of one sentence or of a sum of sentences. Start from {0}. */
typedef struct qkv_bleu_stats {
    int max_order; /* N of the statistics (0 before the first sentence) */
    int64_t sentences;
    int64_t hyp_len, ref_len;            /* tokens; ref_len sums the closest references */
    int64_t correct[QKV_BLEU_MAX_ORDER]; /* clipped matches of order n + 1 */
    int64_t total[QKV_BLEU_MAX_ORDER];   /* hypothesis n-grams of order n + 1 */
    int64_t min_refs, max_refs;          /* fewest, most (non-empty) references of a sentence */
} qkv_bleu_stats;

/* Score one sentence: hyp[0, hyp_len) against refs[i][0, ref_lens[i]), i < n_refs (empty ones
 * left out; at least one non-empty). Adds its statistics to *stats (may be NULL) and stores them
 * alone in *sentence (may be NULL). */
QKV_API qkv_status qkv_bleu_add(qkv_bleu_stats *stats, const qkv_bleu_opts *opts, const char *hyp,
                                size_t hyp_len, const char *const *refs, const size_t *ref_lens,
                                int64_t n_refs, qkv_bleu_stats *sentence);
/* *into += *s (statistics of the same max_order). */
QKV_API qkv_status qkv_bleu_stats_merge(qkv_bleu_stats *into, const qkv_bleu_stats *s);

typedef struct qkv_bleu_result {
    double score;                          /* 0 .. 100 */
    double precisions[QKV_BLEU_MAX_ORDER]; /* p_n, 0 .. 100 (smoothed) */
    double bp, ratio;                      /* brevity penalty, hyp_len / ref_len (0 if no ref) */
    int64_t hyp_len, ref_len;
    int max_order;
} qkv_bleu_result;

/* BLEU of the statistics with opts' smoothing (sacreBLEU's BLEU.compute_bleu). */
QKV_API qkv_status qkv_bleu_compute(const qkv_bleu_stats *stats, const qkv_bleu_opts *opts,
                                    qkv_bleu_result *out);

/* The tokens of one line as sacreBLEU's BLEU sees them, joined by single spaces, NUL-terminated
 * (malloc'd into *out, its length without the NUL in *out_len; may be NULL). */
QKV_API qkv_status qkv_bleu_tokenize(const char *text, size_t len, qkv_bleu_tokenizer tokenizer,
                                     bool lowercase, char **out, size_t *out_len);

/* ---------------------------------------------------------------------------------------------
 * chrF and chrF++.
 *
 * Character n-grams (code points; whitespace removed unless `whitespace`) of orders 1 .. nc and,
 * for chrF++, word n-grams of orders 1 .. nw (words split at whitespace, one punctuation mark
 * split off the end, else the start, of each word longer than one character). Per sentence and
 * order: hypothesis n-grams (0 when the reference has none of that order), reference n-grams,
 * and matches sum_g min(count_hyp(g), count_ref(g)); with several references, those of the
 * reference with the best sentence-level chrF (the first among equals). Over the corpus (sums):
 *   P_n = matches / hyp, R_n = matches / ref,  F_beta(P, R) = (1 + b^2) P R / (b^2 P + R)
 *   default (sacreBLEU's "eff:yes"): P, R the means of P_n, R_n over the orders with hyp > 0 and
 *            ref > 0; chrF = 100 F_beta(P, R), 0 when P + R = 0;
 *   eps_smoothing (chrF++.py, NLTK, Moses): P_n or R_n = 1e-16 when its denominator is 0;
 *            chrF = 100 mean_n F_beta(P_n, R_n) over all nc + nw orders (F = 1e-16 when
 *            b^2 P_n + R_n = 0).
 * ------------------------------------------------------------------------------------------- */

#define QKV_CHRF_MAX_ORDER 16 /* nc + nw */

typedef struct qkv_chrf_opts {
    int char_order;     /* nc: 6 */
    int word_order;     /* nw: 0 for chrF, 2 for chrF++ */
    int beta;           /* 2 */
    bool lowercase;     /* Python's str.lower() first */
    bool whitespace;    /* keep whitespace in character n-grams */
    bool eps_smoothing; /* see above; off by default */
} qkv_chrf_opts;

/* chrF (nc 6, nw 0, beta 2); set word_order = 2 for chrF++. */
QKV_API qkv_chrf_opts qkv_chrf_opts_default(void);

typedef struct qkv_chrf_stats {
    int char_order, word_order; /* of the statistics (0 before the first sentence) */
    int64_t sentences;
    /* per order (characters 1 .. nc, then words 1 .. nw): hypothesis, reference n-grams,
     * matches */
    int64_t hyp[QKV_CHRF_MAX_ORDER], ref[QKV_CHRF_MAX_ORDER], match[QKV_CHRF_MAX_ORDER];
    int64_t min_refs, max_refs;
} qkv_chrf_stats;

/* As qkv_bleu_add. */
QKV_API qkv_status qkv_chrf_add(qkv_chrf_stats *stats, const qkv_chrf_opts *opts, const char *hyp,
                                size_t hyp_len, const char *const *refs, const size_t *ref_lens,
                                int64_t n_refs, qkv_chrf_stats *sentence);
QKV_API qkv_status qkv_chrf_stats_merge(qkv_chrf_stats *into, const qkv_chrf_stats *s);
/* chrF (0 .. 100) of the statistics. */
QKV_API qkv_status qkv_chrf_compute(const qkv_chrf_stats *stats, const qkv_chrf_opts *opts,
                                    double *score);
/* "chrF2", "chrF2++" (beta, then one '+' per word order), into buf. */
QKV_API qkv_status qkv_chrf_name(const qkv_chrf_opts *opts, char *buf, size_t size);

/* ---------------------------------------------------------------------------------------------
 * Bootstrap confidence intervals (sacreBLEU's --confidence; Koehn 2004): `resamples` corpora of
 * as many sentences, drawn with replacement from the per-sentence statistics, each scored; mean =
 * the mean of those scores, and with them sorted ascending s_0 .. s_{B-1}, lo = B / 40 (integer
 * division): lower = s_lo, upper = s_{B-1-lo}, half_width = (upper - lower) / 2 (reported as
 * "mu = mean +- half_width"). Sentence j of resample b is floor(n x / 2^32) for x a 32-bit word
 * of the Philox block of counter (j, b, attempt) and key seed (rejection keeps it unbiased): the
 * same seed gives the same interval on every machine, but not sacreBLEU's (numpy).
 * sacreBLEU's defaults: 1000 resamples, seed 12345.
 * ------------------------------------------------------------------------------------------- */

typedef struct qkv_bootstrap_ci {
    int64_t resamples;
    uint64_t seed;
    double mean, half_width, lower, upper;
} qkv_bootstrap_ci;

#define QKV_BOOTSTRAP_RESAMPLES 1000
#define QKV_BOOTSTRAP_SEED 12345

QKV_API qkv_status qkv_bleu_bootstrap(const qkv_bleu_stats *sentences, int64_t n,
                                      const qkv_bleu_opts *opts, int64_t resamples, uint64_t seed,
                                      qkv_bootstrap_ci *out);
QKV_API qkv_status qkv_chrf_bootstrap(const qkv_chrf_stats *sentences, int64_t n,
                                      const qkv_chrf_opts *opts, int64_t resamples, uint64_t seed,
                                      qkv_bootstrap_ci *out);

/* ---------------------------------------------------------------------------------------------
 * Signatures and score lines, byte for byte as sacreBLEU 2.x prints them (stats give nrefs: the
 * number, or "var"; ci, may be NULL, adds bs:N|seed:S):
 *   nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.0.0
 *   nrefs:2|bs:1000|seed:12345|case:lc|eff:no|tok:none|smooth:floor[0.10]|version:2.0.0
 *   nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|version:2.0.0          (chrF: eff:yes unless
 *                                                                          eps_smoothing)
 * Score lines (width: decimals of the score, sacreBLEU's --width: 1 on its command line, 2 in
 * its Python API; signature may be NULL; ci adds " (μ = mean ± half_width)" when mean > 0):
 *   BLEU|nrefs:1|...|version:2.0.0 = 20.8 54.4/26.6/14.9/8.7 (BP = 1.000 ratio = 1.026 hyp_len =
 *   62880 ref_len = 61287)
 *   chrF2 = 59.73
 * All write NUL-terminated text into buf (QKV_ERR_INVALID_ARG when it does not fit).
 * ------------------------------------------------------------------------------------------- */

QKV_API qkv_status qkv_bleu_signature(const qkv_bleu_opts *opts, const qkv_bleu_stats *stats,
                                      const qkv_bootstrap_ci *ci, char *buf, size_t size);
QKV_API qkv_status qkv_chrf_signature(const qkv_chrf_opts *opts, const qkv_chrf_stats *stats,
                                      const qkv_bootstrap_ci *ci, char *buf, size_t size);
QKV_API qkv_status qkv_bleu_format(const qkv_bleu_result *r, const char *signature,
                                   const qkv_bootstrap_ci *ci, int width, char *buf, size_t size);
QKV_API qkv_status qkv_chrf_format(double score, const qkv_chrf_opts *opts, const char *signature,
                                   const qkv_bootstrap_ci *ci, int width, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif
