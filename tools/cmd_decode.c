/*
 * cmd_decode.c: `qkv decode RUN [FILE...]`: the options, then the run's task reads one input per
 * line from the files or stdin and writes its output (task.h, decode_run): seq2seq
 * "input<TAB>output" (seq2seq_run.c; with --nbest N, N lines per input with their scores),
 * tagging word/TAG lines, classify label<TAB>probability, lm prompt<TAB>continuation. The search
 * options (beam search; --greedy; --sample with temperature, top-k, top-p and a seed; --nbest;
 * --max-len; the length penalty and the controls of the next token) apply to the tasks that
 * generate; --tokens, --mask-predict K, --length-beam L, --allow FILE and --prefix to those that
 * transduce.
 */
#include "cli_args.h"
#include "qkv/qkv_registry.h"
#include "commands.h"
#include "run_dir.h"
#include "task.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: qkv decode RUN [FILE...] [--beam K | --greedy | --sample | --mask-predict K] [--nbest N]\n"
               "                      [--length-beam L] [--stream] [--temperature T] [--top-k K] [--top-p P]\n"
               "                      [--seed S] [--max-len N] [--length-penalty none|average|gnmt] [--alpha A]\n"
               "                      [--repetition-penalty T] [--no-repeat-ngram N] [--allow FILE] [--prefix]\n"
               "                      [--tokens] [--threads N]\n\n"
               "Decode one input per line (characters, or space-separated tokens with --tokens) read from the files\n"
               "or stdin with the model of RUN (a qkv train run directory or a model .safetensors), and print\n"
               "input<TAB>output. With --nbest N, N hypotheses per input with their log-probabilities.\n"
               "Non-autoregressive runs (model.nat) decode with mask-predict: K iterations (default 10; 1: one\n"
               "parallel pass) over the L most probable target lengths (default 5, at least N).\n\n"
               "--max-len N: at most N generated symbols, <eos> included (default: what the model's max_len allows).\n"
               "--threads N: threads (default 0: all cores); the output does not depend on it.\n"
               "--length-penalty, --alpha: how beam search ranks finished hypotheses of different lengths\n"
               "  (default average; gnmt divides by ((5 + length) / 6)^alpha, alpha default 0.6).\n"
               "--repetition-penalty T: a token already in the output has its logit divided by T (> 0) when\n"
               "  positive, multiplied when negative (CTRL); --no-repeat-ngram N: no N-gram twice.\n"
               "--allow FILE: only the target symbols of the text of FILE (and <eos>) are generated.\n"
               "--prefix: each input is source<TAB>prefix; the output starts with the prefix (cut as targets).\n\n"
               "Tagging runs print word/TAG for every token, classify runs label<TAB>probability (only --stream and\n"
               "--threads apply to them). Language-model runs (task = lm) continue each line (a prompt, possibly empty) and\n"
               "print prompt<TAB>continuation: greedy by default, or --beam / --sample with the options above.\n\n"
               "examples:\n"
               "  echo qubit | qkv decode runs/g2p\n"
               "  echo 'The jury said .' | qkv decode runs/pos\n"
               "  qkv decode runs/g2p words.txt --beam 8 --nbest 3\n"
               "  qkv decode runs/g2p words.txt --sample --temperature 0.7 --top-p 0.9 --seed 4\n"
               "  echo 'The jury' | qkv decode runs/lm-brown --sample --top-p 0.9 --max-len 80\n"
               "  printf 'The dog ate.\\tEl perro\\n' | qkv decode runs/en-es --prefix --no-repeat-ngram 3\n");
}

int qkv_cmd_decode(int argc, char **argv) {
    const char *run = NULL;
    const char *files[256];
    int n_files = 0;
    qkv_decode_params dp = qkv_decode_default_params();
    dp.strategy = QKV_DECODE_BEAM;
    dp.beam_size = 4;
    dp.n_best = 1;
    bool stream = false, tokens = false, strategy_set = false, prefix = false;
    const char *allow = NULL;
    int threads = 0; /* 0: all cores */
    const char *transducer_only = NULL; /* an option of the tasks that transduce (seq2seq) */
    const char *search = NULL;          /* a search option: the tasks that generate (seq2seq, lm) */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        static const char *const search_opts[] = {"--beam",        "--greedy",           "--sample",
                                                  "--nbest",       "--temperature",      "--top-k",
                                                  "--top-p",       "--seed",             "--max-len",
                                                  "--alpha",       "--length-penalty",   "--repetition-penalty",
                                                  "--no-repeat-ngram"};
        bool is_search = false;
        for (size_t k = 0; k < sizeof search_opts / sizeof *search_opts; k++) is_search |= !strcmp(a, search_opts[k]);
        if (is_search) search = a;
        else if (strcmp(a, "--stream") && strcmp(a, "--threads") && a[0] == '-') transducer_only = a;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--beam")) {
            dp.strategy = QKV_DECODE_BEAM, strategy_set = true;
            if (!cli_int_option("qkv decode", argc, argv, &i, 1, 1024, &dp.beam_size)) return 2;
        } else if (!strcmp(a, "--greedy")) {
            dp.strategy = QKV_DECODE_GREEDY, strategy_set = true;
        } else if (!strcmp(a, "--sample")) {
            dp.strategy = QKV_DECODE_SAMPLE, strategy_set = true;
        } else if (!strcmp(a, "--mask-predict")) {
            dp.strategy = QKV_DECODE_MASK_PREDICT, strategy_set = true;
            if (!cli_int_option("qkv decode", argc, argv, &i, 1, 1000, &dp.iterations)) return 2;
        } else if (!strcmp(a, "--length-beam")) {
            if (!cli_int_option("qkv decode", argc, argv, &i, 1, 1024, &dp.length_beam)) return 2;
        } else if (!strcmp(a, "--nbest")) {
            if (!cli_int_option("qkv decode", argc, argv, &i, 1, 1024, &dp.n_best)) return 2;
        } else if (!strcmp(a, "--temperature")) {
            if (!cli_real_option("qkv decode", argc, argv, &i, 0, 1e6, false, &dp.temperature)) return 2;
        } else if (!strcmp(a, "--top-k")) {
            if (!cli_int_option("qkv decode", argc, argv, &i, 0, INT32_MAX, &dp.top_k)) return 2;
        } else if (!strcmp(a, "--top-p")) {
            if (!cli_real_option("qkv decode", argc, argv, &i, 0, 1, true, &dp.top_p)) return 2;
        } else if (!strcmp(a, "--seed")) {
            if (!cli_u64_option("qkv decode", argc, argv, &i, &dp.seed)) return 2;
        } else if (!strcmp(a, "--max-len")) {
            if (!cli_int_option("qkv decode", argc, argv, &i, 1, 1000000, &dp.max_len)) return 2;
        } else if (!strcmp(a, "--alpha")) {
            if (!cli_real_option("qkv decode", argc, argv, &i, 0, 10, false, &dp.alpha)) return 2;
        } else if (!strcmp(a, "--length-penalty") && i + 1 < argc) {
            int v;
            if (qkv_registry_parse(QKV_REGISTRY_LENGTH_PENALTY, argv[++i], &v)) {
                cli_print_error("qkv decode: --length-penalty: ");
                return 2;
            }
            dp.length_penalty = (qkv_length_penalty)v;
        } else if (!strcmp(a, "--repetition-penalty")) {
            if (!cli_real_option("qkv decode", argc, argv, &i, 0, 1e3, true, &dp.repetition_penalty)) return 2;
        } else if (!strcmp(a, "--no-repeat-ngram")) {
            if (!cli_int_option("qkv decode", argc, argv, &i, 0, 1000, &dp.no_repeat_ngram)) return 2;
        } else if (!strcmp(a, "--allow") && i + 1 < argc) {
            allow = argv[++i];
        } else if (!strcmp(a, "--prefix")) {
            prefix = true;
        } else if (!strcmp(a, "--threads")) {
            if (!cli_int_option("qkv decode", argc, argv, &i, 0, 4096, &threads)) return 2;
        } else if (!strcmp(a, "--stream")) {
            stream = true;
        } else if (!strcmp(a, "--tokens")) {
            tokens = true;
        } else if (a[0] != '-' && !run) {
            run = a;
        } else if (a[0] != '-' && n_files < 256) {
            files[n_files++] = a;
        } else {
            fprintf(stderr, "qkv decode: unexpected argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!run) {
        usage(stderr);
        return 2;
    }
    qkv_set_num_threads(threads);
    if (dp.strategy == QKV_DECODE_BEAM && dp.n_best > dp.beam_size) dp.beam_size = dp.n_best;
    run_dir r;
    if (run_dir_load(run, &r)) {
        fprintf(stderr, "qkv decode: %s\n", qkv_last_error());
        return 1;
    }
    int rc = 2;
    if (task_takes_option("decode", r.task, transducer_only, TASK_TRANSDUCES, run) &&
        task_takes_option("decode", r.task, search, TASK_GENERATES, run))
        rc = r.task->decode_run(&r, files, n_files,
                                &(task_run_opts){.run = run, .stream = stream, .layer = -1, .head = -1, .kind = -1,
                                                 .decode = &dp, .strategy_set = strategy_set, .src_tokens = tokens,
                                                 .allow = allow, .prefix = prefix});
    run_dir_free(&r);
    return rc;
}
