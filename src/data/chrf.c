/*
 * chrf.c: chrF (Popović 2015, "chrF: character n-gram F-score for automatic MT evaluation") and
 * chrF++ (Popović 2017, "chrF++: words helping character n-grams") exactly as sacreBLEU 2.x
 * computes them (sacrebleu/metrics/chrf.py).
 *
 * Per sentence, for the character n-grams of orders 1 .. nc (code points of the line, lower-cased
 * as an option, whitespace removed unless kept) and, for chrF++, the word n-grams of orders
 * 1 .. nw (words of str.split(); of a word longer than one character, a final punctuation mark
 * of string.punctuation is split off, else an initial one): the hypothesis count (0 when the
 * reference has no n-gram of that order), the reference count and the matches sum_g min(c_hyp,
 * c_ref). With several references, the statistics of the one whose sentence-level chrF is
 * highest (the first among equals). The corpus score is that of the summed statistics:
 *   F_beta(P, R) = (1 + beta^2) P R / (beta^2 P + R),
 *   default: 100 F_beta(mean P_n, mean R_n) over the orders with hypothesis and reference n-grams
 *   (sacreBLEU's effective order; 0 when P + R = 0);
 *   eps_smoothing: 100 mean_n F_beta(P_n, R_n) over all orders, a zero denominator's P_n, R_n or
 *   F_n taken as 1e-16 (chrF++.py, NLTK, Moses).
 * in CHRF._compute_f_score's floating-point operations and order.
 */
#include "mt_internal.h"

#include <stdlib.h>
#include <string.h>

qkv_chrf_opts qkv_chrf_opts_default(void) {
    return (qkv_chrf_opts){6, 0, 2, false, false, false};
}

static qkv_status check_opts(const char *who, const qkv_chrf_opts *o) {
    if (!o) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL options", who);
    if (o->char_order < 0 || o->word_order < 0 || o->char_order + o->word_order < 1 ||
        o->char_order + o->word_order > QKV_CHRF_MAX_ORDER)
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "%s: char_order %d and word_order %d: each >= 0, their sum in [1, %d]",
                         who, o->char_order, o->word_order, QKV_CHRF_MAX_ORDER);
    if (o->beta < 0 || o->beta > 1000)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: beta %d out of range [0, 1000]", who, o->beta);
    return QKV_OK;
}

static bool same_orders(const qkv_chrf_stats *s, const qkv_chrf_opts *o) {
    return s->sentences == 0 || (s->char_order == o->char_order && s->word_order == o->word_order);
}

/* sacreBLEU's CHRF._compute_f_score of stats (3 per order: hyp, ref, match). */
static double f_score(const int64_t *hyp, const int64_t *ref, const int64_t *match, int order,
                      int beta, bool eps_smoothing) {
    const double eps = 1e-16;
    double score = 0.0, avg_prec = 0.0, avg_rec = 0.0;
    int effective_order = 0;
    const int64_t factor = (int64_t)beta * beta;
    for (int i = 0; i < order; i++) {
        const int64_t n_hyp = hyp[i], n_ref = ref[i], n_match = match[i];
        const double prec = n_hyp > 0 ? (double)n_match / (double)n_hyp : eps;
        const double rec = n_ref > 0 ? (double)n_match / (double)n_ref : eps;
        const double denom = (double)factor * prec + rec;
        score += denom > 0 ? (double)(1 + factor) * prec * rec / denom : eps;
        if (n_hyp > 0 && n_ref > 0) {
            avg_prec += prec;
            avg_rec += rec;
            effective_order++;
        }
    }
    if (eps_smoothing) return 100 * score / order;
    if (effective_order == 0) {
        avg_prec = avg_rec = 0.0;
    } else {
        avg_prec /= effective_order;
        avg_rec /= effective_order;
    }
    if (avg_prec + avg_rec != 0) {
        score = (double)(1 + factor) * avg_prec * avg_rec;
        score /= ((double)factor * avg_prec) + avg_rec;
        return 100 * score;
    }
    return 0.0;
}

qkv_status qkv_chrf_compute(const qkv_chrf_stats *stats, const qkv_chrf_opts *opts, double *score) {
    qkv_status st = check_opts("qkv_chrf_compute", opts);
    if (st) return st;
    if (!stats || !score) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_chrf_compute: NULL argument");
    if (!same_orders(stats, opts))
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "qkv_chrf_compute: statistics of orders %d + %d, options %d + %d",
                         stats->char_order, stats->word_order, opts->char_order, opts->word_order);
    *score = f_score(stats->hyp, stats->ref, stats->match, opts->char_order + opts->word_order,
                     opts->beta, opts->eps_smoothing);
    return QKV_OK;
}

qkv_status qkv_chrf_stats_merge(qkv_chrf_stats *into, const qkv_chrf_stats *s) {
    if (!into || !s) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_chrf_stats_merge: NULL argument");
    if (s->sentences == 0) return QKV_OK;
    if (into->sentences && (into->char_order != s->char_order || into->word_order != s->word_order))
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "qkv_chrf_stats_merge: statistics of orders %d + %d and %d + %d",
                         into->char_order, into->word_order, s->char_order, s->word_order);
    if (into->sentences == 0 || s->min_refs < into->min_refs) into->min_refs = s->min_refs;
    if (into->sentences == 0 || s->max_refs > into->max_refs) into->max_refs = s->max_refs;
    into->char_order = s->char_order;
    into->word_order = s->word_order;
    into->sentences += s->sentences;
    for (int k = 0; k < QKV_CHRF_MAX_ORDER; k++) {
        into->hyp[k] += s->hyp[k];
        into->ref[k] += s->ref[k];
        into->match[k] += s->match[k];
    }
    return QKV_OK;
}

/* Python's string.punctuation. */
static bool punct(uint32_t c) {
    return c < 0x80 && c > ' ' && c != 0x7F && !(c >= '0' && c <= '9') && !(c >= 'A' && c <= 'Z') &&
           !(c >= 'a' && c <= 'z');
}

/* One line's symbols: characters (code points) then word ids, and the words' spans. */
typedef struct line {
    mt_cps text;    /* the line (lower-cased) */
    mt_cps chars;   /* its characters for the character n-grams */
    mt_span *words; /* chrF++'s words, spans of text */
    size_t n_words, cap;
} line;

static void line_free(line *l) {
    mt_cps_free(&l->text);
    mt_cps_free(&l->chars);
    free(l->words);
    *l = (line){0};
}

static qkv_status prepare(const char *who, const char *what, const char *s, size_t len,
                          const qkv_chrf_opts *o, mt_cps *scratch, line *l) {
    qkv_status st = mt_decode(who, what, s, len, o->lowercase ? scratch : &l->text);
    if (st) return st;
    if (o->lowercase) mt_lower(scratch->p, scratch->n, &l->text);
    l->chars.n = 0;
    for (size_t i = 0; i < l->text.n; i++)
        if (o->whitespace || !mt_is_space(l->text.p[i])) mt_cps_push(&l->chars, l->text.p[i]);
    l->n_words = 0;
    if (o->word_order > 0) {
        /* CHRF._remove_punctuation on str.split() */
        mt_span *w = NULL;
        size_t n = 0, cap = 0;
        if (!mt_split(l->text.p, l->text.n, &w, &n, &cap)) {
            free(w);
            return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", who);
        }
        for (size_t i = 0; i < n; i++) {
            mt_span a = w[i], b = {0, 0};
            const uint32_t *t = l->text.p + a.start;
            if (a.len > 1 && punct(t[a.len - 1])) {
                b = (mt_span){a.start + a.len - 1, 1};
                a.len--;
            } else if (a.len > 1 && punct(t[0])) {
                b = (mt_span){a.start + 1, a.len - 1};
                a.len = 1;
            }
            for (int k = 0; k < 1 + (b.len > 0); k++) {
                if (l->n_words == l->cap) {
                    const size_t c = l->cap ? l->cap * 2 : 64;
                    mt_span *p = realloc(l->words, c * sizeof *p);
                    if (!p) {
                        free(w);
                        return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", who);
                    }
                    l->words = p, l->cap = c;
                }
                l->words[l->n_words++] = k ? b : a;
            }
        }
        free(w);
    }
    if (l->text.oom || l->chars.oom || scratch->oom)
        return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", who);
    return QKV_OK;
}

/* The statistics of the hypothesis against each reference: hyp/ref/match[r * order + k]. */
static qkv_status match_all(const char *who, const line *lines, int64_t n_refs,
                            const qkv_chrf_opts *o, int64_t *hyp, int64_t *ref, int64_t *match) {
    const int nc = o->char_order, nw = o->word_order, order = nc + nw;
    size_t total = 0, words = 0;
    for (int64_t s = 0; s <= n_refs; s++)
        total += lines[s].chars.n, words += lines[s].n_words;
    const size_t n_sym = total > words ? total : words;
    int64_t *sym = malloc((n_sym ? n_sym : 1) * sizeof *sym);
    int64_t *start = malloc((size_t)(n_refs + 2) * sizeof *start);
    int64_t *hyp_total = malloc((size_t)order * sizeof *hyp_total);
    int64_t *rt = malloc((size_t)(n_refs * order) * sizeof *rt);
    int64_t *mt = malloc((size_t)(n_refs * order) * sizeof *mt);
    mt_cps all = {0};
    mt_span *spans = malloc((words ? words : 1) * sizeof *spans);
    bool ok = sym && start && hyp_total && rt && mt && spans;
    /* character n-grams */
    if (ok && nc > 0) {
        size_t m = 0;
        start[0] = 0;
        for (int64_t s = 0; s <= n_refs; s++) {
            for (size_t i = 0; i < lines[s].chars.n; i++)
                sym[m++] = lines[s].chars.p[i];
            start[s + 1] = (int64_t)m;
        }
        ok = mt_ngram_match(sym, start, n_refs, nc, hyp_total, rt, mt, NULL);
        for (int64_t r = 0; ok && r < n_refs; r++)
            for (int k = 0; k < nc; k++) {
                hyp[r * order + k] = hyp_total[k];
                ref[r * order + k] = rt[r * nc + k];
                match[r * order + k] = mt[r * nc + k];
            }
    }
    /* word n-grams: the words of all lines in one buffer, numbered */
    if (ok && nw > 0) {
        size_t m = 0;
        start[0] = 0;
        for (int64_t s = 0; s <= n_refs; s++) {
            for (size_t i = 0; i < lines[s].n_words; i++) {
                spans[m++] = (mt_span){all.n, lines[s].words[i].len};
                mt_cps_append(&all, lines[s].text.p + lines[s].words[i].start,
                              lines[s].words[i].len);
            }
            start[s + 1] = (int64_t)m;
        }
        ok = !all.oom && mt_intern(all.p, spans, m, sym) &&
             mt_ngram_match(sym, start, n_refs, nw, hyp_total, rt, mt, NULL);
        for (int64_t r = 0; ok && r < n_refs; r++)
            for (int k = 0; k < nw; k++) {
                hyp[r * order + nc + k] = hyp_total[k];
                ref[r * order + nc + k] = rt[r * nw + k];
                match[r * order + nc + k] = mt[r * nw + k];
            }
    }
    free(sym), free(start), free(hyp_total), free(rt), free(mt), free(spans);
    mt_cps_free(&all);
    if (!ok) return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", who);
    /* "Don't count hits if no reference exists for that n-gram" */
    for (int64_t i = 0; i < n_refs * order; i++)
        if (ref[i] == 0) hyp[i] = 0;
    return QKV_OK;
}

qkv_status qkv_chrf_add(qkv_chrf_stats *stats, const qkv_chrf_opts *opts, const char *hyp,
                        size_t hyp_len, const char *const *refs, const size_t *ref_lens,
                        int64_t n_refs, qkv_chrf_stats *sentence) {
    static const char who[] = "qkv_chrf_add";
    qkv_status st = check_opts(who, opts);
    if (st) return st;
    if ((st = mt_check_sentence(who, hyp, hyp_len, refs, ref_lens, n_refs))) return st;
    if (stats && !same_orders(stats, opts))
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "%s: the statistics have orders %d + %d, the options %d + %d", who,
                         stats->char_order, stats->word_order, opts->char_order, opts->word_order);
    const int order = opts->char_order + opts->word_order;
    line *lines = calloc((size_t)n_refs + 1, sizeof *lines);
    mt_cps scratch = {0};
    if (!lines) return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", who);
    st = prepare(who, "the hypothesis", hyp, hyp_len, opts, &scratch, &lines[0]);
    int64_t used = 0;
    char what[64];
    for (int64_t r = 0; st == QKV_OK && r < n_refs; r++) {
        if (!refs[r] && ref_lens[r])
            st = QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: reference %lld is NULL", who, (long long)r);
        if (st || ref_lens[r] == 0) continue; /* sacreBLEU leaves empty references out */
        snprintf(what, sizeof what, "reference %lld", (long long)r);
        st = prepare(who, what, refs[r], ref_lens[r], opts, &scratch, &lines[++used]);
    }
    if (st == QKV_OK && used == 0)
        st = QKV_ERROR(QKV_ERR_INVALID_ARG,
                       "%s: all %lld references are empty (a sentence needs a non-empty one)", who,
                       (long long)n_refs);
    int64_t *h = NULL, *rf = NULL, *m = NULL;
    qkv_chrf_stats one = {0};
    if (st == QKV_OK) {
        const size_t n = (size_t)(used * order);
        h = malloc(n * sizeof *h), rf = malloc(n * sizeof *rf), m = malloc(n * sizeof *m);
        st = h && rf && m ? match_all(who, lines, used, opts, h, rf, m)
                          : QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", who);
    }
    if (st == QKV_OK) {
        /* the reference with the best sentence-level score, the first among equals */
        int64_t best = 0;
        double best_f = -1.0;
        for (int64_t r = 0; r < used; r++) {
            const double f = f_score(h + r * order, rf + r * order, m + r * order, order,
                                     opts->beta, opts->eps_smoothing);
            if (f > best_f) best_f = f, best = r;
        }
        for (int k = 0; k < order; k++) {
            one.hyp[k] = h[best * order + k];
            one.ref[k] = rf[best * order + k];
            one.match[k] = m[best * order + k];
        }
        one.char_order = opts->char_order;
        one.word_order = opts->word_order;
        one.sentences = 1;
        one.min_refs = one.max_refs = used;
    }
    free(h), free(rf), free(m);
    for (int64_t s = 0; s <= n_refs; s++)
        line_free(&lines[s]);
    free(lines);
    mt_cps_free(&scratch);
    if (st) return st;
    if (sentence) *sentence = one;
    if (stats) qkv_chrf_stats_merge(stats, &one);
    return QKV_OK;
}

qkv_status qkv_chrf_name(const qkv_chrf_opts *opts, char *buf, size_t size) {
    qkv_status st = check_opts("qkv_chrf_name", opts);
    if (st) return st;
    if (!buf || size == 0) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_chrf_name: no buffer");
    char name[64]; /* "chrF" 4 digits and at most 16 '+' */
    int n = snprintf(name, sizeof name, "chrF%d", opts->beta);
    for (int k = 0; k < opts->word_order; k++)
        name[n++] = '+';
    name[n] = '\0';
    if ((size_t)n >= size) {
        buf[0] = '\0';
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_chrf_name: buffer of %zu bytes too small", size);
    }
    memcpy(buf, name, (size_t)n + 1);
    return QKV_OK;
}
