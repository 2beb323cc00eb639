/*
 * cmd_attn.c: `qkv attn RUN INPUT [--out DIR] [--terminal] [--layer L] [--head H]`: the options,
 * checked against the model's layers and heads before any forward pass, then the run's task
 * draws the attention maps of every layer and head for INPUT (task.h, attn_run): SVG and PNG per
 * map and an index.html (qkv_viz.h), and with --terminal shaded maps. seq2seq: seq2seq_attn.c;
 * tagging and classify: encoder_lines.c; lm and image: their task files. --kind and --tokens
 * apply to the tasks that transduce (two stacks, three kinds of attention).
 */
#include "cli_args.h"
#include "commands.h"
#include "run_dir.h"
#include "task.h"
#include "qkv/qkv_viz.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: qkv attn RUN INPUT [--out DIR] [--terminal] [--layer L] [--head H] [--kind self|masked|cross]\n"
               "                [--tokens]\n\n"
               "Write the attention maps of every layer and head for one input (SVG + PNG per map and an\n"
               "index.html; default DIR: RUN/attn) and, with --terminal, print shaded maps: the ones selected by\n"
               "--layer / --head / --kind, by default every head of the last decoder layer's cross-attention.\n"
               "Tagging and classify runs: INPUT is space-separated tokens, the maps are the encoder's\n"
               "self-attention, by default every head of the last layer.\n\n"
               "examples:\n"
               "  qkv attn runs/g2p transformer --terminal\n"
               "  qkv attn runs/pos 'The jury said .' --terminal --layer 0\n");
}


/* Whether --layer L / --head H (negative: not given) name maps the run has, checked before any
 * forward pass; a message otherwise. Task runs have one stack (cfg.n_encoder_layers: the encoder,
 * or a language model's decoder); seq2seq maps of --kind self come from the encoder (and a nat
 * decoder's own self-attention), masked and cross from the decoder, and without --kind from
 * either. */
static bool layer_and_head_exist(const qkv_model_config *c, bool task_run, int kind, int layer, int head) {
    const int enc = c->n_encoder_layers, dec = c->n_decoder_layers;
    int layers = enc;
    char what[96];
    if (task_run) {
        snprintf(what, sizeof what, "its %s has %d layer%s", c->arch == QKV_ARCH_DECODER ? "decoder" : "encoder", enc,
                 enc == 1 ? "" : "s");
    } else if (kind == QKV_ATTN_MASKED_SELF || kind == QKV_ATTN_CROSS) {
        layers = dec;
        snprintf(what, sizeof what, "its decoder has %d layer%s", dec, dec == 1 ? "" : "s");
    } else if (kind == QKV_ATTN_SELF && !c->nat) {
        snprintf(what, sizeof what, "its encoder has %d layer%s", enc, enc == 1 ? "" : "s");
    } else {
        layers = enc > dec ? enc : dec;
        snprintf(what, sizeof what, "it has %d encoder and %d decoder layers", enc, dec);
    }
    if (layer < layers && head < c->n_heads) return true;
    fprintf(stderr, "qkv attn: %s %d is not in the model: %s and %d head%s (numbered from 0)\n",
            layer >= layers ? "--layer" : "--head", layer >= layers ? layer : head, what, (int)c->n_heads,
            c->n_heads == 1 ? "" : "s");
    return false;
}

int qkv_cmd_attn(int argc, char **argv) {
    const char *run = NULL, *input = NULL, *out_dir = NULL;
    bool terminal = false, tokens = false;
    int only_layer = -1, only_head = -1, only_kind = -1;
    const char *transducer_only = NULL; /* an option of the tasks that transduce (seq2seq) */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            out_dir = argv[++i];
        } else if (!strcmp(argv[i], "--terminal")) {
            terminal = true;
        } else if (!strcmp(argv[i], "--tokens")) {
            transducer_only = argv[i];
            tokens = true;
        } else if (!strcmp(argv[i], "--layer")) {
            if (!cli_int_option("qkv attn", argc, argv, &i, 0, 1000000, &only_layer)) return 2;
        } else if (!strcmp(argv[i], "--head")) {
            if (!cli_int_option("qkv attn", argc, argv, &i, 0, 1000000, &only_head)) return 2;
        } else if (!strcmp(argv[i], "--kind") && i + 1 < argc) {
            transducer_only = argv[i];
            const char *k = argv[++i];
            only_kind = !strcmp(k, "self") ? QKV_ATTN_SELF : !strcmp(k, "masked") ? QKV_ATTN_MASKED_SELF
                        : !strcmp(k, "cross") ? QKV_ATTN_CROSS : -2;
            if (only_kind == -2) {
                fprintf(stderr, "qkv attn: --kind must be self, masked or cross, not '%s'\n", k);
                return 2;
            }
        } else if (argv[i][0] != '-' && !run) {
            run = argv[i];
        } else if (argv[i][0] != '-' && !input) {
            input = argv[i];
        } else {
            fprintf(stderr, "qkv attn: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!run || !input || !*input) {
        usage(stderr);
        return 2;
    }
    run_dir r;
    if (run_dir_load(run, &r)) {
        fprintf(stderr, "qkv attn: %s\n", qkv_last_error());
        return 1;
    }
    const qkv_model_config *c = &r.model->cfg;
    if (!layer_and_head_exist(c, !r.task->transduces, only_kind, only_layer, only_head)) {
        run_dir_free(&r);
        return 2;
    }
    int rc = 2;
    if (task_takes_option("attn", r.task, transducer_only, TASK_TRANSDUCES, run))
        rc = r.task->attn_run(&r, input,
                              &(task_run_opts){.run = run, .out_dir = out_dir, .terminal = terminal, .layer = only_layer,
                                               .head = only_head, .kind = only_kind, .src_tokens = tokens});
    run_dir_free(&r);
    return rc;
}
