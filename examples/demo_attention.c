/*
 * demo_attention.c: train a 2-layer Transformer encoder to reverse sequences of digits, and watch
 * its loss fall and its attention learn the anti-diagonal.
 *
 *   build/release/demo_attention [--steps N] [--seed S] [--threads N]
 *
 * Task: input x = (x_0 .. x_{T-1}) of random digits, target y_i = x_{T-1-i}. A token can only
 * learn its target by attending to the mirrored position, so the task needs attention and
 * positional information: sinusoidal encodings are added to the embeddings.
 * Model: embedding (10, 64) * sqrt(64) + sinusoidal PE -> 2 post-LN encoder layers (4 heads,
 * FFN 128, dropout 0.1) -> linear (10, 64) -> label-smoothed cross-entropy. AdamW with linear
 * warm-up and cosine decay, gradient clipping at 1.
 * Everything below is the public qkv API: ops, modules, parameters, tape, optimiser.
 */
#include "qkv/qkv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { VOCAB = 10, T = 12, C = 64, HEADS = 4, FF = 128, LAYERS = 2, BATCH = 32 };

typedef struct {
    qkv_params *params;
    qkv_tensor *embed;          /* (VOCAB, C) */
    qkv_layer layers[LAYERS];
    qkv_tensor *head_w, *head_b; /* (VOCAB, C), (VOCAB) */
} model;

static int fail(const char *what) {
    fprintf(stderr, "demo: %s: %s\n", what, qkv_last_error());
    return 1;
}

static qkv_status model_init(model *m, uint64_t seed) {
    memset(m, 0, sizeof *m);
    qkv_status st = qkv_params_new(&m->params);
    if (!st) st = qkv_params_add(m->params, "embed.weight", 2, (int64_t[]){VOCAB, C}, &m->embed);
    qkv_layer_config lc = qkv_layer_default_config(C, HEADS, FF);
    for (int l = 0; l < LAYERS && !st; l++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "encoder.layers.%d.", l);
        st = qkv_encoder_layer_init(&m->layers[l], &lc, m->params, prefix);
    }
    if (!st) st = qkv_params_add(m->params, "head.weight", 2, (int64_t[]){VOCAB, C}, &m->head_w);
    if (!st) st = qkv_params_add(m->params, "head.bias", 1, (int64_t[]){VOCAB}, &m->head_b);
    if (!st) st = qkv_params_finalize(m->params);
    if (st) return st;
    qkv_init_normal(m->embed, 0, 1 / sqrt((double)C), seed, 100);
    for (int l = 0; l < LAYERS; l++) qkv_layer_reset_parameters(&m->layers[l], seed + 1 + (uint64_t)l);
    qkv_init_uniform(m->head_w, -1 / sqrt((double)C), 1 / sqrt((double)C), seed, 101);
    qkv_init_constant(m->head_b, 0);
    return QKV_OK;
}

/* ids (B, T) -> logits (B*T, VOCAB); attn (optional) receives the last layer's weights. */
static qkv_tensor *forward(qkv_ctx *ctx, const model *m, qkv_tensor *ids, qkv_tensor **attn) {
    qkv_tensor *x = qkv_scale(ctx, qkv_embedding(ctx, m->embed, ids), sqrt((double)C)); /* (B, T, C) */
    x = qkv_add(ctx, x, qkv_sinusoidal_pe(ctx, T, C, 0));                            /* + (T, C) */
    for (int l = 0; l < LAYERS; l++) {
        x = qkv_encoder_layer_forward(ctx, &m->layers[l], x, NULL, l == LAYERS - 1 ? attn : NULL);
    }
    qkv_tensor *logits = qkv_linear(ctx, x, m->head_w, m->head_b); /* (B, T, VOCAB) */
    return qkv_reshape(ctx, logits, 2, (int64_t[]){(int64_t)ids->shape[0] * T, VOCAB});
}

/* A batch of the reversal task, deterministic in (seed, step). */
static void make_batch(uint64_t seed, uint64_t step, int32_t *x, int32_t *y, int b) {
    for (int i = 0; i < b; i++)
        for (int t = 0; t < T; t++)
            x[i * T + t] = (int32_t)(qkv_rng_uniform(seed, step, 7, (uint64_t)(i * T + t)) * VOCAB) % VOCAB;
    for (int i = 0; i < b; i++)
        for (int t = 0; t < T; t++) y[i * T + t] = x[i * T + (T - 1 - t)];
}

static void print_attention(const qkv_tensor *w, const int32_t *x) {
    /* w (1, H, T, T): average over heads, one shaded cell per weight */
    static const char *shades[] = {" ", "\u2591", "\u2592", "\u2593", "\u2588"};
    const qkv_real *a = (const qkv_real *)w->data;
    printf("\nlast layer's attention (mean over heads), query rows x key columns:\n     ");
    for (int j = 0; j < T; j++) printf("%d", x[j]);
    printf("\n");
    for (int i = 0; i < T; i++) {
        printf("  %d  ", x[i]);
        for (int j = 0; j < T; j++) {
            double s = 0;
            for (int h = 0; h < HEADS; h++) s += a[(h * T + i) * T + j];
            s /= HEADS;
            int level = s > 0.6 ? 4 : s > 0.35 ? 3 : s > 0.15 ? 2 : s > 0.05 ? 1 : 0;
            printf("%s", shades[level]);
        }
        printf("\n");
    }
}

int main(int argc, char **argv) {
    /* OpenBLAS's AVX kernels where it did not recognise the CPU (qkv_base.h) */
    if (qkv_blas_reexec_with_advice(argv) != QKV_OK) fprintf(stderr, "demo_attention: %s\n", qkv_last_error());
    int steps = 600, threads = 0;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: demo_attention [--steps N] [--seed S] [--threads N]\n");
            return 2;
        }
    }
    if (steps < 1 || steps > 1000000) {
        fprintf(stderr, "demo: --steps must be in 1..1000000\n");
        return 2;
    }
    qkv_set_num_threads(threads);
    printf("qkv %s: a 2-layer Transformer encoder learns to reverse %d digits (%d steps, batch %d)\n",
           qkv_version(), T, steps, BATCH);
    model m;
    if (model_init(&m, seed)) return fail("model");
    printf("%lld parameters in %lld tensors\n", (long long)qkv_params_numel(m.params),
           (long long)qkv_params_count(m.params));
    qkv_ctx_params cp = qkv_ctx_default_params();
    cp.seed = seed;
    qkv_ctx *ctx = NULL;
    if (qkv_ctx_new(&cp, &ctx)) return fail("context");
    qkv_optim_config opt = qkv_optim_default(QKV_OPTIM_ADAMW);
    opt.beta2 = 0.98;
    opt.weight_decay = 0.01;
    qkv_lr_schedule sched = {.kind = QKV_LR_WARMUP_COSINE, .base_lr = 3e-3, .warmup_steps = steps / 10,
                             .total_steps = steps, .min_lr = 1e-4};
    int32_t x[BATCH * T], y[BATCH * T];
    const clock_t start = clock();
    double avg = 0;
    for (int step = 1; step <= steps; step++) {
        qkv_ctx_reset(ctx);
        qkv_ctx_set_training(ctx, true);
        make_batch(seed, (uint64_t)step, x, y, BATCH);
        qkv_tensor *ids = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){BATCH, T}, x);
        qkv_tensor *tgt = qkv_tensor_from(ctx, QKV_I32, 1, (int64_t[]){BATCH * T}, y);
        qkv_tensor *loss = qkv_cross_entropy(ctx, forward(ctx, &m, ids, NULL), tgt, -1, 0.1);
        qkv_params_zero_grad(m.params);
        if (qkv_backward(ctx, loss)) return fail("training step");
        qkv_clip_grad_norm(m.params, 1.0);
        if (qkv_optim_step(m.params, &opt, step, qkv_lr_at(&sched, step))) return fail("optimiser");
        const double l = (double)((qkv_real *)loss->data)[0];
        avg = step == 1 ? l : 0.9 * avg + 0.1 * l;
        if (step == 1 || step % (steps / 12 > 0 ? steps / 12 : 1) == 0 || step == steps)
            printf("step %4d  loss %.4f  (smoothed %.4f)  lr %.2e\n", step, l, avg, qkv_lr_at(&sched, step));
    }
    const double seconds = (double)(clock() - start) / CLOCKS_PER_SEC;
    /* With smoothing eps the best achievable loss is the entropy of the smoothed target. */
    const double eps = 0.1, hi = 1 - eps + eps / VOCAB, lo = eps / VOCAB;
    printf("(the floor is %.4f: the entropy of the label-smoothed targets, eps = %.1f)\n",
           -(hi * log(hi) + (VOCAB - 1) * lo * log(lo)), eps);
    /* Evaluation on fresh sequences, dropout off. */
    qkv_ctx_reset(ctx);
    qkv_ctx_set_training(ctx, false);
    qkv_ctx_set_grad_enabled(ctx, false);
    enum { EVAL = 256 };
    static int32_t ex[EVAL * T], ey[EVAL * T];
    make_batch(seed + 1000, 0, ex, ey, EVAL);
    qkv_tensor *ids = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){EVAL, T}, ex);
    qkv_tensor *pred = qkv_argmax(ctx, forward(ctx, &m, ids, NULL));
    if (qkv_ctx_status(ctx)) return fail("evaluation");
    int correct = 0, exact = 0;
    for (int i = 0; i < EVAL; i++) {
        int row = 1;
        for (int t = 0; t < T; t++) {
            int ok = ((int32_t *)pred->data)[i * T + t] == ey[i * T + t];
            correct += ok;
            row &= ok;
        }
        exact += row;
    }
    printf("\nheld-out: %.1f%% of tokens and %.1f%% of whole sequences reversed correctly (CPU time %.1f s)\n",
           100.0 * correct / (EVAL * T), 100.0 * exact / EVAL, seconds);
    printf("example:  ");
    for (int t = 0; t < T; t++) printf("%d", ex[t]);
    printf("  ->  ");
    for (int t = 0; t < T; t++) printf("%d", ((int32_t *)pred->data)[t]);
    printf("\n");
    qkv_ctx_reset(ctx);
    qkv_tensor *one = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){1, T}, ex);
    qkv_tensor *attn = NULL;
    forward(ctx, &m, one, &attn);
    if (qkv_ctx_status(ctx) || !attn) return fail("attention map");
    print_attention(attn, ex);
    qkv_ctx_free(ctx);
    qkv_params_free(m.params);
    return 0;
}
