/*
 * test_trainer.c: the trainer. Scheduled sampling with p_gold = 1 is exactly teacher forcing;
 * the schedules give their closed-form values; guided attention is 0 for a diagonal map and has
 * the right gradient; resuming from a checkpoint is bit-identical to not stopping; gradient
 * accumulation over two halves equals one step on the whole batch; a bad batch is an error that
 * leaves the model untouched; a checkpoint with a non-finite weight or moment is refused at load;
 * and a small copy task learns.
 */
#include "copy_task.h"

#include <math.h>
#include <stdio.h>
#include <unistd.h>

enum { V = COPY_V, B = COPY_B, S = COPY_S, T = COPY_T }; /* ids: 0 pad, 1 bos, 2 eos, 3.. symbols */

static qkv_model *tiny_seq2seq(uint64_t seed, double dropout) { return copy_model(seed, dropout, 8); }

static qkv_train_config quick_config(void) {
    qkv_train_config c = qkv_train_default_config();
    c.schedule = (qkv_lr_schedule){.kind = QKV_LR_WARMUP_COSINE, .base_lr = 3e-3, .warmup_steps = 5, .total_steps = 200, .min_lr = 1e-4};
    c.optim.lr = 3e-3;
    return c;
}

static qkv_real *copy_params(const qkv_model *m) {
    const int64_t n = qkv_params_numel(m->params);
    qkv_real *x = malloc(sizeof(qkv_real) * (size_t)n);
    memcpy(x, qkv_params_block(m->params, QKV_BLOCK_DATA), sizeof(qkv_real) * (size_t)n);
    return x;
}

/* Train `steps` steps from a fresh model with the given config; returns the parameters. */
static qkv_real *train_steps(const qkv_train_config *c, int steps, double dropout) {
    qkv_model *m = tiny_seq2seq(5, dropout);
    qkv_trainer *t = NULL;
    CHECK_OK(qkv_trainer_new(m, c, &t));
    for (int s = 0; s < steps && t; s++) {
        copy_batch cb;
        make_copy_batch(&cb, (uint64_t)s);
        CHECK_OK(qkv_trainer_step(t, &cb.batch, NULL));
    }
    qkv_real *p = copy_params(m);
    qkv_trainer_free(t);
    qkv_model_free(m);
    return p;
}

TEST(scheduled_sampling_with_gold_probability_one_is_teacher_forcing) {
    qkv_train_config tf = quick_config(), ss = quick_config();
    ss.ss_kind = QKV_SS_LINEAR;
    ss.ss_min_gold = 1.0; /* p_gold = max(1, ...) = 1: pass 1 runs, every token stays gold */
    qkv_real *a = train_steps(&tf, 4, 0.1), *b = train_steps(&ss, 4, 0.1);
    qkv_model *probe = tiny_seq2seq(5, 0.1);
    const int64_t n = qkv_params_numel(probe->params);
    CHECK(memcmp(a, b, sizeof(qkv_real) * (size_t)n) == 0);
    /* and with p_gold < 1 the inputs (hence the parameters) change */
    ss.ss_min_gold = 0.0;
    ss.ss_decay_steps = 1; /* p_gold = 0 from step 1 on: every token is the model's prediction */
    qkv_real *c = train_steps(&ss, 4, 0.1);
    CHECK(memcmp(a, c, sizeof(qkv_real) * (size_t)n) != 0);
    free(a), free(b), free(c);
    qkv_model_free(probe);
}

TEST(scheduled_sampling_schedules) {
    qkv_train_config c = qkv_train_default_config();
    CHECK(qkv_ss_gold_probability(&c, 1000) == 1);
    c.ss_kind = QKV_SS_LINEAR;
    c.ss_decay_steps = 100;
    c.ss_min_gold = 0.25;
    CHECK_NEAR(qkv_ss_gold_probability(&c, 0), 1.0, 1e-15);
    CHECK_NEAR(qkv_ss_gold_probability(&c, 40), 0.6, 1e-15);
    CHECK_NEAR(qkv_ss_gold_probability(&c, 90), 0.25, 1e-15);
    c.ss_kind = QKV_SS_EXPONENTIAL;
    c.ss_k = 0.99;
    c.ss_min_gold = 0;
    CHECK_NEAR(qkv_ss_gold_probability(&c, 100), pow(0.99, 100), 1e-15);
    c.ss_kind = QKV_SS_INVERSE_SIGMOID;
    c.ss_k = 10;
    CHECK_NEAR(qkv_ss_gold_probability(&c, 0), 10.0 / 11.0, 1e-15);
    CHECK_NEAR(qkv_ss_gold_probability(&c, 23), 10 / (10 + exp(2.3)), 1e-15);
    qkv_model *m = tiny_seq2seq(1, 0);
    qkv_trainer *t = NULL;
    c.ss_k = 0.5; /* inverse sigmoid needs k >= 1 */
    CHECK_ERR(qkv_trainer_new(m, &c, &t), QKV_ERR_INVALID_ARG, "k >= 1");
    qkv_model_free(m);
}

TEST(guided_attention_zero_on_the_diagonal_positive_off_it) {
    qkv_ctx *ctx = tu_ctx();
    enum { N = 5 };
    qkv_real eye[N * N] = {0}, anti[N * N] = {0};
    for (int i = 0; i < N; i++) eye[i * N + i] = 1, anti[i * N + (N - 1 - i)] = 1;
    qkv_tensor *a = qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){1, 1, N, N}, eye);
    qkv_tensor *b = qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){1, 1, N, N}, anti);
    const int32_t len[1] = {N};
    qkv_tensor *la = qkv_guided_attention_loss(ctx, &a, 1, len, len, 0.2);
    qkv_tensor *lb = qkv_guided_attention_loss(ctx, &b, 1, len, len, 0.2);
    CHECK_OK(qkv_ctx_status(ctx));
    CHECK(la && ((qkv_real *)la->data)[0] == 0);
    /* anti-diagonal: mean over 25 cells of W at (t, N-1-t): sum_t 1 - exp(-((N-1-2t)/N)^2 / 0.08) */
    double want = 0;
    for (int t = 0; t < N; t++) {
        double d = (double)(N - 1 - t) / N - (double)t / N;
        want += 1 - exp(-d * d / 0.08);
    }
    CHECK(lb && fabs(((qkv_real *)lb->data)[0] - want / (N * N)) < 1e-6);
    CHECK(qkv_guided_attention_loss(ctx, &a, 1, (int32_t[]){N + 1}, len, 0.2) == NULL && strstr(qkv_last_error(), "exceed"));
    qkv_ctx_free(ctx);
}

static qkv_tensor *guided_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    (void)user;
    return qkv_guided_attention_loss(ctx, in, 2, (int32_t[]){3, 2}, (int32_t[]){4, 1}, 0.3);
}

TEST(guided_attention_gradcheck) {
    TU_NEED_DOUBLE();
    qkv_tensor *in[2] = {tu_rand(4, (int64_t[]){2, 2, 4, 3}, 0, 1, 1), tu_rand(4, (int64_t[]){2, 2, 4, 3}, 0, 1, 2)};
    qkv_tensor_requires_grad(in[0]);
    qkv_tensor_requires_grad(in[1]);
    tu_gradcheck("guided attention", guided_fn, in, 2, NULL, NULL);
    tu_free(in[0]);
    tu_free(in[1]);
}

TEST(trainer_resume_is_bit_identical) {
    qkv_train_config c = quick_config();
    c.guided_weight = 0.5;
    c.ss_kind = QKV_SS_LINEAR;
    c.ss_decay_steps = 10;
    c.ss_min_gold = 0.5;
    enum { N = 3 };
    qkv_real *straight = train_steps(&c, 2 * N, 0.1);
    /* N steps, save, a fresh model and trainer, load, N more steps */
    char path[] = "/tmp/qkv_ckpt_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    qkv_model *m = tiny_seq2seq(5, 0.1);
    qkv_trainer *t = NULL;
    CHECK_OK(qkv_trainer_new(m, &c, &t));
    copy_batch cb;
    for (int s = 0; s < N; s++) {
        make_copy_batch(&cb, (uint64_t)s);
        CHECK_OK(qkv_trainer_step(t, &cb.batch, NULL));
    }
    CHECK_OK(qkv_trainer_save(t, path, 0, N, 0xfeedULL));
    qkv_trainer_free(t);
    qkv_model_free(m);
    m = tiny_seq2seq(77, 0.1); /* different initial weights: the checkpoint must overwrite them */
    CHECK_OK(qkv_trainer_new(m, &c, &t));
    int64_t epoch = -1, batch = -1;
    uint64_t fingerprint = 0;
    CHECK_OK(qkv_trainer_load(t, path, &epoch, &batch, &fingerprint));
    CHECK(epoch == 0 && batch == N && fingerprint == 0xfeedULL && qkv_trainer_steps(t) == N);
    for (int s = (int)batch; s < 2 * N; s++) {
        make_copy_batch(&cb, (uint64_t)s);
        CHECK_OK(qkv_trainer_step(t, &cb.batch, NULL));
    }
    CHECK(memcmp(straight, qkv_params_block(m->params, QKV_BLOCK_DATA), sizeof(qkv_real) * (size_t)qkv_params_numel(m->params)) == 0);
    /* a checkpoint of another architecture is refused */
    qkv_model_config other = m->cfg;
    other.dim_feedforward = 32;
    qkv_model *m2 = NULL;
    CHECK_OK(qkv_model_new(&other, 1, &m2));
    qkv_trainer *t2 = NULL;
    CHECK_OK(qkv_trainer_new(m2, &c, &t2));
    CHECK_ERR(qkv_trainer_load(t2, path, NULL, NULL, NULL), QKV_ERR_FORMAT, "configuration differs");
    qkv_trainer_free(t2);
    qkv_model_free(m2);
    unlink(path);
    qkv_trainer_free(t);
    qkv_model_free(m);
    free(straight);
}

/* Replace the only occurrence of `from`'s bytes in the file with `to`'s. */
static void patch_value(const char *path, qkv_real from, qkv_real to) {
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    if (!f) return;
    static unsigned char bytes[1 << 16];
    const size_t n = fread(bytes, 1, sizeof bytes, f);
    CHECK(n < sizeof bytes);
    long at = -1;
    int hits = 0;
    for (size_t i = 0; i + sizeof from <= n; i++)
        if (!memcmp(bytes + i, &from, sizeof from)) at = (long)i, hits++;
    CHECK(hits == 1);
    if (hits == 1) {
        fseek(f, at, SEEK_SET);
        fwrite(&to, sizeof to, 1, f);
    }
    fclose(f);
}

TEST(trainer_load_refuses_non_finite_state_and_keeps_the_trainer) {
    /* a NaN weight or moment, or a negative second moment, would make every later step NaN:
     * the checkpoint is refused at load, naming the tensor, and the trainer is left as it was */
    const struct {
        qkv_param_block block;
        qkv_real bad;
        const char *message;
    } cases[] = {{QKV_BLOCK_DATA, NAN, "'model.%s' holds NaN at element 3"},
                 {QKV_BLOCK_M, INFINITY, "'optim.m.%s' holds an infinite value at element 3"},
                 {QKV_BLOCK_V, -1, "'optim.v.%s' holds a negative value at element 3"}};
    const qkv_real marker = (qkv_real)12345.5;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char path[] = "/tmp/qkv_ckpt_XXXXXX";
        int fd = mkstemp(path);
        if (fd >= 0) close(fd);
        qkv_train_config tc = quick_config();
        qkv_model *m = tiny_seq2seq(5, 0);
        qkv_trainer *t = NULL;
        CHECK_OK(qkv_trainer_new(m, &tc, &t));
        const qkv_tensor *w = qkv_params_get(m->params, 1);
        const ptrdiff_t at = (const qkv_real *)w->data - qkv_params_block(m->params, QKV_BLOCK_DATA) + 3;
        qkv_params_block(m->params, cases[c].block)[at] = marker;
        CHECK_OK(qkv_trainer_save(t, path, 0, 0, 0));
        patch_value(path, marker, cases[c].bad);
        qkv_model *m2 = tiny_seq2seq(6, 0);
        qkv_trainer *t2 = NULL;
        CHECK_OK(qkv_trainer_new(m2, &tc, &t2));
        qkv_real *before = copy_params(m2);
        char expected[256];
        snprintf(expected, sizeof expected, cases[c].message, w->name);
        CHECK_ERR(qkv_trainer_load(t2, path, NULL, NULL, NULL), QKV_ERR_FORMAT, expected);
        CHECK(!memcmp(before, qkv_params_block(m2->params, QKV_BLOCK_DATA),
                      sizeof(qkv_real) * (size_t)qkv_params_numel(m2->params)));
        CHECK(qkv_trainer_steps(t2) == 0);
        free(before);
        qkv_trainer_free(t2);
        qkv_model_free(m2);
        qkv_trainer_free(t);
        qkv_model_free(m);
        unlink(path);
    }
}

TEST(gradient_accumulation_equals_the_whole_batch) {
    /* two halves with the same number of target tokens, accumulated, vs one step on both. SGD: its
     * update is linear in the gradient, so rounding differences stay rounding-sized (Adam divides
     * by sqrt(v) and would magnify them on parameters whose true gradient is 0). */
    qkv_train_config c = quick_config();
    c.label_smoothing = 0;
    c.optim = qkv_optim_default(QKV_OPTIM_SGD);
    c.optim.momentum = 0.9;
    c.clip_norm = 0;
    copy_batch whole;
    make_copy_batch(&whole, 3);
    for (int r = 0; r < B; r++) /* equal lengths in every row so both halves have equal token counts */
        for (int i = 0; i < S; i++) {
            whole.src[r * S + i] = 3 + (r * 5 + i) % (V - 3);
            whole.tgt_in[r * T + i + 1] = whole.tgt_out[r * T + i] = whole.src[r * S + i];
            whole.tgt_out[r * T + S] = 2;
        }
    qkv_train_batch halves[2];
    for (int h = 0; h < 2; h++)
        halves[h] = (qkv_train_batch){.batch = B / 2, .src_len = S, .tgt_len = T, .src = whole.src + h * (B / 2) * S,
                                .tgt_in = whole.tgt_in + h * (B / 2) * T, .tgt_out = whole.tgt_out + h * (B / 2) * T};
    c.accum_steps = 1;
    qkv_model *m1 = tiny_seq2seq(9, 0);
    qkv_trainer *t1 = NULL;
    CHECK_OK(qkv_trainer_new(m1, &c, &t1));
    CHECK_OK(qkv_trainer_step(t1, &whole.batch, NULL));
    c.accum_steps = 2;
    qkv_model *m2 = tiny_seq2seq(9, 0);
    qkv_trainer *t2 = NULL;
    CHECK_OK(qkv_trainer_new(m2, &c, &t2));
    qkv_step_stats st;
    CHECK_OK(qkv_trainer_step(t2, &halves[0], &st));
    CHECK(!st.stepped && qkv_trainer_steps(t2) == 0);
    CHECK_OK(qkv_trainer_step(t2, &halves[1], &st));
    CHECK(st.stepped && qkv_trainer_steps(t2) == 1);
    const int64_t n = qkv_params_numel(m1->params);
    double d = tu_max_rel_diff(qkv_params_block(m2->params, QKV_BLOCK_DATA), qkv_params_block(m1->params, QKV_BLOCK_DATA), n);
    CHECK_MSG(d < (sizeof(qkv_real) == 4 ? 1e-5 : 1e-12), "accumulated step differs by %g", d);
    qkv_trainer_free(t1), qkv_trainer_free(t2);
    qkv_model_free(m1), qkv_model_free(m2);
}

TEST(trainer_rejects_a_bad_batch_and_keeps_the_model) {
    qkv_model *m = tiny_seq2seq(2, 0);
    qkv_trainer *t = NULL;
    qkv_train_config c = quick_config();
    CHECK_OK(qkv_trainer_new(m, &c, &t));
    copy_batch cb;
    make_copy_batch(&cb, 1);
    cb.src[3] = 100; /* outside the vocabulary */
    qkv_real *before = copy_params(m);
    CHECK_ERR(qkv_trainer_step(t, &cb.batch, NULL), QKV_ERR_INVALID_ARG, "id 100");
    make_copy_batch(&cb, 1);
    cb.tgt_in[2 * T] = 3; /* row 2 does not start from the model's bos_id 1, which decoding feeds */
    CHECK_ERR(qkv_trainer_step(t, &cb.batch, NULL), QKV_ERR_INVALID_ARG, "tgt_in row 2 starts with 3, not the model's bos_id 1");
    CHECK(memcmp(before, qkv_params_block(m->params, QKV_BLOCK_DATA), sizeof(qkv_real) * (size_t)qkv_params_numel(m->params)) == 0);
    CHECK(qkv_trainer_steps(t) == 0);
    free(before);
    qkv_trainer_free(t);
    qkv_model_free(m);
}

TEST(trainer_learns_the_copy_task) {
    qkv_model *m = copy_model(4, 0, 32);
    qkv_trainer *t = NULL;
    qkv_train_config c = quick_config();
    CHECK_OK(qkv_trainer_new(m, &c, &t));
    copy_batch cb;
    make_copy_batch(&cb, 100);
    double first = 0, last = 0;
    CHECK_OK(qkv_trainer_eval_loss(t, &cb.batch, &first, NULL));
    for (int s = 0; s < 150; s++) {
        copy_batch train;
        make_copy_batch(&train, (uint64_t)s);
        CHECK_OK(qkv_trainer_step(t, &train.batch, NULL));
    }
    CHECK_OK(qkv_trainer_eval_loss(t, &cb.batch, &last, NULL));
    CHECK_MSG(last < 0.5 * first, "held-out loss %g -> %g did not halve", first, last);
    qkv_trainer_free(t);
    qkv_model_free(m);
}

/* The encoder-only (token and pooled heads) and decoder-only paths of the trainer learn trivially
 * learnable patterns: tag = the token's parity, class = the first token's parity, next token = the
 * current token + 1. */
TEST(trainer_encoder_only_and_decoder_only_learn) {
    enum { NB = 8, L = 6 };
    for (int k = 0; k < 3; k++) {
        const qkv_arch arch = k < 2 ? QKV_ARCH_ENCODER : QKV_ARCH_DECODER;
        qkv_model_config c = qkv_model_default_config(arch, 32, 2, 1);
        c.src_vocab = 12;
        c.tgt_vocab = arch == QKV_ARCH_DECODER ? 12 : 2;
        c.dim_feedforward = 64;
        c.dropout = 0;
        c.head = k == 1 ? QKV_HEAD_POOLED : QKV_HEAD_TOKEN;
        qkv_model *m = NULL;
        CHECK_OK(qkv_model_new(&c, 7, &m));
        qkv_trainer *t = NULL;
        qkv_train_config tc = quick_config();
        tc.label_smoothing = 0;
        CHECK_OK(qkv_trainer_new(m, &tc, &t));
        int32_t src[NB * L], labels[NB * L], next[NB * L];
        double first = 0, last = 0;
        for (int step = 0; step < 120 && t; step++) {
            for (int r = 0; r < NB; r++) {
                const int len = 3 + (r + step) % 4; /* 3..6 tokens, the rest padding */
                int32_t x = 1 + (int32_t)(qkv_rng_uniform(3, (uint64_t)step, (uint64_t)r, 0) * 10);
                for (int i = 0; i < L; i++) {
                    if (arch != QKV_ARCH_DECODER) x = 1 + (int32_t)(qkv_rng_uniform(3, (uint64_t)step, (uint64_t)r, (uint64_t)i) * 10);
                    src[r * L + i] = i < len ? x : 0;
                    labels[r * L + i] = i < len ? x % 2 : QKV_NO_LABEL;
                    if (arch == QKV_ARCH_DECODER) x = x % 11 + 1; /* LM rows count up: 5 6 7 ... */
                }
                for (int i = 0; i < L; i++) next[r * L + i] = i + 1 < len ? src[r * L + i + 1] : 0;
            }
            if (k == 1) /* pooled: one label per row, the parity of its first token */
                for (int r = 0; r < NB; r++) labels[r] = src[r * L] % 2;
            qkv_train_batch b = {.batch = NB, .src_len = L, .tgt_len = L, .src = src, .labels = labels, .tgt_out = next};
            qkv_step_stats st;
            CHECK_OK(qkv_trainer_step(t, &b, &st));
            if (step < 5) first += st.loss / 5;
            if (step >= 115) last += st.loss / 5;
        }
        CHECK_MSG(last < 0.5 * first, "arch %d head %d: loss %g -> %g did not halve", (int)arch, (int)c.head, first, last);
        qkv_train_batch none = {.batch = NB, .src_len = L, .src = src};
        if (arch == QKV_ARCH_ENCODER) CHECK_ERR(qkv_trainer_step(t, &none, NULL), QKV_ERR_INVALID_ARG, "no labels");
        qkv_trainer_free(t);
        qkv_model_free(m);
    }
}
