/*
 * seq2seq_attn.c: `qkv attn` on a seq2seq run (task.h, attn_run): decode INPUT greedily, then run
 * the model once more with teacher forcing on (input, output) and keep the attention weights of
 * every layer and head: encoder self-attention, decoder masked self-attention and
 * cross-attention. Writes one SVG and one PNG per map and an index.html showing them all
 * (qkv_viz.h); --terminal also prints shaded maps (by default the last decoder layer's
 * cross-attention, every head; --layer, --head and --kind pick others).
 *
 * Axes: encoder maps have the input symbols on both axes; decoder rows are labelled with the token
 * each position predicts (y1 .. yn, <eos>), decoder columns with the decoder inputs (<bos>,
 * y1 .. yn) for self-attention and the input symbols for cross-attention. A non-autoregressive run
 * (model.nat) decodes INPUT by mask-predict and its decoder reads the output itself (y1 .. yn, no
 * <bos> / <eos>), every position seeing every other.
 */
#include "run_dir.h"
#include "seq2seq_task.h"
#include "qkv/qkv_viz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { MAX_LEN = 512 };

/* Where the maps go: --out DIR, else RUN/attn (./attn for a model file). */
static void output_dir(const task_run_opts *o, char *dir, size_t size) {
    if (o->out_dir) {
        snprintf(dir, size, "%s", o->out_dir);
        return;
    }
    const size_t n = strlen(o->run);
    const bool file = n > 12 && !strcmp(o->run + n - 12, ".safetensors");
    snprintf(dir, size, "%s%s", file ? "attn" : o->run, file ? "" : "/attn");
}

/* --terminal: the maps --layer / --head / --kind pick, by default every head of the last decoder
 * layer's cross-attention. Nonzero after a failure (qkv_last_error()). */
static qkv_status print_maps(const qkv_attn_map *maps, int64_t n_maps, const qkv_model_config *c,
                             const task_run_opts *o) {
    const bool filtered = o->layer >= 0 || o->head >= 0 || o->kind >= 0;
    for (int64_t i = 0; i < n_maps; i++) {
        const qkv_attn_map *m = &maps[i];
        const bool pick = filtered ? (o->layer < 0 || m->layer == o->layer) && (o->head < 0 || m->head == o->head) &&
                                         (o->kind < 0 || (int)m->kind == o->kind)
                                   : m->kind == QKV_ATTN_CROSS && m->layer == c->n_decoder_layers - 1;
        if (!pick) continue;
        printf("\n");
        qkv_status st = qkv_attn_terminal(stdout, m, NULL);
        if (st) return st;
    }
    return QKV_OK;
}

int seq2seq_attn_run(run_dir *r, const char *input, const task_run_opts *o) {
    const qkv_model_config *c = &r->model->cfg;
    const bool terminal = o->terminal, tokens = o->src_tokens;
    int rc = 1;
    qkv_ctx *ctx = NULL;
    qkv_hypotheses h;
    memset(&h, 0, sizeof h);
    qkv_attn_map *maps = NULL;
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
    if (run_dir_encode(r, "<input>", 1, input, run_dir_src_tokenizer(r, tokens), src, c->max_len < MAX_LEN ? c->max_len : MAX_LEN, &n_src)) {
        fprintf(stderr, "qkv attn: %s\n", qkv_last_error());
        goto done;
    }
    S = (int32_t)n_src;
    for (int32_t i = 0; i < S; i++) src_label[i] = qkv_vocab_symbol(r->src, src[i]);
    /* the output, greedily */
    qkv_decode_params dp = qkv_decode_default_params();
    dp.strategy = c->nat ? QKV_DECODE_MASK_PREDICT : QKV_DECODE_GREEDY;
    dp.bos_id = QKV_VOCAB_BOS;
    dp.eos_id = QKV_VOCAB_EOS;
    dp.max_len = c->max_len < MAX_LEN ? 0 : MAX_LEN - 1; /* the model's limit, within the label arrays */
    if (qkv_decode(r->model, src, &S, 1, &dp, &h)) {
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
        out_label[t] = qkv_vocab_symbol(r->tgt, h.hyp[0].tokens[t]);
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
    qkv_tensor *memory = qkv_model_encode(ctx, r->model, src_t, w_enc);
    qkv_model_decode(ctx, r->model, tgt_t, memory, src_t, w_self, w_cross);
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
    output_dir(o, dir, sizeof dir);
    qkv_attn_page page = {.title = input, .input_tokens = src_label, .n_input = S, .output_tokens = out_label,
                          .n_output = T, .maps = maps, .n_maps = n_maps};
    mkdir(dir, 0777);
    if (qkv_attn_export(dir, &page, NULL)) goto fail;
    printf("%lld attention maps (%d encoder + %d decoder layers x %lld heads): %s/index.html\n", (long long)n_maps,
           c->n_encoder_layers, c->n_decoder_layers, (long long)H, dir);
    if (terminal && print_maps(maps, n_maps, c, o)) goto fail;
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "qkv attn: %s\n", qkv_last_error());
done:
    free(maps);
    free(w_enc), free(w_self), free(w_cross);
    qkv_ctx_free(ctx);
    qkv_hypotheses_free(&h);
    return rc;
}
