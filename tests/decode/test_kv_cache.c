/*
 * test_kv_cache.c: incremental decoding with a KV cache equals the full-sequence forward.
 *
 * For every attention variant (score functions, normalisers, Shaw / T5 / RoPE / ALiBi, learned /
 * sinusoidal / no positions, pre / post-LN, tied output) of an encoder-decoder and of a
 * decoder-only LM: the session's logits, fed one token at a time or in chunks, with and without
 * the cache, equal qkv_model_decode / qkv_model_lm over the whole sequence at every position
 * (float 1e-5, double 1e-10), with source padding and a padding token inside the target history.
 * Also: reordering rows (qkv_session_gather, as beam search does) keeps each row's cache with it;
 * the step arena stops growing after the first step; qkv_mha_step returns the same attention
 * weights as qkv_mha_forward and rejects gradients, causal masks and shapes that do not fit.
 */
#include "decode_testutil.h"

#include "core/internal.h"
#include "infer/infer_internal.h"

enum { B = 3, S = 6, T = 9, V = 9 };

static const int32_t src_ids[B * S] = {3, 4,  5, 6, 7, 8,  /* full length */
                                       9, 10, 3, 4, 0, 0,  /* padded after 4 */
                                       5, 5,  6, 1, 2, 0}; /* padded after 5 */
/* BOS, then tokens; row 1 holds a padding token (a masked key) at position 3 */
static const int32_t tgt_ids[B * T] = {1, 3, 4, 5, 6, 7, 8, 3, 4, //
                                       1, 8, 7, 0, 5, 4, 3, 2, 6, //
                                       1, 2, 2, 3, 3, 4, 4, 5, 5};

/* The full forward's logits (B, T, V), copied out. */
static qkv_real *full_forward(const qkv_model *m, const int32_t *src, const int32_t *tgt, int32_t n,
                              int32_t len) {
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_tensor *in = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){n, len}, tgt);
    qkv_tensor *logits;
    if (m->cfg.arch == QKV_ARCH_DECODER) {
        logits = qkv_model_lm(ctx, m, in, NULL);
    } else {
        qkv_tensor *s = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){n, S}, src);
        logits = qkv_model_decode(ctx, m, in, qkv_model_encode(ctx, m, s, NULL), s, NULL, NULL);
    }
    CHECK_OK(qkv_ctx_status(ctx));
    qkv_real *out = NULL;
    if (logits) {
        out = malloc(sizeof(qkv_real) * (size_t)(n * len * V));
        memcpy(out, logits->data, sizeof(qkv_real) * (size_t)(n * len * V));
    }
    qkv_ctx_free(ctx);
    return out;
}

static qkv_session *open_session(const qkv_model *m, int32_t rows, bool cache, size_t arena) {
    qkv_session_params p = qkv_session_default_params();
    p.max_rows = rows;
    p.max_len = T;
    p.max_src_len = S;
    p.use_cache = cache;
    p.kernels = qkv_test_kernels;
    p.arena_bytes = arena;
    qkv_session *s = NULL;
    CHECK_OK(qkv_session_new(m, &p, &s));
    if (s && m->cfg.arch == QKV_ARCH_ENCODER_DECODER)
        CHECK_OK(qkv_session_encode(s, src_ids, B, S));
    if (s && m->cfg.arch == QKV_ARCH_DECODER) CHECK_OK(qkv_session_start(s, B));
    return s;
}

/* Feed tgt_ids in chunks of the given sizes and compare each chunk's logits with full. */
static void check_incremental(const char *what, const qkv_model *m, const qkv_real *full,
                              bool cache, const int32_t *chunks, int n_chunks) {
    qkv_session *s = open_session(m, B, cache, 0);
    if (!s) return;
    int32_t at = 0;
    for (int c = 0; c < n_chunks; c++) {
        const int32_t len = chunks[c];
        int32_t tok[B * T];
        for (int32_t b = 0; b < B; b++)
            memcpy(tok + b * len, tgt_ids + b * T + at, sizeof(int32_t) * (size_t)len);
        qkv_tensor *logits = NULL;
        CHECK_OK(qkv_session_step(s, tok, len, &logits));
        if (!logits) break;
        CHECK(logits->shape[0] == B && logits->shape[1] == len && logits->shape[2] == V);
        double worst = 0;
        for (int32_t b = 0; b < B; b++) {
            double d = tu_max_rel_diff((const qkv_real *)logits->data + (size_t)b * len * V,
                                       full + ((size_t)b * T + (size_t)at) * V, (int64_t)len * V);
            worst = d > worst || d != d ? d : worst;
        }
        CHECK_MSG(worst <= DT_TOL, "%s (%s, chunk %d at %d): cached logits differ by %g", what,
                  cache ? "cached" : "uncached", c, at, worst);
        at += len;
    }
    CHECK(qkv_session_length(s) == T);
    qkv_session_free(s);
}

static void check_model(const char *what, const qkv_model *m) {
    qkv_real *full = full_forward(m, src_ids, tgt_ids, B, T);
    if (!full) return;
    const int32_t ones[T] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, chunks[] = {4, 1, 2, 2};
    check_incremental(what, m, full, true, ones, T);
    check_incremental(what, m, full, true, chunks, 4);
    check_incremental(what, m, full, false, ones, T);
    free(full);
}

TEST(kv_cache_seq2seq_equals_full_decoder_every_variant) {
    for (int i = 0; i < dt_n_variants; i++) {
        qkv_model *m = dt_seq2seq(&dt_variants[i], V, 1, 10 + (uint64_t)i);
        if (m) check_model(dt_variants[i].name, m);
        qkv_model_free(m);
    }
}

TEST(kv_cache_decoder_only_equals_full_lm_every_variant) {
    for (int i = 0; i < dt_n_variants; i++) {
        qkv_model *m = dt_lm(&dt_variants[i], V, 1, 40 + (uint64_t)i);
        if (m) check_model(dt_variants[i].name, m);
        qkv_model_free(m);
    }
}

/* PROPERTY: after qkv_session_gather(rows), row i continues exactly as old row rows[i] would:
 * its cache, its token history (key padding) and its source move together. */
TEST(kv_cache_gather_moves_every_row_with_its_cache) {
    const int variants[] = {0, 8, 11}; /* plain, Shaw, RoPE */
    for (int vi = 0; vi < 3; vi++) {
        const dt_variant *v = &dt_variants[variants[vi]];
        for (int arch = 0; arch < 2; arch++) {
            qkv_model *m = arch ? dt_lm(v, V, 1, 70) : dt_seq2seq(v, V, 1, 71);
            if (!m) continue;
            for (int cache = 0; cache < 2; cache++) {
                qkv_session *s = open_session(m, 4, cache, 0);
                if (!s) continue;
                qkv_tensor *logits = NULL;
                int32_t head[B * 3];
                for (int32_t b = 0; b < B; b++)
                    memcpy(head + b * 3, tgt_ids + b * T, sizeof head[0] * 3);
                CHECK_OK(qkv_session_step(s, head, 3, &logits));
                /* expand and reorder: new rows 2, 0, 0, 1; keep rows 1 and 3 (in place, positions
                 * 2 and 3 keep stale data); then expand again over the stale positions */
                const int32_t rows[4] = {2, 0, 0, 1}, keep[2] = {1, 3}, again[4] = {1, 0, 1, 1};
                CHECK_OK(qkv_session_gather(s, rows, 4));
                CHECK(qkv_session_rows(s) == 4);
                const int32_t *h2 = qkv_session_tokens(s, 0);
                CHECK(h2 && dt_same_tokens(h2, 3, tgt_ids + 2 * T, 3));
                const int32_t more[4 * 2] = {3, 4, 5, 6, 7, 8, 6, 5}, last[2 * 2] = {4, 4, 3, 8};
                const int32_t final[4 * 2] = {5, 6, 7, 8, 3, 4, 8, 7};
                CHECK_OK(qkv_session_step(s, more, 2, &logits));
                CHECK_OK(qkv_session_gather(s, keep, 2));
                CHECK_OK(qkv_session_step(s, last, 2, &logits));
                CHECK_OK(qkv_session_gather(s, again, 4));
                CHECK_OK(qkv_session_step(s, final, 2, &logits));
                if (!logits) {
                    qkv_session_free(s);
                    continue;
                }
                /* reference: the full sequences of the rows' ancestries */
                int32_t src2[4 * S], tgt2[4 * T];
                for (int32_t i = 0; i < 4; i++) {
                    const int32_t k = keep[again[i]], old = rows[k];
                    memcpy(src2 + i * S, src_ids + old * S, sizeof(int32_t) * S);
                    memcpy(tgt2 + i * T, tgt_ids + old * T, sizeof(int32_t) * 3);
                    memcpy(tgt2 + i * T + 3, more + k * 2, sizeof(int32_t) * 2);
                    memcpy(tgt2 + i * T + 5, last + again[i] * 2, sizeof(int32_t) * 2);
                    memcpy(tgt2 + i * T + 7, final + i * 2, sizeof(int32_t) * 2);
                }
                qkv_real *full = full_forward(m, src2, tgt2, 4, T);
                for (int32_t i = 0; full && i < 4; i++) {
                    const double d =
                        tu_max_rel_diff((const qkv_real *)logits->data + (size_t)i * 2 * V,
                                        full + ((size_t)i * T + 7) * V, 2 * V);
                    CHECK_MSG(d <= DT_TOL, "%s %s (%s): row %d after gathers differs by %g",
                              v->name, arch ? "LM" : "seq2seq", cache ? "cached" : "uncached", i,
                              d);
                }
                free(full);
                qkv_session_free(s);
            }
            qkv_model_free(m);
        }
    }
}

/* The large-gather tests' model: one layer per stack, 2 heads, FFN 16, vocabulary V, no dropout
 * (NULL after a failed check). */
static qkv_model *one_layer_model(qkv_arch arch, int32_t d_model, int32_t max_len, uint64_t seed) {
    qkv_model_config c = qkv_model_default_config(arch, d_model, 2, 1);
    c.src_vocab = c.tgt_vocab = V;
    c.dim_feedforward = 16;
    c.dropout = 0;
    c.max_len = max_len;
    c.pad_id = DT_PAD;
    qkv_model *m = NULL;
    CHECK_OK(qkv_model_new(&c, seed, &m));
    return m;
}

/* qkv_session_gather over 64 rows x 520 positions: after a reordering gather with fixed points
 * and repeats, every row's filled self-attention keys and values, read where the session's table
 * says they are (keys stay in the row that computed them), and its token history are the old
 * row's, byte for byte, with 1 and with 2 threads; and no key or value has moved. (The table and
 * the histories, 2 KiB a row, move on one thread at this size; the threaded copies run in the
 * source-side test below.) */
TEST(kv_cache_large_gather_moves_rows_byte_for_byte) {
    enum { N = 64, LEN = 520 };
    qkv_model *m = one_layer_model(QKV_ARCH_DECODER, 8, 600, 90);
    if (!m) return;
    const int saved = qkv_get_num_threads();
    int32_t *tok = malloc(sizeof(int32_t) * N * LEN), rows[N];
    for (int32_t i = 0; i < N * LEN; i++)
        tok[i] = 1 + (int32_t)((i * 7 + i / LEN * 3) % (V - 1)); /* never pad */
    for (int32_t i = 0; i < N; i++) /* rows 0, 5, 10, ... stay; the others come from elsewhere */
        rows[i] = i % 5 == 0 ? i : (i * 37 + 11) % N;
    for (int threads = 1; threads <= 2 && tok; threads++) {
        qkv_set_num_threads(threads);
        qkv_session_params p = qkv_session_default_params();
        p.max_rows = N;
        p.max_len = LEN + 1;
        p.kernels = qkv_test_kernels;
        qkv_session *s = NULL;
        CHECK_OK(qkv_session_new(m, &p, &s));
        qkv_tensor *logits = NULL;
        if (s) CHECK_OK(qkv_session_start(s, N));
        if (s) CHECK_OK(qkv_session_step(s, tok, LEN, &logits));
        if (!logits) {
            qkv_session_free(s);
            break;
        }
        const size_t row = (size_t)(s->H * s->L * s->D);
        const size_t all = (size_t)(2 * s->n_layers) * N * row;
        qkv_real *before = malloc(sizeof(qkv_real) * all);
        if (before) memcpy(before, s->self_kv, sizeof(qkv_real) * all);
        CHECK_OK(qkv_session_gather(s, rows, N));
        int64_t bad = 0;
        for (int32_t kv = 0; before && kv < 2 * s->n_layers; kv++)
            for (int32_t i = 0; i < N; i++)
                for (int64_t h = 0; h < s->H; h++)
                    for (int64_t j = 0; j < LEN; j++) {
                        const size_t at = (size_t)h * (size_t)(s->L * s->D) + (size_t)(j * s->D);
                        const size_t held = (size_t)s->self_rows[(size_t)i * (size_t)s->L + (size_t)j];
                        const qkv_real *got = s->self_kv + ((size_t)kv * N + held) * row + at;
                        const qkv_real *want = before + ((size_t)kv * N + (size_t)rows[i]) * row + at;
                        bad += memcmp(got, want, sizeof(qkv_real) * (size_t)s->D) != 0;
                    }
        bad += before && memcmp(before, s->self_kv, sizeof(qkv_real) * all) != 0;
        for (int32_t i = 0; i < N; i++)
            bad += !dt_same_tokens(qkv_session_tokens(s, i), LEN, tok + (size_t)rows[i] * LEN, LEN);
        CHECK_MSG(before && bad == 0, "%d thread(s): %lld rows / heads moved wrong", threads,
                  (long long)bad);
        free(before);
        qkv_session_free(s);
    }
    qkv_set_num_threads(saved);
    free(tok);
    qkv_model_free(m);
}

/* The source side of qkv_session_gather at a size where its copies through the scratch buffer
 * run over the threads (an uncached session's encoder memory: 96 rows x 256 positions x d_model
 * 16 = 1.5 MiB), through the move list (`to`) that only the source side uses: after two
 * reordering gathers with fixed points and repeats, every row's memory and source ids are those
 * of the source it now decodes, byte for byte, with 1 and with 2 threads. */
TEST(kv_cache_large_gather_moves_source_rows_byte_for_byte) {
    enum { N = 96, SRC = 256 };
    qkv_model *m = one_layer_model(QKV_ARCH_ENCODER_DECODER, 16, 300, 91);
    if (!m) return;
    const int saved = qkv_get_num_threads();
    int32_t *src = malloc(sizeof(int32_t) * N * SRC), first[N], second[N], holds[N];
    for (int32_t i = 0; i < N * SRC; i++)
        src[i] = 1 + (int32_t)((i * 5 + i / SRC * 7) % (V - 1)); /* never pad; rows differ */
    for (int32_t i = 0; i < N; i++) {
        first[i] = i % 4 == 0 ? i : (i * 29 + 3) % N; /* every fourth row stays */
        second[i] = (i * 53 + 17) % N;
    }
    for (int threads = 1; threads <= 2 && src; threads++) {
        qkv_set_num_threads(threads);
        qkv_session_params p = qkv_session_default_params();
        p.max_rows = N;
        p.max_len = 4;
        p.max_src_len = SRC;
        p.use_cache = false; /* the encoder memory is kept per row and moves with the rows */
        p.kernels = qkv_test_kernels;
        qkv_session *s = NULL;
        CHECK_OK(qkv_session_new(m, &p, &s));
        if (s) CHECK_OK(qkv_session_encode(s, src, N, SRC));
        if (!s || !s->memory) {
            qkv_session_free(s);
            break;
        }
        const size_t row = (size_t)SRC * (size_t)s->C;
        qkv_real *encoded = malloc(sizeof(qkv_real) * row * N); /* source b's memory, as encoded */
        if (encoded) memcpy(encoded, s->memory, sizeof(qkv_real) * row * N);
        for (int32_t i = 0; i < N; i++) holds[i] = i;
        int64_t bad = 0;
        for (int g = 0; g < 2 && encoded; g++) {
            const int32_t *rows = g ? second : first;
            int32_t next[N];
            for (int32_t i = 0; i < N; i++) next[i] = holds[rows[i]];
            memcpy(holds, next, sizeof holds);
            CHECK_OK(qkv_session_gather(s, rows, N));
            for (int32_t i = 0; i < N; i++) {
                bad += memcmp(s->memory + (size_t)i * row, encoded + (size_t)holds[i] * row, sizeof(qkv_real) * row) != 0;
                bad += memcmp(s->src + (size_t)i * SRC, src + (size_t)holds[i] * SRC, sizeof(int32_t) * SRC) != 0;
            }
        }
        CHECK_MSG(encoded && bad == 0, "%d thread(s): %lld memory / source rows moved wrong", threads, (long long)bad);
        free(encoded);
        qkv_session_free(s);
    }
    qkv_set_num_threads(saved);
    free(src);
    qkv_model_free(m);
}

/* Memory: the session's arena reaches its high-water mark when the session is created (the
 * measure run, which allocates without computing the products or the cached attention);
 * decoding steps neither grow it nor call malloc, whatever the attention variant, before and
 * after a reordering gather (after it the keys are read through the session's table of rows). */
TEST(kv_cache_step_arena_does_not_grow) {
    for (int k = 0; k < 2 * dt_n_variants; k++) {
        const int vi = k / 2, arch = k % 2;
        qkv_model *m =
            arch ? dt_lm(&dt_variants[vi], V, 1, 80) : dt_seq2seq(&dt_variants[vi], V, 1, 81);
        qkv_session *s = m ? open_session(m, B, true, 4096) : NULL; /* a tiny first chunk */
        if (!s) {
            qkv_model_free(m);
            continue;
        }
        const qkv_ctx *ctx = qkv_session_ctx(s);
        qkv_tensor *logits = NULL;
        const uint64_t mallocs = qkv_ctx_arena_mallocs(ctx); /* after the measure run and encode / start */
        const size_t peak = qkv_ctx_arena_peak(ctx);
        for (int32_t t = 0; t < T; t++) {
            int32_t tok[B];
            for (int32_t b = 0; b < B; b++)
                tok[b] = tgt_ids[b * T + t];
            CHECK_OK(qkv_session_step(s, tok, 1, &logits));
            if (t == 1) { /* the rows in reverse order */
                int32_t reversed[B];
                for (int32_t b = 0; b < B; b++) reversed[b] = B - 1 - b;
                CHECK_OK(qkv_session_gather(s, reversed, B));
            }
        }
        (void)mallocs;
#ifndef QKV_ARENA_PER_ALLOC /* the sanitizer build mallocs every allocation */
        CHECK_MSG(qkv_ctx_arena_mallocs(ctx) == mallocs, "%s, %s: arena mallocs grew from %llu to %llu",
                  dt_variants[vi].name, arch ? "LM" : "seq2seq", (unsigned long long)mallocs,
                  (unsigned long long)qkv_ctx_arena_mallocs(ctx));
#endif
        CHECK_MSG(qkv_ctx_arena_peak(ctx) == peak, "%s, %s: arena peak grew from %zu to %zu", dt_variants[vi].name,
                  arch ? "LM" : "seq2seq", peak, qkv_ctx_arena_peak(ctx));
        qkv_session_free(s);
        qkv_model_free(m);
    }
}

/* qkv_mha_step's attention weights (unfused path) equal row t of the full forward's weights. */
TEST(mha_step_weights_equal_full_forward) {
    const int64_t N = 2, L = 5, C = 8, H = 2, D = 4;
    qkv_mha_config cfg = qkv_mha_default_config((int32_t)C, (int32_t)H);
    cfg.relpos = QKV_RELPOS_ALIBI;
    qkv_params *p;
    qkv_mha m;
    dt_mha(&m, &p, &cfg, "attn.", 5);
    qkv_tensor *x = tu_rand(3, (int64_t[]){N, L, C}, -1, 1, 6);
    qkv_tensor *ck = tu_tensor(QKV_REAL, 4, (int64_t[]){N, H, L, D}),
               *cv = tu_tensor(QKV_REAL, 4, (int64_t[]){N, H, L, D});
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_mask causal = qkv_mask_none();
    causal.causal = true;
    qkv_tensor *w_full = NULL;
    qkv_tensor *y_full =
        qkv_mha_forward(ctx, &m, x, x, x, &causal, &w_full); /* (N, L, C), (N, H, L, L) */
    CHECK_OK(qkv_ctx_status(ctx));
    for (int64_t t = 0; y_full && t < L; t++) {
        qkv_tensor *xt = qkv_contiguous(ctx, qkv_narrow(ctx, x, 1, t, 1));
        qkv_tensor *w = NULL;
        qkv_tensor *y = qkv_mha_step(ctx, &m, xt, ck, cv, t, true, NULL, &w);
        CHECK_OK(qkv_ctx_status(ctx));
        if (!y || !w) break;
        CHECK(w->shape[3] == t + 1);
        for (int64_t n = 0; n < N; n++) {
            for (int64_t c = 0; c < C; c++)
                CHECK_NEAR(((qkv_real *)y->data)[n * C + c],
                           ((qkv_real *)y_full->data)[(n * L + t) * C + c], DT_TOL);
            for (int64_t h = 0; h < H; h++)
                for (int64_t j = 0; j <= t; j++)
                    CHECK_NEAR(((qkv_real *)w->data)[(n * H + h) * (t + 1) + j],
                               ((qkv_real *)w_full->data)[((n * H + h) * L + t) * L + j], DT_TOL);
        }
    }
    qkv_ctx_free(ctx);
    tu_free(x);
    tu_free(ck);
    tu_free(cv);
    qkv_params_free(p);
}

TEST(mha_step_rejects_gradients_masks_and_shapes) {
    const int64_t C = 8, H = 2, D = 4;
    qkv_mha_config cfg = qkv_mha_default_config((int32_t)C, (int32_t)H);
    qkv_params *p;
    qkv_mha m;
    dt_mha(&m, &p, &cfg, "", 1);
    qkv_tensor *x = tu_rand(3, (int64_t[]){2, 1, C}, -1, 1, 1);
    qkv_tensor *x3 = tu_rand(3, (int64_t[]){2, 3, C}, -1, 1, 1);
    qkv_tensor *ck = tu_tensor(QKV_REAL, 4, (int64_t[]){2, H, 4, D}),
               *cv = tu_tensor(QKV_REAL, 4, (int64_t[]){2, H, 4, D});
    qkv_tensor *bad = tu_tensor(QKV_REAL, 4, (int64_t[]){2, H, 4, D + 1});
    qkv_tensor *mem = tu_rand(3, (int64_t[]){2, 5, C}, -1, 1, 2);
    qkv_ctx *ctx = tu_ctx(); /* gradients enabled: the parameters require one */
    TU_EXPECT_FAIL(ctx, qkv_mha_step(ctx, &m, x, ck, cv, 0, true, NULL, NULL), QKV_ERR_UNSUPPORTED,
                   "mha_step", "not differentiable");
    CHECK_ERR(qkv_mha_cache_memory(ctx, &m, mem, ck, cv), QKV_ERR_SHAPE, "S = 5");
    qkv_ctx_reset(ctx);
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_mask causal = qkv_mask_none();
    causal.causal = true;
    TU_EXPECT_FAIL(ctx, qkv_mha_step(ctx, &m, x, ck, cv, 0, true, &causal, NULL),
                   QKV_ERR_INVALID_ARG, "mha_step", "key_padding");
    TU_EXPECT_FAIL(ctx, qkv_mha_step(ctx, &m, x, bad, cv, 0, true, NULL, NULL), QKV_ERR_SHAPE,
                   "mha_step", "cache_k");
    TU_EXPECT_FAIL(ctx, qkv_mha_step(ctx, &m, x3, ck, cv, 2, true, NULL, NULL), QKV_ERR_SHAPE,
                   "mha_step", "positions 2 .. 4");
    TU_EXPECT_FAIL(ctx, qkv_mha_step(ctx, &m, mem, ck, cv, -1, true, NULL, NULL), QKV_ERR_SHAPE,
                   "mha_step", "-1");
    qkv_ctx_free(ctx);
    qkv_tensor *all[] = {x, x3, ck, cv, bad, mem};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tu_free(all[i]);
    qkv_params_free(p);
}
