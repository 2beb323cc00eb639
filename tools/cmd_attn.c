/*
 * cmd_attn.c: `qkv attn RUN INPUT [--out DIR] [--terminal] [--layer L] [--head H]`: decode INPUT
 * greedily with the model of RUN, then run the model once more with teacher forcing on (input,
 * output) and keep the attention weights of every layer and head: encoder self-attention, decoder
 * masked self-attention and cross-attention. Writes one SVG and one PNG per map and an index.html
 * showing them all (qkv_viz.h); --terminal also prints shaded maps (by default the last decoder
 * layer's cross-attention, every head).
 *
 * Axes: encoder maps have the input symbols on both axes; decoder rows are labelled with the token
 * each position predicts (y1 .. yn, <eos>), decoder columns with the decoder inputs (<bos>,
 * y1 .. yn) for self-attention and the input symbols for cross-attention. A non-autoregressive run
 * (model.nat) decodes INPUT by mask-predict and its decoder reads the output itself (y1 .. yn, no
 * <bos> / <eos>), every position seeing every other.
 *
 * Tagging and classify runs (task.h) go to their task: encoder self-attention over the input
 * tokens, with the predicted tags or label (encoder_lines.c).
 */
#include "cli_args.h"
#include "commands.h"
#include "run_dir.h"
#include "task.h"
#include "qkv/qkv_viz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

enum { MAX_LEN = 512 };

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
    const char *s2s_only = NULL; /* an option of seq2seq runs */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            out_dir = argv[++i];
        } else if (!strcmp(argv[i], "--terminal")) {
            terminal = true;
        } else if (!strcmp(argv[i], "--tokens")) {
            s2s_only = argv[i];
            tokens = true;
        } else if (!strcmp(argv[i], "--layer")) {
            if (!cli_int_option("qkv attn", argc, argv, &i, 0, 1000000, &only_layer)) return 2;
        } else if (!strcmp(argv[i], "--head")) {
            if (!cli_int_option("qkv attn", argc, argv, &i, 0, 1000000, &only_head)) return 2;
        } else if (!strcmp(argv[i], "--kind") && i + 1 < argc) {
            s2s_only = argv[i];
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
    if (!layer_and_head_exist(c, r.task->attn_run != NULL, only_kind, only_layer, only_head)) {
        run_dir_free(&r);
        return 2;
    }
    if (r.task->attn_run) { /* tagging, classify, lm, image: task.h */
        int rc = 2;
        if (s2s_only) fprintf(stderr, "qkv attn: %s applies to seq2seq runs; %s is a %s run\n", s2s_only, run, r.task->name);
        else rc = r.task->attn_run(&r, input, &(task_run_opts){.run = run, .out_dir = out_dir, .terminal = terminal,
                                                               .layer = only_layer, .head = only_head});
        run_dir_free(&r);
        return rc;
    }
    int rc = 1;
    qkv_ctx *ctx = NULL;
    qkv_hypotheses h;
    memset(&h, 0, sizeof h);
    qkv_attn_map *maps = NULL;
    char **labels = NULL;
    qkv_tensor **w_enc = calloc((size_t)c->n_encoder_layers, sizeof *w_enc);
    qkv_tensor **w_self = calloc((size_t)c->n_decoder_layers, sizeof *w_self);
    qkv_tensor **w_cross = calloc((size_t)c->n_decoder_layers, sizeof *w_cross);
    if (!w_enc || !w_self || !w_cross) {
        fprintf(stderr, "qkv attn: out of memory\n");
        goto done;
    }
    /* the input symbols */
    int32_t src[MAX_LEN];
    const char *src_label[MAX_LEN];
    int32_t S = 0;
    int64_t n_src = 0;
    if (run_dir_encode(&r, "<input>", 1, input, tokens, src, c->max_len < MAX_LEN ? c->max_len : MAX_LEN, &n_src)) {
        fprintf(stderr, "qkv attn: %s\n", qkv_last_error());
        goto done;
    }
    S = (int32_t)n_src;
    for (int32_t i = 0; i < S; i++) src_label[i] = qkv_vocab_symbol(r.src, src[i]);
    /* the output, greedily */
    qkv_decode_params dp = qkv_decode_default_params();
    dp.strategy = c->nat ? QKV_DECODE_MASK_PREDICT : QKV_DECODE_GREEDY;
    dp.bos_id = QKV_VOCAB_BOS;
    dp.eos_id = QKV_VOCAB_EOS;
    dp.max_len = c->max_len < MAX_LEN ? 0 : MAX_LEN - 1; /* the model's limit, within the label arrays */
    if (qkv_decode(r.model, src, &S, 1, &dp, &h)) {
        fprintf(stderr, "qkv attn: %s\n", qkv_last_error());
        goto done;
    }
    const int32_t n_out = h.hyp[0].length; /* includes <eos> when finished */
    int32_t tgt_in[MAX_LEN];
    const char *in_label[MAX_LEN], *out_label[MAX_LEN];
    const int32_t T = n_out < MAX_LEN ? n_out : MAX_LEN - 1;
    tgt_in[0] = QKV_VOCAB_BOS;
    in_label[0] = "<bos>";
    for (int32_t t = 0; t < T; t++) {
        out_label[t] = qkv_vocab_symbol(r.tgt, h.hyp[0].tokens[t]);
        if (c->nat) { /* the decoder reads the output itself */
            tgt_in[t] = h.hyp[0].tokens[t];
            in_label[t] = out_label[t];
        } else if (t + 1 < T) {
            tgt_in[t + 1] = h.hyp[0].tokens[t];
            in_label[t + 1] = out_label[t];
        }
    }
    printf("%s ->", input);
    for (int32_t t = 0; t < T; t++)
        if (h.hyp[0].tokens[t] != QKV_VOCAB_EOS) printf(" %s", out_label[t]);
    printf("\n");
    /* teacher-forced pass keeping every weight */
    qkv_ctx_params cp = qkv_ctx_default_params();
    if (qkv_ctx_new(&cp, &ctx)) goto fail;
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_tensor *src_t = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){1, S}, src);
    qkv_tensor *tgt_t = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){1, T}, tgt_in);
    qkv_tensor *memory = qkv_model_encode(ctx, r.model, src_t, w_enc);
    qkv_model_decode(ctx, r.model, tgt_t, memory, src_t, w_self, w_cross);
    if (qkv_ctx_status(ctx)) goto fail;
    const int64_t H = c->n_heads, n_maps = H * (c->n_encoder_layers + 2 * c->n_decoder_layers);
    maps = calloc((size_t)n_maps, sizeof *maps);
    if (!maps) goto fail;
    int64_t k = 0;
    for (int stack = 0; stack < 3; stack++) {
        const int layers = stack == 0 ? c->n_encoder_layers : c->n_decoder_layers;
        for (int l = 0; l < layers; l++)
            for (int64_t hd = 0; hd < H; hd++, k++) {
                qkv_tensor *w = stack == 0 ? w_enc[l] : stack == 1 ? w_self[l] : w_cross[l]; /* (1, H, rows, cols) */
                const int64_t rows = w->shape[2], cols = w->shape[3];
                maps[k] = (qkv_attn_map){.stack = stack == 0 ? "encoder" : "decoder", .layer = l, .head = (int)hd,
                                         .kind = stack == 0 || (stack == 1 && c->nat) ? QKV_ATTN_SELF
                                                 : stack == 1                      ? QKV_ATTN_MASKED_SELF
                                                                                   : QKV_ATTN_CROSS,
                                         .rows = rows, .cols = cols, .dtype = QKV_REAL,
                                         .weights = (const qkv_real *)w->data + hd * rows * cols,
                                         .row_labels = stack == 0 ? src_label : out_label,
                                         .col_labels = stack == 2 || stack == 0 ? src_label : in_label};
            }
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", out_dir ? out_dir : "");
    if (!out_dir) {
        const size_t n = strlen(run);
        const bool file = n > 12 && !strcmp(run + n - 12, ".safetensors");
        snprintf(dir, sizeof dir, "%s%s", file ? "attn" : run, file ? "" : "/attn");
    }
    qkv_attn_page page = {.title = input, .input_tokens = src_label, .n_input = S, .output_tokens = out_label,
                          .n_output = T, .maps = maps, .n_maps = n_maps};
    mkdir(dir, 0777);
    if (qkv_attn_export(dir, &page, NULL)) goto fail;
    printf("%lld attention maps (%d encoder + %d decoder layers x %lld heads): %s/index.html\n", (long long)n_maps,
           c->n_encoder_layers, c->n_decoder_layers, (long long)H, dir);
    if (terminal) {
        for (int64_t i = 0; i < n_maps; i++) {
            const qkv_attn_map *m = &maps[i];
            const bool filtered = only_layer >= 0 || only_head >= 0 || only_kind >= 0;
            const bool pick = filtered ? (only_layer < 0 || m->layer == only_layer) && (only_head < 0 || m->head == only_head) &&
                                             (only_kind < 0 || (int)m->kind == only_kind)
                                       : m->kind == QKV_ATTN_CROSS && m->layer == c->n_decoder_layers - 1;
            if (!pick) continue;
            printf("\n");
            if (qkv_attn_terminal(stdout, m, NULL)) goto fail;
        }
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "qkv attn: %s\n", qkv_last_error());
done:
    free(labels);
    free(maps);
    free(w_enc), free(w_self), free(w_cross);
    qkv_ctx_free(ctx);
    qkv_hypotheses_free(&h);
    run_dir_free(&r);
    return rc;
}
