/* run_dir.c: see run_dir.h. */
#include "run_dir.h"
#include "task.h"

#include <stdio.h>
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
    out->task = &seq2seq_task_ops;
    char conf[1200];
    snprintf(conf, sizeof conf, "%s/task.conf", base);
    if (!st && access(conf, F_OK) == 0) {
        const char *name = NULL;
        if (!config_load(&out->conf, conf) || !config_str(&out->conf, "task", NULL, &name))
            st = qkv_set_error(QKV_ERR_FORMAT, "%s", out->conf.error);
        else if (!name || !(out->task = task_find(name)))
            st = qkv_set_error(QKV_ERR_FORMAT, "%s: unknown task '%s'", conf, name ? name : "(none)");
        else if (out->task == &seq2seq_task_ops && !config_bool(&out->conf, "data.src_tokens", false, &out->src_tokens))
            st = qkv_set_error(QKV_ERR_FORMAT, "%s", out->conf.error);
    }
    if (!st && image && out->task != &image_task_ops)
        st = qkv_set_error(QKV_ERR_FORMAT, "%s: an image model, but not a run of task = image (task.conf)", base);
    else if (!st && !image && out->task == &image_task_ops)
        st = qkv_set_error(QKV_ERR_FORMAT, "%s: task.conf says task = image, but the model reads tokens", base);
    if (st) run_dir_free(out);
    return st;
}

void run_dir_free(run_dir *r) {
    qkv_decoder_free(r->decoder);
    qkv_model_free(r->model);
    qkv_vocab_free(r->src);
    qkv_vocab_free(r->tgt);
    config_free(&r->conf);
    memset(r, 0, sizeof *r);
}

qkv_status run_dir_encode(const run_dir *r, const char *file, int64_t line_no, const char *text, bool tokens,
                          int32_t *ids, int64_t max, int64_t *len) {
    int64_t n = 0;
    const char *p = text;
    tokens = tokens || r->src_tokens;
    while (*p) {
        size_t k;
        if (tokens) {
            while (*p == ' ') p++;
            if (!*p) break;
            k = strcspn(p, " ");
        } else {
            k = 1;
            while ((p[k] & 0xC0) == 0x80) k++; /* the rest of a UTF-8 character */
        }
        if (n == max)
            return qkv_set_error(QKV_ERR_SHAPE, "%s:%lld: input longer than the model's limit of %lld symbols", file,
                                 (long long)line_no, (long long)max);
        qkv_status st = qkv_vocab_lookup(r->src, p, k, true, file, line_no, &ids[n]);
        if (st) return st;
        n++;
        p += k;
    }
    *len = n;
    return QKV_OK;
}
