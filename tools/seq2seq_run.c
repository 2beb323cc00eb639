/*
 * seq2seq_run.c: `qkv eval` on a seq2seq run (task.h, eval_run): decode every word of a pairs
 * file and report the multi-reference WER and PER (each word scored against its closest
 * reference; docs/data.md) and the decoding speed; --show N first prints N words with their
 * hypothesis and first reference.
 */
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
    for (int64_t k = 0; k < hyps->len[g]; k++) printf("%s%s", k ? " " : "", qkv_vocab_symbol(r->tgt, hyps->tokens[g][k]));
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

int seq2seq_eval_run(run_dir *r, const char *data, const task_run_opts *o) {
    seq2seq_settings s;
    memset(&s, 0, sizeof s);
    s.max_src_len = r->model->cfg.max_len;     /* what the encoder accepts */
    s.max_tgt_len = r->model->cfg.max_len - 1; /* references longer than any hypothesis can be are still read */
    s.src_tokens = o->src_tokens || r->src_tokens;
    s.decode = eval_search(r->model, o);
    char what[96];
    describe_search(&s.decode, what, sizeof what);
    seq2seq_eval_set e;
    qkv_wer_counts wc;
    seq2seq_hyps hyps;
    struct timespec t0, t1;
    clock_t c0 = 0;
    if (seq2seq_eval_set_load(data, &s, r->src, r->tgt, &e)) {
        fprintf(stderr, "qkv eval: %s\n", qkv_last_error());
        return 1;
    }
    c0 = clock();
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (seq2seq_evaluate(r->model, &e, &s.decode, 64, 0, &wc, o->show ? &hyps : NULL)) {
        fprintf(stderr, "qkv eval: %s\n", qkv_last_error());
        seq2seq_eval_set_free(&e);
        return 1;
    }
    for (int64_t g = 0; g < o->show && g < hyps.n; g++) show_word(r, &e, &hyps, g);
    if (o->show) seq2seq_free_hyps(&hyps);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double wall = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("%s: %lld words, WER %.2f%%, PER %.2f%% (%s; decoding %.1f s, %.0f words/s, CPU %.1f s)\n", data,
           (long long)wc.items, 100 * qkv_wer(&wc), 100 * qkv_per(&wc), what, wall,
           (double)wc.items / (wall > 1e-9 ? wall : 1e-9), (double)(clock() - c0) / CLOCKS_PER_SEC);
    seq2seq_eval_set_free(&e);
    return 0;
}
