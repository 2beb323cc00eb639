/*
 * test_nat_train.c: the training mode of non-autoregressive models. The masking sampler is a pure
 * function of (seed, step), masks between 1 and L_b token positions of each row, draws every count
 * about equally often, and gives a row the same mask whatever the batch's width; a trainer step's
 * loss is qkv_nat_loss under the sampler's mask at the trainer's RNG position; resuming is
 * bit-identical; bad configurations and batches are clear errors that leave the model unchanged;
 * and a small model learns to reverse digit strings, decoded by mask-predict.
 */
#include "testutil.h"

#include <stdio.h>
#include <unistd.h>

/* ids: 0 pad, 1 unk, 2 bos, 3 eos, 4 .. 4 + SYMBOLS - 1 symbols, MASK last */
enum { SYMBOLS = 6, MASK = 4 + SYMBOLS, V = MASK + 1, B = 16, W = 6 };

static qkv_model *nat_model(uint64_t seed, double dropout, int32_t width, int layers) {
    qkv_model_config c = qkv_model_default_config(QKV_ARCH_ENCODER_DECODER, width, 2, layers);
    c.src_vocab = V - 1;
    c.tgt_vocab = V;
    c.dim_feedforward = 2 * width;
    c.dropout = dropout;
    c.max_len = 8;
    c.nat = true;
    c.mask_id = MASK;
    qkv_model *m = NULL;
    CHECK_OK(qkv_model_new(&c, seed, &m));
    return m;
}

/* The reverse task: target = the source reversed, lengths 3 .. 6, the rest padding. */
typedef struct {
    int32_t src[B * W], tgt[B * W], len[B];
    qkv_train_batch batch;
} reverse_batch;

static void make_reverse_batch(reverse_batch *rb, uint64_t seed) {
    memset(rb, 0, sizeof *rb);
    for (int r = 0; r < B; r++) {
        const int len = 3 + (int)(qkv_rng_uniform(seed, 1, 7, (uint64_t)r) * 4);
        rb->len[r] = len;
        for (int i = 0; i < len; i++)
            rb->src[r * W + i] =
                4 + (int32_t)(qkv_rng_uniform(seed, 1, (uint64_t)r, (uint64_t)i) * SYMBOLS);
        for (int i = 0; i < len; i++)
            rb->tgt[r * W + i] = rb->src[r * W + len - 1 - i];
    }
    rb->batch = (qkv_train_batch){
        .batch = B, .src_len = W, .tgt_len = W, .src = rb->src, .tgt_out = rb->tgt};
}

/* The batch's sources (packed: row r's rb->len[r] ids after the previous row's) decoded by
 * mask-predict with `iterations` passes over the length_beam most probable lengths. */
static void mask_predict(const qkv_model *m, const reverse_batch *rb, int32_t iterations, int32_t length_beam,
                         qkv_hypotheses *h) {
    int32_t src[B * W];
    int n = 0;
    for (int r = 0; r < B; r++)
        for (int i = 0; i < rb->len[r]; i++) src[n++] = rb->src[r * W + i];
    qkv_decode_params p = qkv_decode_default_params();
    p.strategy = QKV_DECODE_MASK_PREDICT;
    p.iterations = iterations;
    p.length_beam = length_beam;
    p.kernels = qkv_test_kernels;
    CHECK_OK(qkv_decode(m, src, rb->len, B, &p, h));
}

static qkv_train_config quick_config(int steps) {
    qkv_train_config c = qkv_train_default_config();
    c.schedule = (qkv_lr_schedule){.kind = QKV_LR_WARMUP_COSINE,
                                   .base_lr = 3e-3,
                                   .warmup_steps = 20,
                                   .total_steps = steps,
                                   .min_lr = 1e-4};
    c.optim.lr = 3e-3;
    return c;
}

TEST(nat_mask_sampler_counts_positions_and_determinism) {
    enum { R = 4, T = 7 };
    const int32_t tgt[R * T] = {5,      6, 7, 8, 9, 0, 0, /**/ 4, 0, 0, 0, 0, 0, 0,
                                /**/ 4, 5, 6, 7, 8, 9, 4, /**/ 7, 7, 0, 0, 0, 0, 0};
    const int L[R] = {5, 1, 7, 2};
    bool a[R * T], b[R * T];
    /* counts: within 1 .. L_b, only on tokens; each count about equally often (chi-square) */
    int hist[R][T + 1];
    memset(hist, 0, sizeof hist);
    enum { DRAWS = 2000 };
    for (uint64_t step = 0; step < DRAWS; step++) {
        CHECK_OK(qkv_nat_sample_mask(tgt, R, T, 0, 42, step, a));
        for (int r = 0; r < R; r++) {
            int n = 0;
            for (int t = 0; t < T; t++) {
                n += a[r * T + t];
                if (a[r * T + t] && t >= L[r])
                    CHECK_MSG(false, "step %d row %d masks padding %d", (int)step, r, t);
            }
            CHECK(n >= 1 && n <= L[r]);
            if (n >= 1 && n <= L[r]) hist[r][n]++;
        }
    }
    for (int r = 0; r < R; r++) {
        double chi2 = 0, expect = (double)DRAWS / L[r];
        for (int n = 1; n <= L[r]; n++)
            chi2 += (hist[r][n] - expect) * (hist[r][n] - expect) / expect;
        CHECK_MSG(chi2 < 30, "row %d: counts 1 .. %d are not uniform (chi2 %.1f)", r, L[r], chi2);
    }
    /* a pure function of (seed, step); another seed or step gives other masks */
    CHECK_OK(qkv_nat_sample_mask(tgt, R, T, 0, 42, 17, a));
    CHECK_OK(qkv_nat_sample_mask(tgt, R, T, 0, 42, 17, b));
    CHECK(memcmp(a, b, sizeof a) == 0);
    int differ_seed = 0, differ_step = 0;
    for (uint64_t s = 0; s < 8; s++) {
        CHECK_OK(qkv_nat_sample_mask(tgt, R, T, 0, 42, s, a));
        CHECK_OK(qkv_nat_sample_mask(tgt, R, T, 0, 43, s, b));
        differ_seed += memcmp(a, b, sizeof a) != 0;
        CHECK_OK(qkv_nat_sample_mask(tgt, R, T, 0, 42, s + 100, b));
        differ_step += memcmp(a, b, sizeof a) != 0;
    }
    CHECK(differ_seed >= 6 && differ_step >= 6);
    /* a row's mask does not depend on the batch width or on the other rows: rows 1 and 3 (same
     * tokens) in a batch of width 2 whose rows 0 and 2 differ */
    CHECK_OK(qkv_nat_sample_mask(tgt, R, T, 0, 9, 3, a));
    const int32_t narrow_tgt[R * 2] = {5, 6, 4, 0, 4, 0, 7, 7};
    bool narrow[R * 2];
    CHECK_OK(qkv_nat_sample_mask(narrow_tgt, R, 2, 0, 9, 3, narrow));
    CHECK(narrow[2] == a[T] && !narrow[3] && narrow[6] == a[3 * T] && narrow[7] == a[3 * T + 1]);
    /* errors */
    const int32_t holey[T] = {5, 0, 6, 0, 0, 0, 0};
    CHECK_ERR(qkv_nat_sample_mask(holey, 1, T, 0, 1, 1, a), QKV_ERR_INVALID_ARG,
              "row 0 has a token after padding");
    const int32_t empty[T] = {0};
    CHECK_ERR(qkv_nat_sample_mask(empty, 1, T, 0, 1, 1, a), QKV_ERR_INVALID_ARG,
              "row 0 has no tokens");
    CHECK_ERR(qkv_nat_sample_mask(NULL, 1, T, 0, 1, 1, a), QKV_ERR_INVALID_ARG, "NULL");
}

/* A trainer step on a nat model computes qkv_nat_loss under the sampler's mask at the trainer's
 * RNG position (dropout 0: the same ops on the same values, so the same bits). */
TEST(nat_trainer_step_is_the_masked_loss) {
    qkv_model *m = nat_model(3, 0, 8, 1), *twin = nat_model(3, 0, 8, 1);
    if (!m || !twin) return;
    qkv_train_config c = quick_config(100);
    c.length_weight = 0.25;
    qkv_trainer *t = NULL;
    CHECK_OK(qkv_trainer_new(m, &c, &t));
    reverse_batch rb;
    make_reverse_batch(&rb, 5);
    qkv_step_stats st;
    CHECK_OK(qkv_trainer_step(t, &rb.batch, &st));
    uint64_t seed, step;
    qkv_ctx_get_rng(qkv_trainer_ctx(t), &seed, &step);
    bool masked[B * W];
    CHECK_OK(qkv_nat_sample_mask(rb.tgt, B, W, 0, seed, step, masked));
    int64_t n_masked = 0;
    for (int i = 0; i < B * W; i++)
        n_masked += masked[i];
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_training(ctx, true);
    qkv_tensor *tok = NULL, *len = NULL;
    qkv_tensor *src = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){B, W}, rb.src);
    qkv_tensor *tgt = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){B, W}, rb.tgt);
    qkv_tensor *loss =
        qkv_nat_loss(ctx, twin, src, tgt, masked, c.label_smoothing, c.length_weight, &tok, &len);
    CHECK_OK(qkv_ctx_status(ctx));
    if (loss) {
        CHECK(st.loss == (double)((qkv_real *)tok->data)[0]);
        CHECK(st.length_loss == (double)((qkv_real *)len->data)[0]);
        CHECK(st.length_loss > 0 && st.tokens == n_masked && st.stepped);
    }
    /* the step changed the length head */
    CHECK(memcmp(m->length_w->data, twin->length_w->data,
                 sizeof(qkv_real) * (size_t)qkv_tensor_numel(m->length_w)) != 0);
    /* eval_loss is deterministic and does not move the RNG */
    double l1 = 0, l2 = 0;
    int64_t n1 = 0;
    CHECK_OK(qkv_trainer_eval_loss(t, &rb.batch, &l1, &n1));
    CHECK_OK(qkv_trainer_eval_loss(t, &rb.batch, &l2, NULL));
    uint64_t seed2, step2;
    qkv_ctx_get_rng(qkv_trainer_ctx(t), &seed2, &step2);
    CHECK(l1 == l2 && l1 > 0 && n1 >= B && seed2 == seed && step2 == step);
    qkv_ctx_free(ctx);
    qkv_trainer_free(t);
    qkv_model_free(m);
    qkv_model_free(twin);
}

static qkv_real *copy_params(const qkv_model *m) {
    const int64_t n = qkv_params_numel(m->params);
    qkv_real *x = malloc(sizeof(qkv_real) * (size_t)n);
    memcpy(x, qkv_params_block(m->params, QKV_BLOCK_DATA), sizeof(qkv_real) * (size_t)n);
    return x;
}

TEST(nat_trainer_resume_is_bit_identical) {
    qkv_train_config c = quick_config(100);
    enum { N = 3 };
    qkv_model *m = nat_model(5, 0.1, 8, 1);
    qkv_trainer *t = NULL;
    CHECK_OK(qkv_trainer_new(m, &c, &t));
    reverse_batch rb;
    for (int s = 0; s < 2 * N && t; s++) {
        make_reverse_batch(&rb, (uint64_t)s);
        CHECK_OK(qkv_trainer_step(t, &rb.batch, NULL));
    }
    qkv_real *straight = copy_params(m);
    qkv_trainer_free(t);
    qkv_model_free(m);
    char path[] = "/tmp/qkv_nat_ckpt_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    m = nat_model(5, 0.1, 8, 1);
    CHECK_OK(qkv_trainer_new(m, &c, &t));
    for (int s = 0; s < N && t; s++) {
        make_reverse_batch(&rb, (uint64_t)s);
        CHECK_OK(qkv_trainer_step(t, &rb.batch, NULL));
    }
    CHECK_OK(qkv_trainer_save(t, path, 0, N, 0));
    qkv_trainer_free(t);
    qkv_model_free(m);
    m = nat_model(77, 0.1, 8, 1);
    CHECK_OK(qkv_trainer_new(m, &c, &t));
    CHECK_OK(qkv_trainer_load(t, path, NULL, NULL, NULL));
    for (int s = N; s < 2 * N && t; s++) {
        make_reverse_batch(&rb, (uint64_t)s);
        CHECK_OK(qkv_trainer_step(t, &rb.batch, NULL));
    }
    CHECK(memcmp(straight, qkv_params_block(m->params, QKV_BLOCK_DATA),
                 sizeof(qkv_real) * (size_t)qkv_params_numel(m->params)) == 0);
    unlink(path);
    free(straight);
    qkv_trainer_free(t);
    qkv_model_free(m);
}

TEST(nat_trainer_rejects_bad_configs_and_batches) {
    qkv_model *m = nat_model(2, 0, 8, 1);
    if (!m) return;
    qkv_trainer *t = NULL;
    qkv_train_config c = quick_config(100);
    c.ss_kind = QKV_SS_LINEAR;
    CHECK_ERR(qkv_trainer_new(m, &c, &t), QKV_ERR_INVALID_ARG, "the model is nat");
    c = quick_config(100);
    c.guided_weight = 1;
    CHECK_ERR(qkv_trainer_new(m, &c, &t), QKV_ERR_INVALID_ARG, "the model is nat");
    c = quick_config(100);
    c.length_weight = -1;
    CHECK_ERR(qkv_trainer_new(m, &c, &t), QKV_ERR_INVALID_ARG, "length_weight -1");
    c = quick_config(100);
    CHECK_OK(qkv_trainer_new(m, &c, &t));
    reverse_batch rb;
    make_reverse_batch(&rb, 1);
    qkv_real *before = copy_params(m);
    rb.tgt[2 * W + 1] = 0; /* a hole in row 2 */
    CHECK_ERR(qkv_trainer_step(t, &rb.batch, NULL), QKV_ERR_INVALID_ARG,
              "row 2 has a token after padding");
    make_reverse_batch(&rb, 1);
    rb.tgt[0] = MASK;
    CHECK_ERR(qkv_trainer_step(t, &rb.batch, NULL), QKV_ERR_INVALID_ARG, "holds mask_id");
    make_reverse_batch(&rb, 1);
    rb.batch.tgt_out = NULL;
    CHECK_ERR(qkv_trainer_step(t, &rb.batch, NULL), QKV_ERR_INVALID_ARG, "no tgt_out");
    CHECK(memcmp(before, qkv_params_block(m->params, QKV_BLOCK_DATA),
                 sizeof(qkv_real) * (size_t)qkv_params_numel(m->params)) == 0);
    CHECK(qkv_trainer_steps(t) == 0);
    free(before);
    qkv_trainer_free(t);
    qkv_model_free(m);
}

/* Training (with dropout and masking) and mask-predict decoding give the same bits with 1 and 2
 * threads. */
TEST(nat_training_and_decoding_are_the_same_on_1_and_2_threads) {
    const int saved = qkv_get_num_threads();
    qkv_real *params[2] = {NULL, NULL};
    qkv_hypotheses h[2];
    memset(h, 0, sizeof h);
    reverse_batch rb;
    for (int k = 0; k < 2; k++) {
        qkv_set_num_threads(k + 1);
        qkv_model *m = nat_model(6, 0.1, 16, 1);
        qkv_trainer *t = NULL;
        qkv_train_config c = quick_config(100);
        CHECK_OK(qkv_trainer_new(m, &c, &t));
        for (int s = 0; s < 3 && t; s++) {
            make_reverse_batch(&rb, (uint64_t)s);
            CHECK_OK(qkv_trainer_step(t, &rb.batch, NULL));
        }
        params[k] = copy_params(m);
        mask_predict(m, &rb, 3, 2, &h[k]);
        qkv_trainer_free(t);
        if (k == 1) {
            CHECK(memcmp(params[0], params[1],
                         sizeof(qkv_real) * (size_t)qkv_params_numel(m->params)) == 0);
            for (int r = 0; h[0].count && h[1].count && r < B; r++)
                CHECK(h[0].hyp[r].length == h[1].hyp[r].length &&
                      h[0].hyp[r].score == h[1].hyp[r].score &&
                      memcmp(h[0].hyp[r].tokens, h[1].hyp[r].tokens,
                             sizeof(int32_t) * (size_t)h[0].hyp[r].length) == 0);
        }
        qkv_model_free(m);
    }
    qkv_set_num_threads(saved);
    free(params[0]), free(params[1]);
    qkv_hypotheses_free(&h[0]), qkv_hypotheses_free(&h[1]);
}

/* Held-out reversals decoded by mask-predict with `iterations` passes (length_beam 1): exact
 * matches and right lengths out of 4 batches. */
static void reverse_accuracy(const qkv_model *m, int32_t iterations, int *exact, int *lengths_right,
                             int *total) {
    *exact = *lengths_right = *total = 0;
    for (int k = 0; k < 4; k++) {
        reverse_batch rb;
        make_reverse_batch(&rb, 100000 + (uint64_t)k);
        qkv_hypotheses h;
        mask_predict(m, &rb, iterations, 1, &h);
        if (!h.count) return;
        for (int r = 0; r < B; r++) {
            const qkv_hypothesis *y = &h.hyp[r];
            const bool len_ok = y->length == rb.len[r];
            *exact += len_ok &&
                      memcmp(y->tokens, rb.tgt + r * W, sizeof(int32_t) * (size_t)y->length) == 0;
            *lengths_right += len_ok;
        }
        *total += B;
        qkv_hypotheses_free(&h);
    }
}

/* A small model learns to reverse strings of 3 .. 6 symbols. Part-way through training, 4
 * mask-predict iterations fix many of the one-pass decoder's errors; at the end the length
 * head predicts the source length and 4 iterations give the exact reversal of nearly every
 * held-out string. */
TEST(nat_learns_to_reverse_strings) {
    enum { STEPS = 600, MIDWAY = 450 };
    qkv_model *m = nat_model(11, 0, 32, 2);
    qkv_trainer *t = NULL;
    qkv_train_config c = quick_config(STEPS);
    CHECK_OK(qkv_trainer_new(m, &c, &t));
    for (int s = 0; s < STEPS && t; s++) {
        reverse_batch rb;
        make_reverse_batch(&rb, (uint64_t)s);
        CHECK_OK(qkv_trainer_step(t, &rb.batch, NULL));
        if (s + 1 == MIDWAY) {
            int one = 0, four = 0, len = 0, total = 0;
            reverse_accuracy(m, 1, &one, &len, &total);
            reverse_accuracy(m, 4, &four, &len, &total);
            /* while one pass still errs, refinement fixes some errors (25 -> 42 of 64 here) */
            CHECK_MSG(one >= 0.9 * total || four > one,
                      "step %d: 4 iterations give %d / %d exact, 1 iteration %d", MIDWAY, four,
                      total, one);
        }
    }
    int exact = 0, lengths_right = 0, total = 0;
    reverse_accuracy(m, 4, &exact, &lengths_right, &total);
    CHECK_MSG(lengths_right >= 0.95 * total, "length head: %d / %d lengths right", lengths_right,
              total);
    CHECK_MSG(exact >= 0.9 * total, "4 iterations: %d / %d exact reversals", exact, total);
    qkv_trainer_free(t);
    qkv_model_free(m);
}
