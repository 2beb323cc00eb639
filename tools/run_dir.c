/* run_dir.c: see run_dir.h. */
#include "run_dir.h"
#include "input_lines.h"
#include "task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

qkv_status run_dir_load(const char *dir, run_dir *out) {
    memset(out, 0, sizeof *out);
    char base[1024], model[1200], src[1200], tgt[1200];
    size_t n = strlen(dir);
    const bool file = n > 12 && !strcmp(dir + n - 12, ".safetensors");
    if (file) { /* the directory of the file */
        const char *slash = strrchr(dir, '/');
        snprintf(base, sizeof base, "%.*s", slash ? (int)(slash - dir) : 1, slash ? dir : ".");
        snprintf(model, sizeof model, "%s", dir);
    } else {
        snprintf(base, sizeof base, "%s", dir);
        snprintf(model, sizeof model, "%s/model.safetensors", dir);
    }
    snprintf(src, sizeof src, "%s/src.vocab", base);
    snprintf(tgt, sizeof tgt, "%s/tgt.vocab", base);
    qkv_status st = qkv_model_load(model, &out->model);
    if (!st) st = qkv_decoder_new(out->model, &out->decoder);
    const bool image = !st && qkv_model_is_image(&out->model->cfg); /* no input vocabulary */
    const bool lm = !st && out->model->cfg.arch == QKV_ARCH_DECODER; /* a language model: tgt.vocab only */
    const bool no_src = image || lm;
    if (!st && !no_src) st = qkv_vocab_load(src, &out->src);
    if (!st) st = qkv_vocab_load(tgt, &out->tgt);
    if (!st && no_src && qkv_vocab_size(out->tgt) != out->model->cfg.tgt_vocab)
        st = qkv_set_error(QKV_ERR_FORMAT, "%s: the vocabulary (%d symbols) does not match the model (%d)", base,
                           qkv_vocab_size(out->tgt), out->model->cfg.tgt_vocab);
    if (!st && !no_src &&
        (qkv_vocab_size(out->src) != out->model->cfg.src_vocab || qkv_vocab_size(out->tgt) != out->model->cfg.tgt_vocab))
        st = qkv_set_error(QKV_ERR_FORMAT, "%s: the vocabularies (%d, %d symbols) do not match the model (%d, %d)", base,
                       qkv_vocab_size(out->src), qkv_vocab_size(out->tgt), out->model->cfg.src_vocab, out->model->cfg.tgt_vocab);
    snprintf(out->dir, sizeof out->dir, "%s", base);
    out->task = &seq2seq_task_ops; /* a run without task.conf */
    char conf[1200];
    snprintf(conf, sizeof conf, "%s/task.conf", base);
    if (!st && access(conf, F_OK) == 0) {
        const char *name = NULL;
        if (!config_load(&out->conf, conf) || !config_str(&out->conf, "task", NULL, &name))
            st = qkv_set_error(QKV_ERR_FORMAT, "%s", out->conf.error);
        else if (!name || !(out->task = task_find(name)))
            st = qkv_set_error(QKV_ERR_FORMAT, "%s: unknown task '%s'", conf, name ? name : "(none)");
    }
    if (!st && out->task->open_run) st = out->task->open_run(out);
    if (!st && image != out->task->reads_images)
        st = qkv_set_error(QKV_ERR_FORMAT, "%s: %s, but task.conf says task = %s, whose models read %s", base,
                           image ? "an image model" : "the model reads tokens", out->task->name,
                           out->task->reads_images ? "images" : "tokens");
    if (st) run_dir_free(out);
    return st;
}

void run_dir_free(run_dir *r) {
    qkv_decoder_free(r->decoder);
    qkv_model_free(r->model);
    qkv_vocab_free(r->src);
    qkv_vocab_free(r->tgt);
    qkv_tokenizer_free(r->src_tokenizer);
    qkv_tokenizer_free(r->tgt_tokenizer);
    config_free(&r->conf);
    memset(r, 0, sizeof *r);
}

const qkv_tokenizer *run_dir_src_tokenizer(const run_dir *r, bool tokens) {
    if (tokens) return qkv_tokenizer_shared(QKV_TOKENIZER_TOKENS);
    return r->src_tokenizer ? r->src_tokenizer : qkv_tokenizer_shared(QKV_TOKENIZER_CHARS);
}

typedef struct encode_sink {
    const qkv_vocab *v;
    const char *file;
    int64_t line_no;
    int32_t *ids;
    int64_t n, max;
} encode_sink;

static qkv_status encode_symbol(void *ctx, size_t off, size_t len, const char *sym, size_t sym_len) {
    (void)off, (void)len;
    encode_sink *e = ctx;
    return e->n == e->max ? qkv_set_error(QKV_ERR_SHAPE, "%s:%lld: input longer than the model's limit of %lld symbols",
                                          e->file, (long long)e->line_no, (long long)e->max)
                          : qkv_vocab_lookup(e->v, sym, sym_len, true, e->file, e->line_no, &e->ids[e->n++]);
}

qkv_status run_dir_encode(const run_dir *r, const char *file, int64_t line_no, const char *text,
                          const qkv_tokenizer *tok, int32_t *ids, int64_t max, int64_t *len) {
    encode_sink e = {.v = r->src, .file = file, .line_no = line_no, .ids = ids, .max = max};
    const qkv_status st = input_line_split(tok, file, line_no, text, strlen(text), "input", encode_symbol, &e);
    *len = e.n;
    return st;
}

qkv_status run_dir_encode_target(const run_dir *r, const char *file, int64_t line_no, const char *text, int32_t *ids,
                                 int64_t max, int64_t *len) {
    encode_sink e = {.v = r->tgt, .file = file, .line_no = line_no, .ids = ids, .max = max};
    const qkv_tokenizer *tok = r->tgt_tokenizer ? r->tgt_tokenizer : qkv_tokenizer_shared(QKV_TOKENIZER_TOKENS);
    const qkv_status st = input_line_split(tok, file, line_no, text, strlen(text), "target text", encode_symbol, &e);
    *len = e.n;
    return st;
}

char *join_symbols(const qkv_tokenizer *t, const char *const *syms, const size_t *lens, int64_t n) {
    size_t len = 0;
    char *text = NULL;
    if (!qkv_tokenizer_join(t, syms, lens, n, NULL, 0, &len) && (text = malloc(len + 1)) &&
        qkv_tokenizer_join(t, syms, lens, n, text, len + 1, &len)) {
        free(text);
        text = NULL;
    }
    return text;
}

char *ids_text(const qkv_tokenizer *t, const qkv_vocab *v, const int32_t *ids, int64_t n) {
    int64_t m = 0;
    while (m < n && ids[m] != QKV_VOCAB_EOS)
        m++;
    const char **syms = malloc(sizeof *syms * (size_t)(m ? m : 1));
    size_t *lens = malloc(sizeof *lens * (size_t)(m ? m : 1));
    char *text = NULL;
    for (int64_t i = 0; syms && lens && i < m; i++) {
        syms[i] = qkv_vocab_symbol(v, ids[i]);
        lens[i] = syms[i] ? strlen(syms[i]) : 0;
    }
    if (syms && lens) text = join_symbols(t, syms, lens, m);
    free(syms);
    free(lens);
    return text;
}

void print_symbols(FILE *f, const qkv_tokenizer *t, const qkv_vocab *v, const int32_t *ids, int64_t n) {
    char *text = ids_text(t, v, ids, n);
    fputs(text ? text : "(out of memory)", f);
    free(text);
}

void run_dir_print_target(FILE *f, const run_dir *r, const int32_t *ids, int64_t n) {
    print_symbols(f, r->tgt_tokenizer ? r->tgt_tokenizer : qkv_tokenizer_shared(QKV_TOKENIZER_TOKENS), r->tgt, ids, n);
}
