/*
 * bench_common.h: what the model benchmarks (bench_train.c, bench_decode.c, bench_attention.c)
 * share: the configurations of issue 4, the qkv model configuration of each, the FLOP formula,
 * synthetic token ids, a clock, medians and the process's memory. Header-only (static inline):
 * every program in bench/ is its own executable.
 *
 * Configurations (../shared/anchors/RESULTS.md measured PyTorch on the same ones; the PyTorch
 * side of this suite is bench/torch_bench.py):
 *   S     encoder-decoder, post-LN nn.Transformer with final norms, d 256, 4 heads, FFN 1024,
 *         3 + 3 layers, vocab 64 / 64, source and target length 32, batch 64 (decode batch 64)
 *   B     the same family: d 512, 8 heads, FFN 2048, 6 + 6 layers, vocab 8000 / 8000, lengths 64,
 *         batch 32 (decode batch 16)
 *   gpt2  GPT-2 124M shape: decoder-only, pre-LN, tanh-GELU, 12 layers, 768 wide, 12 heads,
 *         learned positions (1024), vocab 50304 (llm.c's padded vocab), tied output embedding
 *         plus an output bias (qkv's LM head always has one; the PyTorch side adds it too),
 *         batch 4, length 64, no dropout (GPT-2 / llm.c train without it in the anchors).
 *
 * FLOP formula (the anchors', so every GFLOP/s here compares with theirs): matrix-product FLOPs
 * only, forward = 2 x multiply-adds, training = 3 x forward (the backward costs two products per
 * forward product); embeddings, LayerNorm, softmax, dropout, biases and the optimiser are not
 * counted; attention counts the full T x S score grid (causal masks are not discounted). Per
 * sequence, with d = d_model, ff = FFN width, V = output vocabulary, S / T = source / target
 * length, Le / Ld = encoder / decoder layers:
 *   encoder   Le * [ 2 S (4 d^2 + 2 d ff) + 4 S^2 d ]              (QKV + O, FFN; QK^T and AV)
 *   decoder   Ld * [ 2 T (4 d^2 + 2 d ff) + 4 T^2 d                 (masked self-attention, FFN)
 *                    + 2 T 2 d^2 + 2 S 2 d^2 + 4 T S d ]            (cross-attention: Q, O on T;
 *                                                                    K, V on S; scores and AV)
 *   output    2 T d V
 *   training FLOP per target token = 3 (encoder + decoder + output) / T
 * A decoder-only LM is the encoder term over its own T tokens (S = T, Le = L, Ld = 0), which gives
 * 6 (12 L d^2 + d V) + 12 L d T per token for GPT-2 (ff = 4 d), the anchors' GPT-2 formula.
 * S: 34.01 MFLOP per target token, B: 295.90, gpt2: 748.5.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#endif
#include "qkv/qkv.h"
#include "cli_args.h" /* tools/cli_args.c: strict numeric option values */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

typedef struct bench_config {
    const char *name;
    qkv_arch arch;
    int32_t d_model, n_heads, d_ff, n_enc, n_dec; /* gpt2: its stack counts as n_enc */
    int32_t src_vocab, tgt_vocab;
    int32_t src_len, tgt_len; /* gpt2: src_len = tgt_len = T */
    int32_t batch;            /* training batch */
    int32_t decode_batch;     /* decoding benchmark (0: none) */
    int32_t decode_len;       /* tokens generated per hypothesis */
    int32_t max_len;
} bench_config;

static const bench_config bench_configs[] = {
    {"S", QKV_ARCH_ENCODER_DECODER, 256, 4, 1024, 3, 3, 64, 64, 32, 32, 64, 64, 32, 512},
    {"B", QKV_ARCH_ENCODER_DECODER, 512, 8, 2048, 6, 6, 8000, 8000, 64, 64, 32, 16, 32, 512},
    {"gpt2", QKV_ARCH_DECODER, 768, 12, 3072, 12, 0, 50304, 50304, 64, 64, 4, 0, 0, 1024},
};

/* First thing in every benchmark's main: the OpenBLAS kernels qkv's own programs run
 * (qkv_blas_reexec_with_advice: re-executed with OPENBLAS_CORETYPE set when OpenBLAS fell back to
 * its generic kernels), so a figure here is what `qkv` gets on the same machine. */
static inline void bench_blas_kernels(char **argv) {
    if (qkv_blas_reexec_with_advice(argv) != QKV_OK) fprintf(stderr, "bench: %s\n", qkv_last_error());
}

/* The configuration called name, or NULL (with a message listing the names). */
static inline const bench_config *bench_find_config(const char *name) {
    for (size_t i = 0; i < sizeof bench_configs / sizeof *bench_configs; i++)
        if (!strcmp(bench_configs[i].name, name)) return &bench_configs[i];
    fprintf(stderr, "unknown config '%s' (S, B or gpt2)\n", name);
    return NULL;
}

/* The qkv model of a configuration; dropout 0.1 (S, B) or 0 (gpt2), as the PyTorch side. */
static inline qkv_model_config bench_model_config(const bench_config *b) {
    const int32_t layers = b->arch == QKV_ARCH_DECODER ? b->n_enc : b->n_dec;
    qkv_model_config c = qkv_model_default_config(b->arch, b->d_model, b->n_heads, layers);
    c.n_encoder_layers = b->n_enc;
    c.dim_feedforward = b->d_ff;
    c.src_vocab = b->src_vocab;
    c.tgt_vocab = b->tgt_vocab;
    c.max_len = b->max_len;
    if (b->arch == QKV_ARCH_DECODER) { /* GPT-2 */
        c.pos = QKV_POS_LEARNED;
        c.scale_embeddings = false;
        c.norm_first = true;
        c.tie_embeddings = true;
        c.activation = QKV_ACT_GELU_TANH;
        c.dropout = 0;
    } else { /* nn.Transformer's defaults: post-LN, ReLU, final norms, dropout 0.1 */
        c.dropout = 0.1;
    }
    return c;
}

/* Training FLOPs per target token, the formula above. */
static inline double bench_train_flops_per_token(const bench_config *b) {
    const double d = b->d_model, ff = b->d_ff, V = b->tgt_vocab, S = b->src_len, T = b->tgt_len;
    const double Le = b->n_enc, Ld = b->n_dec;
    const double enc = Le * (2 * S * (4 * d * d + 2 * d * ff) + 4 * S * S * d);
    const double dec = Ld * (2 * T * (4 * d * d + 2 * d * ff) + 4 * T * T * d + 2 * T * 2 * d * d +
                             2 * S * 2 * d * d + 4 * T * S * d);
    const double out = 2 * T * d * V;
    return 3 * (enc + dec + out) / T;
}

/* n token ids uniform in 1 .. vocab - 1 (0 is qkv's padding id, so never drawn), a pure
 * function of (seed, stream, index). */
static inline void bench_tokens(int32_t *out, int64_t n, int32_t vocab, uint64_t seed,
                                uint64_t stream) {
    for (int64_t i = 0; i < n; i++) {
        const int32_t t =
            1 + (int32_t)(qkv_rng_uniform(seed, 0, stream, (uint64_t)i) * (float)(vocab - 1));
        out[i] = t < vocab ? t : vocab - 1;
    }
}

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int bench_cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Median of n > 0 values (sorts them: v[0] is then the minimum, v[n - 1] the maximum). */
static inline double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Peak resident memory of this process so far (getrusage ru_maxrss, KiB on Linux), MiB. */
static inline double bench_peak_rss_mib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

/* Resident memory now (VmRSS of /proc/self/status), MiB; -1 where there is no /proc. */
static inline double bench_rss_mib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kib = atof(line + 6);
    if (f) fclose(f);
    return kib < 0 ? -1 : kib / 1024.0;
}

#endif
