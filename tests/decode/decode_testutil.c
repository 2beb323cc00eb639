/* decode_testutil.c: see decode_testutil.h. */
#include "decode_testutil.h"

#include <math.h>

const dt_variant dt_variants[] = {
    {"scaled dot, sinusoidal, post-LN", QKV_SCORE_SCALED_DOT, QKV_NORM_SOFTMAX, QKV_RELPOS_NONE,
     QKV_POS_SINUSOIDAL, false, false, false, false},
    {"scaled dot, learned positions, pre-LN", QKV_SCORE_SCALED_DOT, QKV_NORM_SOFTMAX,
     QKV_RELPOS_NONE, QKV_POS_LEARNED, true, false, false, false},
    {"dot, no positions, tied, no final norm", QKV_SCORE_DOT, QKV_NORM_SOFTMAX, QKV_RELPOS_NONE,
     QKV_POS_NONE, false, true, true, false},
    {"cosine", QKV_SCORE_COSINE, QKV_NORM_SOFTMAX, QKV_RELPOS_NONE, QKV_POS_SINUSOIDAL, true, false,
     false, false},
    {"additive", QKV_SCORE_ADDITIVE, QKV_NORM_SOFTMAX, QKV_RELPOS_NONE, QKV_POS_SINUSOIDAL, false,
     false, false, false},
    {"general", QKV_SCORE_GENERAL, QKV_NORM_SOFTMAX, QKV_RELPOS_NONE, QKV_POS_LEARNED, false, false,
     false, false},
    {"relu row-normalised", QKV_SCORE_SCALED_DOT, QKV_NORM_RELU_ROWNORM, QKV_RELPOS_NONE,
     QKV_POS_SINUSOIDAL, true, false, false, false},
    {"sigmoid", QKV_SCORE_SCALED_DOT, QKV_NORM_SIGMOID, QKV_RELPOS_NONE, QKV_POS_SINUSOIDAL, false,
     false, false, false},
    {"sparsemax", QKV_SCORE_SCALED_DOT, QKV_NORM_SPARSEMAX, QKV_RELPOS_NONE, QKV_POS_SINUSOIDAL, true,
     false, false, false},
    {"Shaw", QKV_SCORE_SCALED_DOT, QKV_NORM_SOFTMAX, QKV_RELPOS_SHAW, QKV_POS_NONE, false, false,
     false, false},
    {"T5 unidirectional", QKV_SCORE_SCALED_DOT, QKV_NORM_SOFTMAX, QKV_RELPOS_T5, QKV_POS_NONE, true,
     false, false, false},
    {"T5 bidirectional", QKV_SCORE_DOT, QKV_NORM_SOFTMAX, QKV_RELPOS_T5, QKV_POS_NONE, false, false,
     false, true},
    {"RoPE", QKV_SCORE_SCALED_DOT, QKV_NORM_SOFTMAX, QKV_RELPOS_ROPE, QKV_POS_NONE, true, false,
     false, false},
    {"ALiBi", QKV_SCORE_SCALED_DOT, QKV_NORM_SOFTMAX, QKV_RELPOS_ALIBI, QKV_POS_NONE, false, false,
     false, false},
    {"ALiBi with cosine scores", QKV_SCORE_COSINE, QKV_NORM_SOFTMAX, QKV_RELPOS_ALIBI, QKV_POS_NONE,
     true, false, false, false},
};
const int dt_n_variants = (int)(sizeof dt_variants / sizeof *dt_variants);

static void set_attn(qkv_mha_config *a, const dt_variant *v, bool causal) {
    a->score = v->score;
    a->norm = v->norm;
    a->relpos = v->relpos;
    a->relpos_max_distance = v->relpos == QKV_RELPOS_SHAW ? 2 : 12;
    a->relpos_buckets = 8;
    a->relpos_bidirectional = causal ? v->bidirectional_t5 : true;
    a->cos_scale_init = 3;
}

static void sharpen_output(qkv_model *m, double sharpen) {
    qkv_real *w = m->out_w->data;
    for (int64_t i = 0, n = qkv_tensor_numel(m->out_w); i < n; i++)
        w[i] = (qkv_real)(w[i] * sharpen);
}

static qkv_model *build(qkv_arch arch, const dt_variant *v, int32_t vocab, double sharpen,
                        uint64_t seed) {
    qkv_model_config c = qkv_model_default_config(arch, 8, 2, 2);
    c.src_vocab = 11;
    c.tgt_vocab = vocab;
    c.dim_feedforward = 16;
    c.dropout = 0;
    c.max_len = 16;
    c.pad_id = DT_PAD;
    c.bos_id = DT_BOS;
    c.eos_id = DT_EOS;
    c.pos = v->pos;
    c.norm_first = v->norm_first;
    c.tie_embeddings = v->tie;
    c.final_norm = !v->no_final;
    c.activation = QKV_ACT_GELU;
    set_attn(&c.self_attn, v, arch == QKV_ARCH_DECODER);
    set_attn(&c.dec_self_attn, v, true);
    set_attn(&c.cross_attn, v, false);
    qkv_model *m = NULL;
    CHECK_OK(qkv_model_new(&c, seed, &m));
    if (m) sharpen_output(m, sharpen);
    return m;
}

qkv_model *dt_seq2seq(const dt_variant *v, int32_t tgt_vocab, double sharpen, uint64_t seed) {
    return build(QKV_ARCH_ENCODER_DECODER, v, tgt_vocab, sharpen, seed);
}

qkv_model *dt_lm(const dt_variant *v, int32_t vocab, double sharpen, uint64_t seed) {
    return build(QKV_ARCH_DECODER, v, vocab, sharpen, seed);
}

qkv_decode_params dt_params(qkv_decode_strategy strategy) {
    qkv_decode_params p = qkv_decode_default_params();
    p.strategy = strategy;
    p.kernels = qkv_test_kernels;
    p.bos_id = DT_BOS;
    p.eos_id = DT_EOS;
    return p;
}

/* log_softmax of row `pos` of logits (1, T, V) at token tok, in double. */
static double log_prob(const qkv_tensor *logits, int64_t pos, int32_t tok) {
    const int64_t V = logits->shape[2];
    const qkv_real *row = (const qkv_real *)logits->data + pos * V;
    double mx = -INFINITY, sum = 0;
    for (int64_t v = 0; v < V; v++)
        mx = fmax(mx, (double)row[v]);
    for (int64_t v = 0; v < V; v++)
        sum += exp((double)row[v] - mx);
    return (double)row[tok] - mx - log(sum);
}

/* Next-token logits (1, T, V) of the full forward over prefix (len ids). */
static qkv_tensor *full_logits(qkv_ctx *ctx, const qkv_model *m, const int32_t *src,
                               int32_t src_len, const int32_t *prefix, int32_t len) {
    qkv_tensor *in = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){1, len}, prefix);
    if (m->cfg.arch == QKV_ARCH_DECODER) return qkv_model_lm(ctx, m, in, NULL);
    qkv_tensor *s = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){1, src_len}, src);
    return qkv_model_decode(ctx, m, in, qkv_model_encode(ctx, m, s, NULL), s, NULL, NULL);
}

double dt_teacher_score(const qkv_model *m, const int32_t *src, int32_t src_len,
                        const int32_t *tokens, int32_t len) {
    const bool lm = m->cfg.arch == QKV_ARCH_DECODER;
    const int32_t P = lm ? src_len : 1;
    int32_t prefix[64];
    if (lm)
        memcpy(prefix, src, sizeof(int32_t) * (size_t)P);
    else
        prefix[0] = DT_BOS;
    memcpy(prefix + P, tokens, sizeof(int32_t) * (size_t)len);
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_tensor *logits = full_logits(ctx, m, src, src_len, prefix, P + len - 1);
    double score = 0;
    CHECK_OK(qkv_ctx_status(ctx));
    for (int32_t g = 0; logits && g < len; g++)
        score += log_prob(logits, P - 1 + g, tokens[g]);
    qkv_ctx_free(ctx);
    return score;
}

void dt_next_logits(const qkv_model *m, const int32_t *src, int32_t src_len, const int32_t *fed, int32_t n_fed,
                    double *out) {
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_tensor *logits = full_logits(ctx, m, src, src_len, fed, n_fed);
    CHECK_OK(qkv_ctx_status(ctx));
    const int64_t V = m->cfg.tgt_vocab;
    for (int64_t v = 0; logits && v < V; v++)
        out[v] = (double)((const qkv_real *)logits->data)[(int64_t)(n_fed - 1) * V + v];
    qkv_ctx_free(ctx);
}

typedef struct {
    const qkv_model *m;
    const int32_t *src;
    int32_t src_len, max_len, P;
    qkv_ctx *ctx;
    dt_seq *out;
    int32_t n, cap;
} search;

static void extend(search *s, int32_t *prefix, int32_t len, double score) {
    qkv_ctx_reset(s->ctx);
    qkv_tensor *logits = full_logits(s->ctx, s->m, s->src, s->src_len, prefix, len);
    CHECK_OK(qkv_ctx_status(s->ctx));
    if (!logits) return;
    const int32_t g = len - s->P; /* tokens generated so far */
    double lp[64];
    const int32_t V = s->m->cfg.tgt_vocab;
    for (int32_t v = 0; v < V; v++)
        lp[v] = log_prob(logits, len - 1, v);
    for (int32_t v = 0; v < V; v++) {
        if (v == DT_PAD) continue;
        prefix[len] = v;
        if (v == DT_EOS || g + 1 == s->max_len) {
            if (s->n == s->cap) {
                s->cap = s->cap ? 2 * s->cap : 256;
                s->out = realloc(s->out, sizeof(dt_seq) * (size_t)s->cap);
            }
            dt_seq *q = &s->out[s->n++];
            memcpy(q->tokens, prefix + s->P, sizeof(int32_t) * (size_t)(g + 1));
            q->length = g + 1;
            q->score = score + lp[v];
        } else {
            extend(s, prefix, len + 1, score + lp[v]);
        }
    }
}

dt_seq *dt_exhaustive(const qkv_model *m, const int32_t *src, int32_t src_len, int32_t max_len,
                      int32_t *n) {
    search s = {m,        src,  src_len, max_len, m->cfg.arch == QKV_ARCH_DECODER ? src_len : 1,
                tu_ctx(), NULL, 0,       0};
    qkv_ctx_set_grad_enabled(s.ctx, false);
    int32_t prefix[64];
    if (m->cfg.arch == QKV_ARCH_DECODER)
        memcpy(prefix, src, sizeof(int32_t) * (size_t)src_len);
    else
        prefix[0] = DT_BOS;
    extend(&s, prefix, s.P, 0);
    qkv_ctx_free(s.ctx);
    *n = s.n;
    return s.out;
}

bool dt_same_tokens(const int32_t *a, int32_t na, const int32_t *b, int32_t nb) {
    return na == nb && (na == 0 || memcmp(a, b, sizeof(int32_t) * (size_t)na) == 0);
}

void dt_mha(qkv_mha *m, qkv_params **p, const qkv_mha_config *cfg, const char *prefix,
            uint64_t seed) {
    *p = NULL;
    CHECK_OK(qkv_params_new(p));
    CHECK_OK(qkv_mha_init(m, cfg, *p, prefix));
    CHECK_OK(qkv_params_finalize(*p));
    qkv_mha_reset_parameters(m, seed);
}

bool dt_same_bits(const qkv_hypotheses *x, const qkv_hypotheses *y) {
    if (x->batch != y->batch || x->n_best != y->n_best) return false;
    for (int32_t b = 0; b < x->batch; b++) {
        if (x->count[b] != y->count[b]) return false;
        for (int32_t i = 0; i < x->count[b]; i++) {
            const qkv_hypothesis *a = &x->hyp[b * x->n_best + i], *c = &y->hyp[b * y->n_best + i];
            if (a->length != c->length || a->finished != c->finished ||
                memcmp(a->tokens, c->tokens, sizeof(int32_t) * (size_t)a->length) != 0 ||
                memcmp(&a->score, &c->score, sizeof a->score) != 0 ||
                memcmp(&a->norm_score, &c->norm_score, sizeof a->norm_score) != 0)
                return false;
        }
    }
    return true;
}
