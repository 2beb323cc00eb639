/*
 * seq2seq_run.c: `qkv eval` and `qkv decode` on a seq2seq run (task.h, eval_run and decode_run).
 *   eval    decode every word of a pairs file and report the multi-reference WER and PER (each
 *           word scored against its closest reference; docs/data.md) and the decoding speed;
 *           --show N first prints N words with their hypothesis and first reference.
 *   decode  one input per line (a word for G2P) -> "input<TAB>output" (with --nbest N, N lines
 *           per input with their scores), in batches of 64 or one by one as they arrive
 *           (--stream); a symbol missing from the vocabulary, or an input longer than the model
 *           accepts, is an error naming the file and line.
 * Beam search by default; non-autoregressive runs (model.nat) decode with mask-predict.
 */
#include "input_lines.h"
#include "run_dir.h"
#include "seq2seq_task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The search of `qkv eval` on model m: the options given (o->decode), or the default, beam 4
 * (a non-autoregressive model: mask-predict, 10 iterations and 5 lengths). */
static qkv_decode_params eval_search(const qkv_model *m, const task_run_opts *o) {
    qkv_decode_params p = o->decode ? *o->decode : qkv_decode_default_params();
    if (m->cfg.nat && !o->strategy_set) {
        p.strategy = QKV_DECODE_MASK_PREDICT;
        p.iterations = 10;
    }
    p.n_best = 1;
    p.bos_id = QKV_VOCAB_BOS;
    p.eos_id = QKV_VOCAB_EOS;
    p.max_len = 0; /* up to the model's limit */
    return p;
}

static void describe_search(const qkv_decode_params *p, char *what, size_t size) {
    if (p->strategy == QKV_DECODE_MASK_PREDICT)
        snprintf(what, size, "mask-predict, %d iteration%s, %d length%s", p->iterations, p->iterations > 1 ? "s" : "",
                 p->length_beam, p->length_beam > 1 ? "s" : "");
    else if (p->strategy == QKV_DECODE_BEAM)
        snprintf(what, size, "beam search %d", p->beam_size);
    else
        snprintf(what, size, "greedy");
}

/* Word g, its hypothesis and its first reference (and how many more), as --show prints them. */
static void show_word(const run_dir *r, const seq2seq_eval_set *e, const seq2seq_hyps *hyps, int64_t g) {
    size_t len = 0;
    const char *word = qkv_corpus_key(e->corpus, e->groups.start[g], &len);
    printf("%.*s\t", (int)len, word);
    run_dir_print_target(stdout, r, hyps->tokens[g], hyps->len[g]);
    printf("\t(reference:");
    const int64_t ex = e->groups.start[g];
    for (int64_t k = 0; k < qkv_corpus_length(e->corpus, ex, QKV_FIELD_TGT); k++) {
        size_t sl = 0;
        const char *sym = qkv_corpus_symbol(e->corpus, ex, QKV_FIELD_TGT, k, &sl);
        printf(" %.*s", (int)sl, sym);
    }
    const int64_t refs = e->groups.start[g + 1] - ex;
    printf(refs > 1 ? " and %lld more)\n" : ")\n", (long long)(refs - 1));
}

/* A translation run's BLEU and chrF lines, as sacreBLEU prints them. */
static int print_text_scores(const run_dir *r, const seq2seq_eval_set *e, const seq2seq_hyps *h) {
    const qkv_bleu_opts bo = qkv_bleu_opts_default();
    const qkv_chrf_opts co = qkv_chrf_opts_default();
    qkv_bleu_stats bs;
    qkv_chrf_stats cs;
    qkv_bleu_result br;
    double chrf = 0;
    char sig[256], line[512], line2[512];
    if (seq2seq_text_scores(e, h, r->tgt, r->tgt_tokenizer, &bs, &cs) || qkv_bleu_compute(&bs, &bo, &br) ||
        qkv_bleu_signature(&bo, &bs, NULL, sig, sizeof sig) || qkv_bleu_format(&br, sig, NULL, 2, line, sizeof line) ||
        qkv_chrf_compute(&cs, &co, &chrf) || qkv_chrf_signature(&co, &cs, NULL, sig, sizeof sig) ||
        qkv_chrf_format(chrf, &co, sig, NULL, 2, line2, sizeof line2)) {
        fprintf(stderr, "qkv eval: %s\n", qkv_last_error());
        return 1;
    }
    printf("%s\n%s\n", line, line2);
    return 0;
}

int seq2seq_eval_run(run_dir *r, const char *data, const task_run_opts *o) {
    seq2seq_settings s;
    memset(&s, 0, sizeof s);
    s.max_src_len = r->model->cfg.max_len;     /* what the encoder accepts */
    s.max_tgt_len = r->model->cfg.max_len - 1; /* references longer than any hypothesis can be are still read */
    const qkv_read_opts ro = seq2seq_read_opts(&s, run_dir_src_tokenizer(r, o->src_tokens), r->tgt_tokenizer);
    s.decode = eval_search(r->model, o);
    char what[96];
    describe_search(&s.decode, what, sizeof what);
    seq2seq_eval_set e;
    qkv_wer_counts wc;
    seq2seq_hyps hyps;
    struct timespec t0, t1;
    clock_t c0 = 0;
    bool bleu = false;
    if (!seq2seq_read_metric(&r->conf, &bleu)) {
        fprintf(stderr, "qkv eval: %s\n", r->conf.error);
        return 1;
    }
    if (seq2seq_eval_set_load(data, &ro, bleu, r->src, r->tgt, &e)) {
        fprintf(stderr, "qkv eval: %s\n", qkv_last_error());
        return 1;
    }
    c0 = clock();
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (seq2seq_evaluate(r->model, &e, &s.decode, 64, 0, &wc, o->show || bleu ? &hyps : NULL)) {
        fprintf(stderr, "qkv eval: %s\n", qkv_last_error());
        seq2seq_eval_set_free(&e);
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    for (int64_t g = 0; g < o->show && g < hyps.n; g++) show_word(r, &e, &hyps, g);
    const double wall = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    const char *unit = bleu ? "sentences" : "words";
    printf("%s: %lld %s, WER %.2f%%, PER %.2f%% (%s; decoding %.1f s, %.0f %s/s, CPU %.1f s)\n", data,
           (long long)wc.items, unit, 100 * qkv_wer(&wc), 100 * qkv_per(&wc), what, wall,
           (double)wc.items / (wall > 1e-9 ? wall : 1e-9), unit, (double)(clock() - c0) / CLOCKS_PER_SEC);
    int rc = bleu ? print_text_scores(r, &e, &hyps) : 0;
    if (o->show || bleu) seq2seq_free_hyps(&hyps);
    seq2seq_eval_set_free(&e);
    return rc;
}

/* ---- decode ---------------------------------------------------------------------------------- */

/* Sequences back to back. */
typedef struct {
    int32_t *ids, *lens;
    int64_t n_ids, cap_ids, cap;
} sequences;

static bool seq_push(sequences *q, int64_t n, const int32_t *ids, int64_t len) {
    if (n == q->cap) {
        const int64_t cap = q->cap ? 2 * q->cap : 64;
        int32_t *l = realloc(q->lens, sizeof *l * (size_t)cap);
        if (!l) return false;
        q->lens = l;
        q->cap = cap;
    }
    if (q->n_ids + len > q->cap_ids) {
        const int64_t cap = 2 * (q->n_ids + len) + 64;
        int32_t *g = realloc(q->ids, sizeof *g * (size_t)cap);
        if (!g) return false;
        q->ids = g;
        q->cap_ids = cap;
    }
    if (len) memcpy(q->ids + q->n_ids, ids, sizeof *ids * (size_t)len);
    q->lens[n] = (int32_t)len;
    q->n_ids += len;
    return true;
}

typedef struct {
    char **text;     /* the input lines, for the output */
    sequences src;   /* their sources */
    sequences pre;   /* --prefix: their forced target prefixes */
    int64_t n, cap;
} pending;

static bool push(pending *p, const char *line, const int32_t *ids, int64_t len, const int32_t *pre, int64_t pre_len) {
    if (p->n == p->cap) {
        const int64_t cap = p->cap ? 2 * p->cap : 64;
        char **t = realloc(p->text, sizeof *t * (size_t)cap);
        if (!t) return false;
        p->text = t;
        p->cap = cap;
    }
    if (!seq_push(&p->src, p->n, ids, len) || (pre && !seq_push(&p->pre, p->n, pre, pre_len))) return false;
    if (!(p->text[p->n] = malloc(strlen(line) + 1))) return false;
    strcpy(p->text[p->n++], line);
    return true;
}

static void clear(pending *p) {
    for (int64_t i = 0; i < p->n; i++) free(p->text[i]);
    p->n = p->src.n_ids = p->pre.n_ids = 0;
}

static bool flush(pending *p, const run_dir *r, const qkv_decode_params *params, bool prefix) {
    if (!p->n) return true;
    qkv_hypotheses h;
    memset(&h, 0, sizeof h);
    qkv_decode_params dp = *params;
    if (prefix) dp.prefix = p->pre.ids, dp.prefix_len = p->pre.lens;
    if (qkv_decoder_decode(r->decoder, p->src.ids, p->src.lens, (int32_t)p->n, &dp, &h)) {
        fprintf(stderr, "qkv decode: %s\n", qkv_last_error());
        return false;
    }
    int32_t *whole = NULL; /* --prefix: the prefix, then the hypothesis */
    for (int64_t b = 0, pre_at = 0; b < p->n; pre_at += prefix ? p->pre.lens[b] : 0, b++) {
        for (int32_t k = 0; k < h.count[b]; k++) {
            const qkv_hypothesis *hy = &h.hyp[b * h.n_best + k];
            printf("%s\t", p->text[b]);
            const int32_t n_pre = prefix ? p->pre.lens[b] : 0;
            int32_t *grown = realloc(whole, sizeof *whole * (size_t)(n_pre + hy->length + 1));
            if (!grown) {
                fprintf(stderr, "qkv decode: out of memory\n");
                free(whole);
                qkv_hypotheses_free(&h);
                return false;
            }
            whole = grown;
            if (n_pre) memcpy(whole, p->pre.ids + pre_at, sizeof *whole * (size_t)n_pre);
            memcpy(whole + n_pre, hy->tokens, sizeof *whole * (size_t)hy->length);
            run_dir_print_target(stdout, r, whole, n_pre + hy->length); /* up to <eos> (dp.eos_id) */
            if (dp.n_best > 1) printf("\t%.4f", hy->score);
            printf("\n");
        }
    }
    free(whole);
    fflush(stdout);
    qkv_hypotheses_free(&h);
    clear(p);
    return true;
}

typedef struct {
    const run_dir *r;
    const qkv_decode_params *dp;
    const qkv_tokenizer *tok; /* of the inputs */
    bool stream, prefix;
    int64_t max_in;
    int32_t *ids, *pre; /* (max_in) */
    pending p;
} decode_lines;

/* One input line: queued, and decoded with the queue when it holds 64 (or at once with --stream).
 * An empty line prints empty lines in its place (n_best of them), so the output keeps its n_best
 * lines per input. */
static int decode_line(void *user, const char *file, int64_t line_no, char *line) {
    decode_lines *d = user;
    if (!line[0]) {
        if (!flush(&d->p, d->r, d->dp, d->prefix)) return 1;
        for (int32_t k = 0; k < d->dp->n_best; k++) printf("\n");
        if (d->stream) fflush(stdout);
        return 0;
    }
    int64_t len = 0, pre_len = 0;
    char *tab = d->prefix ? strchr(line, '\t') : NULL; /* --prefix: source<TAB>target prefix */
    if (tab) *tab = '\0';
    const qkv_status st = run_dir_encode(d->r, file, line_no, line, d->tok, d->ids, d->max_in, &len);
    if (tab) *tab = '\t';
    if (st || (tab && run_dir_encode_target(d->r, file, line_no, tab + 1, d->pre, d->max_in - 1, &pre_len))) {
        fprintf(stderr, "qkv decode: %s\n", qkv_last_error());
        return 1;
    }
    if (!push(&d->p, line, d->ids, len, d->prefix ? d->pre : NULL, pre_len)) {
        fprintf(stderr, "qkv decode: out of memory\n");
        return 1;
    }
    return (d->stream || d->p.n == 64) && !flush(&d->p, d->r, d->dp, d->prefix);
}

typedef struct {
    const run_dir *r;
    uint8_t *allowed;
    int32_t *ids;
    int64_t max;
} allow_lines;

static int allow_line(void *user, const char *file, int64_t line_no, char *line) {
    allow_lines *a = user;
    int64_t n = 0;
    if (run_dir_encode_target(a->r, file, line_no, line, a->ids, a->max, &n)) {
        fprintf(stderr, "qkv decode: --allow: %s\n", qkv_last_error());
        return 1;
    }
    for (int64_t i = 0; i < n; i++)
        a->allowed[a->ids[i]] = 1;
    return 0;
}

/* --allow FILE: the target symbols of the text of FILE (cut with the target tokenizer). */
static uint8_t *read_allowed(const run_dir *r, const char *path) {
    const int32_t V = qkv_vocab_size(r->tgt);
    allow_lines a = {.r = r, .allowed = calloc((size_t)V, 1), .max = 1 << 20};
    a.ids = malloc(sizeof(int32_t) * (size_t)a.max);
    if (!a.allowed || !a.ids) fprintf(stderr, "qkv decode: out of memory\n");
    if (!a.allowed || !a.ids || input_for_each_line("decode", &path, 1, allow_line, &a)) {
        free(a.allowed);
        a.allowed = NULL;
    }
    free(a.ids);
    return a.allowed;
}

int seq2seq_decode_run(run_dir *r, const char *const *files, int n_files, const task_run_opts *o) {
    qkv_decode_params dp = *o->decode;
    if (r->model->cfg.nat && !o->strategy_set) dp.strategy = QKV_DECODE_MASK_PREDICT; /* the only way to decode it */
    if (dp.strategy == QKV_DECODE_MASK_PREDICT && dp.n_best > dp.length_beam) dp.length_beam = dp.n_best;
    dp.bos_id = QKV_VOCAB_BOS;
    dp.eos_id = QKV_VOCAB_EOS;
    /* dp.max_len: --max-len, else 0: up to the model's limit */
    const int64_t max_in = r->model->cfg.max_len;
    uint8_t *allowed = o->allow ? read_allowed(r, o->allow) : NULL;
    if (o->allow && !allowed) return 1;
    dp.allowed = allowed;
    decode_lines d = {.r = r, .dp = &dp, .tok = run_dir_src_tokenizer(r, o->src_tokens), .stream = o->stream,
                      .prefix = o->prefix, .max_in = max_in};
    d.ids = malloc(sizeof(int32_t) * (size_t)max_in);
    d.pre = malloc(sizeof(int32_t) * (size_t)max_in);
    int rc = d.ids && d.pre ? input_for_each_line("decode", files, n_files, decode_line, &d) : 1;
    if (!d.ids || !d.pre) fprintf(stderr, "qkv decode: out of memory\n");
    pending *const p = &d.p;
    if (rc == 0 && !flush(p, r, &dp, d.prefix)) rc = 1;
    clear(p);
    free(p->text), free(p->src.ids), free(p->src.lens), free(p->pre.ids), free(p->pre.lens), free(d.ids), free(d.pre);
    free(allowed);
    return rc;
}
