/*
 * mt_report.c: sacreBLEU 2.x's signatures and score lines (sacrebleu/metrics/base.py: Signature
 * .format, Score.format; bleu.py: BLEUSignature, BLEUScore; chrf.py: CHRFSignature), byte for
 * byte. A signature lists nrefs (the number, or "var" when sentences had different numbers), bs
 * and seed when a bootstrap ran, the metric's settings, and the version last:
 *   BLEU: nrefs|bs|seed|case|eff|tok|smooth|version, smooth "floor[0.10]" and "add-k[1.00]"
 *         with their value (%.2f);
 *   chrF: nrefs|bs|seed|case|eff|nc|nw|space|version, eff:yes unless eps_smoothing.
 * A score line: NAME[|SIGNATURE] = SCORE[ (μ = MEAN ± HALF)][ VERBOSE], SCORE with `width`
 * decimals, the interval when its mean is > 0, and BLEU's VERBOSE "p1/p2/p3/p4 (BP = %.3f ratio
 * = %.3f hyp_len = N ref_len = N)" with the precisions as %.1f. printf's %.Nf rounds the binary
 * value correctly, as Python's format does.
 */
#include "mt_internal.h"

#include "qkv/qkv_registry.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct out {
    char *buf;
    size_t size, n;
    bool full;
} out;

static void put(out *o, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void put(out *o, const char *fmt, ...) {
    if (o->full) return;
    va_list ap;
    va_start(ap, fmt);
    const int k = vsnprintf(o->buf + o->n, o->size - o->n, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= o->size - o->n)
        o->full = true;
    else
        o->n += (size_t)k;
}

static qkv_status finish(const char *who, out *o) {
    if (!o->full) return QKV_OK;
    if (o->size) o->buf[0] = '\0';
    return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: the text does not fit %zu bytes", who, o->size);
}

static void nrefs(out *o, int64_t min_refs, int64_t max_refs, const qkv_bootstrap_ci *ci) {
    if (min_refs == max_refs)
        put(o, "nrefs:%lld", (long long)min_refs);
    else
        put(o, "nrefs:var");
    if (ci) put(o, "|bs:%lld|seed:%llu", (long long)ci->resamples, (unsigned long long)ci->seed);
}

qkv_status qkv_bleu_signature(const qkv_bleu_opts *opts, const qkv_bleu_stats *stats,
                              const qkv_bootstrap_ci *ci, char *buf, size_t size) {
    static const char who[] = "qkv_bleu_signature";
    if (!opts || !stats || !buf || size == 0)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL argument or empty buffer", who);
    const char *tok = qkv_registry_name(QKV_REGISTRY_BLEU_TOKENIZER, (int)opts->tokenizer),
               *smooth = qkv_registry_name(QKV_REGISTRY_BLEU_SMOOTH, (int)opts->smooth);
    if (!tok || !smooth)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: unknown tokenizer or smoothing", who);
    if (stats->sentences == 0)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: no sentence scored (nrefs unknown)", who);
    out o = {buf, size, 0, false};
    nrefs(&o, stats->min_refs, stats->max_refs, ci);
    put(&o, "|case:%s|eff:%s|tok:%s|smooth:%s", opts->lowercase ? "lc" : "mixed",
        opts->effective_order ? "yes" : "no", tok, smooth);
    if (opts->smooth == QKV_BLEU_SMOOTH_FLOOR || opts->smooth == QKV_BLEU_SMOOTH_ADD_K) {
        double v = opts->smooth_value;
        if (v < 0) v = opts->smooth == QKV_BLEU_SMOOTH_FLOOR ? 0.1 : 1.0;
        put(&o, "[%.2f]", v);
    }
    put(&o, "|version:%s", QKV_SACREBLEU_VERSION);
    return finish(who, &o);
}

qkv_status qkv_chrf_signature(const qkv_chrf_opts *opts, const qkv_chrf_stats *stats,
                              const qkv_bootstrap_ci *ci, char *buf, size_t size) {
    static const char who[] = "qkv_chrf_signature";
    if (!opts || !stats || !buf || size == 0)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL argument or empty buffer", who);
    if (stats->sentences == 0)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: no sentence scored (nrefs unknown)", who);
    out o = {buf, size, 0, false};
    nrefs(&o, stats->min_refs, stats->max_refs, ci);
    put(&o, "|case:%s|eff:%s|nc:%d|nw:%d|space:%s|version:%s", opts->lowercase ? "lc" : "mixed",
        opts->eps_smoothing ? "no" : "yes", opts->char_order, opts->word_order,
        opts->whitespace ? "yes" : "no", QKV_SACREBLEU_VERSION);
    return finish(who, &o);
}

static void head(out *o, const char *name, const char *signature, double score,
                 const qkv_bootstrap_ci *ci, int width) {
    put(o, "%s%s%s = %.*f", name, signature ? "|" : "", signature ? signature : "", width, score);
    if (ci && ci->mean > 0)
        put(o, " (\xCE\xBC = %.*f \xC2\xB1 %.*f)", width, ci->mean, width, ci->half_width);
}

qkv_status qkv_bleu_format(const qkv_bleu_result *r, const char *signature,
                           const qkv_bootstrap_ci *ci, int width, char *buf, size_t size) {
    static const char who[] = "qkv_bleu_format";
    if (!r || !buf || size == 0)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL argument or empty buffer", who);
    if (width < 0 || width > 17 || r->max_order < 1 || r->max_order > QKV_BLEU_MAX_ORDER)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: width %d (0 .. 17) or max_order %d", who, width,
                         r->max_order);
    out o = {buf, size, 0, false};
    head(&o, "BLEU", signature, r->score, ci, width);
    for (int k = 0; k < r->max_order; k++)
        put(&o, "%s%.1f", k ? "/" : " ", r->precisions[k]);
    put(&o, " (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)", r->bp, r->ratio,
        (long long)r->hyp_len, (long long)r->ref_len);
    return finish(who, &o);
}

qkv_status qkv_chrf_format(double score, const qkv_chrf_opts *opts, const char *signature,
                           const qkv_bootstrap_ci *ci, int width, char *buf, size_t size) {
    static const char who[] = "qkv_chrf_format";
    if (!opts || !buf || size == 0)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL argument or empty buffer", who);
    if (width < 0 || width > 17)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: width %d (0 .. 17)", who, width);
    char name[64];
    qkv_status st = qkv_chrf_name(opts, name, sizeof name);
    if (st) return st;
    out o = {buf, size, 0, false};
    head(&o, name, signature, score, ci, width);
    return finish(who, &o);
}
