/*
 * test_mask_predict.c: mask-predict decoding of non-autoregressive models (src/infer/
 * mask_predict.c) against a reference written here from the paper's description, one input at a
 * time through the full forward (qkv_model_encode / qkv_model_length_logits / qkv_model_decode):
 * one iteration is the argmax of one parallel pass at the argmax length; T iterations re-mask
 * floor(L (T - t) / T) lowest-probability tokens (ties: the lower position); length_beam l decodes
 * the l most probable lengths and ranks them by average log-probability; a batch decodes as its
 * inputs alone; bad parameters and models are clear errors.
 */
#include "decode_testutil.h"
#include "infer/infer_internal.h"

#include <math.h>

enum { VT = 12, MASK = 11, MAXLEN = 16 };

/* A random nat model (vocab: pad 0, bos 1, eos 2, tokens 3 .. 10, mask 11) whose output and
 * length head are scaled by `sharpen` for peakier distributions. */
static qkv_model *nat_model(const dt_variant *v, uint64_t seed) {
    qkv_model_config c = qkv_model_default_config(QKV_ARCH_ENCODER_DECODER, 8, 2, 2);
    c.src_vocab = 11;
    c.tgt_vocab = VT;
    c.dim_feedforward = 16;
    c.dropout = 0;
    c.max_len = MAXLEN;
    c.pos = v->pos;
    c.norm_first = v->norm_first;
    c.activation = QKV_ACT_GELU;
    c.self_attn.score = c.dec_self_attn.score = c.cross_attn.score = v->score;
    c.self_attn.relpos = c.dec_self_attn.relpos = v->relpos;
    c.dec_self_attn.relpos_bidirectional = true;
    c.nat = true;
    c.mask_id = MASK;
    c.bos_id = DT_BOS;
    c.eos_id = DT_EOS;
    qkv_model *m = NULL;
    CHECK_OK(qkv_model_new(&c, seed, &m));
    if (!m) return NULL;
    for (int k = 0; k < 2; k++) {
        qkv_tensor *w = k ? m->length_w : m->out_w;
        for (int64_t i = 0; i < qkv_tensor_numel(w); i++)
            ((qkv_real *)w->data)[i] *= (qkv_real)(k ? 6 : 4);
    }
    return m;
}

static const dt_variant variants[] = {
    {"scaled dot, sinusoidal, post-LN", QKV_SCORE_SCALED_DOT, QKV_NORM_SOFTMAX, QKV_RELPOS_NONE,
     QKV_POS_SINUSOIDAL, false, false, false, false},
    {"learned positions, pre-LN", QKV_SCORE_SCALED_DOT, QKV_NORM_SOFTMAX, QKV_RELPOS_NONE,
     QKV_POS_LEARNED, true, false, false, false},
    {"T5 bidirectional + sinusoidal", QKV_SCORE_DOT, QKV_NORM_SOFTMAX, QKV_RELPOS_T5,
     QKV_POS_SINUSOIDAL, false, false, false, true},
};

/* ---- the reference, one input ------------------------------------------------------------- */

/* Length logits (max_len + 1) of one source. */
static void ref_length_logits(const qkv_model *m, const int32_t *src, int32_t S, double *out) {
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_tensor *s = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){1, S}, src);
    qkv_tensor *len = qkv_model_length_logits(ctx, m, qkv_model_encode(ctx, m, s, NULL), s);
    CHECK_OK(qkv_ctx_status(ctx));
    for (int k = 0; k <= MAXLEN; k++)
        out[k] = len ? ((qkv_real *)len->data)[k] : 0;
    qkv_ctx_free(ctx);
}

/* The lengths 1 .. max_len sorted by logit, most probable first (ties: shorter first). */
static void ref_length_order(const double *logits, int32_t max_len, int32_t *order) {
    for (int32_t i = 0; i < max_len; i++)
        order[i] = i + 1;
    for (int32_t i = 1; i < max_len; i++)
        for (int32_t k = i; k > 0 && logits[order[k]] > logits[order[k - 1]]; k--) {
            int32_t x = order[k];
            order[k] = order[k - 1];
            order[k - 1] = x;
        }
}

/* One decoder pass over y (L) (mask_id where masked): for each masked position the argmax (not
 * pad, not mask; ties to the lowest id) and its log-probability. */
static void ref_pass(const qkv_model *m, const int32_t *src, int32_t S, int32_t *y, double *score,
                     const bool *masked, int32_t L) {
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_tensor *s = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){1, S}, src);
    int32_t in[MAXLEN];
    for (int32_t i = 0; i < L; i++)
        in[i] = masked[i] ? MASK : y[i];
    qkv_tensor *t = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){1, L}, in);
    qkv_tensor *logits =
        qkv_model_decode(ctx, m, t, qkv_model_encode(ctx, m, s, NULL), s, NULL, NULL);
    CHECK_OK(qkv_ctx_status(ctx));
    for (int32_t i = 0; logits && i < L; i++) {
        if (!masked[i]) continue;
        const qkv_real *z = (qkv_real *)logits->data + i * VT;
        double mx = -INFINITY, se = 0;
        for (int v = 0; v < VT; v++)
            mx = fmax(mx, z[v]);
        for (int v = 0; v < VT; v++)
            se += exp(z[v] - mx);
        int32_t best = 1;
        for (int v = 2; v < VT; v++)
            if (v != MASK && z[v] > z[best]) best = v;
        y[i] = best;
        score[i] = z[best] - mx - log(se);
    }
    qkv_ctx_free(ctx);
}

/* Mask-predict at length L with T iterations, from section 3.2 of the paper. */
static double ref_mask_predict(const qkv_model *m, const int32_t *src, int32_t S, int32_t L,
                               int32_t T, int32_t *y) {
    double score[MAXLEN];
    bool masked[MAXLEN] = {false};
    for (int32_t i = 0; i < L; i++)
        masked[i] = true;
    ref_pass(m, src, S, y, score, masked, L);
    for (int32_t t = 1; t < T; t++) {
        const int32_t n = L * (T - t) / T;
        /* the n lowest scores, earlier position first among equals: n rounds of "pick the
         * smallest not yet picked" */
        for (int32_t i = 0; i < L; i++)
            masked[i] = false;
        for (int32_t k = 0; k < n; k++) {
            int32_t pick = -1;
            for (int32_t i = 0; i < L; i++)
                if (!masked[i] && (pick < 0 || score[i] < score[pick])) pick = i;
            masked[pick] = true;
        }
        if (n > 0) ref_pass(m, src, S, y, score, masked, L);
    }
    double sum = 0;
    for (int32_t i = 0; i < L; i++)
        sum += score[i];
    return sum;
}

static qkv_decode_params mp_params(int32_t iterations, int32_t length_beam) {
    qkv_decode_params p = dt_params(QKV_DECODE_MASK_PREDICT);
    p.iterations = iterations;
    p.length_beam = length_beam;
    return p;
}

/* three sources back to back */
static const int32_t SRC[] = {5, 3, 9, 2, 7, /**/ 4, 8, /**/ 10, 6, 6, 1};
static const int32_t SRC_LEN[] = {5, 2, 4};
static const int32_t SRC_OFF[] = {0, 5, 7};

TEST(mask_predict_one_iteration_is_one_parallel_pass_at_the_argmax_length) {
    for (size_t k = 0; k < sizeof variants / sizeof *variants; k++) {
        qkv_model *m = nat_model(&variants[k], 10 + k);
        if (!m) continue;
        qkv_decode_params p = mp_params(1, 1);
        qkv_hypotheses h;
        CHECK_OK(qkv_decode(m, SRC, SRC_LEN, 3, &p, &h));
        for (int b = 0; h.count && b < 3; b++) {
            double logits[MAXLEN + 1];
            int32_t order[MAXLEN], y[MAXLEN];
            ref_length_logits(m, SRC + SRC_OFF[b], SRC_LEN[b], logits);
            ref_length_order(logits, MAXLEN, order);
            const int32_t L = order[0];
            bool masked[MAXLEN];
            double score[MAXLEN], sum = 0;
            for (int i = 0; i < L; i++)
                masked[i] = true;
            ref_pass(m, SRC + SRC_OFF[b], SRC_LEN[b], y, score, masked, L);
            for (int i = 0; i < L; i++)
                sum += score[i];
            const qkv_hypothesis *x = &h.hyp[b];
            CHECK_MSG(h.count[b] == 1 && x->length == L &&
                          dt_same_tokens(x->tokens, x->length, y, L) && x->finished,
                      "%s, input %d: length %d (argmax %d)", variants[k].name, b, x->length, L);
            CHECK_NEAR(x->score, sum, DT_TOL * fmax(1, fabs(sum)));
            CHECK_NEAR(x->norm_score, x->score / x->length, 1e-12 * fmax(1, fabs(x->score)));
        }
        qkv_hypotheses_free(&h);
        qkv_model_free(m);
    }
}

TEST(mask_predict_remask_counts_and_ties) {
    /* n = floor(L (T - t) / T), by hand: L 7, T 10 and L 4, T 4 */
    const int32_t n7[9] = {6, 5, 4, 4, 3, 2, 2, 1, 0}, n4[3] = {3, 2, 1};
    for (int t = 1; t < 10; t++)
        CHECK(dec_mask_predict_count(7, 10, t) == n7[t - 1]);
    for (int t = 1; t < 4; t++)
        CHECK(dec_mask_predict_count(4, 4, t) == n4[t - 1]);
    CHECK(dec_mask_predict_count(1000000, 1000, 999) == 1000);
    /* the n lowest, ties to the lower position */
    const double s[5] = {-1, -3, -1, -3, -2};
    const bool want[5][5] = {
        {0, 0, 0, 0, 0}, {0, 1, 0, 0, 0}, {0, 1, 0, 1, 0}, {0, 1, 0, 1, 1}, {1, 1, 0, 1, 1}};
    for (int n = 0; n < 5; n++) {
        bool got[5];
        dec_mask_lowest(s, 5, n, got);
        CHECK_MSG(memcmp(got, want[n], sizeof got) == 0, "n = %d", n);
    }
    /* whole decodes against the reference for several T, every length candidate */
    for (size_t k = 0; k < sizeof variants / sizeof *variants; k++) {
        qkv_model *m = nat_model(&variants[k], 20 + k);
        if (!m) continue;
        for (int32_t T = 2; T <= 5; T += 3) {
            qkv_decode_params p = mp_params(T, 3);
            p.n_best = 3;
            qkv_hypotheses h;
            CHECK_OK(qkv_decode(m, SRC, SRC_LEN, 3, &p, &h));
            for (int b = 0; h.count && b < 3; b++) {
                CHECK(h.count[b] == 3);
                for (int i = 0; i < h.count[b]; i++) {
                    const qkv_hypothesis *x = &h.hyp[b * 3 + i];
                    int32_t y[MAXLEN];
                    const double sum =
                        ref_mask_predict(m, SRC + SRC_OFF[b], SRC_LEN[b], x->length, T, y);
                    CHECK_MSG(dt_same_tokens(x->tokens, x->length, y, x->length),
                              "%s, T %d, input %d, length %d", variants[k].name, T, b, x->length);
                    CHECK_NEAR(x->score, sum, DT_TOL * fmax(1, fabs(sum)));
                }
            }
            qkv_hypotheses_free(&h);
        }
        qkv_model_free(m);
    }
}

TEST(mask_predict_length_beam_ranks_the_most_probable_lengths) {
    qkv_model *m = nat_model(&variants[1], 31);
    if (!m) return;
    enum { L_BEAM = 4 };
    qkv_decode_params all = mp_params(3, L_BEAM), best = mp_params(3, L_BEAM),
                      one = mp_params(3, 1);
    all.n_best = L_BEAM;
    qkv_hypotheses ha, hb, h1;
    CHECK_OK(qkv_decode(m, SRC, SRC_LEN, 3, &all, &ha));
    CHECK_OK(qkv_decode(m, SRC, SRC_LEN, 3, &best, &hb));
    CHECK_OK(qkv_decode(m, SRC, SRC_LEN, 3, &one, &h1));
    int picked_other = 0;
    for (int b = 0; ha.count && hb.count && h1.count && b < 3; b++) {
        double logits[MAXLEN + 1];
        int32_t order[MAXLEN];
        ref_length_logits(m, SRC + SRC_OFF[b], SRC_LEN[b], logits);
        ref_length_order(logits, MAXLEN, order);
        CHECK(h1.hyp[b].length == order[0]); /* length_beam 1: the argmax length */
        CHECK(ha.count[b] == L_BEAM && hb.count[b] == 1);
        bool seen[MAXLEN + 1] = {false};
        for (int i = 0; i < ha.count[b]; i++) {
            const qkv_hypothesis *x = &ha.hyp[b * L_BEAM + i];
            seen[x->length] = true;
            CHECK_NEAR(x->norm_score, x->score / x->length, 1e-12 * fmax(1, fabs(x->score)));
            if (i) CHECK(x->norm_score <= ha.hyp[b * L_BEAM + i - 1].norm_score);
        }
        for (int i = 0; i < L_BEAM; i++)
            CHECK_MSG(seen[order[i]], "input %d: length %d (rank %d) not decoded", b, order[i], i);
        /* n_best 1 returns the best of the same candidates */
        const qkv_hypothesis *top = &ha.hyp[b * L_BEAM], *x = &hb.hyp[b];
        CHECK(x->length == top->length &&
              dt_same_tokens(x->tokens, x->length, top->tokens, top->length) &&
              x->score == top->score);
        picked_other += x->length != order[0];
    }
    CHECK_MSG(picked_other > 0,
              "every input kept its argmax length: the test does not exercise the ranking");
    qkv_hypotheses_free(&ha), qkv_hypotheses_free(&hb), qkv_hypotheses_free(&h1);
    /* max_len bounds the candidate lengths (and the number of candidates) */
    qkv_decode_params shortp = mp_params(2, 5);
    shortp.max_len = 2;
    shortp.n_best = 5;
    CHECK_OK(qkv_decode(m, SRC, SRC_LEN, 3, &shortp, &ha));
    for (int b = 0; ha.count && b < 3; b++) {
        CHECK(ha.count[b] == 2);
        for (int i = 0; i < ha.count[b]; i++)
            CHECK(ha.hyp[b * 5 + i].length <= 2);
    }
    qkv_hypotheses_free(&ha);
    qkv_model_free(m);
}

TEST(mask_predict_batch_equals_inputs_alone_and_is_deterministic) {
    qkv_model *m = nat_model(&variants[0], 41);
    if (!m) return;
    qkv_decode_params p = mp_params(4, 3);
    qkv_hypotheses h, again;
    CHECK_OK(qkv_decode(m, SRC, SRC_LEN, 3, &p, &h));
    CHECK_OK(qkv_decode(m, SRC, SRC_LEN, 3, &p, &again));
    for (int b = 0; h.count && again.count && b < 3; b++) {
        CHECK(h.hyp[b].score == again.hyp[b].score &&
              dt_same_tokens(h.hyp[b].tokens, h.hyp[b].length, again.hyp[b].tokens,
                             again.hyp[b].length));
        qkv_hypotheses alone;
        CHECK_OK(qkv_decode(m, SRC + SRC_OFF[b], &SRC_LEN[b], 1, &p, &alone));
        if (!alone.count) continue;
        CHECK(dt_same_tokens(h.hyp[b].tokens, h.hyp[b].length, alone.hyp[0].tokens,
                             alone.hyp[0].length));
        CHECK_NEAR(h.hyp[b].score, alone.hyp[0].score, DT_TOL * fmax(1, fabs(alone.hyp[0].score)));
        qkv_hypotheses_free(&alone);
    }
    qkv_hypotheses_free(&h), qkv_hypotheses_free(&again);
    qkv_model_free(m);
}

TEST(mask_predict_rejects_bad_parameters_and_models) {
    qkv_model *nat = nat_model(&variants[0], 1);
    qkv_model *ar = dt_seq2seq(&dt_variants[0], VT, 1, 1);
    qkv_model *lm = dt_lm(&dt_variants[0], VT, 1, 1);
    if (!nat || !ar || !lm) return;
    qkv_hypotheses h;
    qkv_decode_params p = mp_params(0, 1);
    CHECK_ERR(qkv_decode(nat, SRC, SRC_LEN, 3, &p, &h), QKV_ERR_INVALID_ARG,
              "iterations >= 1 (got 0)");
    p = mp_params(2, 0);
    CHECK_ERR(qkv_decode(nat, SRC, SRC_LEN, 3, &p, &h), QKV_ERR_INVALID_ARG, "length_beam");
    p = mp_params(2, 2);
    p.n_best = 3;
    CHECK_ERR(qkv_decode(nat, SRC, SRC_LEN, 3, &p, &h), QKV_ERR_INVALID_ARG, "n_best 3");
    p = mp_params(2, 2);
    CHECK_ERR(qkv_decode(ar, SRC, SRC_LEN, 3, &p, &h), QKV_ERR_INVALID_ARG,
              "this one is autoregressive");
    CHECK_ERR(qkv_generate(lm, SRC, SRC_LEN, 3, &p, &h), QKV_ERR_INVALID_ARG,
              "this one is autoregressive");
    for (int s = 0; s < 3; s++) {
        qkv_decode_params q = dt_params((qkv_decode_strategy)s);
        CHECK_ERR(qkv_decode(nat, SRC, SRC_LEN, 3, &q, &h), QKV_ERR_INVALID_ARG,
                  "decode it with mask-predict");
    }
    p.strategy = (qkv_decode_strategy)4;
    CHECK_ERR(qkv_decode(nat, SRC, SRC_LEN, 3, &p, &h), QKV_ERR_INVALID_ARG, "unknown strategy 4");
    CHECK(h.count == NULL && h.hyp == NULL);
    qkv_session_params sp = qkv_session_default_params();
    sp.max_len = sp.max_src_len = 8;
    qkv_session *s = NULL;
    CHECK_ERR(qkv_session_new(nat, &sp, &s), QKV_ERR_INVALID_ARG, "non-autoregressive");
    CHECK(s == NULL);
    qkv_model_free(nat), qkv_model_free(ar), qkv_model_free(lm);
}
