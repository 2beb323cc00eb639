/*
 * bleu.c: corpus BLEU (Papineni, Roukos, Ward & Zhu 2002) exactly as sacreBLEU 2.x computes it
 * (Post 2018, "A Call for Clarity in Reporting BLEU Scores"; sacrebleu/metrics/bleu.py and
 * tokenizers/tokenizer_13a.py).
 *
 * Tokenizer 13a (mteval-v13a.pl), on the line lower-cased (option) and right-stripped: remove
 * "<skipped>", join "-\n", "\n" -> " ", unescape &quot; &amp; &lt; &gt; (in that order, each a
 * pass of its own), pad with a space each side, then four regular-expression passes, each
 * scanning left to right without overlaps (Python's re.sub):
 *   ([\{-\~\[-\` -\&\(-\+\:-\@\/])  ->  " \1 "     ASCII symbols but ' - . , and digits
 *   ([^0-9])([\.,])                 ->  "\1 \2 "   period and comma unless preceded by a digit
 *   ([\.,])([^0-9])                 ->  " \1 \2"   period and comma unless followed by a digit
 *   ([0-9])(-)                      ->  "\1 \2 "   a dash after a digit
 * and split at whitespace (Python's str.split). Tokenizer none: the split alone.
 *
 * Statistics and score: include/qkv/qkv_mt_metrics.h; the score repeats BLEU.compute_bleu's
 * floating-point operations in its order (p_n = 100. * correct / total, the exp smoothing's
 * 100. / (2^k total), the mean of the logs summed from order 1, log 0 taken as -9999999999).
 */
#include "mt_internal.h"

#include "qkv/qkv_registry.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

qkv_bleu_opts qkv_bleu_opts_default(void) {
    return (qkv_bleu_opts){QKV_BLEU_TOK_13A, false, QKV_BLEU_SMOOTH_EXP, -1.0, 4, false};
}

static qkv_status check_opts(const char *who, const qkv_bleu_opts *o) {
    if (!o) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL options", who);
    if (!qkv_registry_name(QKV_REGISTRY_BLEU_TOKENIZER, (int)o->tokenizer))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: unknown tokenizer %d (13a, none)", who,
                         (int)o->tokenizer);
    if (!qkv_registry_name(QKV_REGISTRY_BLEU_SMOOTH, (int)o->smooth))
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "%s: unknown smoothing method %d (exp, none, floor, add-k)", who,
                         (int)o->smooth);
    if (o->max_order < 1 || o->max_order > QKV_BLEU_MAX_ORDER)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: max_order %d out of range [1, %d]", who,
                         o->max_order, QKV_BLEU_MAX_ORDER);
    if (!isfinite(o->smooth_value))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: smooth_value is not finite", who);
    return QKV_OK;
}

/* ---- the 13a tokenizer on code points ---- */

static bool is_digit(uint32_t c) {
    return c >= '0' && c <= '9';
}

/* Python's str.replace(pat, rep) of ASCII strings: in -> out. */
static void replace_all(const mt_cps *in, const char *pat, const char *rep, mt_cps *out) {
    const size_t np = strlen(pat), nr = strlen(rep);
    out->n = 0;
    for (size_t i = 0; i < in->n;) {
        size_t k = 0;
        while (k < np && i + k < in->n && in->p[i + k] == (unsigned char)pat[k])
            k++;
        if (k == np) {
            for (size_t j = 0; j < nr; j++)
                mt_cps_push(out, (unsigned char)rep[j]);
            i += np;
        } else {
            mt_cps_push(out, in->p[i++]);
        }
    }
}

/* [\{-\~\[-\` -\&\(-\+\:-\@\/]: { | } ~ [ \ ] ^ _ ` space ! " # $ % & ( ) * + : ; < = > ? @ / */
static bool symbol_13a(uint32_t c) {
    return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
           (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

static bool period_comma(uint32_t c) {
    return c == '.' || c == ',';
}

static void regex_passes(const mt_cps *in, mt_cps *tmp, mt_cps *out) {
    /* ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> " \1 " */
    tmp->n = 0;
    for (size_t i = 0; i < in->n; i++) {
        if (symbol_13a(in->p[i])) {
            const uint32_t r[3] = {' ', in->p[i], ' '};
            mt_cps_append(tmp, r, 3);
        } else {
            mt_cps_push(tmp, in->p[i]);
        }
    }
    /* ([^0-9])([\.,]) -> "\1 \2 " */
    out->n = 0;
    for (size_t i = 0; i < tmp->n;) {
        if (!is_digit(tmp->p[i]) && i + 1 < tmp->n && period_comma(tmp->p[i + 1])) {
            const uint32_t r[4] = {tmp->p[i], ' ', tmp->p[i + 1], ' '};
            mt_cps_append(out, r, 4);
            i += 2;
        } else {
            mt_cps_push(out, tmp->p[i++]);
        }
    }
    /* ([\.,])([^0-9]) -> " \1 \2" */
    tmp->n = 0;
    for (size_t i = 0; i < out->n;) {
        if (period_comma(out->p[i]) && i + 1 < out->n && !is_digit(out->p[i + 1])) {
            const uint32_t r[4] = {' ', out->p[i], ' ', out->p[i + 1]};
            mt_cps_append(tmp, r, 4);
            i += 2;
        } else {
            mt_cps_push(tmp, out->p[i++]);
        }
    }
    /* ([0-9])(-) -> "\1 \2 " */
    out->n = 0;
    for (size_t i = 0; i < tmp->n;) {
        if (is_digit(tmp->p[i]) && i + 1 < tmp->n && tmp->p[i + 1] == '-') {
            const uint32_t r[4] = {tmp->p[i], ' ', '-', ' '};
            mt_cps_append(out, r, 4);
            i += 2;
        } else {
            mt_cps_push(out, tmp->p[i++]);
        }
    }
}

/* Scratch buffers and the tokens of the sentence so far (all in `text`). */
typedef struct work {
    mt_cps a, b, c, text;
    mt_span *words;
    size_t n_words, cap;
} work;

static void work_free(work *w) {
    mt_cps_free(&w->a);
    mt_cps_free(&w->b);
    mt_cps_free(&w->c);
    mt_cps_free(&w->text);
    free(w->words);
}

/* The tokens of s[0, len), appended to w->text and w->words; *count gets their number. */
static qkv_status tokenize(const char *who, const char *what, const char *s, size_t len,
                           qkv_bleu_tokenizer tok, bool lowercase, work *w, size_t *count) {
    qkv_status st = mt_decode(who, what, s, len, &w->a);
    if (st) return st;
    mt_cps *cur = &w->a, *other = &w->b;
    if (lowercase) {
        mt_lower(cur->p, cur->n, other);
        mt_cps *t = cur;
        cur = other, other = t;
    }
    while (cur->n && mt_is_space(cur->p[cur->n - 1])) /* str.rstrip() */
        cur->n--;
    if (tok == QKV_BLEU_TOK_13A) {
        static const char *const pairs[][2] = {{"<skipped>", ""}, {"-\n", ""},    {"\n", " "},
                                               {"&quot;", "\""},  {"&amp;", "&"}, {"&lt;", "<"},
                                               {"&gt;", ">"}};
        for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
            replace_all(cur, pairs[i][0], pairs[i][1], other);
            mt_cps *t = cur;
            cur = other, other = t;
        }
        /* " {} ".format(line) */
        other->n = 0;
        mt_cps_push(other, ' ');
        mt_cps_append(other, cur->p, cur->n);
        mt_cps_push(other, ' ');
        regex_passes(other, cur, &w->c);
        cur = &w->c;
    }
    if (cur->oom) return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory tokenizing %s", who, what);
    const size_t base = w->text.n, first = w->n_words;
    mt_cps_append(&w->text, cur->p, cur->n);
    if (w->text.oom || !mt_split(w->text.p + base, cur->n, &w->words, &w->n_words, &w->cap))
        return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory tokenizing %s", who, what);
    for (size_t i = first; i < w->n_words; i++)
        w->words[i].start += base;
    *count = w->n_words - first;
    return QKV_OK;
}

qkv_status qkv_bleu_tokenize(const char *text, size_t len, qkv_bleu_tokenizer tokenizer,
                             bool lowercase, char **out, size_t *out_len) {
    if (!out || (!text && len))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_bleu_tokenize: NULL argument");
    *out = NULL;
    if (!qkv_registry_name(QKV_REGISTRY_BLEU_TOKENIZER, (int)tokenizer))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_bleu_tokenize: unknown tokenizer %d",
                         (int)tokenizer);
    work w = {0};
    size_t n = 0;
    qkv_status st =
        tokenize("qkv_bleu_tokenize", "the text", text, len, tokenizer, lowercase, &w, &n);
    qkv__buf b = {0};
    for (size_t i = 0; st == QKV_OK && i < n; i++) {
        if (i) qkv__buf_ch(&b, ' ');
        mt_encode(w.text.p + w.words[i].start, w.words[i].len, &b);
    }
    work_free(&w);
    if (st) return st;
    if (!b.p && !b.oom) b.p = malloc(1);
    if (b.oom || !b.p) {
        qkv__buf_free(&b);
        return QKV_ERROR(QKV_ERR_OOM, "qkv_bleu_tokenize: out of memory");
    }
    b.p[b.n] = '\0';
    *out = b.p;
    if (out_len) *out_len = b.n;
    return QKV_OK;
}

/* ---- statistics ---- */

static void stats_count_refs(qkv_bleu_stats *s, int64_t n_refs) {
    if (s->sentences == 0 || n_refs < s->min_refs) s->min_refs = n_refs;
    if (s->sentences == 0 || n_refs > s->max_refs) s->max_refs = n_refs;
}

qkv_status qkv_bleu_stats_merge(qkv_bleu_stats *into, const qkv_bleu_stats *s) {
    if (!into || !s) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_bleu_stats_merge: NULL argument");
    if (s->sentences == 0) return QKV_OK;
    if (into->sentences && into->max_order != s->max_order)
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "qkv_bleu_stats_merge: statistics of max_order %d and %d", into->max_order,
                         s->max_order);
    if (into->sentences == 0 || s->min_refs < into->min_refs) into->min_refs = s->min_refs;
    if (into->sentences == 0 || s->max_refs > into->max_refs) into->max_refs = s->max_refs;
    into->max_order = s->max_order;
    into->sentences += s->sentences;
    into->hyp_len += s->hyp_len;
    into->ref_len += s->ref_len;
    for (int k = 0; k < QKV_BLEU_MAX_ORDER; k++) {
        into->correct[k] += s->correct[k];
        into->total[k] += s->total[k];
    }
    return QKV_OK;
}

qkv_status qkv_bleu_add(qkv_bleu_stats *stats, const qkv_bleu_opts *opts, const char *hyp,
                        size_t hyp_len, const char *const *refs, const size_t *ref_lens,
                        int64_t n_refs, qkv_bleu_stats *sentence) {
    static const char who[] = "qkv_bleu_add";
    qkv_status st = check_opts(who, opts);
    if (st) return st;
    if ((st = mt_check_sentence(who, hyp, hyp_len, refs, ref_lens, n_refs))) return st;
    if (stats && stats->sentences && stats->max_order != opts->max_order)
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "%s: the statistics have max_order %d, the options %d", who,
                         stats->max_order, opts->max_order);
    const int N = opts->max_order;
    work w = {0};
    int64_t *start = malloc((size_t)(n_refs + 2) * sizeof *start);
    int64_t *ids = NULL, *ref_total = NULL;
    if (!start) return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", who);
    size_t count = 0;
    char what[64];
    st =
        tokenize(who, "the hypothesis", hyp, hyp_len, opts->tokenizer, opts->lowercase, &w, &count);
    const int64_t c = (int64_t)count;
    int64_t used = 0, r_len = -1;
    start[0] = 0;
    start[1] = c;
    for (int64_t r = 0; st == QKV_OK && r < n_refs; r++) {
        if (!refs[r] && ref_lens[r])
            st = QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: reference %lld is NULL", who, (long long)r);
        if (st || ref_lens[r] == 0) continue; /* sacreBLEU leaves empty references out */
        snprintf(what, sizeof what, "reference %lld", (long long)r);
        st =
            tokenize(who, what, refs[r], ref_lens[r], opts->tokenizer, opts->lowercase, &w, &count);
        if (st) break;
        const int64_t len = (int64_t)count, d = llabs(len - c), best = llabs(r_len - c);
        if (r_len < 0 || d < best || (d == best && len < r_len)) r_len = len;
        used++;
        start[used + 1] = start[used] + len;
    }
    if (st == QKV_OK && used == 0)
        st = QKV_ERROR(QKV_ERR_INVALID_ARG,
                       "%s: all %lld references are empty (a sentence needs a non-empty one)", who,
                       (long long)n_refs);
    qkv_bleu_stats one = {0};
    if (st == QKV_OK) {
        ids = malloc((w.n_words ? w.n_words : 1) * sizeof *ids);
        ref_total = malloc((size_t)used * (size_t)N * sizeof *ref_total);
        if (!ids || !ref_total || !mt_intern(w.text.p, w.words, w.n_words, ids) ||
            !mt_ngram_match(ids, start, used, N, one.total, ref_total, NULL, one.correct))
            st = QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", who);
    }
    free(ids);
    free(ref_total);
    free(start);
    work_free(&w);
    if (st) return st;
    one.max_order = N;
    one.hyp_len = c;
    one.ref_len = r_len;
    stats_count_refs(&one, used);
    one.sentences = 1;
    if (sentence) *sentence = one;
    if (stats) qkv_bleu_stats_merge(stats, &one);
    return QKV_OK;
}

/* sacreBLEU's my_log. */
static double floored_log(double x) {
    return x == 0.0 ? -9999999999.0 : log(x);
}

qkv_status qkv_bleu_compute(const qkv_bleu_stats *stats, const qkv_bleu_opts *opts,
                            qkv_bleu_result *out) {
    static const char who[] = "qkv_bleu_compute";
    qkv_status st = check_opts(who, opts);
    if (st) return st;
    if (!stats || !out) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL argument", who);
    if (stats->sentences && stats->max_order != opts->max_order)
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "%s: the statistics have max_order %d, the options %d", who,
                         stats->max_order, opts->max_order);
    const int N = opts->max_order;
    double smooth_value = opts->smooth_value;
    if (smooth_value < 0) smooth_value = opts->smooth == QKV_BLEU_SMOOTH_FLOOR ? 0.1 : 1.0;
    const int64_t sys_len = stats->hyp_len, ref_len = stats->ref_len;
    *out = (qkv_bleu_result){0};
    out->max_order = N;
    out->hyp_len = sys_len;
    out->ref_len = ref_len;
    out->ratio = ref_len ? (double)sys_len / (double)ref_len : 0.0;
    if (sys_len < ref_len)
        out->bp = sys_len > 0 ? exp(1.0 - (double)ref_len / (double)sys_len) : 0.0;
    else
        out->bp = 1.0;
    bool any = false;
    for (int k = 0; k < N; k++)
        any |= stats->correct[k] != 0;
    if (!any) return QKV_OK; /* no match at all: 0 (sacreBLEU #141) */
    double smooth_mteval = 1.0;
    int eff_order = N;
    for (int n = 1; n <= N; n++) {
        double correct = (double)stats->correct[n - 1], total = (double)stats->total[n - 1];
        if (opts->smooth == QKV_BLEU_SMOOTH_ADD_K && n > 1) {
            correct += smooth_value;
            total += smooth_value;
        }
        if (total == 0) break;
        if (opts->effective_order) eff_order = n;
        if (correct == 0) {
            if (opts->smooth == QKV_BLEU_SMOOTH_EXP) {
                smooth_mteval *= 2;
                out->precisions[n - 1] = 100. / (smooth_mteval * total);
            } else if (opts->smooth == QKV_BLEU_SMOOTH_FLOOR) {
                out->precisions[n - 1] = 100. * smooth_value / total;
            }
        } else {
            out->precisions[n - 1] = 100. * correct / total;
        }
    }
    double sum = 0.0;
    for (int k = 0; k < eff_order; k++)
        sum += floored_log(out->precisions[k]);
    out->score = out->bp * exp(sum / eff_order);
    return QKV_OK;
}
