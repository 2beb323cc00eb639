/*
 * test_search.c: greedy and beam search.
 *
 *   - beam size 1 equals greedy search: tokens, scores, normalised scores (every length penalty,
 *     encoder-decoder and decoder-only);
 *   - a beam at least as wide as the number of candidate sequences finds exactly the top of an
 *     exhaustive search over every sequence of at most max_len tokens (tiny vocabulary: 4 tokens
 *     + BOS + EOS; pad never generated), for every length penalty; a narrow beam never beats it;
 *   - every hypothesis's score equals the independent teacher-forced log-probability under the
 *     full-sequence forward, and its normalised score the hand-computed length penalty;
 *   - length penalties: hand values (GNMT ((5 + len) / 6)^alpha);
 *   - n-best lists are sorted by normalised score and distinct; a smaller n_best is a prefix;
 *   - a batch decodes as each input alone (different source / prompt lengths);
 *   - decoding with the KV cache equals decoding without it (the decoder re-run every step);
 *   - without EOS every hypothesis runs to max_len.
 */
#include "decode_testutil.h"

#include <math.h>

enum { NB = 4 };
static const int32_t srcs[] = {3, 4, 5,         6, 7, 8, /* 6 */ 9, /* 1 */ 10,
                               3, 4, /* 3 */ 5, 5, 6, 7, 8}; /* 5 */
static const int32_t src_lens[NB] = {6, 1, 3, 5};
static const int32_t prompts[] = {3, /* 1 */ 4, 5, 6, 7, /* 4 */ 8, 1, /* 2 */ 2, 3, 4}; /* 3 */
static const int32_t prompt_lens[NB] = {1, 4, 2, 3};

static int64_t offset_of(const int32_t *lens, int32_t b) {
    int64_t at = 0;
    for (int32_t i = 0; i < b; i++)
        at += lens[i];
    return at;
}

static qkv_status run(const qkv_model *m, const int32_t *in, const int32_t *lens, int32_t batch,
                      const qkv_decode_params *p, qkv_hypotheses *h) {
    return m->cfg.arch == QKV_ARCH_DECODER ? qkv_generate(m, in, lens, batch, p, h)
                                           : qkv_decode(m, in, lens, batch, p, h);
}

static double hand_penalty(qkv_length_penalty kind, double alpha, int32_t len) {
    return kind == QKV_LENGTH_PENALTY_AVERAGE ? len
           : kind == QKV_LENGTH_PENALTY_GNMT  ? pow((5.0 + len) / 6.0, alpha)
                                              : 1;
}

static bool same_hyp(const qkv_hypothesis *a, const qkv_hypothesis *b) {
    return dt_same_tokens(a->tokens, a->length, b->tokens, b->length);
}

static double rel(double a, double b) {
    return fabs(a - b) / fmax(1, fabs(b));
}

TEST(decode_beam_of_one_equals_greedy) {
    const int variants[] = {0, 3, 9, 12};
    const qkv_length_penalty lps[] = {QKV_LENGTH_PENALTY_NONE, QKV_LENGTH_PENALTY_AVERAGE,
                                      QKV_LENGTH_PENALTY_GNMT};
    for (int vi = 0; vi < 4; vi++)
        for (int arch = 0; arch < 2; arch++) {
            qkv_model *m = arch ? dt_lm(&dt_variants[variants[vi]], 9, 3, 100 + vi)
                                : dt_seq2seq(&dt_variants[variants[vi]], 9, 3, 110 + vi);
            const int32_t *in = arch ? prompts : srcs, *lens = arch ? prompt_lens : src_lens;
            for (int l = 0; m && l < 3; l++) {
                qkv_decode_params g = dt_params(QKV_DECODE_GREEDY), bm = dt_params(QKV_DECODE_BEAM);
                g.length_penalty = bm.length_penalty = lps[l];
                g.max_len = bm.max_len = 10;
                bm.beam_size = 1;
                qkv_hypotheses hg, hb;
                CHECK_OK(run(m, in, lens, NB, &g, &hg));
                CHECK_OK(run(m, in, lens, NB, &bm, &hb));
                for (int32_t b = 0; hg.hyp && hb.hyp && b < NB; b++) {
                    CHECK(hg.count[b] == 1 && hb.count[b] == 1);
                    const qkv_hypothesis *x = &hg.hyp[b], *y = &hb.hyp[b];
                    CHECK_MSG(same_hyp(x, y) && x->score == y->score &&
                                  x->norm_score == y->norm_score && x->finished == y->finished,
                              "%s %s, penalty %d, input %d: greedy (%d tokens, %.17g) != beam 1 "
                              "(%d tokens, %.17g)",
                              dt_variants[variants[vi]].name, arch ? "LM" : "seq2seq", l, b,
                              x->length, x->score, y->length, y->score);
                }
                qkv_hypotheses_free(&hg);
                qkv_hypotheses_free(&hb);
            }
            qkv_model_free(m);
        }
}

/* Sort the exhaustive list by normalised score, best first. */
static void sort_by_norm(dt_seq *q, int32_t n, qkv_length_penalty kind, double alpha,
                         double *norm) {
    for (int32_t i = 0; i < n; i++)
        norm[i] = q[i].score / hand_penalty(kind, alpha, q[i].length);
    for (int32_t i = 1; i < n; i++) /* insertion sort, stable */
        for (int32_t k = i; k > 0 && norm[k - 1] < norm[k]; k--) {
            dt_seq tq = q[k];
            q[k] = q[k - 1];
            q[k - 1] = tq;
            double tn = norm[k];
            norm[k] = norm[k - 1];
            norm[k - 1] = tn;
        }
}

TEST(decode_wide_beam_equals_exhaustive_search) {
    const int32_t max_len = 4, V = 7; /* pad, BOS, EOS + 4 tokens */
    const qkv_length_penalty lps[] = {QKV_LENGTH_PENALTY_NONE, QKV_LENGTH_PENALTY_AVERAGE,
                                      QKV_LENGTH_PENALTY_GNMT};
    const double alphas[] = {0, 0, 1.3};
    for (int arch = 0; arch < 2; arch++) {
        qkv_model *m =
            arch ? dt_lm(&dt_variants[11], V, 2.5, 120) : dt_seq2seq(&dt_variants[0], V, 2.5, 121);
        if (!m) continue;
        const int32_t src[] = {3, 4, 5, 6, 1}, src_len = arch ? 2 : 5;
        int32_t n = 0;
        dt_seq *all = dt_exhaustive(m, src, src_len, max_len, &n);
        CHECK_MSG(n == 1 + 5 + 25 + 125 + 625, "%d sequences", n); /* 5 tokens continue, EOS ends */
        double *norm = malloc(sizeof(double) * (size_t)n);
        for (int l = 0; l < 3; l++) {
            sort_by_norm(all, n, lps[l], alphas[l], norm);
            qkv_decode_params p = dt_params(QKV_DECODE_BEAM);
            p.max_len = max_len;
            p.length_penalty = lps[l];
            p.alpha = alphas[l];
            p.beam_size = 800; /* >= 750 candidates at the last step: nothing is pruned */
            p.n_best = 6;
            qkv_hypotheses h;
            CHECK_OK(run(m, src, &src_len, 1, &p, &h));
            CHECK(h.hyp && h.count[0] == 6);
            for (int32_t i = 0; h.hyp && i < h.count[0]; i++) {
                const qkv_hypothesis *x = &h.hyp[i];
                CHECK_MSG(dt_same_tokens(x->tokens, x->length, all[i].tokens, all[i].length),
                          "%s, penalty %d: hypothesis %d differs from the exhaustive search",
                          arch ? "LM" : "seq2seq", l, i);
                CHECK_MSG(
                    rel(x->score, all[i].score) <= DT_TOL && rel(x->norm_score, norm[i]) <= DT_TOL,
                    "%s, penalty %d, hypothesis %d: score %.12g / %.12g, exhaustive %.12g / %.12g",
                    arch ? "LM" : "seq2seq", l, i, x->score, x->norm_score, all[i].score, norm[i]);
            }
            qkv_hypotheses_free(&h);
            /* a narrow beam finds a sequence of the list, never a better one */
            p.beam_size = 2;
            p.n_best = 1;
            CHECK_OK(run(m, src, &src_len, 1, &p, &h));
            if (h.hyp) CHECK(h.hyp[0].norm_score <= norm[0] + DT_TOL);
            qkv_hypotheses_free(&h);
        }
        free(norm);
        free(all);
        qkv_model_free(m);
    }
}

TEST(decode_length_penalty_hand_values) {
    CHECK(qkv_length_penalty_value(QKV_LENGTH_PENALTY_NONE, 0.6, 7) == 1);
    CHECK(qkv_length_penalty_value(QKV_LENGTH_PENALTY_AVERAGE, 0.6, 7) == 7);
    CHECK_NEAR(qkv_length_penalty_value(QKV_LENGTH_PENALTY_GNMT, 1, 7), 2, 1e-15); /* 12 / 6 */
    CHECK_NEAR(qkv_length_penalty_value(QKV_LENGTH_PENALTY_GNMT, 0.5, 13), sqrt(3),
               1e-15); /* (18 / 6)^0.5 */
    CHECK_NEAR(qkv_length_penalty_value(QKV_LENGTH_PENALTY_GNMT, 2, 4), 2.25, 1e-15); /* 1.5^2 */
    CHECK_NEAR(qkv_length_penalty_value(QKV_LENGTH_PENALTY_GNMT, 0.6, 1), 1, 1e-15);  /* length 1 */
    CHECK_NEAR(qkv_length_penalty_value(QKV_LENGTH_PENALTY_GNMT, 0, 30), 1, 1e-15);   /* alpha 0 */
}

/* Check every hypothesis against teacher forcing and the hand penalty; returns false on a
 * mismatch. */
static void check_scores(const char *what, const qkv_model *m, const int32_t *in,
                         const int32_t *lens, const qkv_decode_params *p, const qkv_hypotheses *h) {
    for (int32_t b = 0; b < h->batch; b++)
        for (int32_t i = 0; i < h->count[b]; i++) {
            const qkv_hypothesis *x = &h->hyp[b * h->n_best + i];
            const double want =
                dt_teacher_score(m, in + offset_of(lens, b), lens[b], x->tokens, x->length);
            CHECK_MSG(rel(x->score, want) <= DT_TOL,
                      "%s: input %d hypothesis %d: score %.12g, teacher forcing %.12g", what, b, i,
                      x->score, want);
            CHECK_MSG(rel(x->norm_score,
                          x->score / hand_penalty(p->length_penalty, p->alpha, x->length)) <= 1e-14,
                      "%s: normalised score", what);
            CHECK(x->length >= 1 && x->length <= p->max_len);
            CHECK(x->finished == (x->tokens[x->length - 1] == p->eos_id));
            for (int32_t g = 0; g < x->length; g++)
                CHECK(x->tokens[g] != DT_PAD && (g == x->length - 1 || x->tokens[g] != p->eos_id));
            if (!x->finished) CHECK(x->length == p->max_len);
        }
}

TEST(decode_scores_equal_teacher_forcing) {
    const qkv_decode_strategy strategies[] = {QKV_DECODE_GREEDY, QKV_DECODE_BEAM,
                                              QKV_DECODE_SAMPLE};
    for (int arch = 0; arch < 2; arch++) {
        qkv_model *m =
            arch ? dt_lm(&dt_variants[8], 9, 3, 130) : dt_seq2seq(&dt_variants[4], 9, 3, 131);
        const int32_t *in = arch ? prompts : srcs, *lens = arch ? prompt_lens : src_lens;
        for (int k = 0; m && k < 3; k++) {
            qkv_decode_params p = dt_params(strategies[k]);
            p.max_len = 7;
            p.length_penalty = k == 1 ? QKV_LENGTH_PENALTY_GNMT : QKV_LENGTH_PENALTY_AVERAGE;
            p.beam_size = 3;
            p.n_best = k == 0 ? 1 : 3;
            p.temperature = 1.5;
            qkv_hypotheses h;
            CHECK_OK(run(m, in, lens, NB, &p, &h));
            if (h.hyp) check_scores(arch ? "LM" : "seq2seq", m, in, lens, &p, &h);
            qkv_hypotheses_free(&h);
        }
        qkv_model_free(m);
    }
}

TEST(decode_nbest_sorted_distinct_and_prefix) {
    for (int arch = 0; arch < 2; arch++) {
        qkv_model *m =
            arch ? dt_lm(&dt_variants[1], 9, 2, 140) : dt_seq2seq(&dt_variants[1], 9, 2, 141);
        const int32_t *in = arch ? prompts : srcs, *lens = arch ? prompt_lens : src_lens;
        if (!m) continue;
        qkv_decode_params p = dt_params(QKV_DECODE_BEAM);
        p.max_len = 8;
        p.beam_size = 5;
        p.n_best = 5;
        qkv_hypotheses h5, h2;
        CHECK_OK(run(m, in, lens, NB, &p, &h5));
        p.n_best = 2;
        CHECK_OK(run(m, in, lens, NB, &p, &h2));
        for (int32_t b = 0; h5.hyp && h2.hyp && b < NB; b++) {
            const qkv_hypothesis *list = h5.hyp + b * 5;
            CHECK(h5.count[b] == 5 && h2.count[b] == 2);
            for (int32_t i = 0; i < h5.count[b]; i++) {
                if (i > 0) CHECK(list[i - 1].norm_score >= list[i].norm_score);
                for (int32_t k = 0; k < i; k++)
                    CHECK_MSG(!same_hyp(&list[i], &list[k]),
                              "input %d: hypotheses %d and %d are equal", b, k, i);
            }
            for (int32_t i = 0; i < 2; i++)
                CHECK(same_hyp(&h2.hyp[b * 2 + i], &list[i]) &&
                      h2.hyp[b * 2 + i].score == list[i].score);
        }
        qkv_hypotheses_free(&h5);
        qkv_hypotheses_free(&h2);
        qkv_model_free(m);
    }
}

TEST(decode_batch_equals_each_input_alone) {
    for (int arch = 0; arch < 2; arch++) {
        qkv_model *m =
            arch ? dt_lm(&dt_variants[9], 9, 3, 150) : dt_seq2seq(&dt_variants[12], 9, 3, 151);
        const int32_t *in = arch ? prompts : srcs, *lens = arch ? prompt_lens : src_lens;
        for (int k = 0; m && k < 2; k++) {
            qkv_decode_params p = dt_params(k ? QKV_DECODE_BEAM : QKV_DECODE_GREEDY);
            p.max_len = 9;
            p.beam_size = 3;
            p.n_best = k ? 3 : 1;
            p.length_penalty = QKV_LENGTH_PENALTY_GNMT;
            qkv_hypotheses all;
            CHECK_OK(run(m, in, lens, NB, &p, &all));
            for (int32_t b = 0; all.hyp && b < NB; b++) {
                qkv_hypotheses one;
                CHECK_OK(run(m, in + offset_of(lens, b), &lens[b], 1, &p, &one));
                if (!one.hyp) continue;
                CHECK(one.count[0] == all.count[b]);
                for (int32_t i = 0; i < one.count[0] && i < all.count[b]; i++) {
                    const qkv_hypothesis *x = &all.hyp[b * p.n_best + i], *y = &one.hyp[i];
                    CHECK_MSG(same_hyp(x, y) && rel(x->score, y->score) <= DT_TOL,
                              "%s %s: input %d hypothesis %d differs between the batch and alone",
                              arch ? "LM" : "seq2seq", k ? "beam" : "greedy", b, i);
                }
                qkv_hypotheses_free(&one);
            }
            qkv_hypotheses_free(&all);
        }
        qkv_model_free(m);
    }
}

TEST(decode_with_cache_equals_without) {
    const int variants[] = {0, 8, 10, 11};
    const qkv_decode_strategy strategies[] = {QKV_DECODE_GREEDY, QKV_DECODE_BEAM,
                                              QKV_DECODE_SAMPLE};
    for (int vi = 0; vi < 4; vi++)
        for (int arch = 0; arch < 2; arch++) {
            const dt_variant *v = &dt_variants[variants[vi]];
            qkv_model *m = arch ? dt_lm(v, 9, 3, 160 + vi) : dt_seq2seq(v, 9, 3, 170 + vi);
            const int32_t *in = arch ? prompts : srcs, *lens = arch ? prompt_lens : src_lens;
            for (int k = 0; m && k < 3; k++) {
                qkv_decode_params p = dt_params(strategies[k]);
                p.max_len = 9;
                p.beam_size = 3;
                p.n_best = k ? 2 : 1;
                p.seed = 7;
                qkv_hypotheses hc, hu;
                CHECK_OK(run(m, in, lens, NB, &p, &hc));
                p.use_cache = false;
                CHECK_OK(run(m, in, lens, NB, &p, &hu));
                for (int32_t b = 0; hc.hyp && hu.hyp && b < NB; b++) {
                    CHECK(hc.count[b] == hu.count[b]);
                    for (int32_t i = 0; i < hc.count[b] && i < hu.count[b]; i++) {
                        const qkv_hypothesis *x = &hc.hyp[b * p.n_best + i],
                                             *y = &hu.hyp[b * p.n_best + i];
                        CHECK_MSG(same_hyp(x, y) && rel(x->score, y->score) <= DT_TOL,
                                  "%s %s strategy %d: input %d hypothesis %d differs with and "
                                  "without the cache",
                                  v->name, arch ? "LM" : "seq2seq", k, b, i);
                    }
                }
                qkv_hypotheses_free(&hc);
                qkv_hypotheses_free(&hu);
            }
            qkv_model_free(m);
        }
}

TEST(decode_without_eos_runs_to_max_len) {
    qkv_model *m = dt_seq2seq(&dt_variants[0], 9, 1, 180);
    if (!m) return;
    for (int k = 0; k < 2; k++) {
        qkv_decode_params p = dt_params(k ? QKV_DECODE_BEAM : QKV_DECODE_GREEDY);
        p.eos_id = -1;
        p.max_len = 6;
        p.beam_size = 2;
        p.n_best = k ? 2 : 1;
        qkv_hypotheses h;
        CHECK_OK(qkv_decode(m, srcs, src_lens, NB, &p, &h));
        for (int32_t b = 0; h.hyp && b < NB; b++)
            for (int32_t i = 0; i < h.count[b]; i++)
                CHECK(h.hyp[b * p.n_best + i].length == 6 && !h.hyp[b * p.n_best + i].finished);
        qkv_hypotheses_free(&h);
    }
    /* max_len 0: the model's max_len (16) */
    qkv_decode_params p = dt_params(QKV_DECODE_GREEDY);
    p.eos_id = -1;
    qkv_hypotheses h;
    CHECK_OK(qkv_decode(m, srcs, src_lens, 1, &p, &h));
    if (h.hyp) CHECK(h.hyp[0].length == 16);
    qkv_hypotheses_free(&h);
    qkv_model_free(m);
}

/* Many rows over a large vocabulary: the strategies compute the rows' log-probabilities a window
 * at a time (decode.c, dec_logp_rows; 100,000 tokens -> windows of 5 rows, so the 11 greedy rows
 * span three windows and beams of 3 straddle two), the rows of a window in parallel. Every score
 * still equals teacher forcing, beam 1 still equals greedy, and 1 and 2 threads give the same
 * bits. (Equal tokens are compared between runs of as many rows only: BLAS's bits for a row may
 * depend on where the row sits in the batch, and 100,000 logits have near-ties.) */
TEST(decode_many_rows_over_a_large_vocabulary) {
    enum { NIN = 11, SRC_LEN = 4 };
    const int32_t V = 100000;
    qkv_model *m = dt_seq2seq(&dt_variants[0], V, 3, 190);
    if (!m) return;
    int32_t src[NIN * SRC_LEN], lens[NIN];
    for (int32_t b = 0; b < NIN; b++) {
        lens[b] = SRC_LEN;
        for (int32_t i = 0; i < SRC_LEN; i++)
            src[b * SRC_LEN + i] = 3 + (b * 5 + i * 3) % 8; /* source ids 3 .. 10 */
    }
    const int saved = qkv_get_num_threads();
    qkv_hypotheses greedy = {0};
    for (int k = 0; k < 3; k++) { /* greedy, beam 3, beam 1 */
        qkv_decode_params p = dt_params(k == 0 ? QKV_DECODE_GREEDY : QKV_DECODE_BEAM);
        p.max_len = 4;
        p.eos_id = -1; /* every row runs to max_len: the windows stay full */
        p.beam_size = k == 1 ? 3 : 1;
        p.length_penalty = QKV_LENGTH_PENALTY_NONE;
        qkv_hypotheses h1, h2;
        qkv_set_num_threads(1);
        CHECK_OK(qkv_decode(m, src, lens, NIN, &p, &h1));
        qkv_set_num_threads(2);
        CHECK_OK(qkv_decode(m, src, lens, NIN, &p, &h2));
        qkv_set_num_threads(saved);
        if (!h1.hyp || !h2.hyp) {
            qkv_hypotheses_free(&h1);
            qkv_hypotheses_free(&h2);
            continue;
        }
        check_scores(k == 0 ? "greedy" : "beam", m, src, lens, &p, &h2);
        for (int32_t b = 0; b < NIN; b++) {
            CHECK(h1.count[b] == 1 && h2.count[b] == 1);
            const qkv_hypothesis *x = &h1.hyp[b], *y = &h2.hyp[b];
            CHECK_MSG(same_hyp(x, y) && x->score == y->score,
                      "strategy %d input %d: 1 thread (%.17g) != 2 threads (%.17g)", k, b,
                      x->score, y->score);
            if (k == 2 && greedy.hyp) /* beam 1 = greedy */
                CHECK_MSG(same_hyp(x, &greedy.hyp[b]) && x->score == greedy.hyp[b].score,
                          "input %d: beam 1 (%.17g) != greedy (%.17g)", b, x->score,
                          greedy.hyp[b].score);
        }
        qkv_hypotheses_free(&h2);
        if (k == 0) {
            greedy = h1;
        } else {
            qkv_hypotheses_free(&h1);
        }
    }
    qkv_hypotheses_free(&greedy);
    qkv_model_free(m);
}
