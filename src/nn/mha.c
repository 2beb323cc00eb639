/*
 * mha.c: multi-head attention (module). See qkv_nn.h for the math and parameter names.
 *
 * Dims: B batch, T query length, S key length, C model width, H heads, D = C / H, A additive width.
 * Self-attention runs one GEMM x (B, T, C) . in_proj_weight^T (C, 3C) and splits q, k, v as views;
 * cross-attention runs one GEMM for q and one for k and v together.
 *
 * The projection, the scores and the attention-plus-output stages are shared with the incremental
 * decoding step (mha_cached.c) through nn_internal.h; they take the position of the first query
 * (query_offset, 0 here) so relative encodings see the right distances.
 */
#include "nn_internal.h"
#include "qkv/qkv_registry.h"

#include <math.h>
#include <stdio.h>

qkv_mha_config qkv_mha_default_config(int32_t d_model, int32_t n_heads) {
    qkv_mha_config c;
    memset(&c, 0, sizeof c);
    c.d_model = d_model;
    c.n_heads = n_heads;
    c.score = QKV_SCORE_SCALED_DOT;
    c.norm = QKV_NORM_SOFTMAX;
    c.bias = true;
    c.dropout = 0;
    c.cos_scale_learnable = true;
    c.cos_scale_init = 10;
    c.additive_dim = 0; /* 0: D */
    c.relpos = QKV_RELPOS_NONE;
    c.relpos_max_distance = 0; /* 0: 16 for Shaw, 128 for T5 */
    c.relpos_buckets = 32;
    c.relpos_bidirectional = true;
    c.rope_base = 10000;
    c.use_fused = true;
    return c;
}

static int32_t head_dim(const qkv_mha_config *c) { return c->d_model / c->n_heads; }
static int32_t additive_dim(const qkv_mha_config *c) { return c->additive_dim > 0 ? c->additive_dim : head_dim(c); }
static int32_t max_distance(const qkv_mha_config *c) {
    return c->relpos_max_distance > 0 ? c->relpos_max_distance : (c->relpos == QKV_RELPOS_T5 ? 128 : 16);
}

/* The largest additive width, Shaw / T5 distance and T5 bucket count a configuration may ask for:
 * far past any use, and small enough that the tables they size cannot overflow. */
enum { MHA_MAX_ADDITIVE_DIM = 1 << 16, MHA_MAX_RELPOS = 100000 };
/* Cosine scores lie in [-1, 1]: at scale 1e4 softmax is one-hot to float precision. */
#define MHA_MAX_COS_SCALE 1e4

qkv_status qkv__mha_config_check(const qkv_mha_config *cfg, const char *who) {
#define BAD(...) QKV_ERROR(QKV_ERR_INVALID_ARG, __VA_ARGS__)
    const int64_t C = cfg->d_model, H = cfg->n_heads;
    if (C <= 0 || H <= 0 || C % H != 0)
        return BAD("%s: d_model %lld is not a positive multiple of n_heads %lld", who, (long long)C, (long long)H);
    if (!qkv_registry_name(QKV_REGISTRY_SCORE, cfg->score) || !qkv_registry_name(QKV_REGISTRY_NORM, cfg->norm) ||
        !qkv_registry_name(QKV_REGISTRY_RELPOS, cfg->relpos))
        return BAD("%s: unknown score (%d), normaliser (%d) or relpos (%d)", who, (int)cfg->score, (int)cfg->norm,
                   (int)cfg->relpos);
    if (!(cfg->dropout >= 0 && cfg->dropout < 1)) return BAD("%s: dropout %g is not in [0, 1)", who, cfg->dropout);
    if (cfg->score == QKV_SCORE_COSINE && !(cfg->cos_scale_init > 0 && cfg->cos_scale_init <= MHA_MAX_COS_SCALE))
        return BAD("%s: cos_scale_init %g is not in (0, %g]", who, cfg->cos_scale_init, MHA_MAX_COS_SCALE);
    if (cfg->additive_dim < 0 || cfg->additive_dim > MHA_MAX_ADDITIVE_DIM)
        return BAD("%s: additive_dim %d is not in [0, %d] (0: the head size)", who, cfg->additive_dim,
                   MHA_MAX_ADDITIVE_DIM);
    const bool shaw = cfg->relpos == QKV_RELPOS_SHAW, t5 = cfg->relpos == QKV_RELPOS_T5;
    if ((shaw || t5) && (cfg->relpos_max_distance < 0 || cfg->relpos_max_distance > MHA_MAX_RELPOS))
        return BAD("%s: relpos_max_distance %d is not in [0, %d] (0: the default)", who, cfg->relpos_max_distance,
                   MHA_MAX_RELPOS);
    if (t5 && (cfg->relpos_buckets < 1 || cfg->relpos_buckets > MHA_MAX_RELPOS))
        return BAD("%s: relpos_buckets %d is not in [1, %d]", who, cfg->relpos_buckets, MHA_MAX_RELPOS);
    if (t5 && qkv_t5_bucket(0, cfg->relpos_bidirectional, cfg->relpos_buckets, max_distance(cfg)) < 0) {
        char msg[400]; /* the bucketing's own rule (ops/posenc_t5.c) */
        snprintf(msg, sizeof msg, "%s", qkv_last_error());
        return BAD("%s: %s", who, msg);
    }
    /* base < 1 makes the angles p base^(-2i/D) grow without bound: sin(inf) is NaN */
    if (cfg->relpos == QKV_RELPOS_ROPE && !(cfg->rope_base >= 1 && isfinite(cfg->rope_base)))
        return BAD("%s: rope_base %g must be finite and >= 1", who, cfg->rope_base);
    if (cfg->relpos == QKV_RELPOS_ROPE && (C / H) % 2)
        return BAD("%s: RoPE needs an even head size, got %lld", who, (long long)(C / H));
#undef BAD
    return QKV_OK;
}

qkv_status qkv_mha_init(qkv_mha *m, const qkv_mha_config *cfg, qkv_params *p, const char *prefix) {
    if (!m || !cfg || !p) return QKV_ERROR(QKV_ERR_INVALID_ARG, "mha_init: NULL argument");
    memset(m, 0, sizeof *m);
    qkv_status st = qkv__mha_config_check(cfg, "mha_init");
    if (st) return st;
    const int64_t C = cfg->d_model, H = cfg->n_heads;
    const int64_t D = C / H, A = additive_dim(cfg), K = max_distance(cfg);
    m->cfg = *cfg;
#define ADD(name, ndim, field, ...) \
    if (!st) st = qkv__params_add_prefixed(p, prefix, name, ndim, (const int64_t[]){__VA_ARGS__}, &m->field)
    ADD("in_proj_weight", 2, in_proj_weight, 3 * C, C);
    if (cfg->bias) ADD("in_proj_bias", 1, in_proj_bias, 3 * C);
    ADD("out_proj.weight", 2, out_proj_weight, C, C);
    if (cfg->bias) ADD("out_proj.bias", 1, out_proj_bias, C);
    if (cfg->score == QKV_SCORE_GENERAL) ADD("general_weight", 3, general_weight, H, D, D);
    if (cfg->score == QKV_SCORE_ADDITIVE) {
        ADD("additive_wq", 3, additive_wq, H, A, D);
        ADD("additive_wk", 3, additive_wk, H, A, D);
        ADD("additive_v", 2, additive_v, H, A);
    }
    if (cfg->score == QKV_SCORE_COSINE && cfg->cos_scale_learnable) ADD("cos_scale", 1, cos_scale, H);
    if (cfg->relpos == QKV_RELPOS_SHAW) {
        ADD("rel_k", 2, rel_k, 2 * K + 1, D);
        ADD("rel_v", 2, rel_v, 2 * K + 1, D);
    }
    if (cfg->relpos == QKV_RELPOS_T5) ADD("t5_bias", 2, t5_bias, cfg->relpos_buckets, H);
#undef ADD
    return st;
}

void qkv_mha_reset_parameters(qkv_mha *m, uint64_t seed) {
    const double C = m->cfg.d_model, D = head_dim(&m->cfg);
    qkv_init_xavier_uniform(m->in_proj_weight, seed, 1);
    if (m->in_proj_bias) qkv_init_constant(m->in_proj_bias, 0);
    qkv_init_uniform(m->out_proj_weight, -1 / sqrt(C), 1 / sqrt(C), seed, 2);
    if (m->out_proj_bias) qkv_init_constant(m->out_proj_bias, 0);
    if (m->general_weight) qkv_init_uniform(m->general_weight, -sqrt(3.0 / D), sqrt(3.0 / D), seed, 3);
    if (m->additive_wq) {
        double a = sqrt(6.0 / (D + additive_dim(&m->cfg)));
        qkv_init_uniform(m->additive_wq, -a, a, seed, 4);
        qkv_init_uniform(m->additive_wk, -a, a, seed, 5);
        double b = 1 / sqrt((double)additive_dim(&m->cfg));
        qkv_init_uniform(m->additive_v, -b, b, seed, 6);
    }
    if (m->cos_scale) qkv_init_constant(m->cos_scale, m->cfg.cos_scale_init);
    if (m->rel_k) {
        qkv_init_normal(m->rel_k, 0, 1 / sqrt(D), seed, 7);
        qkv_init_normal(m->rel_v, 0, 1 / sqrt(D), seed, 8);
    }
    if (m->t5_bias) qkv_init_normal(m->t5_bias, 0, 0.1, seed, 9);
}

void qkv__mha_project(qkv_ctx *ctx, const qkv_mha *m, qkv_tensor *x, int first, int count, qkv_tensor **heads) {
    const int64_t C = m->cfg.d_model, H = m->cfg.n_heads, D = C / H;
    qkv_tensor *w = qkv_narrow(ctx, m->in_proj_weight, 0, first * C, count * C); /* (count C, C) */
    qkv_tensor *b = m->in_proj_bias ? qkv_narrow(ctx, m->in_proj_bias, 0, first * C, count * C) : NULL;
    qkv_tensor *y = qkv_linear(ctx, x, w, b); /* (B, L, count C) */
    if (!y) return;
    qkv_tensor *r = qkv_reshape(ctx, y, 4, (int64_t[]){y->shape[0], y->shape[1], count * H, D}); /* (B, L, count H, D) */
    qkv_tensor *t = qkv_permute(ctx, r, (const int[]){0, 2, 1, 3});                            /* (B, count H, L, D) */
    for (int i = 0; i < count; i++) heads[i] = qkv_narrow(ctx, t, 1, i * H, H);                 /* (B, H, L, D) */
}

qkv_tensor *qkv__mha_scores(qkv_ctx *ctx, const qkv_mha *m, qkv_tensor *q, qkv_tensor *k, int64_t query_offset) {
    const qkv_mha_config *c = &m->cfg;
    const int64_t H = c->n_heads, D = head_dim(c), T = q->shape[2], S = k->shape[2];
    const double inv_sqrt_d = 1 / sqrt((double)D);
    qkv_tensor *e = NULL;
    double content_scale = 1;
    switch (c->score) {
    case QKV_SCORE_DOT:
    case QKV_SCORE_SCALED_DOT:
    case QKV_SCORE_COSINE:
        e = qkv_attn_scores(ctx, q, k, c->score, m->cos_scale, c->cos_scale_init);
        content_scale = c->score == QKV_SCORE_SCALED_DOT ? inv_sqrt_d : 1;
        break;
    case QKV_SCORE_GENERAL: { /* q^T W k = q . (k W^T) */
        qkv_tensor *kw = qkv_matmul(ctx, k, m->general_weight, false, true); /* (B, H, S, D) */
        e = qkv_attn_scores(ctx, q, kw, QKV_SCORE_DOT, NULL, 1);
        break;
    }
    case QKV_SCORE_ADDITIVE: {
        qkv_tensor *qp = qkv_matmul(ctx, q, m->additive_wq, false, true); /* (B, H, T, A) */
        qkv_tensor *kp = qkv_matmul(ctx, k, m->additive_wk, false, true); /* (B, H, S, A) */
        e = qkv_additive_scores(ctx, qp, kp, m->additive_v);
        break;
    }
    }
    switch (c->relpos) {
    case QKV_RELPOS_SHAW: /* e_ij += q_i . a^K_{j-i}, scaled like the content term */
        e = qkv_add(ctx, e, qkv_scale(ctx, qkv_shaw_scores_at(ctx, q, m->rel_k, S, query_offset), content_scale));
        break;
    case QKV_RELPOS_T5:
        e = qkv_add(ctx, e,
                    qkv_t5_bias_at(ctx, m->t5_bias, T, S, query_offset, c->relpos_bidirectional, max_distance(c)));
        break;
    case QKV_RELPOS_ALIBI:
        e = qkv_add(ctx, e, qkv_alibi_bias_at(ctx, H, T, S, query_offset));
        break;
    case QKV_RELPOS_NONE:
    case QKV_RELPOS_ROPE: break;
    }
    return e;
}

qkv_tensor *qkv_mha_forward(qkv_ctx *ctx, const qkv_mha *m, qkv_tensor *query, qkv_tensor *key, qkv_tensor *value,
                            const qkv_mask *mask, qkv_tensor **weights_out) {
    if (weights_out) *weights_out = NULL;
    if (!QKV_OP_BEGIN(ctx, "mha", query, key, value)) return NULL;
    if (!m || !m->in_proj_weight) return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "mha: module is not initialised");
    const qkv_mha_config *c = &m->cfg;
    const int64_t C = c->d_model;
    char bq[96], bk[96], bv[96];
    if (query->ndim != 3 || key->ndim != 3 || value->ndim != 3 || query->shape[2] != C || key->shape[2] != C ||
        value->shape[2] != C || key->shape[0] != query->shape[0] || value->shape[0] != query->shape[0] ||
        key->shape[1] != value->shape[1])
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "mha: query %s, key %s, value %s are not (B, T, %lld), (B, S, %lld), (B, S, %lld)",
                        qkv_tensor_shape_str(query, bq, sizeof bq), qkv_tensor_shape_str(key, bk, sizeof bk),
                        qkv_tensor_shape_str(value, bv, sizeof bv), (long long)C, (long long)C, (long long)C);
    qkv_tensor *q = NULL, *k = NULL, *v = NULL;
    if (query == key && key == value) { /* self-attention: one GEMM for q, k, v */
        qkv_tensor *qkv[3] = {NULL, NULL, NULL};
        qkv__mha_project(ctx, m, query, 0, 3, qkv);
        q = qkv[0], k = qkv[1], v = qkv[2];
    } else {
        qkv__mha_project(ctx, m, query, 0, 1, &q);
        if (key == value) {
            qkv_tensor *kv[2] = {NULL, NULL};
            qkv__mha_project(ctx, m, key, 1, 2, kv);
            k = kv[0], v = kv[1];
        } else {
            qkv__mha_project(ctx, m, key, 1, 1, &k);
            qkv__mha_project(ctx, m, value, 2, 1, &v);
        }
    }
    if (ctx->status) return NULL;
    if (c->relpos == QKV_RELPOS_ROPE) {
        q = qkv_rope(ctx, q, 0, c->rope_base);
        k = qkv_rope(ctx, k, 0, c->rope_base);
    }
    return qkv__mha_attend(ctx, m, q, k, v, mask, 0, weights_out);
}

qkv_tensor *qkv__mha_attend(qkv_ctx *ctx, const qkv_mha *m, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v,
                            const qkv_mask *mask, int64_t query_offset, qkv_tensor **weights_out) {
    if (weights_out) *weights_out = NULL;
    if (ctx->status) return NULL;
    const qkv_mha_config *c = &m->cfg;
    const int64_t H = c->n_heads, D = c->d_model / H;
    const bool dropout_on = ctx->training && c->dropout > 0;
    /* Training with short keys: the composed arithmetic (scores, softmax, dropout, product) runs
     * its products in BLAS and draws the exponentials and dropout words once, where the fused
     * kernel tiles, recomputes and keeps nothing, which is slower at short keys (config B,
     * T = S = 64, H S = C; BENCHMARKS.md). qkv_sdpa_weights does that arithmetic keeping only
     * the (B, H, T, S) weights; while H S <= C they take at most as much per query as q, k and v
     * do (C each), so it is the better trade; past it memory grows with S and the fused kernel
     * takes over. Score functions, normalisers and encodings the two ops do not cover take the
     * composed ops themselves. */
    const bool short_keys = ctx->training && !c->fused_always && H * k->shape[2] <= c->d_model;
    /* qkv_sdpa's ALiBi term counts queries from 0: with an offset the bias goes through the scores */
    const bool fused = c->use_fused && !short_keys && !weights_out && c->score == QKV_SCORE_SCALED_DOT &&
                       c->norm == QKV_NORM_SOFTMAX &&
                       (c->relpos == QKV_RELPOS_NONE || c->relpos == QKV_RELPOS_ROPE ||
                        (c->relpos == QKV_RELPOS_ALIBI && query_offset == 0));
    /* the composed ops' arithmetic in one op that keeps only the weights (qkv_sdpa_weights) */
    const bool weights_op = c->use_fused && short_keys && !weights_out && c->score == QKV_SCORE_SCALED_DOT &&
                            c->norm == QKV_NORM_SOFTMAX && (c->relpos == QKV_RELPOS_NONE || c->relpos == QKV_RELPOS_ROPE);
    qkv_tensor *merged; /* (B, T, C) */
    if (weights_op) { /* the heads merged as they are written: no merge copy */
        merged = qkv_sdpa_weights_merged(ctx, q, k, v, 1 / sqrt((double)D), mask, dropout_on ? c->dropout : 0);
    } else {
        qkv_tensor *o; /* (B, H, T, D) */
        if (fused) {
            qkv_real *slopes = NULL;
            if (c->relpos == QKV_RELPOS_ALIBI) {
                slopes = qkv__scratch(ctx, sizeof(qkv_real) * (size_t)H);
                if (!slopes) return NULL;
                qkv_alibi_slopes(H, slopes);
            }
            /* dropout inside the kernel: the mask and random position of the composed path's */
            o = qkv_sdpa_dropout(ctx, q, k, v, 1 / sqrt((double)D), mask, slopes, dropout_on ? c->dropout : 0);
        } else {
            qkv_tensor *e = qkv__mha_scores(ctx, m, q, k, query_offset); /* (B, H, T, S) */
            qkv_tensor *a = qkv_attn_normalize(ctx, e, c->norm, mask);  /* (B, H, T, S) */
            if (weights_out) *weights_out = a;
            qkv_tensor *ad = qkv_dropout(ctx, a, c->dropout);
            o = qkv_matmul(ctx, ad, v, false, false); /* (B, H, T, D) */
            if (c->relpos == QKV_RELPOS_SHAW) o = qkv_add(ctx, o, qkv_shaw_values_at(ctx, ad, m->rel_v, query_offset));
        }
        merged = qkv_merge_heads(ctx, o);
    }
    qkv_tensor *y = qkv_linear(ctx, merged, m->out_proj_weight, m->out_proj_bias); /* (B, T, C) */
    if (ctx->status && weights_out) *weights_out = NULL;
    return y;
}
