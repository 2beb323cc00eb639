/*
 * mt_internal.h (internal): what the machine-translation metrics (bleu.c, chrf.c, mt_bootstrap.c,
 * mt_report.c) share: text as code points with Python's str semantics (mt_text.c) and n-gram
 * match counting (mt_ngram.c).
 */
#ifndef QKV_MT_INTERNAL_H
#define QKV_MT_INTERNAL_H

#include "qkv/qkv_mt_metrics.h"

#include "data_internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The arguments of one sentence of qkv_bleu_add / qkv_chrf_add (mt_text.c): a hypothesis (NULL
 * only when empty) and n_refs >= 1 references; QKV_ERR_INVALID_ARG "<who>: ..." otherwise. */
qkv_status mt_check_sentence(const char *who, const char *hyp, size_t hyp_len, const char *const *refs,
                             const size_t *ref_lens, int64_t n_refs);

/* ---- code points (mt_text.c) ---- */

/* A growable array of code points: pushes never fail; oom is sticky and checked at the end. */
typedef struct mt_cps {
    uint32_t *p;
    size_t n, cap;
    bool oom;
} mt_cps;

void mt_cps_push(mt_cps *b, uint32_t c);
void mt_cps_append(mt_cps *b, const uint32_t *c, size_t n);
void mt_cps_free(mt_cps *b);

/* s[0, len) decoded into *out (replacing its content). QKV_ERR_FORMAT "<who>: <what> is not
 * UTF-8 ..." on a malformed byte, QKV_ERR_OOM when out of memory. */
qkv_status mt_decode(const char *who, const char *what, const char *s, size_t len, mt_cps *out);
/* Code points as UTF-8, appended to out. */
void mt_encode(const uint32_t *c, size_t n, qkv__buf *out);
/* Python's str.isspace() of one character, the separators of str.split() and str.rstrip(). */
bool mt_is_space(uint32_t c);
/* Python's str.lower() of in[0, n) into *out (replacing its content): Unicode 14.0's
 * lower-case mappings, U+0130 to "i" U+0307, and the Final_Sigma rule. */
void mt_lower(const uint32_t *in, size_t n, mt_cps *out);

/* A word: a span of code points. */
typedef struct mt_span {
    size_t start, len;
} mt_span;

/* Python's str.split() of t[0, n): the whitespace-separated words, appended to *words. false
 * when out of memory. */
bool mt_split(const uint32_t *t, size_t n, mt_span **words, size_t *n_words, size_t *cap);

/* ---- n-gram matches (mt_ngram.c) ---- */

/* Sequences of symbols, one after the other in sym: sequence s is sym[start[s], start[s + 1]);
 * sequence 0 is the hypothesis, 1 .. n_refs the references. For orders 1 .. max_order (index
 * k = order - 1):
 *   hyp_total[k]                  hypothesis n-grams
 *   ref_total[r * max_order + k]  n-grams of reference r
 *   match[r * max_order + k]      sum over distinct n-grams g of min(c_hyp(g), c_r(g))
 *   match_max[k]                  sum over g of min(c_hyp(g), max_r c_r(g)) (BLEU's clipping)
 * (any of the last three may be NULL). false when out of memory. */
bool mt_ngram_match(const int64_t *sym, const int64_t *start, int64_t n_refs, int max_order,
                    int64_t *hyp_total, int64_t *ref_total, int64_t *match, int64_t *match_max);

/* Dense ids for words: equal spans of t get equal ids (0, 1, ...), written to ids[i]. false when
 * out of memory. */
bool mt_intern(const uint32_t *t, const mt_span *words, size_t n, int64_t *ids);

#endif
