/*
 * cmd_decode.c: `qkv decode RUN [FILE...]`: read one input per line (a word for G2P) from the
 * files or stdin, and write its decoded output: "input<TAB>output" (with --nbest N, N lines per
 * input with their scores). Beam search by default; --greedy; --sample with temperature, top-k,
 * top-p and a seed; --mask-predict K [--length-beam L] for non-autoregressive runs (their
 * default). Inputs are decoded in batches of 64, or one by one as they arrive (--stream).
 * A symbol missing from the vocabulary, or an input longer than the model accepts, is an error
 * naming the file and line. Tagging and classify runs (task.h) go to their task (word/TAG
 * lines; label<TAB>probability); language-model runs too, with the search options
 * (prompt<TAB>continuation). --max-len N caps the generated symbols.
 */
#include "cli_args.h"
#include "commands.h"
#include "input_lines.h"
#include "run_dir.h"
#include "task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: qkv decode RUN [FILE...] [--beam K | --greedy | --sample | --mask-predict K] [--nbest N]\n"
               "                      [--length-beam L] [--stream] [--temperature T] [--top-k K] [--top-p P]\n"
               "                      [--seed S] [--max-len N] [--tokens] [--threads N]\n\n"
               "Decode one input per line (characters, or space-separated tokens with --tokens) read from the files\n"
               "or stdin with the model of RUN (a qkv train run directory or a model .safetensors), and print\n"
               "input<TAB>output. With --nbest N, N hypotheses per input with their log-probabilities.\n"
               "Non-autoregressive runs (model.nat) decode with mask-predict: K iterations (default 10; 1: one\n"
               "parallel pass) over the L most probable target lengths (default 5, at least N).\n\n"
               "--max-len N: at most N generated symbols, <eos> included (default: what the model's max_len allows).\n"
               "--threads N: threads (default 0: all cores); the output does not depend on it.\n\n"
               "Tagging runs print word/TAG for every token, classify runs label<TAB>probability (only --stream and\n"
               "--threads apply to them). Language-model runs (task = lm) continue each line (a prompt, possibly empty) and\n"
               "print prompt<TAB>continuation: greedy by default, or --beam / --sample with the options above.\n\n"
               "examples:\n"
               "  echo qubit | qkv decode runs/g2p\n"
               "  echo 'The jury said .' | qkv decode runs/pos\n"
               "  qkv decode runs/g2p words.txt --beam 8 --nbest 3\n"
               "  qkv decode runs/g2p words.txt --sample --temperature 0.7 --top-p 0.9 --seed 4\n"
               "  echo 'The jury' | qkv decode runs/lm-brown --sample --top-p 0.9 --max-len 80\n");
}

typedef struct {
    char **text; /* the input lines, for the output */
    int32_t *ids, *lens;
    int64_t n, n_ids, cap, cap_ids;
} pending;

static bool push(pending *p, const char *line, const int32_t *ids, int64_t len) {
    if (p->n == p->cap) {
        int64_t cap = p->cap ? 2 * p->cap : 64;
        char **t = realloc(p->text, sizeof *t * (size_t)cap);
        int32_t *l = t ? realloc(p->lens, sizeof *l * (size_t)cap) : NULL;
        if (t) p->text = t;
        if (l) p->lens = l;
        if (!t || !l) return false;
        p->cap = cap;
    }
    if (p->n_ids + len > p->cap_ids) {
        int64_t cap = 2 * (p->n_ids + len) + 64;
        int32_t *g = realloc(p->ids, sizeof *g * (size_t)cap);
        if (!g) return false;
        p->ids = g;
        p->cap_ids = cap;
    }
    p->text[p->n] = malloc(strlen(line) + 1);
    if (!p->text[p->n]) return false;
    strcpy(p->text[p->n], line);
    memcpy(p->ids + p->n_ids, ids, sizeof *ids * (size_t)len);
    p->lens[p->n++] = (int32_t)len;
    p->n_ids += len;
    return true;
}

static void clear(pending *p) {
    for (int64_t i = 0; i < p->n; i++) free(p->text[i]);
    p->n = p->n_ids = 0;
}

static bool flush(pending *p, const run_dir *r, const qkv_decode_params *dp) {
    if (!p->n) return true;
    qkv_hypotheses h;
    memset(&h, 0, sizeof h);
    if (qkv_decoder_decode(r->decoder, p->ids, p->lens, (int32_t)p->n, dp, &h)) {
        fprintf(stderr, "qkv decode: %s\n", qkv_last_error());
        return false;
    }
    for (int64_t b = 0; b < p->n; b++) {
        for (int32_t k = 0; k < h.count[b]; k++) {
            const qkv_hypothesis *hy = &h.hyp[b * h.n_best + k];
            printf("%s\t", p->text[b]);
            for (int32_t t = 0; t < hy->length; t++) {
                if (hy->tokens[t] == dp->eos_id) break;
                printf("%s%s", t ? " " : "", qkv_vocab_symbol(r->tgt, hy->tokens[t]));
            }
            if (dp->n_best > 1) printf("\t%.4f", hy->score);
            printf("\n");
        }
    }
    fflush(stdout);
    qkv_hypotheses_free(&h);
    clear(p);
    return true;
}

typedef struct {
    const run_dir *r;
    const qkv_decode_params *dp;
    bool tokens, stream;
    int64_t max_in;
    int32_t *ids; /* (max_in) */
    pending p;
} decode_lines;

/* One input line: queued, and decoded with the queue when it holds 64 (or at once with --stream).
 * An empty line prints empty lines in its place (n_best of them), so the output keeps its n_best
 * lines per input. */
static int decode_line(void *user, const char *file, int64_t line_no, char *line) {
    decode_lines *d = user;
    if (!line[0]) {
        if (!flush(&d->p, d->r, d->dp)) return 1;
        for (int32_t k = 0; k < d->dp->n_best; k++) printf("\n");
        if (d->stream) fflush(stdout);
        return 0;
    }
    int64_t len = 0;
    if (run_dir_encode(d->r, file, line_no, line, d->tokens, d->ids, d->max_in, &len)) {
        fprintf(stderr, "qkv decode: %s\n", qkv_last_error());
        return 1;
    }
    if (!push(&d->p, line, d->ids, len)) {
        fprintf(stderr, "qkv decode: out of memory\n");
        return 1;
    }
    return (d->stream || d->p.n == 64) && !flush(&d->p, d->r, d->dp);
}

int qkv_cmd_decode(int argc, char **argv) {
    const char *run = NULL;
    const char *files[256];
    int n_files = 0;
    qkv_decode_params dp = qkv_decode_default_params();
    dp.strategy = QKV_DECODE_BEAM;
    dp.beam_size = 4;
    dp.n_best = 1;
    bool stream = false, tokens = false, strategy_set = false;
    int threads = 0; /* 0: all cores */
    const char *s2s_only = NULL; /* an option of seq2seq runs */
    const char *search = NULL;   /* a search option: seq2seq runs and tasks that generate (lm) */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        static const char *const search_opts[] = {"--beam", "--greedy", "--sample", "--nbest", "--temperature",
                                                  "--top-k", "--top-p", "--seed", "--max-len"};
        bool is_search = false;
        for (size_t k = 0; k < sizeof search_opts / sizeof *search_opts; k++) is_search |= !strcmp(a, search_opts[k]);
        if (is_search) search = a;
        else if (strcmp(a, "--stream") && strcmp(a, "--threads") && a[0] == '-') s2s_only = a;
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
    if (r.task->decode_run) { /* tagging, classify, lm: task.h */
        int rc = 2;
        const char *bad = s2s_only ? s2s_only : r.task->generates ? NULL : search;
        if (bad)
            fprintf(stderr, "qkv decode: %s applies to seq2seq runs%s; %s is a %s run\n", bad,
                    s2s_only ? "" : " and language-model runs", run, r.task->name);
        else rc = r.task->decode_run(&r, files, n_files, &(task_run_opts){.run = run, .stream = stream, .layer = -1, .head = -1,
                                                                           .decode = &dp, .strategy_set = strategy_set});
        run_dir_free(&r);
        return rc;
    }
    if (r.model->cfg.nat && !strategy_set) dp.strategy = QKV_DECODE_MASK_PREDICT; /* the only way to decode it */
    if (dp.strategy == QKV_DECODE_MASK_PREDICT && dp.n_best > dp.length_beam) dp.length_beam = dp.n_best;
    dp.bos_id = QKV_VOCAB_BOS;
    dp.eos_id = QKV_VOCAB_EOS;
    /* dp.max_len: --max-len, else 0: up to the model's limit */
    const int64_t max_in = r.model->cfg.max_len;
    decode_lines d = {.r = &r, .dp = &dp, .tokens = tokens, .stream = stream, .max_in = max_in};
    d.ids = malloc(sizeof(int32_t) * (size_t)max_in);
    int rc = d.ids ? input_for_each_line("decode", files, n_files, decode_line, &d) : 1;
    if (!d.ids) fprintf(stderr, "qkv decode: out of memory\n");
    pending *const p = &d.p;
    if (rc == 0 && !flush(p, &r, &dp)) rc = 1;
    clear(p);
    free(p->text), free(p->ids), free(p->lens), free(d.ids);
    run_dir_free(&r);
    return rc;
}
