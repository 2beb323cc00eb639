/*
 * test_controls.c: the controls of the next token (qkv_decode_params: allowed, no_repeat_ngram,
 * repetition_penalty) and the forced target prefix.
 *
 *   - greedy search under each control, and under all of them with a prefix, equals a greedy
 *     search written here from the definitions over the full-sequence forward (the logits of
 *     every step recomputed from scratch, the controls applied to a copy in double), token for
 *     token, with its scores;
 *   - a beam of one equals greedy search under the controls, bit for bit;
 *   - every hypothesis of a wide beam and of sampling obeys them: only allowed tokens, no repeated
 *     n-gram;
 *   - with a prefix, a hypothesis' score is the teacher-forced log-probability of prefix +
 *     hypothesis minus that of the prefix;
 *   - bad controls are refused.
 */
#include "decode_testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { V = 9, MAX_LEN = 10 };
static const int32_t src[] = {3, 4, 5, 6};

/* Greedy search from the definitions (decode_testutil's full forward at every step). */
static int32_t ref_greedy(const qkv_model *m, const qkv_decode_params *p, const int32_t *prefix, int32_t n_prefix,
                          int32_t *out, double *score) {
    int32_t fed[32] = {DT_BOS};
    int32_t n = 1 + n_prefix, len = 0;
    if (n_prefix) memcpy(fed + 1, prefix, sizeof(int32_t) * (size_t)n_prefix);
    *score = 0;
    while (len < p->max_len) {
        double x[V];
        dt_next_logits(m, src, 4, fed, n, x);
        const int32_t *h = fed + 1, L = n - 1; /* the hypothesis' tokens */
        for (int32_t v = 0; v < V; v++) {
            if (p->allowed && !p->allowed[v] && v != DT_EOS) x[v] = -INFINITY;
            bool seen = false;
            for (int32_t i = 0; i < L; i++)
                seen |= h[i] == v;
            if (seen && p->repetition_penalty != 1)
                x[v] = x[v] > 0 ? x[v] / p->repetition_penalty : x[v] * p->repetition_penalty;
            const int32_t k = p->no_repeat_ngram;
            for (int32_t i = 0; k > 0 && i + k <= L; i++) { /* does h + v repeat h[i .. i + k)? */
                bool same = h[i + k - 1] == v;
                for (int32_t q = 0; q < k - 1 && same; q++)
                    same = h[i + q] == h[L - k + 1 + q];
                if (same) x[v] = -INFINITY;
            }
        }
        double mx = -INFINITY, sum = 0;
        for (int32_t v = 0; v < V; v++)
            mx = fmax(mx, x[v]);
        for (int32_t v = 0; v < V; v++)
            sum += exp(x[v] - mx);
        int32_t best = 1; /* the lowest id that is not padding (0) */
        for (int32_t v = 2; v < V; v++)
            if (x[v] > x[best]) best = v;
        *score += x[best] - mx - log(sum);
        out[len++] = best;
        fed[n++] = best;
        if (best == DT_EOS) break;
    }
    return len;
}

static qkv_decode_params params(qkv_decode_strategy strategy) {
    qkv_decode_params p = dt_params(strategy);
    p.max_len = MAX_LEN;
    return p;
}

static bool has_repeated_ngram(const int32_t *t, int32_t n, int32_t k) {
    for (int32_t i = 0; i + k <= n; i++)
        for (int32_t j = i + 1; j + k <= n; j++)
            if (!memcmp(t + i, t + j, sizeof(int32_t) * (size_t)k)) return true;
    return false;
}

TEST(decode_controls_greedy_equals_definition) {
    qkv_model *m = dt_seq2seq(&dt_variants[0], V, 3.0, 11);
    if (!m) return;
    static const uint8_t allowed[V] = {1, 1, 1, 0, 1, 1, 0, 1, 1};
    static const int32_t prefix[] = {5, 5};
    for (int c = 0; c < 6; c++) {
        qkv_decode_params p = params(QKV_DECODE_GREEDY);
        const int32_t n_prefix = c == 5 ? 2 : 0;
        if (c == 1 || c == 4 || c == 5) p.allowed = allowed;
        if (c == 2 || c == 4 || c == 5) p.no_repeat_ngram = c == 2 ? 1 : 2;
        if (c == 3 || c == 4 || c == 5) p.repetition_penalty = c == 3 ? 4.0 : 1.7;
        if (n_prefix) p.prefix = prefix, p.prefix_len = &n_prefix;
        int32_t want[MAX_LEN];
        double want_score;
        const int32_t n = ref_greedy(m, &p, prefix, n_prefix, want, &want_score);
        qkv_hypotheses h;
        CHECK_OK(qkv_decode(m, src, (int32_t[]){4}, 1, &p, &h));
        if (h.count && h.count[0] == 1) {
            CHECK_MSG(dt_same_tokens(h.hyp[0].tokens, h.hyp[0].length, want, n), "case %d: the tokens differ", c);
            CHECK_MSG(fabs(h.hyp[0].score - want_score) <= DT_TOL * fmax(1, fabs(want_score)),
                      "case %d: score %.9g, the definition's %.9g", c, h.hyp[0].score, want_score);
            /* a beam of one is greedy search, bit for bit */
            qkv_decode_params b = p;
            b.strategy = QKV_DECODE_BEAM;
            b.beam_size = 1;
            qkv_hypotheses hb;
            CHECK_OK(qkv_decode(m, src, (int32_t[]){4}, 1, &b, &hb));
            CHECK(dt_same_bits(&h, &hb));
            qkv_hypotheses_free(&hb);
        }
        qkv_hypotheses_free(&h);
    }
    /* the controls change something on this model: else the test proves nothing */
    int32_t plain[MAX_LEN], controlled[MAX_LEN];
    double s1, s2;
    qkv_decode_params p = params(QKV_DECODE_GREEDY);
    const int32_t n1 = ref_greedy(m, &p, NULL, 0, plain, &s1);
    p.no_repeat_ngram = 1;
    const int32_t n2 = ref_greedy(m, &p, NULL, 0, controlled, &s2);
    CHECK(!dt_same_tokens(plain, n1, controlled, n2));
    qkv_model_free(m);
}

TEST(decode_controls_hold_in_beam_and_sampling) {
    qkv_model *m = dt_seq2seq(&dt_variants[3], V, 2.0, 5);
    if (!m) return;
    static const uint8_t allowed[V] = {1, 1, 1, 1, 0, 1, 0, 1, 0};
    for (int strategy = 0; strategy < 2; strategy++) {
        qkv_decode_params p = params(strategy ? QKV_DECODE_SAMPLE : QKV_DECODE_BEAM);
        p.beam_size = 6;
        p.n_best = strategy ? 5 : 6;
        p.seed = 3;
        p.allowed = allowed;
        p.no_repeat_ngram = 2;
        p.eos_id = -1; /* every hypothesis runs to max_len: the longest to check */
        qkv_hypotheses h;
        CHECK_OK(qkv_decode(m, src, (int32_t[]){4}, 1, &p, &h));
        for (int32_t k = 0; h.count && k < h.count[0]; k++) {
            const qkv_hypothesis *hy = &h.hyp[k];
            CHECK(hy->length == MAX_LEN);
            for (int32_t i = 0; i < hy->length; i++)
                CHECK_MSG(allowed[hy->tokens[i]], "strategy %d: token %d is not allowed", strategy, hy->tokens[i]);
            CHECK_MSG(!has_repeated_ngram(hy->tokens, hy->length, 2), "strategy %d: a bigram repeats", strategy);
        }
        qkv_hypotheses_free(&h);
    }
    qkv_model_free(m);
}

TEST(decode_prefix_scores_the_continuation) {
    qkv_model *m = dt_seq2seq(&dt_variants[0], V, 2.0, 7);
    if (!m) return;
    /* two inputs, prefixes of lengths 3 and 0, in one batch */
    static const int32_t srcs[] = {3, 4, 5, 6, 7, 8};
    static const int32_t lens[] = {4, 2}, prefix[] = {6, 3, 7}, prefix_len[] = {3, 0};
    qkv_decode_params p = params(QKV_DECODE_BEAM);
    p.beam_size = 3;
    p.prefix = prefix;
    p.prefix_len = prefix_len;
    qkv_hypotheses h;
    CHECK_OK(qkv_decode(m, srcs, lens, 2, &p, &h));
    for (int32_t b = 0; h.count && b < 2; b++) {
        const qkv_hypothesis *hy = &h.hyp[b];
        int32_t all[32];
        memcpy(all, prefix, sizeof(int32_t) * (size_t)prefix_len[b]);
        memcpy(all + prefix_len[b], hy->tokens, sizeof(int32_t) * (size_t)hy->length);
        const int32_t *s = b ? srcs + 4 : srcs;
        const double want = dt_teacher_score(m, s, lens[b], all, prefix_len[b] + hy->length) -
                            (prefix_len[b] ? dt_teacher_score(m, s, lens[b], prefix, prefix_len[b]) : 0);
        CHECK_MSG(fabs(hy->score - want) <= DT_TOL * fmax(1, fabs(want)), "input %d: score %.9g, teacher %.9g", b,
                  hy->score, want);
        /* as that input alone */
        qkv_decode_params one = p;
        one.prefix = prefix_len[b] ? prefix : NULL;
        one.prefix_len = prefix_len[b] ? prefix_len : NULL;
        qkv_hypotheses alone;
        CHECK_OK(qkv_decode(m, s, &lens[b], 1, &one, &alone));
        if (alone.count) CHECK(dt_same_tokens(alone.hyp[0].tokens, alone.hyp[0].length, hy->tokens, hy->length));
        qkv_hypotheses_free(&alone);
    }
    qkv_hypotheses_free(&h);
    qkv_model_free(m);
}

TEST(decode_controls_refused) {
    qkv_model *m = dt_seq2seq(&dt_variants[0], V, 1.0, 1);
    qkv_model *lm = dt_lm(&dt_variants[0], V, 1.0, 1);
    if (!m || !lm) goto done;
    qkv_hypotheses h;
    qkv_decode_params p = params(QKV_DECODE_GREEDY);
    p.repetition_penalty = 0;
    CHECK_ERR(qkv_decode(m, src, (int32_t[]){4}, 1, &p, &h), QKV_ERR_INVALID_ARG, "repetition_penalty 0 must be");
    p = params(QKV_DECODE_GREEDY);
    p.no_repeat_ngram = -2;
    CHECK_ERR(qkv_decode(m, src, (int32_t[]){4}, 1, &p, &h), QKV_ERR_INVALID_ARG, "no_repeat_ngram -2");
    p = params(QKV_DECODE_GREEDY);
    const int32_t prefix[] = {3, 0}, one = 1, two = 2, long_len = 16;
    p.prefix = prefix, p.prefix_len = &two;
    CHECK_ERR(qkv_decode(m, src, (int32_t[]){4}, 1, &p, &h), QKV_ERR_INVALID_ARG, "prefix 0, position 1: id 0");
    p.prefix_len = &long_len;
    CHECK_ERR(qkv_decode(m, src, (int32_t[]){4}, 1, &p, &h), QKV_ERR_SHAPE, "has length 16, not in 0 .. 15");
    p.prefix_len = &one;
    p.max_len = 16;
    CHECK_ERR(qkv_decode(m, src, (int32_t[]){4}, 1, &p, &h), QKV_ERR_SHAPE, "max_len 16 and a prefix of 1");
    p.max_len = 0; /* the model's limit less the prefix */
    CHECK_OK(qkv_decode(m, src, (int32_t[]){4}, 1, &p, &h));
    qkv_hypotheses_free(&h);
    p.prefix_len = NULL;
    CHECK_ERR(qkv_decode(m, src, (int32_t[]){4}, 1, &p, &h), QKV_ERR_INVALID_ARG, "prefix without prefix_len");
    p = params(QKV_DECODE_GREEDY);
    p.prefix = prefix, p.prefix_len = &one;
    CHECK_ERR(qkv_generate(lm, src, (int32_t[]){2}, 1, &p, &h), QKV_ERR_INVALID_ARG, "a target prefix is for");
done:
    qkv_model_free(m);
    qkv_model_free(lm);
}
