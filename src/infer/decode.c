/*
 * decode.c: the decoding entry points (qkv_decode for encoder-decoder models, qkv_generate for
 * decoder-only LMs): parameter defaults and validation, the job description the strategies share,
 * the common start of every search (encode or start, feed the shared prompt prefix, replicate
 * rows) and the decoder's kept session. log_probs.c has the log-probabilities the searches read,
 * hypotheses.c the hypotheses and their length penalties.
 *
 * Positions: an encoder-decoder row starts from the prompt [BOS]; a decoder-only row from its
 * user prompt. Position t of input b is forced while t < prompt_len[b] and generated after, so
 * prompts of different lengths decode in one batch without padding: the positions every prompt
 * covers (prompt_min) are fed in one step, the remaining prompt tokens of longer prompts are fed
 * as forced steps while shorter ones already generate. A hypothesis of at most max_len tokens
 * needs prompt_len + max_len - 1 positions (the last token is never fed).
 *
 * Dims: B inputs, N rows, V target vocabulary.
 */
#include "infer_internal.h"

#include "qkv/qkv_registry.h"

#include <math.h>
#include <stdlib.h>

qkv_decode_params qkv_decode_default_params(void) {
    qkv_decode_params p;
    memset(&p, 0, sizeof p);
    p.strategy = QKV_DECODE_BEAM;
    p.max_len = 0;
    p.beam_size = 4;
    p.n_best = 1;
    p.length_penalty = QKV_LENGTH_PENALTY_AVERAGE;
    p.alpha = 0.6;
    p.temperature = 1;
    p.top_k = 0;
    p.top_p = 1;
    p.seed = 0;
    p.bos_id = QKV_DECODE_MODEL_ID;
    p.eos_id = QKV_DECODE_MODEL_ID;
    p.use_cache = true;
    p.kernels = QKV_KERNELS_FAST;
    p.iterations = 10;
    p.length_beam = 5;
    p.weight_panels = true;
    p.repetition_penalty = 1;
    return p;
}

/* ---- validation -------------------------------------------------------------------------------
 */

#define BAD(...) QKV_ERROR(QKV_ERR_INVALID_ARG, __VA_ARGS__)

static qkv_status check_params(const char *fn, const qkv_decode_params *p, const qkv_model *m) {
    const int32_t V = m->cfg.tgt_vocab;
    if (!qkv_registry_name(QKV_REGISTRY_DECODE_STRATEGY, p->strategy))
        return BAD("%s: unknown strategy %d", fn, (int)p->strategy);
    if (p->strategy == QKV_DECODE_MASK_PREDICT && !m->cfg.nat)
        return BAD(
            "%s: mask-predict decodes non-autoregressive models (nat); this one is autoregressive",
            fn);
    if (p->strategy != QKV_DECODE_MASK_PREDICT && m->cfg.nat)
        return BAD("%s: the model is non-autoregressive (nat): decode it with mask-predict", fn);
    if (p->strategy == QKV_DECODE_MASK_PREDICT &&
        (p->iterations < 1 || p->length_beam < 1 || p->n_best > p->length_beam))
        return BAD("%s: mask-predict needs iterations >= 1 (got %d) and length_beam >= 1 and >= "
                   "n_best %d (got %d)",
                   fn, p->iterations, p->n_best, p->length_beam);
    if (p->max_len < 0)
        return BAD("%s: max_len %d must be >= 0 (0: the model's limit)", fn, p->max_len);
    if (p->n_best < 1) return BAD("%s: n_best %d must be >= 1", fn, p->n_best);
    if (p->strategy == QKV_DECODE_BEAM && (p->beam_size < 1 || p->n_best > p->beam_size))
        return BAD("%s: beam_size %d must be >= 1 and >= n_best %d", fn, p->beam_size, p->n_best);
    if (p->strategy == QKV_DECODE_GREEDY && p->n_best != 1)
        return BAD("%s: greedy search returns one hypothesis, n_best is %d", fn, p->n_best);
    if (!qkv_registry_name(QKV_REGISTRY_LENGTH_PENALTY, p->length_penalty))
        return BAD("%s: unknown length penalty %d", fn, (int)p->length_penalty);
    if (!(p->alpha >= 0 && isfinite(p->alpha)))
        return BAD("%s: alpha %g must be finite and >= 0", fn, p->alpha);
    if (!(p->temperature >= 0 && isfinite(p->temperature)))
        return BAD("%s: temperature %g must be finite and >= 0", fn, p->temperature);
    if (p->top_k < 0) return BAD("%s: top_k %d must be >= 0 (0: no limit)", fn, p->top_k);
    if (!(p->top_p > 0 && p->top_p <= 1)) return BAD("%s: top_p %g is not in (0, 1]", fn, p->top_p);
    const bool seq2seq = m->cfg.arch == QKV_ARCH_ENCODER_DECODER; /* a decoder-only LM feeds its prompts */
    if (seq2seq && (p->bos_id < 0 || p->bos_id >= V))
        return BAD("%s: bos_id %d is outside the vocabulary (%d)", fn, p->bos_id, V);
    if (p->eos_id < -1 || p->eos_id >= V)
        return BAD("%s: eos_id %d is outside the vocabulary (%d; -1: none)", fn, p->eos_id, V);
    if (p->eos_id == m->cfg.pad_id)
        return BAD("%s: eos_id %d is the padding id, which is never generated", fn, p->eos_id);
    /* ids the model was not trained with decode garbage without an error */
    if (seq2seq && m->cfg.bos_id >= 0 && p->bos_id != m->cfg.bos_id)
        return BAD("%s: bos_id %d is not the model's (%d): leave it QKV_DECODE_MODEL_ID", fn, p->bos_id,
                   m->cfg.bos_id);
    if (p->eos_id != -1 && m->cfg.eos_id >= 0 && p->eos_id != m->cfg.eos_id)
        return BAD("%s: eos_id %d is not the model's (%d): leave it QKV_DECODE_MODEL_ID, or -1 for none", fn,
                   p->eos_id, m->cfg.eos_id);
    if (!qkv__backend_of(p->kernels)) return BAD("%s: unknown kernel set %d", fn, (int)p->kernels);
    if (!(p->repetition_penalty > 0 && isfinite(p->repetition_penalty)))
        return BAD("%s: repetition_penalty %g must be finite and > 0 (1: none)", fn, p->repetition_penalty);
    if (p->no_repeat_ngram < 0) return BAD("%s: no_repeat_ngram %d must be >= 0 (0: none)", fn, p->no_repeat_ngram);
    if (p->strategy == QKV_DECODE_MASK_PREDICT && (dec_controls_on(p) || p->prefix))
        return BAD("%s: mask-predict takes no vocabulary restriction, repetition controls or target prefix", fn);
    if (p->prefix && !seq2seq) return BAD("%s: a target prefix is for encoder-decoder models (a decoder-only "
                                          "model's prompt is its prefix)", fn);
    if (p->prefix && !p->prefix_len) return BAD("%s: prefix without prefix_len", fn);
    return QKV_OK;
}

/* Offsets of `batch` sequences given back to back; lengths must be in 1 .. limit and ids in
 * [0, vocab). */
static qkv_status check_sequences(const char *fn, const char *what, const int32_t *ids,
                                  const int32_t *len, int32_t batch, int32_t limit, int32_t vocab,
                                  int64_t *off, int32_t *min_len, int32_t *max_len) {
    int64_t at = 0;
    *min_len = INT32_MAX;
    *max_len = 0;
    for (int32_t b = 0; b < batch; b++) {
        if (len[b] < 1 || len[b] > limit)
            return QKV_ERROR(QKV_ERR_SHAPE,
                             "%s: %s %d has length %d, not in 1 .. %d (the model's max_len)", fn,
                             what, b, len[b], limit);
        off[b] = at;
        for (int32_t i = 0; i < len[b]; i++)
            if (ids[at + i] < 0 || ids[at + i] >= vocab)
                return BAD("%s: %s %d, position %d: id %d is outside the vocabulary (%d)", fn, what,
                           b, i, ids[at + i], vocab);
        at += len[b];
        if (len[b] < *min_len) *min_len = len[b];
        if (len[b] > *max_len) *max_len = len[b];
    }
    return QKV_OK;
}

/* ---- the shared start -------------------------------------------------------------------------
 */

/* The decoder's kept session (qkv_decode.h, "Memory"), taken whole: NULL when there is none, no
 * decoder or another call holds it. */
static qkv_session *take_spare(qkv_decoder *d) {
    return d ? __atomic_exchange_n(&d->spare, NULL, __ATOMIC_ACQ_REL) : NULL;
}

qkv_status qkv_decoder_new(const qkv_model *m, qkv_decoder **out) {
    if (!m || !out) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_decoder_new: NULL argument");
    *out = calloc(1, sizeof **out);
    if (!*out) return QKV_ERROR(QKV_ERR_OOM, "qkv_decoder_new: out of memory");
    (*out)->m = m;
    return QKV_OK;
}

void qkv_decoder_release_memory(qkv_decoder *d) { qkv_session_free(take_spare(d)); }

void qkv_decoder_free(qkv_decoder *d) {
    qkv_decoder_release_memory(d);
    free(d);
}

/* Whether s is a session of model m with p's kernels, cache mode, arena and panels (any sizes). */
static bool session_same_kind(const qkv_session *s, const qkv_model *m, const qkv_session_params *p) {
    return s->m == m && s->p.kernels == p->kernels && s->p.use_cache == p->use_cache &&
           s->p.arena_bytes == p->arena_bytes && s->p.weight_panels == p->weight_panels;
}

/* Whether s can serve a call that needs p: the same kind, and at least its rows and lengths. */
static bool session_fits(const qkv_session *s, const qkv_model *m, const qkv_session_params *p) {
    return session_same_kind(s, m, p) && s->p.max_rows >= p->max_rows && s->p.max_len >= p->max_len &&
           s->p.max_src_len >= p->max_src_len;
}

void dec_end(const dec_job *j, qkv_session *s, qkv_status st) {
    if (st || !s || !j->decoder) { /* a failed call may leave it half-way: not worth keeping */
        qkv_session_free(s);
        return;
    }
    qkv_session_free(__atomic_exchange_n(&j->decoder->spare, s, __ATOMIC_ACQ_REL));
}

qkv_status dec_begin(const dec_job *j, int32_t width, int32_t max_width, qkv_session **sp,
                     qkv_real **first) {
    *sp = NULL;
    *first = NULL;
    const qkv_model *m = j->m;
    const bool ed = m->cfg.arch == QKV_ARCH_ENCODER_DECODER;
    qkv_session_params sp_ = qkv_session_default_params();
    sp_.max_rows = j->batch * max_width;
    sp_.max_len = j->prompt_max + j->p.max_len - 1;
    sp_.max_src_len = ed ? j->src_max : 0;
    sp_.use_cache = j->p.use_cache;
    sp_.kernels = j->p.kernels;
    sp_.weight_panels = j->p.weight_panels;
    qkv_session *s = take_spare(j->decoder);
    qkv_session_params both = sp_;
    if (s && !session_fits(s, m, &sp_)) {
        /* replaced by one that fits both calls, where only the sizes differ: calls that
         * alternate a longer source and more rows then settle on one session */
        if (session_same_kind(s, m, &sp_)) {
            both.max_rows = s->p.max_rows > sp_.max_rows ? s->p.max_rows : sp_.max_rows;
            both.max_len = s->p.max_len > sp_.max_len ? s->p.max_len : sp_.max_len;
            both.max_src_len = s->p.max_src_len > sp_.max_src_len ? s->p.max_src_len : sp_.max_src_len;
        }
        qkv_session_free(s);
        s = NULL;
    }
    qkv_status st = QKV_OK;
    if (!s) {
        st = qkv_session_new(m, &both, &s);
        if (st && (both.max_rows != sp_.max_rows || both.max_len != sp_.max_len ||
                   both.max_src_len != sp_.max_src_len)) /* the union too large: this call's own */
            st = qkv_session_new(m, &sp_, &s);
    }
    if (!st)
        st = ed ? qkv_session_encode(s, j->src_padded, j->batch, j->src_max)
                : qkv_session_start(s, j->batch);
    /* the positions every input is forced through, fed in one step */
    const int32_t P = j->prompt_min, B = j->batch, V = j->V;
    int32_t *ids = st ? NULL : malloc(sizeof(int32_t) * (size_t)B * (size_t)P);
    int32_t *rows = st ? NULL : malloc(sizeof(int32_t) * (size_t)B * (size_t)width);
    qkv_real *out = st ? NULL : malloc(sizeof(qkv_real) * (size_t)B * (size_t)width * (size_t)V);
    if (!st && (!ids || !rows || !out)) st = QKV_ERROR(QKV_ERR_OOM, "decode: out of memory");
    qkv_tensor *logits = NULL;
    if (!st) {
        for (int32_t b = 0; b < B; b++)
            memcpy(ids + (size_t)b * P, j->prompt + j->prompt_off[b], sizeof(int32_t) * (size_t)P);
        st = qkv_session_step(s, ids, P, &logits); /* (B, P, V) */
    }
    if (!st) {
        for (int32_t r = 0; r < B * width; r++) {
            rows[r] = r / width;
            memcpy(out + (size_t)r * V,
                   qkv__data(logits) + ((size_t)(r / width) * P + (size_t)(P - 1)) * V,
                   sizeof(qkv_real) * (size_t)V);
        }
        if (width > 1) st = qkv_session_gather(s, rows, B * width);
    }
    free(ids);
    free(rows);
    if (st) {
        free(out);
        dec_end(j, s, st);
        return st;
    }
    *sp = s;
    *first = out;
    return QKV_OK;
}

/* ---- entry points -----------------------------------------------------------------------------
 */

static qkv_status run(dec_job *j) {
    qkv_hypotheses *out = j->out;
    out->batch = j->batch;
    out->n_best = j->p.n_best;
    out->eos_id = j->p.eos_id;
    out->count = calloc((size_t)j->batch, sizeof *out->count);
    out->hyp = calloc((size_t)j->batch * (size_t)j->p.n_best, sizeof *out->hyp);
    if (!out->count || !out->hyp) {
        qkv_hypotheses_free(out);
        return QKV_ERROR(QKV_ERR_OOM, "decode: out of memory for %d x %d hypotheses", j->batch,
                         j->p.n_best);
    }
    qkv_status st = j->p.strategy == QKV_DECODE_GREEDY         ? dec_greedy(j)
                    : j->p.strategy == QKV_DECODE_BEAM         ? dec_beam(j)
                    : j->p.strategy == QKV_DECODE_MASK_PREDICT ? dec_mask_predict(j)
                                                               : dec_sample(j);
    if (st) qkv_hypotheses_free(out);
    return st;
}

/* Checks shared by both entry points; fills j except the prompts and sources. */
static qkv_status job_init(const char *fn, dec_job *j, const qkv_model *m, qkv_arch arch,
                           const int32_t *ids, const int32_t *len, int32_t batch,
                           const qkv_decode_params *p, qkv_hypotheses *out) {
    memset(j, 0, sizeof *j);
    if (out) memset(out, 0, sizeof *out);
    if (!m || !ids || !len || !out) return BAD("%s: NULL argument", fn);
    if (m->cfg.arch != arch)
        return BAD("%s: needs %s model", fn,
                   arch == QKV_ARCH_ENCODER_DECODER ? "an encoder-decoder" : "a decoder-only");
    if (batch < 1) return BAD("%s: batch %d must be >= 1", fn, batch);
    j->m = m;
    j->p = p ? *p : qkv_decode_default_params();
    /* the model's ids; -1 in a model file written before they were stored: the caller's */
    if (j->p.bos_id == QKV_DECODE_MODEL_ID && m->cfg.bos_id < 0 && arch == QKV_ARCH_ENCODER_DECODER)
        return BAD("%s: the model does not record its bos_id (a file written before qkv stored it): set "
                   "qkv_decode_params.bos_id",
                   fn);
    if (j->p.eos_id == QKV_DECODE_MODEL_ID && m->cfg.eos_id < 0)
        return BAD("%s: the model does not record its eos_id (a file written before qkv stored it): set "
                   "qkv_decode_params.eos_id (-1: none)",
                   fn);
    if (j->p.bos_id == QKV_DECODE_MODEL_ID) j->p.bos_id = m->cfg.bos_id;
    if (j->p.eos_id == QKV_DECODE_MODEL_ID) j->p.eos_id = m->cfg.eos_id;
    qkv_status st = check_params(fn, &j->p, m);
    if (st) return st;
    const int32_t width = j->p.strategy == QKV_DECODE_BEAM           ? j->p.beam_size
                          : j->p.strategy == QKV_DECODE_SAMPLE       ? j->p.n_best
                          : j->p.strategy == QKV_DECODE_MASK_PREDICT ? j->p.length_beam
                                                                     : 1;
    if ((int64_t)batch * width > INT32_MAX / 4)
        return BAD("%s: batch %d x %d rows per input is too many", fn, batch, width);
    j->batch = batch;
    j->V = m->cfg.tgt_vocab;
    j->pad_id = m->cfg.pad_id;
    j->out = out;
    j->prompt_off = malloc(sizeof(int64_t) * (size_t)batch);
    if (!j->prompt_off) return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", fn);
    return QKV_OK;
}

static qkv_status decode(const char *fn, const qkv_model *m, qkv_decoder *decoder, const int32_t *src,
                         const int32_t *src_len, int32_t batch, const qkv_decode_params *p, qkv_hypotheses *out) {
    dec_job j;
    qkv_status st = job_init(fn, &j, m, QKV_ARCH_ENCODER_DECODER, src, src_len, batch, p, out);
    j.decoder = decoder;
    if (st) {
        free(j.prompt_off);
        return st;
    }
    int64_t *src_off = malloc(sizeof(int64_t) * (size_t)batch);
    int32_t *bos_len = malloc(sizeof(int32_t) * (size_t)batch);
    int32_t src_min = 0, *prompts = NULL;
    st = !src_off || !bos_len ? QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", fn)
                              : check_sequences(fn, "source", src, src_len, batch, m->cfg.max_len,
                                                m->cfg.src_vocab, src_off, &src_min, &j.src_max);
    /* every input's prompt: [BOS], then its forced prefix */
    int64_t total = batch;
    for (int32_t b = 0; !st && j.p.prefix && b < batch; b++) {
        if (j.p.prefix_len[b] < 0 || j.p.prefix_len[b] > m->cfg.max_len - 1)
            st = QKV_ERROR(QKV_ERR_SHAPE, "%s: the prefix of input %d has length %d, not in 0 .. %d", fn, b,
                           j.p.prefix_len[b], m->cfg.max_len - 1);
        total += j.p.prefix_len[b];
    }
    if (!st && !(prompts = malloc(sizeof(int32_t) * (size_t)total))) st = QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", fn);
    j.prompt_min = INT32_MAX, j.prompt_max = 0;
    for (int32_t b = 0, at = 0, from = 0; !st && b < batch; b++) {
        const int32_t n = j.p.prefix ? j.p.prefix_len[b] : 0;
        j.prompt_off[b] = at;
        prompts[at++] = j.p.bos_id;
        for (int32_t i = 0; i < n && !st; i++, at++) {
            prompts[at] = j.p.prefix[from + i];
            if (prompts[at] < 0 || prompts[at] >= j.V || prompts[at] == j.pad_id)
                st = BAD("%s: prefix %d, position %d: id %d is not a target token (vocabulary %d, padding %d)", fn,
                         b, i, prompts[at], j.V, j.pad_id);
        }
        from += n;
        bos_len[b] = 1 + n;
        if (bos_len[b] < j.prompt_min) j.prompt_min = bos_len[b];
        if (bos_len[b] > j.prompt_max) j.prompt_max = bos_len[b];
    }
    if (!st && j.p.max_len == 0) j.p.max_len = m->cfg.max_len + 1 - j.prompt_max;
    if (!st && (int64_t)j.prompt_max + j.p.max_len - 1 > m->cfg.max_len)
        st = QKV_ERROR(QKV_ERR_SHAPE,
                       j.prompt_max > 1 ? "%s: max_len %d and a prefix of %d exceed the model's max_len %d"
                                        : "%s: max_len %d exceeds the model's max_len %d",
                       fn, j.p.max_len, j.prompt_max > 1 ? j.prompt_max - 1 : m->cfg.max_len, m->cfg.max_len);
    if (!st && j.p.max_len < 1)
        st = QKV_ERROR(QKV_ERR_SHAPE, "%s: no room to generate after a prefix of %d", fn, j.prompt_max - 1);
    if (!st) {
        j.src_padded = malloc(sizeof(int32_t) * (size_t)batch * (size_t)j.src_max);
        if (!j.src_padded) st = QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", fn);
    }
    if (!st) {
        for (int32_t b = 0; b < batch; b++) {
            int32_t *row = j.src_padded + (size_t)b * j.src_max;
            memcpy(row, src + src_off[b], sizeof(int32_t) * (size_t)src_len[b]);
            for (int32_t i = src_len[b]; i < j.src_max; i++)
                row[i] = m->cfg.pad_id;
        }
        j.prompt = prompts;
        j.prompt_len = bos_len;
        st = run(&j);
    }
    free(prompts);
    free(src_off);
    free(bos_len);
    free(j.src_padded);
    free(j.prompt_off);
    return st;
}

static qkv_status generate(const char *fn, const qkv_model *m, qkv_decoder *decoder, const int32_t *prompt,
                           const int32_t *prompt_len, int32_t batch, const qkv_decode_params *p, qkv_hypotheses *out) {
    dec_job j;
    qkv_status st = job_init(fn, &j, m, QKV_ARCH_DECODER, prompt, prompt_len, batch, p, out);
    j.decoder = decoder;
    if (st) {
        free(j.prompt_off);
        return st;
    }
    st = check_sequences(fn, "prompt", prompt, prompt_len, batch, m->cfg.max_len, m->cfg.tgt_vocab,
                         j.prompt_off, &j.prompt_min, &j.prompt_max);
    if (!st && j.p.max_len == 0) {
        j.p.max_len = m->cfg.max_len + 1 - j.prompt_max;
        if (j.p.max_len < 1)
            st = QKV_ERROR(QKV_ERR_SHAPE, "%s: no room to generate after a prompt of %d", fn,
                           j.prompt_max);
    }
    if (!st && (int64_t)j.prompt_max + j.p.max_len - 1 > m->cfg.max_len)
        st = QKV_ERROR(QKV_ERR_SHAPE,
                       "%s: prompt length %d + max_len %d - 1 exceeds the model's max_len %d", fn,
                       j.prompt_max, j.p.max_len, m->cfg.max_len);
    if (!st) {
        j.prompt = prompt;
        j.prompt_len = prompt_len;
        st = run(&j);
    }
    free(j.prompt_off);
    return st;
}

qkv_status qkv_decode(const qkv_model *m, const int32_t *src, const int32_t *src_len, int32_t batch,
                      const qkv_decode_params *p, qkv_hypotheses *out) {
    return decode("qkv_decode", m, NULL, src, src_len, batch, p, out);
}

qkv_status qkv_generate(const qkv_model *m, const int32_t *prompt, const int32_t *prompt_len, int32_t batch,
                        const qkv_decode_params *p, qkv_hypotheses *out) {
    return generate("qkv_generate", m, NULL, prompt, prompt_len, batch, p, out);
}

qkv_status qkv_decoder_decode(qkv_decoder *d, const int32_t *src, const int32_t *src_len, int32_t batch,
                              const qkv_decode_params *p, qkv_hypotheses *out) {
    if (!d) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_decoder_decode: NULL decoder");
    return decode("qkv_decoder_decode", d->m, d, src, src_len, batch, p, out);
}

qkv_status qkv_decoder_generate(qkv_decoder *d, const int32_t *prompt, const int32_t *prompt_len, int32_t batch,
                                const qkv_decode_params *p, qkv_hypotheses *out) {
    if (!d) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_decoder_generate: NULL decoder");
    return generate("qkv_decoder_generate", d->m, d, prompt, prompt_len, batch, p, out);
}
