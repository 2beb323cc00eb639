/* encoder_lines.c: see encoder_lines.h. */
#include "encoder_lines.h"
#include "input_lines.h"
#include "task.h"

#include "qkv/qkv_viz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static bool grow(void **p, int64_t need, size_t elem) {
    void *g = realloc(*p, elem * (size_t)need);
    if (!g) return false;
    *p = g;
    return true;
}

/* Make room for n_lines lines and n_tokens tokens in every array. */
static bool reserve(enc_lines *l, const enc_input *in, int64_t n_lines, int64_t n_tokens) {
    const int64_t F = in->s.n_features;
    if (n_lines > l->cap_lines) {
        const int64_t cap = n_lines > 2 * l->cap_lines ? n_lines : 2 * l->cap_lines;
        if (!grow((void **)&l->text, cap, sizeof *l->text) ||
            !grow((void **)&l->start, cap + 1, sizeof *l->start) ||
            !grow((void **)&l->row, cap, sizeof *l->row))
            return false;
        l->cap_lines = cap;
    }
    if (n_tokens > l->cap_tokens) {
        const int64_t cap = n_tokens > 2 * l->cap_tokens ? n_tokens : 2 * l->cap_tokens;
        if (!grow((void **)&l->tok, cap, sizeof *l->tok) ||
            !grow((void **)&l->tok_len, cap, sizeof *l->tok_len) ||
            !grow((void **)&l->words, cap, sizeof *l->words) ||
            !grow((void **)&l->feats, cap * F + 1, sizeof *l->feats))
            return false;
        l->cap_tokens = cap;
    }
    return true;
}

/* Where a line's words go while the tokenizer cuts it: their spans in the line's copy. */
typedef struct line_words {
    enc_lines *l;
    const enc_input *in;
    char *copy;
    const char *file;
    int64_t line_no, k, max_len;
} line_words;

static qkv_status add_word(void *ctx, size_t off, size_t len, const char *sym, size_t sym_len) {
    (void)sym, (void)sym_len;
    line_words *w = ctx;
    enc_lines *l = w->l;
    qkv_status st = QKV_OK;
    if (w->k - l->start[l->n] == w->max_len)
        st = qkv_set_error(QKV_ERR_SHAPE, "%s:%lld: input longer than the model's limit of %lld tokens", w->file,
                           (long long)w->line_no, (long long)w->max_len);
    else if (!reserve(l, w->in, l->n + 1, w->k + 1))
        st = qkv_set_error(QKV_ERR_OOM, "out of memory");
    if (!st) {
        l->tok[w->k] = w->copy + off;
        l->tok_len[w->k++] = (int64_t)len;
    }
    return st;
}

qkv_status enc_lines_add(enc_lines *l, const enc_input *in, const char *file, int64_t line_no,
                         const char *text, int64_t max_len) {
    const int64_t F = in->s.n_features;
    const size_t n = strlen(text);
    if (!reserve(l, in, l->n + 1, 0)) return qkv_set_error(QKV_ERR_OOM, "out of memory");
    char *copy = malloc(n + 1);
    if (!copy) return qkv_set_error(QKV_ERR_OOM, "out of memory");
    memcpy(copy, text, n + 1);
    if (l->n == 0) l->start[0] = 0;
    /* the words (runs of bytes other than space and TAB), then each one NUL-terminated in place
     * (the separator after it: once the whole line is cut) and looked up with its features */
    line_words w = {.l = l, .in = in, .copy = copy, .file = file, .line_no = line_no, .k = l->start[l->n],
                    .max_len = max_len};
    qkv_status st =
        input_line_split(qkv_tokenizer_shared(QKV_TOKENIZER_WORDS), file, line_no, copy, n, "input", add_word, &w);
    for (int64_t k = l->start[l->n]; !st && k < w.k; k++) {
        copy[l->tok[k] - copy + l->tok_len[k]] = '\0';
        st = enc_input_token(in, l->tok[k], (size_t)l->tok_len[k], &l->words[k], l->feats + k * F);
    }
    if (st) {
        free(copy);
        return st;
    }
    l->text[l->n] = copy;
    l->start[++l->n] = w.k;
    return QKV_OK;
}

void enc_lines_clear(enc_lines *l) {
    for (int64_t i = 0; i < l->n; i++)
        free(l->text[i]);
    l->n = 0;
}

void enc_lines_free(enc_lines *l) {
    enc_lines_clear(l);
    free(l->text), free(l->start), free(l->tok), free(l->tok_len), free(l->words), free(l->feats),
        free(l->row);
    memset(l, 0, sizeof *l);
}

qkv_tensor *enc_lines_logits(qkv_ctx *ctx, const qkv_model *m, enc_lines *l,
                             qkv_tensor **weights_out) {
    const int64_t F = m->cfg.n_features;
    int64_t B = 0, S = 0;
    for (int64_t i = 0; i < l->n; i++) {
        const int64_t len = l->start[i + 1] - l->start[i];
        l->row[i] = len ? B++ : -1;
        if (len > S) S = len;
    }
    if (B == 0) return NULL;
    qkv_tensor *src = qkv_tensor_zeros(ctx, QKV_I32, 2, (int64_t[]){B, S}); /* <pad> = 0 */
    qkv_tensor *feats = F ? qkv_tensor_zeros(ctx, QKV_I32, 3, (int64_t[]){B, S, F}) : NULL;
    if (!src || (F && !feats)) return NULL;
    for (int64_t i = 0; i < l->n; i++) {
        if (l->row[i] < 0) continue;
        const int64_t len = l->start[i + 1] - l->start[i], r = l->row[i];
        memcpy((int32_t *)src->data + r * S, l->words + l->start[i], sizeof(int32_t) * (size_t)len);
        if (F)
            memcpy((int32_t *)feats->data + r * S * F, l->feats + l->start[i] * F,
                   sizeof(int32_t) * (size_t)(len * F));
    }
    return qkv_model_classify_features(ctx, m, src, feats, weights_out);
}

static bool flush(const run_dir *r, qkv_ctx *ctx, enc_lines *l, enc_print_fn print, void *user) {
    if (!l->n) return true;
    qkv_ctx_reset(ctx);
    qkv_tensor *logits = enc_lines_logits(ctx, r->model, l, NULL);
    if (qkv_ctx_status(ctx)) {
        fprintf(stderr, "qkv decode: %s\n", qkv_last_error());
        return false;
    }
    print(user, l, logits);
    fflush(stdout);
    enc_lines_clear(l);
    return true;
}

typedef struct decode_state {
    const run_dir *r;
    const enc_input *in;
    qkv_ctx *ctx;
    enc_lines l;
    bool stream;
    enc_print_fn print;
    void *user;
} decode_state;

static int decode_line(void *user, const char *file, int64_t line_no, char *line) {
    decode_state *d = user;
    if (enc_lines_add(&d->l, d->in, file, line_no, line, d->r->model->cfg.max_len)) {
        fprintf(stderr, "qkv decode: %s\n", qkv_last_error());
        return 1;
    }
    return (d->stream || d->l.n == 64) && !flush(d->r, d->ctx, &d->l, d->print, d->user);
}

int enc_decode_files(const run_dir *r, const enc_input *in, const char *const *files, int n_files,
                     bool stream, enc_print_fn print, void *user) {
    decode_state d = {.r = r, .in = in, .stream = stream, .print = print, .user = user};
    qkv_ctx_params cp = qkv_ctx_default_params();
    if (qkv_ctx_new(&cp, &d.ctx)) {
        fprintf(stderr, "qkv decode: %s\n", qkv_last_error());
        return 1;
    }
    qkv_ctx_set_grad_enabled(d.ctx, false);
    qkv_ctx_set_training(d.ctx, false);
    int rc = input_for_each_line("decode", files, n_files, decode_line, &d);
    if (rc == 0 && !flush(r, d.ctx, &d.l, print, user)) rc = 1;
    enc_lines_free(&d.l);
    qkv_ctx_free(d.ctx);
    return rc;
}

int enc_attn(const run_dir *r, const char *run, const enc_input *in, const char *input,
             const char *out_dir, bool terminal, int layer, int head) {
    const qkv_model_config *c = &r->model->cfg;
    const int64_t L = c->n_encoder_layers, H = c->n_heads;
    int rc = 1;
    qkv_ctx *ctx = NULL;
    enc_lines l;
    memset(&l, 0, sizeof l);
    qkv_tensor **w = calloc((size_t)L, sizeof *w);
    const char **out = NULL;
    qkv_ctx_params cp = qkv_ctx_default_params();
    if (!w || qkv_ctx_new(&cp, &ctx)) {
        fprintf(stderr, "qkv attn: out of memory\n");
        goto done;
    }
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_ctx_set_training(ctx, false);
    if (enc_lines_add(&l, in, "<input>", 1, input, c->max_len)) goto fail;
    const int64_t S = l.start[1];
    if (S == 0) {
        fprintf(stderr, "qkv attn: the input has no tokens\n");
        goto done;
    }
    qkv_tensor *logits = enc_lines_logits(ctx, r->model, &l, w);
    if (qkv_ctx_status(ctx)) goto fail;
    const int64_t K = logits->shape[logits->ndim - 1];
    const bool tokens = c->head == QKV_HEAD_TOKEN;
    out = calloc((size_t)S, sizeof *out);
    if (!out) goto fail;
    printf("%s ->", input);
    for (int64_t s = 0; s < (tokens ? S : 1); s++) {
        out[s] = qkv_vocab_symbol(r->tgt, enc_argmax((const qkv_real *)logits->data + s * K, K));
        printf(" %s", out[s]);
    }
    printf("\n");
    rc = task_attn_write(&(task_attn){.run = run,
                                      .out_dir = out_dir,
                                      .stack = "encoder",
                                      .kind = QKV_ATTN_SELF,
                                      .weights = w,
                                      .n_layers = L,
                                      .n_heads = H,
                                      .rows = S,
                                      .cols = S,
                                      .row_labels = l.tok,
                                      .col_labels = l.tok,
                                      .page = {.title = input,
                                               .input_tokens = l.tok,
                                               .n_input = S,
                                               .output_tokens = out,
                                               .n_output = tokens ? S : 1},
                                      .terminal = terminal,
                                      .layer = layer,
                                      .head = head});
    goto done;
fail:
    fprintf(stderr, "qkv attn: %s\n", qkv_last_error());
done:
    free(out);
    free(w);
    enc_lines_free(&l);
    qkv_ctx_free(ctx);
    return rc;
}

bool enc_open_run(const run_dir *r, const char *cmd, qkv_head_kind head,
                  const enc_input_settings *is, enc_input *in) {
    const qkv_model_config *c = &r->model->cfg;
    if (c->arch != QKV_ARCH_ENCODER || c->head != head || c->n_features != is->n_features) {
        fprintf(stderr,
                "qkv %s: %s: the model is not the encoder with a %s head and %d feature inputs "
                "task.conf describes\n",
                cmd, r->dir, head == QKV_HEAD_TOKEN ? "token" : "pooled", is->n_features);
        return false;
    }
    if (enc_input_load(in, is, r->dir, r->src)) {
        fprintf(stderr, "qkv %s: %s\n", cmd, qkv_last_error());
        return false;
    }
    for (int k = 0; k < is->n_features; k++)
        if (qkv_vocab_size(in->feat[k]) != c->feature_vocab[k]) {
            fprintf(stderr, "qkv %s: %s: feat.%s.vocab has %d symbols, the model's table %d\n", cmd,
                    r->dir, qkv_word_feature_name(is->features[k]), qkv_vocab_size(in->feat[k]),
                    c->feature_vocab[k]);
            enc_input_free(in);
            return false;
        }
    return true;
}

bool enc_open_run_conf(run_dir *r, const char *cmd, qkv_head_kind head, bool keys_ok,
                       enc_input *in) {
    enc_input_settings is;
    if (!keys_ok || !enc_input_read_settings(&r->conf, false, &is) ||
        !config_check_unused(&r->conf)) {
        fprintf(stderr, "qkv %s: %s\n", cmd, r->conf.error);
        return false;
    }
    return enc_open_run(r, cmd, head, &is, in);
}

int enc_decode_run(run_dir *r, qkv_head_kind head, bool keys_ok, const char *const *files,
                   int n_files, const task_run_opts *o, enc_print_fn print, void *user) {
    enc_input in;
    if (!enc_open_run_conf(r, "decode", head, keys_ok, &in)) return 1;
    const int rc = enc_decode_files(r, &in, files, n_files, o->stream, print, user);
    enc_input_free(&in);
    return rc;
}

int enc_attn_run(run_dir *r, qkv_head_kind head, bool keys_ok, const char *input,
                 const task_run_opts *o) {
    enc_input in;
    if (!enc_open_run_conf(r, "attn", head, keys_ok, &in)) return 1;
    const int rc = enc_attn(r, o->run, &in, input, o->out_dir, o->terminal, o->layer, o->head);
    enc_input_free(&in);
    return rc;
}
