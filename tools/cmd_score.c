/*
 * cmd_score.c: `qkv score`: corpus BLEU, chrF and chrF++ of a file of hypotheses against one or
 * more reference files, as sacreBLEU 2.x scores them (qkv_mt_metrics.h, docs/metrics.md).
 *
 *   qkv score REF... [-i HYP] [--metrics bleu,chrf,chrf++] [--tokenize 13a|none] [--lowercase]
 *             [--smooth exp|none|floor|add-k] [--smooth-value V] [--confidence] [--resamples N]
 *             [--seed S] [--width W]
 *
 * Line i of the hypotheses (HYP, or stdin) is scored against line i of every REF file; an empty
 * reference line leaves that reference out for the sentence (nrefs:var). Each metric prints its
 * sacreBLEU score line with its signature; --confidence adds the bootstrap interval.
 *
 * Exit status: 0 on success, 1 when a file is missing or malformed (invalid UTF-8, line counts
 * that differ: the message names the file and line), 2 for usage errors.
 */
#include "cli_args.h"
#include "commands.h"
#include "input_lines.h"
#include "qkv/qkv.h"
#include "qkv/qkv_mt_metrics.h"
#include "qkv/qkv_registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "qkv score"

static void usage(FILE *f) {
    fprintf(f,
            "usage: qkv score REF... [-i HYP] [--metrics bleu,chrf,chrf++] [--tokenize 13a|none]\n"
            "                 [--lowercase] [--smooth exp|none|floor|add-k] [--smooth-value V]\n"
            "                 [--confidence] [--resamples N] [--seed S] [--width W]\n\n"
            "Corpus BLEU, chrF and chrF++ of the hypotheses (HYP, or stdin; one per line) against the\n"
            "reference files (line i of each), computed and printed as sacreBLEU %s does:\n"
            "  --metrics    which, comma-separated (default bleu,chrf)\n"
            "  --tokenize   BLEU's tokenizer: 13a (default, mteval-v13a) or none (tokenized text)\n"
            "  --lowercase  case-insensitive (BLEU and chrF)\n"
            "  --smooth     BLEU's smoothing (default exp), --smooth-value its value (floor 0.1,\n"
            "               add-k 1)\n"
            "  --confidence bootstrap 95%% intervals over --resamples corpora (default %d) drawn with\n"
            "               --seed (default %d)\n"
            "  --width      decimals of the scores (default 1)\n"
            "An empty reference line leaves that reference out for the sentence (nrefs:var).\n\n"
            "example:\n"
            "  $ qkv score ref.txt -i hyp.txt --metrics bleu,chrf,chrf++\n"
            "  BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.0.0 = 48.5 82.4/50.0/45.5/37.5 "
            "(BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)\n"
            "  chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.0.0 = 59.7\n"
            "  ...\n",
            QKV_SACREBLEU_VERSION, QKV_BOOTSTRAP_RESAMPLES, QKV_BOOTSTRAP_SEED);
}

/* The lines of one file. */
typedef struct lines {
    const char *file;
    char **s;
    size_t *len;
    int64_t n, cap;
} lines;

static int keep_line(void *user, const char *file, int64_t line_no, char *line) {
    lines *l = user;
    (void)line_no;
    l->file = file;
    if (l->n == l->cap) {
        const int64_t cap = l->cap ? 2 * l->cap : 1024;
        char **s = realloc(l->s, (size_t)cap * sizeof *s);
        if (s) l->s = s;
        size_t *n = realloc(l->len, (size_t)cap * sizeof *n);
        if (n) l->len = n;
        if (!s || !n) goto oom;
        l->cap = cap;
    }
    const size_t n = strlen(line);
    if (!(l->s[l->n] = malloc(n + 1))) goto oom;
    memcpy(l->s[l->n], line, n + 1);
    l->len[l->n++] = n;
    return 0;
oom:
    fprintf(stderr, CMD ": %s: out of memory\n", file);
    return 1;
}

static void lines_free(lines *l) {
    for (int64_t i = 0; i < l->n; i++)
        free(l->s[i]);
    free(l->s);
    free(l->len);
}

typedef struct options {
    const char *hyp;
    const char **refs;
    int n_refs;
    bool bleu, chrf, chrfpp, confidence;
    qkv_bleu_opts bleu_opts;
    bool lowercase;
    int resamples, width;
    uint64_t seed;
} options;

/* The metrics of "bleu,chrf,chrf++"; false (printed) for an unknown one. */
static bool parse_metrics(const char *text, options *o) {
    o->bleu = o->chrf = o->chrfpp = false;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *save = NULL, *m = strtok_r(buf, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
        if (!strcmp(m, "bleu")) o->bleu = true;
        else if (!strcmp(m, "chrf")) o->chrf = true;
        else if (!strcmp(m, "chrf++")) o->chrfpp = true;
        else {
            fprintf(stderr, CMD ": unknown metric '%s' in --metrics (bleu, chrf, chrf++)\n", m);
            return false;
        }
    }
    if (!o->bleu && !o->chrf && !o->chrfpp) {
        fprintf(stderr, CMD ": --metrics names no metric (bleu, chrf, chrf++)\n");
        return false;
    }
    return true;
}

static bool parse_name(qkv_registry_id id, const char *opt, const char *text, int *out) {
    if (!qkv_registry_parse(id, text, out)) return true;
    char prefix[64];
    snprintf(prefix, sizeof prefix, CMD ": %s: ", opt);
    cli_print_error(prefix);
    return false;
}

/* 0: parsed; 2: a usage error (printed). */
static int parse(int argc, char **argv, options *o) {
    o->bleu = o->chrf = true;
    o->bleu_opts = qkv_bleu_opts_default();
    o->resamples = QKV_BOOTSTRAP_RESAMPLES;
    o->seed = QKV_BOOTSTRAP_SEED;
    o->width = 1;
    if (!(o->refs = calloc((size_t)argc, sizeof *o->refs))) {
        fprintf(stderr, CMD ": out of memory\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const bool has_value = i + 1 < argc;
        int v;
        if ((!strcmp(a, "-i") || !strcmp(a, "--input")) && has_value) {
            o->hyp = argv[++i];
        } else if (!strcmp(a, "--metrics") && has_value) {
            if (!parse_metrics(argv[++i], o)) return 2;
        } else if (!strcmp(a, "--tokenize") && has_value) {
            if (!parse_name(QKV_REGISTRY_BLEU_TOKENIZER, a, argv[++i], &v)) return 2;
            o->bleu_opts.tokenizer = (qkv_bleu_tokenizer)v;
        } else if (!strcmp(a, "--smooth") && has_value) {
            if (!parse_name(QKV_REGISTRY_BLEU_SMOOTH, a, argv[++i], &v)) return 2;
            o->bleu_opts.smooth = (qkv_bleu_smooth)v;
        } else if (!strcmp(a, "--smooth-value")) {
            if (!cli_real_option(CMD, argc, argv, &i, 0, 1e6, false, &o->bleu_opts.smooth_value)) return 2;
        } else if (!strcmp(a, "--lowercase")) {
            o->lowercase = o->bleu_opts.lowercase = true;
        } else if (!strcmp(a, "--confidence")) {
            o->confidence = true;
        } else if (!strcmp(a, "--resamples")) {
            if (!cli_int_option(CMD, argc, argv, &i, 1, 1000000, &o->resamples)) return 2;
        } else if (!strcmp(a, "--seed")) {
            if (!cli_u64_option(CMD, argc, argv, &i, &o->seed)) return 2;
        } else if (!strcmp(a, "--width")) {
            if (!cli_int_option(CMD, argc, argv, &i, 0, 10, &o->width)) return 2;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, CMD ": unknown option or missing value: %s (qkv score --help)\n", a);
            return 2;
        } else {
            o->refs[o->n_refs++] = a;
        }
    }
    if (!o->n_refs) {
        fprintf(stderr, CMD ": no reference file (qkv score REF... -i HYP)\n");
        return 2;
    }
    return 0;
}

/* Line i of every reference file into refs / lens. */
static void refs_of(const lines *refs, int n_refs, int64_t i, const char **r, size_t *len) {
    for (int k = 0; k < n_refs; k++) {
        r[k] = refs[k].s[i];
        len[k] = refs[k].len[i];
    }
}

static int fail(const lines *hyp, int64_t i) {
    char prefix[600];
    snprintf(prefix, sizeof prefix, CMD ": %s:%lld: ", hyp->file, (long long)(i + 1));
    cli_print_error(prefix);
    return 1;
}

static int score_bleu(const options *o, const lines *hyp, const lines *refs, const char **r, size_t *len) {
    qkv_bleu_stats corpus = {0}, *per = calloc((size_t)(hyp->n ? hyp->n : 1), sizeof *per);
    if (!per) {
        fprintf(stderr, CMD ": out of memory\n");
        return 1;
    }
    int rc = 0;
    for (int64_t i = 0; i < hyp->n && !rc; i++) {
        refs_of(refs, o->n_refs, i, r, len);
        if (qkv_bleu_add(&corpus, &o->bleu_opts, hyp->s[i], hyp->len[i], r, len, o->n_refs, &per[i]))
            rc = fail(hyp, i);
    }
    qkv_bleu_result res;
    qkv_bootstrap_ci ci;
    char sig[512], line[1024];
    if (!rc && (qkv_bleu_compute(&corpus, &o->bleu_opts, &res) ||
                (o->confidence && qkv_bleu_bootstrap(per, hyp->n, &o->bleu_opts, o->resamples, o->seed, &ci)) ||
                qkv_bleu_signature(&o->bleu_opts, &corpus, o->confidence ? &ci : NULL, sig, sizeof sig) ||
                qkv_bleu_format(&res, sig, o->confidence ? &ci : NULL, o->width, line, sizeof line))) {
        cli_print_error(CMD ": BLEU: ");
        rc = 1;
    }
    if (!rc) printf("%s\n", line);
    free(per);
    return rc;
}

static int score_chrf(const options *o, int word_order, const lines *hyp, const lines *refs, const char **r,
                      size_t *len) {
    qkv_chrf_opts co = qkv_chrf_opts_default();
    co.word_order = word_order;
    co.lowercase = o->lowercase;
    qkv_chrf_stats corpus = {0}, *per = calloc((size_t)(hyp->n ? hyp->n : 1), sizeof *per);
    if (!per) {
        fprintf(stderr, CMD ": out of memory\n");
        return 1;
    }
    int rc = 0;
    for (int64_t i = 0; i < hyp->n && !rc; i++) {
        refs_of(refs, o->n_refs, i, r, len);
        if (qkv_chrf_add(&corpus, &co, hyp->s[i], hyp->len[i], r, len, o->n_refs, &per[i])) rc = fail(hyp, i);
    }
    double score = 0;
    qkv_bootstrap_ci ci;
    char sig[512], line[1024];
    if (!rc && (qkv_chrf_compute(&corpus, &co, &score) ||
                (o->confidence && qkv_chrf_bootstrap(per, hyp->n, &co, o->resamples, o->seed, &ci)) ||
                qkv_chrf_signature(&co, &corpus, o->confidence ? &ci : NULL, sig, sizeof sig) ||
                qkv_chrf_format(score, &co, sig, o->confidence ? &ci : NULL, o->width, line, sizeof line))) {
        cli_print_error(CMD ": chrF: ");
        rc = 1;
    }
    if (!rc) printf("%s\n", line);
    free(per);
    return rc;
}

int qkv_cmd_score(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    options o = {0};
    int rc = parse(argc, argv, &o);
    lines hyp = {.file = o.hyp ? o.hyp : "<stdin>"}, *refs = calloc((size_t)(o.n_refs + 1), sizeof *refs);
    const char **r = calloc((size_t)(o.n_refs + 1), sizeof *r);
    size_t *len = calloc((size_t)(o.n_refs + 1), sizeof *len);
    if (!rc && (!refs || !r || !len)) {
        fprintf(stderr, CMD ": out of memory\n");
        rc = 1;
    }
    for (int k = 0; !rc && k < o.n_refs; k++) {
        refs[k].file = o.refs[k];
        rc = input_for_each_line("score", &o.refs[k], 1, keep_line, &refs[k]);
    }
    if (!rc) rc = input_for_each_line("score", o.hyp ? &o.hyp : NULL, o.hyp ? 1 : 0, keep_line, &hyp);
    for (int k = 0; !rc && k < o.n_refs; k++)
        if (refs[k].n != hyp.n) {
            fprintf(stderr, CMD ": %s has %lld lines, the hypotheses (%s) %lld: line i of each reference is the "
                            "reference of hypothesis i\n",
                    o.refs[k], (long long)refs[k].n, hyp.file, (long long)hyp.n);
            rc = 1;
        }
    if (!rc && hyp.n == 0) {
        fprintf(stderr, CMD ": %s: no hypothesis to score\n", hyp.file);
        rc = 1;
    }
    if (!rc && o.bleu) rc = score_bleu(&o, &hyp, refs, r, len);
    if (!rc && o.chrf) rc = score_chrf(&o, 0, &hyp, refs, r, len);
    if (!rc && o.chrfpp) rc = score_chrf(&o, 2, &hyp, refs, r, len);
    if (fflush(stdout) != 0) {
        fprintf(stderr, CMD ": cannot write the output\n");
        rc = 1;
    }
    lines_free(&hyp);
    for (int k = 0; refs && k < o.n_refs; k++)
        lines_free(&refs[k]);
    free(refs);
    free(r);
    free(len);
    free(o.refs);
    return rc;
}
