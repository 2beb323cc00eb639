/*
 * test_session_panels.c: decoding with the sessions' weight panels (qkv_session_params.
 * weight_panels, src/kernels/gemm/gemm_panels.c) gives the bits of decoding without them.
 *
 *   - greedy (12 rows, fewer as hypotheses end at EOS: the steps cross the panels' 8-row
 *     threshold) and beam 4 (48 rows) on an encoder-decoder whose decoder weights the panels
 *     take (d_model 512: 1 MiB and more), with and without panels: the same tokens, scores and
 *     normalised scores, bit for bit;
 *   - the first step of a batch copies nothing; later steps do where the panels run (the float
 *     build with BLAS, its fast kernels, an AVX-512F CPU), and nowhere else;
 *   - the weights changed between two calls that share the kept session: the second call's
 *     results are those of decoding the new weights in place (the copies are refilled for every
 *     batch), and differ from the first call's.
 */
#include "decode_testutil.h"

#include "infer/infer_internal.h"

enum { B = 12, V = 40, MAXLEN = 7 };

static qkv_model *wide_model(uint64_t seed) {
    qkv_model_config c = qkv_model_default_config(QKV_ARCH_ENCODER_DECODER, 512, 8, 1);
    c.src_vocab = c.tgt_vocab = V;
    c.dim_feedforward = 1024;
    c.dropout = 0;
    c.max_len = 12;
    c.pad_id = DT_PAD;
    c.bos_id = DT_BOS;
    c.eos_id = DT_EOS;
    qkv_model *m = NULL;
    CHECK_OK(qkv_model_new(&c, seed, &m));
    return m;
}

/* B sources of 2 .. 10 ordinary ids, back to back. */
static int32_t sources(int32_t *src, int32_t *len) {
    int32_t total = 0;
    for (int32_t b = 0; b < B; b++) {
        len[b] = 2 + (b * 5) % 9;
        for (int32_t i = 0; i < len[b]; i++)
            src[total++] = 3 + (b * 7 + i * 11) % (V - 3);
    }
    return total;
}

static void decode_both(const qkv_model *m, const int32_t *src, const int32_t *len,
                        qkv_decode_strategy how, qkv_hypotheses *on, qkv_hypotheses *off) {
    qkv_decode_params p = dt_params(how);
    p.max_len = MAXLEN;
    p.n_best = how == QKV_DECODE_BEAM ? 2 : 1;
    p.weight_panels = true;
    CHECK_OK(qkv_decode(m, src, len, B, &p, on));
    p.weight_panels = false;
    CHECK_OK(qkv_decode(m, src, len, B, &p, off));
}

TEST(session_panels_decode_the_bits_of_the_weights_in_place) {
    qkv_model *m = wide_model(5);
    if (!m) return;
    ((qkv_real *)m->out_b->data)[DT_EOS] += 1; /* EOS now and then: greedy rows end at 3 .. 7 */
    int32_t src[B * 10], len[B];
    sources(src, len);
    for (int k = 0; k < 2; k++) {
        const qkv_decode_strategy how = k ? QKV_DECODE_BEAM : QKV_DECODE_GREEDY;
        qkv_hypotheses on, off;
        decode_both(m, src, len, how, &on, &off);
        CHECK_MSG(dt_same_bits(&on, &off), "%s: the panels changed the results",
                  k ? "beam" : "greedy");
        int32_t early = 0; /* rows that left the batch before the last step */
        for (int32_t b = 0; b < B; b++)
            early += on.hyp[b * on.n_best].length < MAXLEN;
        if (!k)
            CHECK_MSG(early > B - 8,
                      "greedy: %d rows ended early; the batch never fell below 8 rows", early);
        qkv_hypotheses_free(&on);
        qkv_hypotheses_free(&off);
    }
    qkv_model_free(m);
}

TEST(session_panels_are_filled_from_the_second_step_where_they_run) {
    qkv_model *m = wide_model(6);
    if (!m) return;
    int32_t src[B * 10], len[B];
    sources(src, len);
    int32_t padded[B * 10] = {0}, tok[B];
    for (int32_t b = 0, at = 0; b < B; at += len[b], b++)
        memcpy(padded + b * 10, src + at, sizeof(int32_t) * (size_t)len[b]);
    qkv_session_params sp = qkv_session_default_params();
    sp.max_rows = B;
    sp.max_len = MAXLEN;
    sp.max_src_len = 10;
    sp.kernels = qkv_test_kernels;
    qkv_session *s = NULL;
    CHECK_OK(qkv_session_new(m, &sp, &s));
    if (!s) {
        qkv_model_free(m);
        return;
    }
    qkv_tensor *logits = NULL;
    for (int32_t b = 0; b < B; b++)
        tok[b] = DT_BOS;
    CHECK_OK(qkv_session_encode(s, padded, B, 10));
    CHECK_OK(qkv_session_step(s, tok, 1, &logits));
    CHECK_MSG(qkv__panels_bytes(s->panels) == 0, "the batch's first step copied weights");
    CHECK_OK(qkv_session_step(s, tok, 1, &logits));
#ifndef QKV_DOUBLE
    const bool run = qkv_test_kernels == QKV_KERNELS_FAST && qkv__gemm_panels_available() &&
                     qkv__gemm_uses_small_m(false, true, B, 512, 512); /* builds with BLAS */
#else
    const bool run = false;
#endif
    /* the decoder layer's six weights of 1 MiB or more (the output projection is 80 KiB) */
    const size_t least = sizeof(float) * 512 * (1536 + 512 + 512 + 512 + 1024 + 1024);
    CHECK_MSG(run ? qkv__panels_bytes(s->panels) >= least : qkv__panels_bytes(s->panels) == 0,
              "panels %s run here, yet %zu bytes copied", run ? "should" : "cannot",
              qkv__panels_bytes(s->panels));
    qkv_session_free(s);
    qkv_model_free(m);
}

TEST(session_panels_follow_weights_changed_between_calls) {
    qkv_model *m = wide_model(7);
    if (!m) return;
    int32_t src[B * 10], len[B];
    sources(src, len);
    qkv_decode_params p = dt_params(QKV_DECODE_GREEDY);
    p.max_len = MAXLEN;
    p.eos_id = -1; /* every row runs every step: all of them read every copy */
    qkv_hypotheses before, after, in_place;
    qkv_decoder *d = NULL; /* keeps its session, and the session its panels, between the calls */
    CHECK_OK(qkv_decoder_new(m, &d));
    if (!d) return;
    CHECK_OK(qkv_decoder_decode(d, src, len, B, &p, &before));
    const uint64_t serial = d->spare ? d->spare->serial : 0;
    static const char *changed[] = {"transformer.decoder.layers.0.linear1.weight",
                                    "transformer.decoder.layers.0.self_attn.out_proj.weight"};
    for (int i = 0; i < 2; i++) {
        qkv_tensor *w = qkv_params_find(m->params, changed[i]);
        CHECK_MSG(w != NULL, "no parameter %s", changed[i]);
        for (int64_t j = 0; w && j < qkv_tensor_numel(w); j++)
            ((qkv_real *)w->data)[j] *= (qkv_real)-0.75;
    }
    CHECK_OK(qkv_decoder_decode(d, src, len, B, &p, &after));
    CHECK_MSG(d->spare && d->spare->serial == serial,
              "the second call did not reuse the kept session");
    p.weight_panels = false;
    CHECK_OK(qkv_decode(m, src, len, B, &p, &in_place));
    CHECK_MSG(dt_same_bits(&after, &in_place), "stale copies: the new weights decode differently");
    CHECK_MSG(!dt_same_bits(&before, &after),
              "the changed weights changed nothing (the test proves nothing)");
    qkv_hypotheses_free(&before);
    qkv_hypotheses_free(&after);
    qkv_hypotheses_free(&in_place);
    qkv_decoder_free(d);
    qkv_model_free(m);
}
