/*
 * cmd_eval.c: `qkv eval RUN DATA.tsv [--beam K | --greedy | --mask-predict K] [--show N]`: decode
 * every word of a pairs file with a trained model and report the multi-reference WER and PER (each
 * word scored against its closest reference; DATA.md section 4) and the decoding speed. Tagging
 * and classify runs (task.h) go to their task, which prints their accuracies.
 */
#include "cli_args.h"
#include "commands.h"
#include "run_dir.h"
#include "seq2seq_task.h"
#include "task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *f) {
    fprintf(f, "usage: qkv eval RUN DATA.tsv [--beam K | --greedy | --mask-predict K [--length-beam L]] [--show N]\n"
               "                [--tokens] [--threads N]\n\n"
               "Decode the words of DATA.tsv (word<TAB>PH PH ..., variants on consecutive lines) with the model of RUN\n"
               "(a run directory of qkv train, or a model .safetensors with src.vocab and tgt.vocab beside it) and\n"
               "print the word error rate and phone error rate against the closest reference of each word.\n"
               "Non-autoregressive runs (model.nat) decode with mask-predict: K iterations (default 10; 1: one\n"
               "parallel pass) over the L most probable target lengths (default 5).\n"
               "--show N prints the first N words with their hypothesis and (first) reference; --tokens for runs\n"
               "trained with data.src_tokens (space-separated source tokens) that have no task.conf saying so.\n"
               "On a tagging or classify run (task.conf), prints its accuracies instead (docs/cli.md).\n\n"
               "example:\n"
               "  qkv eval runs/g2p data/g2p/cmudict.nostress.test.tsv --beam 4 --show 10\n");
}

int qkv_cmd_eval(int argc, char **argv) {
    const char *run = NULL, *data = NULL;
    int beam = 4, show = 0, threads = 0, iterations = 0, length_beam = 5;
    bool tokens = false, strategy_set = false;
    const char *s2s_only = NULL; /* an option of seq2seq runs */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--beam")) {
            s2s_only = argv[i];
            iterations = 0, strategy_set = true;
            if (!cli_int_option("qkv eval", argc, argv, &i, 1, 1024, &beam)) return 2;
        } else if (!strcmp(argv[i], "--greedy")) {
            s2s_only = argv[i];
            beam = 1, iterations = 0, strategy_set = true;
        } else if (!strcmp(argv[i], "--mask-predict")) {
            s2s_only = argv[i];
            strategy_set = true;
            if (!cli_int_option("qkv eval", argc, argv, &i, 1, 1000, &iterations)) return 2;
        } else if (!strcmp(argv[i], "--length-beam")) {
            s2s_only = argv[i];
            if (!cli_int_option("qkv eval", argc, argv, &i, 1, 1024, &length_beam)) return 2;
        } else if (!strcmp(argv[i], "--tokens")) {
            s2s_only = argv[i];
            tokens = true;
        } else if (!strcmp(argv[i], "--show")) {
            if (!cli_int_option("qkv eval", argc, argv, &i, 0, INT32_MAX, &show)) return 2;
        } else if (!strcmp(argv[i], "--threads")) {
            if (!cli_int_option("qkv eval", argc, argv, &i, 0, 4096, &threads)) return 2;
        } else if (argv[i][0] != '-' && !run) {
            run = argv[i];
        } else if (argv[i][0] != '-' && !data) {
            data = argv[i];
        } else {
            fprintf(stderr, "qkv eval: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!run || !data) {
        usage(stderr);
        return 2;
    }
    qkv_set_num_threads(threads);
    run_dir r;
    if (run_dir_load(run, &r)) {
        fprintf(stderr, "qkv eval: %s\n", qkv_last_error());
        return 1;
    }
    if (r.task->eval_run) { /* tagging, classify: task.h */
        int rc = 2;
        if (s2s_only) fprintf(stderr, "qkv eval: %s applies to seq2seq runs; %s is a %s run\n", s2s_only, run, r.task->name);
        else rc = r.task->eval_run(&r, data, &(task_run_opts){.run = run, .show = show});
        run_dir_free(&r);
        return rc;
    }
    seq2seq_settings s;
    memset(&s, 0, sizeof s);
    s.max_src_len = r.model->cfg.max_len;     /* what the encoder accepts */
    s.max_tgt_len = r.model->cfg.max_len - 1; /* references longer than any hypothesis can be are still read */
    s.src_tokens = tokens || r.src_tokens;
    s.decode = qkv_decode_default_params();
    s.decode.strategy = beam > 1 ? QKV_DECODE_BEAM : QKV_DECODE_GREEDY;
    s.decode.beam_size = beam;
    s.decode.n_best = 1;
    s.decode.bos_id = QKV_VOCAB_BOS;
    s.decode.eos_id = QKV_VOCAB_EOS;
    s.decode.max_len = 0; /* up to the model's limit */
    if (r.model->cfg.nat && !strategy_set) iterations = 10; /* a nat model decodes with mask-predict */
    if (iterations > 0) {
        s.decode.strategy = QKV_DECODE_MASK_PREDICT;
        s.decode.iterations = iterations;
        s.decode.length_beam = length_beam;
    }
    char what[64];
    if (iterations > 0)
        snprintf(what, sizeof what, "mask-predict, %d iteration%s, %d length%s", iterations, iterations > 1 ? "s" : "",
                 length_beam, length_beam > 1 ? "s" : "");
    else snprintf(what, sizeof what, beam > 1 ? "beam search %d" : "greedy", beam);
    seq2seq_eval_set e;
    qkv_wer_counts wc;
    seq2seq_hyps hyps;
    int rc = 1;
    struct timespec t0, t1;
    clock_t c0 = 0;
    if (seq2seq_eval_set_load(data, &s, r.src, r.tgt, &e)) {
        fprintf(stderr, "qkv eval: %s\n", qkv_last_error());
    } else if (c0 = clock(), clock_gettime(CLOCK_MONOTONIC, &t0),
               seq2seq_evaluate(r.model, &e, &s.decode, 64, 0, &wc, show ? &hyps : NULL)) {
        fprintf(stderr, "qkv eval: %s\n", qkv_last_error());
        seq2seq_eval_set_free(&e);
    } else {
        for (int64_t g = 0; g < show && g < hyps.n; g++) {
            size_t len = 0;
            const char *word = qkv_corpus_key(e.corpus, e.groups.start[g], &len);
            printf("%.*s\t", (int)len, word);
            for (int64_t k = 0; k < hyps.len[g]; k++) printf("%s%s", k ? " " : "", qkv_vocab_symbol(r.tgt, hyps.tokens[g][k]));
            printf("\t(reference:");
            const int64_t ex = e.groups.start[g];
            for (int64_t k = 0; k < qkv_corpus_length(e.corpus, ex, QKV_FIELD_TGT); k++) {
                size_t sl = 0;
                const char *sym = qkv_corpus_symbol(e.corpus, ex, QKV_FIELD_TGT, k, &sl);
                printf(" %.*s", (int)sl, sym);
            }
            const int64_t refs = e.groups.start[g + 1] - ex;
            printf(refs > 1 ? " and %lld more)\n" : ")\n", (long long)(refs - 1));
        }
        if (show) seq2seq_free_hyps(&hyps);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        const double wall = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        printf("%s: %lld words, WER %.2f%%, PER %.2f%% (%s; decoding %.1f s, %.0f words/s, CPU %.1f s)\n", data,
               (long long)wc.items, 100 * qkv_wer(&wc), 100 * qkv_per(&wc), what, wall,
               (double)wc.items / (wall > 1e-9 ? wall : 1e-9), (double)(clock() - c0) / CLOCKS_PER_SEC);
        seq2seq_eval_set_free(&e);
        rc = 0;
    }
    run_dir_free(&r);
    return rc;
}
