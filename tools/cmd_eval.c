/*
 * cmd_eval.c: `qkv eval RUN DATA.tsv [--beam K | --greedy] [--show N]`: decode every word of a
 * pairs file with a trained model and report the multi-reference WER and PER (each word scored
 * against its closest reference; DATA.md section 4). Tagging and classify runs (task.h) go to
 * their task, which prints their accuracies.
 */
#include "commands.h"
#include "run_dir.h"
#include "seq2seq_task.h"
#include "task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *f) {
    fprintf(f, "usage: qkv eval RUN DATA.tsv [--beam K | --greedy] [--show N] [--tokens] [--threads N]\n\n"
               "Decode the words of DATA.tsv (word<TAB>PH PH ..., variants on consecutive lines) with the model of RUN\n"
               "(a run directory of qkv train, or a model .safetensors with src.vocab and tgt.vocab beside it) and\n"
               "print the word error rate and phone error rate against the closest reference of each word.\n"
               "--show N prints the first N words with their hypothesis and (first) reference; --tokens for runs\n"
               "trained with data.src_tokens (space-separated source tokens) that have no task.conf saying so.\n"
               "On a tagging or classify run (task.conf), prints its accuracies instead (docs/cli.md).\n\n"
               "example:\n"
               "  qkv eval runs/g2p data/g2p/cmudict.nostress.test.tsv --beam 4 --show 10\n");
}

int qkv_cmd_eval(int argc, char **argv) {
    const char *run = NULL, *data = NULL;
    int beam = 4, show = 0, threads = 0;
    bool tokens = false;
    const char *s2s_only = NULL; /* an option of seq2seq runs */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--beam") && i + 1 < argc) {
            s2s_only = argv[i];
            beam = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--greedy")) {
            s2s_only = argv[i];
            beam = 1;
        } else if (!strcmp(argv[i], "--tokens")) {
            s2s_only = argv[i];
            tokens = true;
        } else if (!strcmp(argv[i], "--show") && i + 1 < argc) {
            show = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            threads = atoi(argv[++i]);
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
    if (!run || !data || beam < 1 || beam > 1024 || show < 0) {
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
    seq2seq_eval_set e;
    qkv_wer_counts wc;
    seq2seq_hyps hyps;
    int rc = 1;
    const clock_t c0 = clock();
    if (seq2seq_eval_set_load(data, &s, r.src, r.tgt, &e)) {
        fprintf(stderr, "qkv eval: %s\n", qkv_last_error());
    } else if (seq2seq_evaluate(r.model, &e, &s.decode, 64, 0, &wc, show ? &hyps : NULL)) {
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
        printf("%s: %lld words, WER %.2f%%, PER %.2f%% (%s, CPU %.1f s)\n", data, (long long)wc.items, 100 * qkv_wer(&wc),
               100 * qkv_per(&wc), beam > 1 ? "beam search" : "greedy", (double)(clock() - c0) / CLOCKS_PER_SEC);
        seq2seq_eval_set_free(&e);
        rc = 0;
    }
    run_dir_free(&r);
    return rc;
}
