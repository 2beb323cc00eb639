/*
 * bench_train.c: training throughput of qkv on the issue-4 configurations (S, B, gpt2; see
 * bench_common.h), the qkv half of bench/compare.sh (bench/torch_bench.py is the PyTorch half).
 *
 *   bench_train --config S|B|gpt2 [--threads N] [--steps N] [--warmup N] [--seed N]
 *               [--attention auto|fused|composed] [--json]
 *
 * --attention picks the attention path of every module to measure them against each other:
 * composed (qkv_mha_config.use_fused = false: scores, softmax, dropout and the weighted sum as
 * separate ops), fused (fused_always: the tiled kernel qkv_sdpa_dropout), or auto (the default,
 * what a model does unless told otherwise: composed in training where H S <= d_model).
 *
 * What one step is (the same as torch_bench.py and ../shared/anchors/torch_transformer_bench.py,
 * gpt2_torch_bench.py): qkv_trainer_step = zero gradients, forward in training mode (dropout
 * 0.1 for S and B, none for gpt2), cross-entropy without label smoothing, backward, optimiser
 * update. Optimiser: S and B torch.optim.Adam(lr 1e-4, betas (0.9, 0.98), eps 1e-9); gpt2
 * torch.optim.AdamW(lr 1e-4, betas (0.9, 0.999), eps 1e-8, weight decay 0); constant rate, no
 * clipping (qkv still computes the gradient norm it reports: one pass over the gradients).
 * Data: one batch of random token ids from a fixed seed, every sequence full length (no padding);
 * S and B train on the same batch every step (as the anchor), gpt2 on a new batch per step.
 *
 * Measured: the wall time of each qkv_trainer_step after --warmup untimed steps; reported are
 * the median (and min, max) seconds per step, target tokens per second = batch x target length /
 * median, GFLOP/s = training FLOPs per token (bench_common.h) x tokens/s, and the peak resident
 * memory of the process (getrusage ru_maxrss; run one configuration per process), and what it
 * holds: the step arena's high-water mark (activations, the tape's saved tensors, gradients of
 * intermediates) and the parameter table (values, gradients, two Adam moments). The parameter
 * count is printed so bench/compare.sh can check it against PyTorch's module.
 */
#include "bench_common.h"

static const char ME[] = "bench_train"; /* the program in option messages */

#include <math.h>

/* One training batch: S, B: src (B, S), tgt_in (B, T) = the target without its last token,
 * tgt_out (B, T) = without its first (a random (B, T + 1) target shifted, as the anchor, whose
 * first token is the model's bos_id, which the trainer checks; the values change no cost);
 * gpt2: tokens (B, T) in src, tgt_out the tokens shifted left. */
typedef struct batch_data {
    int32_t *src, *tgt_in, *tgt_out;
    qkv_train_batch b;
} batch_data;

static void batch_free(batch_data *d) {
    free(d->src);
    free(d->tgt_in);
    free(d->tgt_out);
}

static int batch_fill(batch_data *d, const bench_config *c, int32_t bos_id, uint64_t seed, uint64_t index) {
    const int64_t B = c->batch, S = c->src_len, T = c->tgt_len;
    const bool lm = c->arch == QKV_ARCH_DECODER;
    int32_t *full = malloc(sizeof(int32_t) * (size_t)(B * (T + 1)));
    if (!d->src) d->src = malloc(sizeof(int32_t) * (size_t)(B * S));
    if (!d->tgt_in) d->tgt_in = malloc(sizeof(int32_t) * (size_t)(B * T));
    if (!d->tgt_out) d->tgt_out = malloc(sizeof(int32_t) * (size_t)(B * T));
    if (!full || !d->src || !d->tgt_in || !d->tgt_out) {
        free(full);
        return -1;
    }
    bench_tokens(full, B * (T + 1), c->tgt_vocab, seed, 2 * index + 1);
    for (int64_t r = 0; r < B; r++) {
        if (!lm) full[r * (T + 1)] = bos_id;
        memcpy(d->tgt_in + r * T, full + r * (T + 1), sizeof(int32_t) * (size_t)T);
        memcpy(d->tgt_out + r * T, full + r * (T + 1) + 1, sizeof(int32_t) * (size_t)T);
    }
    free(full);
    if (lm)
        memcpy(d->src, d->tgt_in, sizeof(int32_t) * (size_t)(B * T));
    else
        bench_tokens(d->src, B * S, c->src_vocab, seed, 2 * index);
    d->b = (qkv_train_batch){.batch = (int32_t)B,
                             .src_len = (int32_t)S,
                             .tgt_len = (int32_t)T,
                             .src = d->src,
                             .tgt_in = lm ? NULL : d->tgt_in,
                             .tgt_out = d->tgt_out};
    return 0;
}

static qkv_train_config train_config(const bench_config *c, uint64_t seed) {
    qkv_train_config t = qkv_train_default_config();
    if (c->arch == QKV_ARCH_DECODER) {
        t.optim = qkv_optim_default(QKV_OPTIM_ADAMW);
        t.optim.weight_decay = 0;
    } else {
        t.optim = qkv_optim_default(QKV_OPTIM_ADAM);
        t.optim.beta2 = 0.98;
        t.optim.eps = 1e-9;
    }
    t.optim.lr = 1e-4;
    t.schedule = (qkv_lr_schedule){.kind = QKV_LR_CONSTANT, .base_lr = 1e-4};
    t.clip_norm = 0;
    t.label_smoothing = 0;
    t.seed = seed;
    return t;
}

static int usage(void) {
    fprintf(stderr, "usage: bench_train --config S|B|gpt2 [--threads N] [--steps N] [--warmup N] "
                    "[--seed N] [--attention auto|fused|composed] [--json]\n");
    return 2;
}

/* The command line (usage()). */
typedef struct train_opts {
    const bench_config *c;
    int threads, steps, warmup;
    uint64_t seed;
    bool json;
    const char *attention; /* auto, fused or composed */
} train_opts;

/* -1 to go on, else the exit code. */
static int parse_options(int argc, char **argv, train_opts *o) {
    *o = (train_opts){.steps = -1, .warmup = -1, .attention = "auto"};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc) {
            if (!(o->c = bench_find_config(argv[++i]))) return 2;
        } else if (!strcmp(argv[i], "--threads")) {
            if (!cli_int_option(ME, argc, argv, &i, 1, 1024, &o->threads)) return 2;
        } else if (!strcmp(argv[i], "--steps")) {
            if (!cli_int_option(ME, argc, argv, &i, 1, 100000, &o->steps)) return 2;
        } else if (!strcmp(argv[i], "--warmup")) {
            if (!cli_int_option(ME, argc, argv, &i, 0, 100000, &o->warmup)) return 2;
        } else if (!strcmp(argv[i], "--seed")) {
            if (!cli_u64_option(ME, argc, argv, &i, &o->seed)) return 2;
        } else if (!strcmp(argv[i], "--json"))
            o->json = true;
        else if (!strcmp(argv[i], "--attention") && i + 1 < argc) {
            o->attention = argv[++i];
            if (strcmp(o->attention, "auto") && strcmp(o->attention, "fused") && strcmp(o->attention, "composed"))
                return usage();
        } else
            return usage();
    }
    if (!o->c) return usage();
    /* the anchors' step counts: S 3 + 12, B 3 + 10 (here 2 + 6: a B step takes seconds), gpt2
     * 2 + 10 */
    if (o->steps < 0) o->steps = !strcmp(o->c->name, "S") ? 12 : !strcmp(o->c->name, "B") ? 6 : 10;
    if (o->warmup < 0) o->warmup = !strcmp(o->c->name, "S") ? 3 : 2;
    return -1;
}

int main(int argc, char **argv) {
    bench_blas_kernels(argv);
    train_opts o;
    const int parsed = parse_options(argc, argv, &o);
    if (parsed >= 0) return parsed;
    const bench_config *c = o.c;
    const int threads = o.threads, steps = o.steps, warmup = o.warmup;
    const uint64_t seed = o.seed;
    const bool json = o.json;
    const char *attention = o.attention;
    if (threads > 0) qkv_set_num_threads(threads);

    qkv_model_config mc = bench_model_config(c);
    qkv_mha_config *attn[3] = {&mc.self_attn, &mc.dec_self_attn, &mc.cross_attn};
    for (int i = 0; i < 3; i++) {
        attn[i]->use_fused = strcmp(attention, "composed") != 0;
        attn[i]->fused_always = !strcmp(attention, "fused");
    }
    qkv_model *m = NULL;
    qkv_trainer *tr = NULL;
    const qkv_train_config tc = train_config(c, seed + 1);
    if (qkv_model_new(&mc, seed, &m) || qkv_trainer_new(m, &tc, &tr)) {
        fprintf(stderr, "bench_train: %s\n", qkv_last_error());
        qkv_model_free(m);
        return 1;
    }
    if (c->arch == QKV_ARCH_DECODER) /* GPT-2's N(0, 0.02) token table (tied to the output) */
        qkv_init_normal(m->src_embed, 0, 0.02, seed, 1000);
    const int64_t params = qkv_params_numel(m->params);
    const double flop_tok = bench_train_flops_per_token(c);
    const int64_t tok_step = (int64_t)c->batch * c->tgt_len;
    if (!json) {
        printf("qkv %s, %d thread(s)\n", qkv_version(), qkv_get_num_threads());
        printf("config %s: %s, d_model %d, %d heads, FFN %d, layers %d + %d, vocab %d, lengths "
               "%d / %d, batch %d; %lld parameters\n",
               c->name,
               c->arch == QKV_ARCH_DECODER ? "decoder-only pre-LN" : "encoder-decoder post-LN",
               c->d_model, c->n_heads, c->d_ff, c->n_enc, c->n_dec, c->tgt_vocab, c->src_len,
               c->tgt_len, c->batch, (long long)params);
        printf("training FLOP per target token %.2f M (bench_common.h); %d warm-up + %d timed "
               "steps\n",
               flop_tok / 1e6, warmup, steps);
        fflush(stdout);
    }

    batch_data d = {0};
    double *t = malloc(sizeof(double) * (size_t)steps);
    double first_loss = NAN, last_loss = NAN;
    int rc = t ? 0 : 1;
    for (int i = 0; i < warmup + steps && !rc; i++) {
        if ((i == 0 || c->arch == QKV_ARCH_DECODER) && batch_fill(&d, c, mc.bos_id, seed + 2, (uint64_t)i)) {
            fprintf(stderr, "bench_train: out of memory\n");
            rc = 1;
            break;
        }
        qkv_step_stats s;
        const double t0 = bench_now();
        const qkv_status st = qkv_trainer_step(tr, &d.b, &s);
        const double dt = bench_now() - t0;
        if (st) {
            fprintf(stderr, "bench_train: %s\n", qkv_last_error());
            rc = 1;
            break;
        }
        if (i == 0) first_loss = s.loss;
        last_loss = s.loss;
        if (i >= warmup) t[i - warmup] = dt;
    }
    if (!rc) {
        const double med = bench_median(t, steps);
        const double tok_s = (double)tok_step / med;
        const double rss = bench_peak_rss_mib();
        const double arena = (double)qkv_ctx_arena_peak(qkv_trainer_ctx(tr)) / 1048576.0;
        const double table = 4.0 * (double)params * sizeof(qkv_real) / 1048576.0;
        if (json)
            printf("{\"impl\": \"qkv\", \"mode\": \"train\", \"config\": \"%s\", \"threads\": %d, "
                   "\"params\": %lld, \"flop_per_tok\": %.10g, \"tokens_per_step\": %lld, "
                   "\"steps\": %d, \"warmup\": %d, \"step_s_median\": %.6g, \"step_s_min\": %.6g, "
                   "\"step_s_max\": %.6g, \"tok_per_s\": %.6g, \"gflops\": %.6g, "
                   "\"peak_rss_mib\": %.1f, \"arena_peak_mib\": %.1f, \"param_table_mib\": %.1f, "
                   "\"first_loss\": %.6g, \"last_loss\": %.6g, "
                   "\"attention\": \"%s\", \"version\": \"%s\"}\n",
                   c->name, qkv_get_num_threads(), (long long)params, flop_tok, (long long)tok_step,
                   steps, warmup, med, t[0], t[steps - 1], tok_s, flop_tok * tok_s / 1e9, rss,
                   arena, table, first_loss, last_loss, attention, qkv_version());
        else
            printf("s/step median %.4f (min %.4f, max %.4f); %.1f target tokens/s; %.1f GFLOP/s; "
                   "peak RSS %.0f MiB (step arena %.0f, parameter table %.0f); loss %.4f -> %.4f\n",
                   med, t[0], t[steps - 1], tok_s, flop_tok * tok_s / 1e9, rss, arena, table,
                   first_loss, last_loss);
    }
    free(t);
    batch_free(&d);
    qkv_trainer_free(tr);
    qkv_model_free(m);
    return rc;
}
