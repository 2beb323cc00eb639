/* seq2seq_task.c: see seq2seq_task.h. */
#include "seq2seq_task.h"
#include "run_dir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


bool seq2seq_read_tokenizers(config *cfg, seq2seq_settings *s) {
    bool src_tokens;
    const char *src_name;
    int src, tgt;
    if (!config_bool(cfg, "data.src_tokens", false, &src_tokens) ||
        !config_str(cfg, "data.src_tokenizer", NULL, &src_name) ||
        !config_registry(cfg, "data.src_tokenizer", QKV_REGISTRY_TOKENIZER,
                         src_tokens ? QKV_TOKENIZER_TOKENS : QKV_TOKENIZER_CHARS, &src) ||
        !config_registry(cfg, "data.tgt_tokenizer", QKV_REGISTRY_TOKENIZER, QKV_TOKENIZER_TOKENS, &tgt))
        return false;
    if (src_tokens && src != QKV_TOKENIZER_TOKENS)
        return config_fail(cfg, "data.src_tokens",
                           "data.src_tokens = true says data.src_tokenizer = tokens, but data.src_tokenizer = %s",
                           src_name);
    const char *model[2];
    for (int side = 0; side < 2; side++) {
        const char *key = side ? "data.tgt_tokenizer_model" : "data.src_tokenizer_model";
        const int kind = side ? tgt : src;
        const char *name = qkv_registry_name(QKV_REGISTRY_TOKENIZER, kind);
        if (!config_str(cfg, key, NULL, &model[side])) return false;
        if (qkv_tokenizer_takes_model((qkv_tokenizer_kind)kind) && (!model[side] || !model[side][0]))
            return config_fail(cfg, side ? "data.tgt_tokenizer" : "data.src_tokenizer",
                               "the tokenizer '%s' needs its model file: %s = PATH (qkv tokenizer learn writes one)",
                               name, key);
        if (!qkv_tokenizer_takes_model((qkv_tokenizer_kind)kind) && model[side])
            return config_fail(cfg, key, "%s: the tokenizer '%s' takes no model file", key, name);
    }
    s->src_tokenizer = (qkv_tokenizer_kind)src;
    s->tgt_tokenizer = (qkv_tokenizer_kind)tgt;
    s->src_tokenizer_model = model[0];
    s->tgt_tokenizer_model = model[1];
    return true;
}

qkv_status seq2seq_tokenizers_open(const seq2seq_settings *s, const char *dir, seq2seq_tokenizers *out) {
    memset(out, 0, sizeof *out);
    for (int side = 0; side < 2; side++) {
        const char *model = side ? s->tgt_tokenizer_model : s->src_tokenizer_model;
        char path[1200];
        if (model && dir && model[0] != '/') {
            qkv_status st = task_path(path, sizeof path, dir, model);
            if (st) return st;
            model = path;
        }
        qkv_status st = qkv_tokenizer_new(side ? s->tgt_tokenizer : s->src_tokenizer, model, side ? &out->tgt : &out->src);
        if (st) {
            seq2seq_tokenizers_free(out);
            return st;
        }
    }
    return QKV_OK;
}

void seq2seq_tokenizers_free(seq2seq_tokenizers *t) {
    qkv_tokenizer_free(t->src);
    qkv_tokenizer_free(t->tgt);
    memset(t, 0, sizeof *t);
}

bool seq2seq_read_settings(config *cfg, seq2seq_settings *s) {
    memset(s, 0, sizeof *s);
    int64_t v;
    int e;
    double d;
    /* the keys every task reads (task.c), with the same defaults */
    task_settings c;
    if (!task_read_common(cfg, &c)) return false;
    s->train_path = c.train_path, s->dev_path = c.dev_path, s->test_path = c.test_path;
    s->out_dir = c.out_dir;
    s->train = c.train;
    s->steps = c.steps, s->max_tokens = c.max_tokens, s->eval_every = c.eval_every;
    s->log_every = c.log_every, s->threads = c.threads, s->keep_checkpoints = c.keep_checkpoints;
    if (!seq2seq_read_tokenizers(cfg, s) || !config_int(cfg, "data.max_src_len", 64, 1, 100000, &s->max_src_len) ||
        !config_int(cfg, "data.max_tgt_len", 64, 1, 100000, &s->max_tgt_len))
        return false;
    /* model: the encoder's keys (task.c), then the decoder's */
    qkv_model_config *m = &s->model;
    const int64_t max_len = s->max_src_len > s->max_tgt_len + 1 ? s->max_src_len : s->max_tgt_len + 1;
    int64_t dec;
    if (!task_read_encoder_model(cfg, QKV_HEAD_TOKEN, max_len, m) ||
        !config_int(cfg, "model.decoder_layers", 3, 1, 1000, &dec))
        return false;
    m->arch = QKV_ARCH_ENCODER_DECODER; /* qkv_model_default_config's encoder-decoder */
    m->n_decoder_layers = (int32_t)dec;
    if (!config_bool(cfg, "model.tie_embeddings", false, &m->tie_embeddings) ||
        !config_bool(cfg, "model.share_embeddings", false, &m->share_embeddings))
        return false;
    if (!config_bool(cfg, "model.nat", false, &m->nat)) return false; /* mask_id: seq2seq_nat_mask */
    m->dec_self_attn = m->self_attn;
    m->dec_self_attn.relpos_bidirectional = m->nat; /* a nat decoder looks both ways */
    m->cross_attn = m->self_attn;
    if (m->cross_attn.relpos != QKV_RELPOS_NONE && m->cross_attn.relpos != QKV_RELPOS_ALIBI &&
        m->cross_attn.relpos != QKV_RELPOS_T5)
        m->cross_attn.relpos = QKV_RELPOS_NONE; /* Shaw / RoPE positions do not cross sequences */
    if (!task_read_attention(cfg, "model.cross_attention", &m->cross_attn)) return false;
    /* training: the decoder's keys */
    qkv_train_config *t = &s->train;
    if (!config_registry(cfg, "train.ss", QKV_REGISTRY_SCHEDULED_SAMPLING, QKV_SS_NONE, &e)) return false;
    t->ss_kind = (qkv_ss_kind)e;
    if (!config_double(cfg, "train.ss_k", t->ss_k, 0, 1e9, &t->ss_k) ||
        !config_int(cfg, "train.ss_decay_steps", t->ss_decay_steps, 1, INT64_C(1) << 40, &t->ss_decay_steps) ||
        !config_double(cfg, "train.ss_min_gold", t->ss_min_gold, 0, 1, &t->ss_min_gold) ||
        !config_double(cfg, "train.guided_weight", 0, 0, 1e6, &t->guided_weight) ||
        !config_double(cfg, "train.guided_sigma", 0.2, 1e-6, 1e6, &t->guided_sigma) ||
        !config_double(cfg, "train.length_weight", 0.1, 0, 1e6, &t->length_weight))
        return false;
    /* decoding for evaluation */
    qkv_decode_params *p = &s->decode;
    *p = qkv_decode_default_params();
    p->bos_id = QKV_VOCAB_BOS;
    p->eos_id = QKV_VOCAB_EOS;
    if (!config_registry(cfg, "eval.strategy", QKV_REGISTRY_DECODE_STRATEGY,
                         m->nat ? QKV_DECODE_MASK_PREDICT : QKV_DECODE_BEAM, &e))
        return false;
    p->strategy = (qkv_decode_strategy)e;
    const char *strategy = qkv_registry_name(QKV_REGISTRY_DECODE_STRATEGY, e);
    if (p->strategy == QKV_DECODE_SAMPLE)
        return config_fail(cfg, "eval.strategy",
                           "eval.strategy = %s: the dev score picks the best model, so evaluation decodes "
                           "deterministically (greedy, beam or mask_predict)",
                           strategy);
    if ((p->strategy == QKV_DECODE_MASK_PREDICT) != m->nat) /* only an explicit eval.strategy can disagree */
        return config_fail(cfg, "eval.strategy", "eval.strategy = %s %s", strategy,
                           m->nat ? "cannot decode a model.nat = true model (use mask_predict)"
                                  : "needs model.nat = true (a non-autoregressive model)");
    if (!config_int(cfg, "eval.iterations", 10, 1, 1000, &v)) return false;
    p->iterations = (int32_t)v;
    if (!config_int(cfg, "eval.length_beam", 5, 1, 1024, &v)) return false;
    p->length_beam = (int32_t)v;
    if (!config_int(cfg, "eval.beam", 4, 1, 1024, &v)) return false;
    p->beam_size = (int32_t)v;
    p->n_best = 1;
    if (!config_registry(cfg, "eval.length_penalty", QKV_REGISTRY_LENGTH_PENALTY, QKV_LENGTH_PENALTY_AVERAGE, &e))
        return false;
    p->length_penalty = (qkv_length_penalty)e;
    if (!config_double(cfg, "eval.alpha", 0.6, 0, 10, &d)) return false;
    p->alpha = d;
    /* generated tokens, EOS included: the longest target + 1, within what the model accepts */
    p->max_len = (int32_t)(s->max_tgt_len + 1 < m->max_len ? s->max_tgt_len + 1 : m->max_len);
    if (!config_int(cfg, "eval.batch", 64, 1, 1 << 20, &s->eval_batch) ||
        !config_int(cfg, "eval.max_items", 0, 0, INT64_MAX, &s->eval_max_items) || !seq2seq_read_metric(cfg, &s->bleu))
        return false;
    return true;
}

bool seq2seq_read_metric(config *cfg, bool *bleu) {
    int metric;
    if (!config_switch(cfg, "eval.metric", SWITCH_METRIC, 0, &metric)) return false;
    *bleu = metric == 1;
    return true;
}

qkv_status seq2seq_text_scores(const seq2seq_eval_set *e, const seq2seq_hyps *h, const qkv_vocab *tgt,
                               const qkv_tokenizer *tok, qkv_bleu_stats *bleu, qkv_chrf_stats *chrf) {
    const qkv_bleu_opts bo = qkv_bleu_opts_default();
    const qkv_chrf_opts co = qkv_chrf_opts_default();
    memset(bleu, 0, sizeof *bleu);
    memset(chrf, 0, sizeof *chrf);
    qkv_status st = QKV_OK;
    for (int64_t g = 0; g < h->n && !st; g++) {
        const int64_t first = e->groups.start[g], n_refs = e->groups.start[g + 1] - first;
        char *hyp = ids_text(tok, tgt, h->tokens[g], h->len[g]);
        char **refs = calloc((size_t)n_refs, sizeof *refs);
        size_t *ref_lens = calloc((size_t)n_refs, sizeof *ref_lens);
        st = hyp && refs && ref_lens ? QKV_OK : qkv_set_error(QKV_ERR_OOM, "evaluate: out of memory");
        for (int64_t k = 0; k < n_refs && !st; k++) {
            const int64_t n = qkv_corpus_length(e->corpus, first + k, QKV_FIELD_TGT);
            const char **syms = malloc(sizeof *syms * (size_t)(n ? n : 1));
            size_t *lens = malloc(sizeof *lens * (size_t)(n ? n : 1));
            for (int64_t i = 0; syms && lens && i < n; i++)
                syms[i] = qkv_corpus_symbol(e->corpus, first + k, QKV_FIELD_TGT, i, &lens[i]);
            if (!syms || !lens || !(refs[k] = join_symbols(tok, syms, lens, n)))
                st = qkv_set_error(QKV_ERR_OOM, "evaluate: out of memory");
            else
                ref_lens[k] = strlen(refs[k]);
            free(syms);
            free(lens);
        }
        if (!st) st = qkv_bleu_add(bleu, &bo, hyp, strlen(hyp), (const char *const *)refs, ref_lens, n_refs, NULL);
        if (!st) st = qkv_chrf_add(chrf, &co, hyp, strlen(hyp), (const char *const *)refs, ref_lens, n_refs, NULL);
        for (int64_t k = 0; refs && k < n_refs; k++)
            free(refs[k]);
        free(refs);
        free(ref_lens);
        free(hyp);
    }
    return st;
}

qkv_status seq2seq_nat_mask(qkv_vocab *tgt, bool add, int32_t *mask_id) {
    const int32_t id = qkv_vocab_find(tgt, SEQ2SEQ_MASK, strlen(SEQ2SEQ_MASK));
    if (add && id >= 0)
        return qkv_set_error(QKV_ERR_FORMAT, "the training targets contain the symbol %s, which model.nat reserves",
                             SEQ2SEQ_MASK);
    if (!add && id < 0)
        return qkv_set_error(QKV_ERR_FORMAT, "tgt.vocab has no %s symbol: the run was not trained with model.nat = true",
                             SEQ2SEQ_MASK);
    *mask_id = id;
    return add ? qkv_vocab_add(tgt, SEQ2SEQ_MASK, strlen(SEQ2SEQ_MASK), mask_id) : QKV_OK;
}

qkv_read_opts seq2seq_read_opts(const seq2seq_settings *s, const qkv_tokenizer *src, const qkv_tokenizer *tgt) {
    return (qkv_read_opts){
        .max_src_len = s->max_src_len, .max_tgt_len = s->max_tgt_len, .src_tokenizer = src, .tgt_tokenizer = tgt};
}

/* One group per line. */
static qkv_status line_groups(const qkv_corpus *c, qkv_groups *out) {
    const int64_t n = qkv_corpus_size(c);
    out->n = n;
    if (!(out->start = malloc(sizeof *out->start * (size_t)(n + 1))))
        return qkv_set_error(QKV_ERR_OOM, "evaluate: out of memory");
    for (int64_t i = 0; i <= n; i++)
        out->start[i] = i;
    return QKV_OK;
}

qkv_status seq2seq_eval_set_load(const char *path, const qkv_read_opts *ro, bool per_line, const qkv_vocab *src,
                                 const qkv_vocab *tgt, seq2seq_eval_set *out) {
    memset(out, 0, sizeof *out);
    qkv_status st = qkv_corpus_read(QKV_CORPUS_PAIRS, path, ro, &out->corpus);
    if (!st) st = qkv_dataset_encode(out->corpus, src, tgt, false, &out->data);
    if (!st) st = per_line ? line_groups(out->corpus, &out->groups) : qkv_corpus_groups(out->corpus, &out->groups);
    if (!st && out->groups.n == 0) /* no words would score a perfect 0 % WER */
        st = qkv_set_error(QKV_ERR_FORMAT, "%s: no pairs to evaluate on (the file is empty)", path);
    if (st) seq2seq_eval_set_free(out);
    return st;
}

void seq2seq_eval_set_free(seq2seq_eval_set *e) {
    qkv_groups_free(&e->groups);
    qkv_dataset_free(e->data);
    qkv_corpus_free(e->corpus);
    memset(e, 0, sizeof *e);
}

void seq2seq_free_hyps(seq2seq_hyps *h) {
    for (int64_t i = 0; h->tokens && i < h->n; i++) free(h->tokens[i]);
    free(h->tokens);
    free(h->len);
    memset(h, 0, sizeof *h);
}

qkv_status seq2seq_evaluate(const qkv_model *m, const seq2seq_eval_set *e, const qkv_decode_params *p, int64_t batch,
                            int64_t max_items, qkv_wer_counts *counts, seq2seq_hyps *hyp_out) {
    memset(counts, 0, sizeof *counts);
    const int64_t n = max_items > 0 && max_items < e->groups.n ? max_items : e->groups.n;
    if (hyp_out) {
        memset(hyp_out, 0, sizeof *hyp_out);
        hyp_out->tokens = calloc((size_t)(n ? n : 1), sizeof *hyp_out->tokens);
        hyp_out->len = calloc((size_t)(n ? n : 1), sizeof *hyp_out->len);
        if (!hyp_out->tokens || !hyp_out->len) return qkv_set_error(QKV_ERR_OOM, "evaluate: out of memory");
        hyp_out->n = n;
    }
    int32_t *src = NULL, *lens = NULL;
    qkv_decoder *decoder = NULL; /* one session for every batch, freed after the evaluation */
    qkv_status st = qkv_decoder_new(m, &decoder);
    for (int64_t first = 0; first < n && !st; first += batch) {
        const int64_t rows = n - first < batch ? n - first : batch;
        int64_t total = 0;
        for (int64_t r = 0; r < rows; r++) {
            qkv_example ex;
            qkv_dataset_get(e->data, e->groups.start[first + r], &ex);
            total += ex.src_len;
        }
        free(src);
        free(lens);
        src = malloc(sizeof(int32_t) * (size_t)(total ? total : 1));
        lens = malloc(sizeof(int32_t) * (size_t)rows);
        if (!src || !lens) {
            st = qkv_set_error(QKV_ERR_OOM, "evaluate: out of memory");
            break;
        }
        int64_t at = 0;
        for (int64_t r = 0; r < rows; r++) {
            qkv_example ex;
            qkv_dataset_get(e->data, e->groups.start[first + r], &ex);
            memcpy(src + at, ex.src, sizeof(int32_t) * (size_t)ex.src_len);
            lens[r] = (int32_t)ex.src_len;
            at += ex.src_len;
        }
        qkv_hypotheses h;
        memset(&h, 0, sizeof h);
        st = qkv_decoder_decode(decoder, src, lens, (int32_t)rows, p, &h);
        for (int64_t r = 0; r < rows && !st; r++) {
            const qkv_hypothesis *best = h.count[r] ? &h.hyp[r * h.n_best] : NULL;
            const int64_t len = best ? qkv_seq_length(best->tokens, best->length, p->eos_id) : 0;
            st = qkv_wer_add_group(counts, e->data, &e->groups, first + r, best ? best->tokens : NULL, len, NULL);
            if (!st && hyp_out) {
                hyp_out->tokens[first + r] = malloc(sizeof(int32_t) * (size_t)(len ? len : 1));
                if (!hyp_out->tokens[first + r]) st = qkv_set_error(QKV_ERR_OOM, "evaluate: out of memory");
                else if (len) memcpy(hyp_out->tokens[first + r], best->tokens, sizeof(int32_t) * (size_t)len);
                hyp_out->len[first + r] = len;
            }
        }
        qkv_hypotheses_free(&h);
    }
    qkv_decoder_free(decoder);
    free(src);
    free(lens);
    if (st && hyp_out) seq2seq_free_hyps(hyp_out);
    return st;
}

/* ---- the seq2seq task of `qkv train` (task.h) ------------------------------------------------ */

typedef struct seq2seq_task {
    task base;
    seq2seq_settings s;
    seq2seq_tokenizers tok;
    qkv_corpus *train_corpus;
    qkv_vocab *src, *tgt;
    qkv_dataset *train;
    seq2seq_eval_set dev;
} seq2seq_task;

static bool s2s_create(config *cfg, task **out) {
    seq2seq_task *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(cfg->error, sizeof cfg->error, "out of memory");
        return false;
    }
    t->base.ops = &seq2seq_task_ops;
    *out = &t->base;
    if (!seq2seq_read_settings(cfg, &t->s)) return false;
    if (t->s.bleu) t->base.select = "bleu", t->base.lower_is_better = false;
    task_settings *c = &t->base.s;
    c->train_path = t->s.train_path, c->dev_path = t->s.dev_path, c->test_path = t->s.test_path;
    c->out_dir = t->s.out_dir;
    c->model = t->s.model;
    c->train = t->s.train;
    c->steps = t->s.steps, c->max_tokens = t->s.max_tokens, c->eval_every = t->s.eval_every;
    c->log_every = t->s.log_every, c->threads = t->s.threads, c->keep_checkpoints = t->s.keep_checkpoints;
    return true;
}

/* The file name of a side's tokenizer model in the run directory: "src.bpe", "tgt.bpe". */
static void run_model_name(const seq2seq_settings *s, int side, char *buf, size_t size) {
    snprintf(buf, size, "%s.%s", side ? "tgt" : "src",
             qkv_registry_name(QKV_REGISTRY_TOKENIZER, (int)(side ? s->tgt_tokenizer : s->src_tokenizer)));
}

/* The tokenizers of a training run. A fresh run loads the model files the configuration names and
 * copies them into the run directory (src.bpe, tgt.bpe), which task.conf then names, so that the
 * run decodes as it trained whatever becomes of the originals; a resumed run loads those copies. */
static qkv_status s2s_tokenizers(seq2seq_task *t, bool resume) {
    seq2seq_settings s = t->s;
    char names[2][64];
    for (int side = 0; side < 2; side++) {
        const char **model = side ? &s.tgt_tokenizer_model : &s.src_tokenizer_model;
        if (!*model) continue;
        run_model_name(&t->s, side, names[side], sizeof names[side]);
        if (resume) *model = names[side];
    }
    qkv_status st = seq2seq_tokenizers_open(&s, resume ? s.out_dir : NULL, &t->tok);
    for (int side = 0; !st && !resume && side < 2; side++) {
        const char *model = side ? s.tgt_tokenizer_model : s.src_tokenizer_model;
        if (!model) continue;
        char path[1200], *data = NULL;
        size_t len = 0;
        st = qkv_file_read(model, (uint64_t)1 << 30, &data, &len);
        if (!st) st = task_path(path, sizeof path, s.out_dir, names[side]);
        if (!st) st = qkv_file_write_atomic(path, data, len);
        free(data);
    }
    return st;
}

/* The vocabulary of both fields of c (model.share_embeddings), in byte order. */
static qkv_status joint_vocab(const qkv_corpus *c, qkv_vocab **out) {
    qkv_status st = qkv_vocab_build(c, QKV_FIELD_SRC, 1, false, out);
    for (int64_t i = 0; !st && i < qkv_corpus_size(c); i++)
        for (int64_t k = 0; !st && k < qkv_corpus_length(c, i, QKV_FIELD_TGT); k++) {
            size_t len;
            const char *sym = qkv_corpus_symbol(c, i, QKV_FIELD_TGT, k, &len);
            int32_t id;
            st = qkv_vocab_add(*out, sym, len, &id);
        }
    if (!st) st = qkv_vocab_sort(*out);
    return st;
}

static qkv_status s2s_prepare(task *base, bool resume) {
    seq2seq_task *t = (seq2seq_task *)base;
    const seq2seq_settings *s = &t->s;
    const char *dir = s->out_dir;
    char path[1024];
    qkv_status st = s2s_tokenizers(t, resume);
    if (st) return st;
    const qkv_read_opts ro = seq2seq_read_opts(s, t->tok.src, t->tok.tgt);
    st = qkv_corpus_read(QKV_CORPUS_PAIRS, s->train_path, &ro, &t->train_corpus);
    if (st) return st;
    /* vocabularies: built from the training set on a fresh run, read back on resume */
    if (resume) {
        if ((st = task_path(path, sizeof path, dir, "src.vocab")) || (st = qkv_vocab_load(path, &t->src))) return st;
        if ((st = task_path(path, sizeof path, dir, "tgt.vocab")) || (st = qkv_vocab_load(path, &t->tgt))) return st;
        if (s->model.nat && (st = seq2seq_nat_mask(t->tgt, false, &base->s.model.mask_id))) return st;
    } else {
        if (s->model.share_embeddings) { /* one vocabulary: both fields' symbols in each copy */
            if ((st = joint_vocab(t->train_corpus, &t->src)) || (st = joint_vocab(t->train_corpus, &t->tgt))) return st;
        } else if ((st = qkv_vocab_build(t->train_corpus, QKV_FIELD_SRC, 1, true, &t->src)) ||
                   (st = qkv_vocab_build(t->train_corpus, QKV_FIELD_TGT, 1, true, &t->tgt))) {
            return st;
        }
        /* the tokenizers' symbols the training set lacks (bpe: bytes, ...), in byte order with the rest */
        for (int k = 0; k < (s->model.share_embeddings ? 2 : 1) && !st; k++) /* joint: both into each */
            if ((st = qkv_tokenizer_add_fallback(k ? t->tok.tgt : t->tok.src, t->src)) ||
                (st = qkv_tokenizer_add_fallback(k ? t->tok.src : t->tok.tgt, t->tgt)))
                return st;
        if ((st = qkv_vocab_sort(t->src)) || (st = qkv_vocab_sort(t->tgt))) return st;
        /* a non-autoregressive run appends <mask> to the target vocabulary before saving it */
        if (s->model.nat && (st = seq2seq_nat_mask(t->tgt, true, &base->s.model.mask_id))) return st;
        if ((st = task_path(path, sizeof path, dir, "src.vocab")) || (st = qkv_vocab_save(t->src, path))) return st;
        if ((st = task_path(path, sizeof path, dir, "tgt.vocab")) || (st = qkv_vocab_save(t->tgt, path))) return st;
        char conf[5][128];
        const char *lines[5];
        int n = 0;
        for (int side = 0; side < 2; side++) {
            const char *which = side ? "tgt" : "src";
            snprintf(conf[n], sizeof conf[n], "data.%s_tokenizer = %s", which,
                     qkv_registry_name(QKV_REGISTRY_TOKENIZER, (int)(side ? s->tgt_tokenizer : s->src_tokenizer)));
            lines[n] = conf[n], n++;
            if (side ? s->tgt_tokenizer_model : s->src_tokenizer_model) {
                char name[64];
                run_model_name(s, side, name, sizeof name);
                snprintf(conf[n], sizeof conf[n], "data.%s_tokenizer_model = %s", which, name);
                lines[n] = conf[n], n++;
            }
        }
        if (s->bleu) lines[n++] = "eval.metric = bleu";
        if ((st = task_write_conf(dir, "seq2seq", lines, n))) return st;
    }
    if ((st = qkv_dataset_encode(t->train_corpus, t->src, t->tgt, true, &t->train))) return st;
    if ((st = seq2seq_eval_set_load(s->dev_path, &ro, s->bleu, t->src, t->tgt, &t->dev))) return st;
    base->s.model.src_vocab = qkv_vocab_size(t->src);
    base->s.model.tgt_vocab = qkv_vocab_size(t->tgt);
    base->train = t->train;
    base->batch_opts = qkv_batch_default_opts(s->max_tokens);
    base->batch_opts.decoder = true;
    base->batch_opts.seed = s->train.seed;
    base->batch_opts.bucket_width = 2;
    return QKV_OK;
}

static qkv_status s2s_batch(task *base, const qkv_batch *b, qkv_train_batch *out) {
    const seq2seq_task *t = (const seq2seq_task *)base;
    *out = (qkv_train_batch){.batch = (int32_t)b->rows, .src_len = (int32_t)b->src_cols, .tgt_len = (int32_t)b->dec_cols,
                             .src = b->src, .tgt_in = b->dec_in, .tgt_out = b->dec_out};
    if (t->s.model.nat) { /* the target alone (qkv_train.h) */
        out->tgt_in = NULL;
        out->tgt_out = b->tgt;
        out->tgt_len = (int32_t)b->tgt_cols;
    }
    return QKV_OK;
}

static qkv_status s2s_evaluate(task *base, const qkv_model *m, task_metrics *out) {
    seq2seq_task *t = (seq2seq_task *)base;
    qkv_wer_counts wc;
    seq2seq_hyps h;
    memset(out, 0, sizeof *out);
    qkv_status st = seq2seq_evaluate(m, &t->dev, &t->s.decode, t->s.eval_batch, t->s.eval_max_items, &wc,
                                     t->s.bleu ? &h : NULL);
    if (st) return st;
    if (t->s.bleu) { /* translation: BLEU and chrF of the joined text, then the token error rates */
        qkv_bleu_stats bs;
        qkv_chrf_stats cs;
        qkv_bleu_result br;
        const qkv_bleu_opts bo = qkv_bleu_opts_default();
        const qkv_chrf_opts co = qkv_chrf_opts_default();
        double chrf = 0;
        st = seq2seq_text_scores(&t->dev, &h, t->tgt, t->tok.tgt, &bs, &cs);
        if (!st) st = qkv_bleu_compute(&bs, &bo, &br);
        if (!st) st = qkv_chrf_compute(&cs, &co, &chrf);
        seq2seq_free_hyps(&h);
        if (st) return st;
        task_metrics_add_plain(out, "bleu", "BLEU", br.score);
        task_metrics_add_plain(out, "chrf", "chrF2", chrf);
    }
    task_metrics_add(out, "wer", "WER", 100 * qkv_wer(&wc));
    task_metrics_add(out, "per", "PER", 100 * qkv_per(&wc));
    out->items = wc.items;
    out->unit = t->s.bleu ? "sentences" : "words";
    return QKV_OK;
}

static void s2s_describe(const task *base, FILE *f) {
    const seq2seq_task *t = (const seq2seq_task *)base;
    fprintf(f, "%lld training pairs, %lld dev %s | vocab %d -> %d", (long long)qkv_dataset_size(t->train),
            (long long)t->dev.groups.n, t->s.bleu ? "sentences" : "words", qkv_vocab_size(t->src), qkv_vocab_size(t->tgt));
}

static void s2s_free(task *base) {
    seq2seq_task *t = (seq2seq_task *)base;
    seq2seq_eval_set_free(&t->dev);
    qkv_dataset_free(t->train);
    qkv_vocab_free(t->src);
    qkv_vocab_free(t->tgt);
    qkv_corpus_free(t->train_corpus);
    seq2seq_tokenizers_free(&t->tok);
    free(t);
}

/* The tokenizers of a run (task.conf, their model files in the run directory; chars and tokens
 * for a run without one). */
static qkv_status seq2seq_open_run(run_dir *r) {
    seq2seq_settings s;
    if (!seq2seq_read_tokenizers(&r->conf, &s)) return qkv_set_error(QKV_ERR_FORMAT, "%s", r->conf.error);
    seq2seq_tokenizers t;
    qkv_status st = seq2seq_tokenizers_open(&s, r->dir, &t);
    if (st) return st;
    r->src_tokenizer = t.src;
    r->tgt_tokenizer = t.tgt;
    return QKV_OK;
}

const task_ops seq2seq_task_ops = {.name = "seq2seq",
                                   .summary = "source<TAB>targets pairs: encoder-decoder, multi-reference WER / PER",
                                   .select = "wer", .lower_is_better = true, .create = s2s_create,
                                   .prepare = s2s_prepare, .batch = s2s_batch, .evaluate = s2s_evaluate,
                                   .describe = s2s_describe, .free = s2s_free, .eval_run = seq2seq_eval_run,
                                   .decode_run = seq2seq_decode_run, .attn_run = seq2seq_attn_run,
                                   .generates = true, .transduces = true, .open_run = seq2seq_open_run};
