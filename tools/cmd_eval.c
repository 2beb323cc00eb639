/*
 * cmd_eval.c: `qkv eval RUN DATA [--beam K | --greedy | --mask-predict K] [--show N]`: the options,
 * then the run's task scores the model on DATA (task.h, eval_run): seq2seq the WER and PER of
 * its decodes (seq2seq_run.c), tagging and classify their accuracies, lm its cross-entropy, image
 * its accuracy. The search options apply to the tasks whose evaluation decodes (transduces).
 */
#include "cli_args.h"
#include "commands.h"
#include "run_dir.h"
#include "task.h"

#include <stdio.h>
#include <string.h>

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
    int show = 0, threads = 0, beam = 4, iterations = 0, length_beam = 5;
    bool tokens = false, strategy_set = false;
    const char *search_option = NULL; /* an option of the tasks whose evaluation searches */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--beam")) {
            search_option = argv[i];
            iterations = 0, strategy_set = true;
            if (!cli_int_option("qkv eval", argc, argv, &i, 1, 1024, &beam)) return 2;
        } else if (!strcmp(argv[i], "--greedy")) {
            search_option = argv[i];
            beam = 1, iterations = 0, strategy_set = true;
        } else if (!strcmp(argv[i], "--mask-predict")) {
            search_option = argv[i];
            strategy_set = true;
            if (!cli_int_option("qkv eval", argc, argv, &i, 1, 1000, &iterations)) return 2;
        } else if (!strcmp(argv[i], "--length-beam")) {
            search_option = argv[i];
            if (!cli_int_option("qkv eval", argc, argv, &i, 1, 1024, &length_beam)) return 2;
        } else if (!strcmp(argv[i], "--tokens")) {
            search_option = argv[i];
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
    qkv_decode_params search = qkv_decode_default_params();
    search.strategy = iterations > 0 ? QKV_DECODE_MASK_PREDICT : beam > 1 ? QKV_DECODE_BEAM : QKV_DECODE_GREEDY;
    search.beam_size = beam;
    search.iterations = iterations > 0 ? iterations : search.iterations;
    search.length_beam = length_beam;
    qkv_set_num_threads(threads);
    run_dir r;
    if (run_dir_load(run, &r)) {
        fprintf(stderr, "qkv eval: %s\n", qkv_last_error());
        return 1;
    }
    int rc = 2;
    if (task_takes_option("eval", r.task, search_option, TASK_TRANSDUCES, run))
        rc = r.task->eval_run(&r, data,
                              &(task_run_opts){.run = run, .show = show, .decode = &search,
                                               .strategy_set = strategy_set, .src_tokens = tokens});
    run_dir_free(&r);
    return rc;
}
