/*
 * test_spare_session.c: the session a decoder keeps for the next call (qkv_decoder,
 * qkv_decode.h, "Memory"; src/infer/decode.c).
 *
 *   - a call reuses the spare when it fits, and its results are the bits of a fresh session's:
 *     tokens, lengths, scores and normalised scores, for greedy, beam and sampling, on an
 *     encoder-decoder and a decoder-only model, after a larger call whose caches hold other
 *     keys (more rows, longer sources and prompts);
 *   - a call the spare does not fit (more rows, or a longer input) replaces it with one as large
 *     as both calls in each size;
 *   - the same with the uncached decoder, and on prompts that share two positions;
 *   - qkv_decoder_release_memory frees it (and accepts NULL); a refused call leaves it be.
 */
#include "decode_testutil.h"

#include "infer/infer_internal.h"

enum { NB = 3 };
static const int32_t big_in[] = {3, 4, 5, 6, 7, 8, 9, 10, /* 8 */ 4, 4, 5, /* 3 */ 9, 8, 7, 6, 5}; /* 5 */
static const int32_t big_lens[NB] = {8, 3, 5};
static const int32_t small_in[] = {10, 9, /* 2 */ 3}; /* 1 */
static const int32_t small_lens[2] = {2, 1};

static qkv_status run(qkv_decoder *d, const int32_t *in, const int32_t *lens, int32_t batch,
                      const qkv_decode_params *p, qkv_hypotheses *h) {
    return d->m->cfg.arch == QKV_ARCH_DECODER ? qkv_decoder_generate(d, in, lens, batch, p, h)
                                              : qkv_decoder_decode(d, in, lens, batch, p, h);
}

/* A decoder of m (NULL when m is). */
static qkv_decoder *decoder_of(const qkv_model *m) {
    qkv_decoder *d = NULL;
    if (m) CHECK_OK(qkv_decoder_new(m, &d));
    return d;
}

/* The bits of a call on a reused spare (after `first`) and on a fresh session. */
static void check_reused_equals_fresh(qkv_decoder *m, const int32_t *in0, const int32_t *lens0, int32_t n0,
                                      const qkv_decode_params *p0, const int32_t *in, const int32_t *lens, int32_t n,
                                      const qkv_decode_params *p, const char *what) {
    qkv_hypotheses first, reused, fresh;
    qkv_decoder_release_memory(m);
    CHECK_OK(run(m, in0, lens0, n0, p0, &first));
    const uint64_t serial = m->spare ? ((const qkv_session *)m->spare)->serial : 0;
    CHECK_OK(run(m, in, lens, n, p, &reused));
    CHECK_MSG(m->spare && ((const qkv_session *)m->spare)->serial == serial, "%s: not reused", what);
    qkv_decoder_release_memory(m);
    CHECK_OK(run(m, in, lens, n, p, &fresh));
    CHECK_MSG(dt_same_bits(&reused, &fresh),
              "%s: the reused session's results differ from a fresh one's", what);
    qkv_hypotheses_free(&first);
    qkv_hypotheses_free(&reused);
    qkv_hypotheses_free(&fresh);
}

/* The paths the test below does not take: the uncached decoder (use_cache false), and a
 * decoder-only model whose prompts share two positions (fed in one step of two tokens, the
 * general attention path over a cache of more positions than the call's). */
TEST(decode_reused_spare_keeps_the_bits_uncached_and_with_shared_prompts) {
    qkv_model *s2s = dt_seq2seq(&dt_variants[0], 11, 2, 320), *lm = dt_lm(&dt_variants[0], 11, 2, 321);
    CHECK(s2s && lm);
    if (s2s && lm) {
        qkv_decode_params big = dt_params(QKV_DECODE_BEAM), p = dt_params(QKV_DECODE_BEAM);
        big.beam_size = 3, big.max_len = 7, big.use_cache = false;
        p.beam_size = 2, p.max_len = 4, p.use_cache = false;
        qkv_decoder *d_s2s = decoder_of(s2s), *d_lm = decoder_of(lm);
        check_reused_equals_fresh(d_s2s, big_in, big_lens, NB, &big, small_in, small_lens, 2, &p, "seq2seq uncached");
        static const int32_t prompts[] = {4, 5, 6, 7};
        static const int32_t prompt_lens[] = {2, 2};
        big.use_cache = p.use_cache = true;
        check_reused_equals_fresh(d_lm, big_in, big_lens, NB, &big, prompts, prompt_lens, 2, &p, "LM, prompts of 2");
        qkv_decoder_free(d_s2s);
        qkv_decoder_free(d_lm);
    }
    qkv_model_free(s2s);
    qkv_model_free(lm);
}

TEST(decode_reuses_the_spare_session_with_a_fresh_sessions_bits) {
    static const qkv_decode_strategy strategies[] = {QKV_DECODE_GREEDY, QKV_DECODE_BEAM, QKV_DECODE_SAMPLE};
    for (int arch = 0; arch < 2; arch++) {
        qkv_model *model = arch ? dt_lm(&dt_variants[0], 11, 2, 310) : dt_seq2seq(&dt_variants[0], 11, 2, 311);
        CHECK(model != NULL);
        qkv_decoder *m = decoder_of(model);
        for (int k = 0; m && k < 3; k++) {
            /* a large call first: 3 inputs x beam 4, long sources / prompts */
            qkv_decode_params big = dt_params(QKV_DECODE_BEAM);
            big.beam_size = 4;
            big.n_best = 2;
            big.max_len = 7;
            qkv_hypotheses h_big, reused, fresh;
            CHECK_OK(run(m, big_in, big_lens, NB, &big, &h_big));
            const qkv_session *spare = m->spare;
            CHECK_MSG(spare != NULL, "no session kept after a successful call");
            const uint64_t serial = spare ? spare->serial : 0;
            /* then a smaller one, which fits in the spare */
            qkv_decode_params p = dt_params(strategies[k]);
            p.beam_size = 2;
            p.n_best = 2;
            p.max_len = 5;
            p.seed = 77;
            if (strategies[k] == QKV_DECODE_GREEDY) p.n_best = 1;
            CHECK_OK(run(m, small_in, small_lens, 2, &p, &reused));
            CHECK_MSG(m->spare && ((const qkv_session *)m->spare)->serial == serial,
                      "%s %d: the spare that fits was not reused", arch ? "LM" : "seq2seq", (int)strategies[k]);
            qkv_decoder_release_memory(m);
            CHECK(m->spare == NULL);
            CHECK_OK(run(m, small_in, small_lens, 2, &p, &fresh)); /* on a new session */
            CHECK_MSG(dt_same_bits(&reused, &fresh),
                      "%s strategy %d: the reused session's results differ from a fresh one's",
                      arch ? "LM" : "seq2seq", (int)strategies[k]);
            /* the small session does not fit the large call: replaced by one that does */
            qkv_hypotheses again;
            CHECK_OK(run(m, big_in, big_lens, NB, &big, &again));
            const qkv_session *s = m->spare;
            CHECK(s != NULL && s->p.max_rows >= NB * big.beam_size);
            CHECK_MSG(dt_same_bits(&h_big, &again), "%s: the large call's results changed",
                      arch ? "LM" : "seq2seq");
            qkv_hypotheses_free(&h_big);
            qkv_hypotheses_free(&reused);
            qkv_hypotheses_free(&fresh);
            qkv_hypotheses_free(&again);
        }
        /* many rows over short inputs, then few rows over a long one: the replacement holds both */
        if (m) {
            qkv_decoder_release_memory(m);
            qkv_decode_params wide = dt_params(QKV_DECODE_BEAM), narrow = dt_params(QKV_DECODE_GREEDY);
            wide.beam_size = 4;
            wide.max_len = 3;
            narrow.max_len = 6;
            qkv_hypotheses h1, h2;
            CHECK_OK(run(m, small_in, small_lens, 2, &wide, &h1));
            CHECK_OK(run(m, big_in, big_lens, 1, &narrow, &h2));
            const qkv_session *s = m->spare;
            CHECK(s != NULL && s->p.max_rows >= 2 * 4 && s->p.max_len >= 6 &&
                  (arch || s->p.max_src_len >= big_lens[0]));
            qkv_hypotheses_free(&h1);
            qkv_hypotheses_free(&h2);
        }
        /* a refused call (a token outside the vocabulary) leaves the spare as it was */
        if (m) {
            const qkv_session *before = m->spare;
            const uint64_t serial = before ? before->serial : 0;
            const int32_t bad[] = {3, 999};
            const int32_t bad_len[] = {2};
            qkv_decode_params p = dt_params(QKV_DECODE_GREEDY);
            qkv_hypotheses h;
            CHECK(run(m, bad, bad_len, 1, &p, &h) != QKV_OK);
            CHECK(before != NULL && m->spare == before && before->serial == serial);
        }
        qkv_decoder_free(m); /* frees the kept session */
        qkv_model_free(model);
    }
    qkv_decoder_release_memory(NULL);
    qkv_decoder_free(NULL);
    qkv_decoder *d = NULL;
    CHECK_ERR(qkv_decoder_new(NULL, &d), QKV_ERR_INVALID_ARG, "qkv_decoder_new: NULL argument");
    qkv_hypotheses h;
    const int32_t one = 1;
    CHECK_ERR(qkv_decoder_decode(NULL, &one, &one, 1, NULL, &h), QKV_ERR_INVALID_ARG, "NULL decoder");
    CHECK_ERR(qkv_decoder_generate(NULL, &one, &one, 1, NULL, &h), QKV_ERR_INVALID_ARG, "NULL decoder");
}
