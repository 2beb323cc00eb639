/*
 * test_sample.c: sampling.
 *
 *   - the same seed gives the same samples; different seeds give different ones;
 *   - temperature 0, a tiny temperature, top_k = 1 and a tiny top_p all give greedy search (the
 *     same tokens; scores to rounding, since a batch of n samples per input runs GEMMs of other
 *     shapes than greedy's);
 *   - the first sampled token follows the model's distribution (computed independently from the
 *     full forward's logits, pad excluded and renormalised): 2000 draws, every token's count
 *     within 4.5 standard deviations of its expectation, at temperature 1, at temperature 2 with
 *     top-k 3, and with top-p 0.6 (the nucleus computed by hand);
 *   - the n samples of an input are ordered by normalised score.
 */
#include "decode_testutil.h"

#include <math.h>

enum { NB = 3, V = 9 };
static const int32_t srcs[] = {3, 4, 5, 6, 7, 8, 9, 10, 3, 4};
static const int32_t src_lens[NB] = {4, 2, 4};
static const int32_t prompts[] = {3, 4, 5, 6, 7, 8, 6, 5, 3, 4}; /* lengths src_lens */

static bool same_output(const qkv_hypotheses *a, const qkv_hypotheses *b) {
    if (a->batch != b->batch || a->n_best != b->n_best) return false;
    for (int32_t i = 0; i < a->batch * a->n_best; i++)
        if (!dt_same_tokens(a->hyp[i].tokens, a->hyp[i].length, b->hyp[i].tokens,
                            b->hyp[i].length) ||
            a->hyp[i].score != b->hyp[i].score)
            return false;
    return true;
}

TEST(sample_seed_reproduces_and_changes_samples) {
    qkv_model *m = dt_seq2seq(&dt_variants[0], V, 1, 200);
    if (!m) return;
    qkv_decode_params p = dt_params(QKV_DECODE_SAMPLE);
    p.max_len = 8;
    p.n_best = 4;
    p.seed = 11;
    qkv_hypotheses a, b, c;
    CHECK_OK(qkv_decode(m, srcs, src_lens, NB, &p, &a));
    CHECK_OK(qkv_decode(m, srcs, src_lens, NB, &p, &b));
    p.seed = 12;
    CHECK_OK(qkv_decode(m, srcs, src_lens, NB, &p, &c));
    if (a.hyp && b.hyp && c.hyp) {
        CHECK_MSG(same_output(&a, &b), "the same seed gave different samples");
        CHECK_MSG(!same_output(&a, &c), "seeds 11 and 12 gave the same 12 samples");
        for (int32_t i = 0; i < NB; i++) {
            CHECK(a.count[i] == 4);
            for (int32_t k = 1; k < 4; k++)
                CHECK(a.hyp[i * 4 + k - 1].norm_score >= a.hyp[i * 4 + k].norm_score);
        }
    }
    qkv_hypotheses_free(&a);
    qkv_hypotheses_free(&b);
    qkv_hypotheses_free(&c);
    qkv_model_free(m);
}

TEST(sample_limits_equal_greedy) {
    for (int arch = 0; arch < 2; arch++) {
        qkv_model *m =
            arch ? dt_lm(&dt_variants[3], V, 1, 210) : dt_seq2seq(&dt_variants[3], V, 1, 211);
        if (!m) continue;
        qkv_decode_params g = dt_params(QKV_DECODE_GREEDY);
        g.max_len = 10;
        qkv_hypotheses hg;
        CHECK_OK(arch ? qkv_generate(m, prompts, src_lens, NB, &g, &hg)
                      : qkv_decode(m, srcs, src_lens, NB, &g, &hg));
        const struct {
            const char *what;
            double temperature, top_p;
            int32_t top_k;
        } cases[] = {{"temperature 0", 0, 1, 0},
                     {"temperature 1e-4", 1e-4, 1, 0},
                     {"top_k 1", 1, 1, 1},
                     {"top_p 1e-9", 1, 1e-9, 0}};
        for (int k = 0; hg.hyp && k < 4; k++) {
            qkv_decode_params p = g;
            p.strategy = QKV_DECODE_SAMPLE;
            p.temperature = cases[k].temperature;
            p.top_p = cases[k].top_p;
            p.top_k = cases[k].top_k;
            p.n_best = 2;
            qkv_hypotheses h;
            CHECK_OK(arch ? qkv_generate(m, prompts, src_lens, NB, &p, &h)
                          : qkv_decode(m, srcs, src_lens, NB, &p, &h));
            for (int32_t b = 0; h.hyp && b < NB; b++)
                for (int32_t i = 0; i < 2; i++) {
                    const qkv_hypothesis *x = &h.hyp[b * 2 + i], *y = &hg.hyp[b];
                    CHECK_MSG(dt_same_tokens(x->tokens, x->length, y->tokens, y->length) &&
                                  fabs(x->score - y->score) <= DT_TOL * fmax(1, fabs(y->score)),
                              "%s (%s): input %d sample %d differs from greedy", cases[k].what,
                              arch ? "LM" : "seq2seq", b, i);
                }
            qkv_hypotheses_free(&h);
        }
        qkv_hypotheses_free(&hg);
        qkv_model_free(m);
    }
}

/* The model's first-token probabilities given source src (pad excluded, renormalised), from the
 * full forward's logits. */
static void first_token_probs(const qkv_model *m, const int32_t *src, int32_t src_len, double *q) {
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_tensor *s = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){1, src_len}, src);
    qkv_tensor *bos = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){1, 1}, (int32_t[]){DT_BOS});
    qkv_tensor *logits =
        qkv_model_decode(ctx, m, bos, qkv_model_encode(ctx, m, s, NULL), s, NULL, NULL);
    CHECK_OK(qkv_ctx_status(ctx));
    double total = 0;
    for (int32_t v = 0; v < V; v++) {
        q[v] = v == DT_PAD || !logits ? 0 : exp((double)((qkv_real *)logits->data)[v]);
        total += q[v];
    }
    for (int32_t v = 0; v < V; v++)
        q[v] /= total;
    qkv_ctx_free(ctx);
}

/* Temperature and truncation applied by hand: q^(1/T), top-k by probability, then the nucleus. */
static void warp(double *q, double temperature, int32_t top_k, double top_p) {
    int32_t order[V];
    double total = 0;
    for (int32_t v = 0; v < V; v++) {
        q[v] = q[v] > 0 ? pow(q[v], 1 / temperature) : 0;
        order[v] = v;
    }
    for (int32_t i = 1; i < V; i++) /* by descending probability */
        for (int32_t k = i; k > 0 && q[order[k - 1]] < q[order[k]]; k--) {
            int32_t t = order[k];
            order[k] = order[k - 1];
            order[k - 1] = t;
        }
    int32_t keep = top_k > 0 ? top_k : V;
    for (int32_t i = 0; i < keep; i++)
        total += q[order[i]];
    double cum = 0;
    for (int32_t i = 0; i < keep; i++) {
        cum += q[order[i]];
        if (cum >= top_p * total) {
            keep = i + 1;
            break;
        }
    }
    total = 0;
    for (int32_t i = 0; i < V; i++)
        if (i >= keep)
            q[order[i]] = 0;
        else
            total += q[order[i]];
    for (int32_t v = 0; v < V; v++)
        q[v] /= total;
}

TEST(sample_first_token_frequencies_match_the_model) {
    qkv_model *m = dt_seq2seq(&dt_variants[0], V, 2, 220);
    if (!m) return;
    const int32_t n = 2000;
    const struct {
        double temperature, top_p;
        int32_t top_k;
    } cases[] = {{1, 1, 0}, {2, 1, 3}, {1, 0.6, 0}};
    for (int k = 0; k < 3; k++) {
        double q[V];
        first_token_probs(m, srcs, 4, q);
        warp(q, cases[k].temperature, cases[k].top_k, cases[k].top_p);
        qkv_decode_params p = dt_params(QKV_DECODE_SAMPLE);
        p.max_len = 1;
        p.n_best = n;
        p.temperature = cases[k].temperature;
        p.top_k = cases[k].top_k;
        p.top_p = cases[k].top_p;
        p.seed = 1000 + (uint64_t)k;
        qkv_hypotheses h;
        CHECK_OK(qkv_decode(m, srcs, src_lens, 1, &p, &h));
        if (!h.hyp) continue;
        int32_t count[V] = {0};
        for (int32_t i = 0; i < h.count[0]; i++)
            count[h.hyp[i].tokens[0]]++;
        int kept = 0;
        for (int32_t v = 0; v < V; v++) {
            const double mean = n * q[v], sd = sqrt(n * q[v] * (1 - q[v]));
            kept += q[v] > 0;
            CHECK_MSG(fabs(count[v] - mean) <= 4.5 * sd + 1e-9,
                      "case %d: token %d drawn %d times, expected %.1f +- %.1f", k, v, count[v],
                      mean, sd);
        }
        CHECK_MSG(k == 0 || kept < V - 1, "case %d: the truncation kept every token (%d)", k, kept);
        qkv_hypotheses_free(&h);
    }
    qkv_model_free(m);
}
