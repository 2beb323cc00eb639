/*
 * bench_decode.c: decoding throughput of an encoder-decoder Transformer, greedy and beam search,
 * with the KV cache and without it (every step re-runs the whole decoder over the prefix, as
 * PyTorch's nn.Transformer and its translation tutorial do).
 *
 *   bench_decode [--threads N] [--batch B] [--len T] [--reps R] [--beam K] [--no-uncached]
 *
 * Model: config S of the anchors (shared/anchors/RESULTS.md): d_model 256, 4 heads, FFN 1024,
 * 3 + 3 layers, vocabularies 64 / 64, post-LN, sinusoidal positions, random weights (seeded);
 * sources of S = 32 random tokens, batch 64. Every hypothesis is decoded to exactly T = 32 new
 * tokens (no EOS, as the anchor's decode: BOS-only start, no early stop), so
 *   tokens/s = B * T / seconds (one hypothesis per input; beam search runs B * K rows).
 * The time covers the whole qkv_decode call (session creation, encoder, search). Median of R
 * runs after one warm-up.
 */
#include "qkv/qkv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median seconds of reps decodes (after a warm-up), or a negative number on error. */
static double time_decode(const qkv_model *m, const int32_t *src, const int32_t *len, int32_t B,
                          const qkv_decode_params *p, int reps, int32_t *first_tokens) {
    double t[64];
    if (reps > 64) reps = 64;
    for (int r = -1; r < reps; r++) {
        qkv_hypotheses h;
        const double t0 = now();
        const qkv_status st = qkv_decode(m, src, len, B, p, &h);
        const double t1 = now();
        if (st) {
            fprintf(stderr, "bench_decode: %s\n", qkv_last_error());
            return -1;
        }
        if (r >= 0) t[r] = t1 - t0;
        if (first_tokens)
            for (int32_t b = 0; b < B; b++)
                first_tokens[b] = h.hyp[(size_t)b * h.n_best].tokens[0];
        qkv_hypotheses_free(&h);
    }
    qsort(t, (size_t)reps, sizeof t[0], by_value);
    return t[reps / 2];
}

int main(int argc, char **argv) {
    int threads = 0, reps = 3;
    int32_t B = 64, T = 32, K = 5, S = 32;
    bool uncached = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            B = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--len") && i + 1 < argc)
            T = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--beam") && i + 1 < argc)
            K = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-uncached"))
            uncached = false;
        else {
            fprintf(stderr,
                    "usage: bench_decode [--threads N] [--batch B] [--len T] [--reps R] [--beam K] "
                    "[--no-uncached]\n");
            return 2;
        }
    }
    if (B < 1 || T < 1 || reps < 1 || K < 1) {
        fprintf(stderr, "bench_decode: batch, len, reps and beam must be >= 1\n");
        return 2;
    }
    if (threads > 0) qkv_set_num_threads(threads);
    qkv_model_config c = qkv_model_default_config(QKV_ARCH_ENCODER_DECODER, 256, 4, 3);
    c.dim_feedforward = 1024;
    c.src_vocab = c.tgt_vocab = 64;
    c.max_len = 512;
    c.dropout = 0;
    qkv_model *m = NULL;
    if (qkv_model_new(&c, 1, &m)) {
        fprintf(stderr, "bench_decode: %s\n", qkv_last_error());
        return 1;
    }
    int32_t *src = malloc(sizeof(int32_t) * (size_t)B * (size_t)S),
            *len = malloc(sizeof(int32_t) * (size_t)B);
    int32_t *tok_c = malloc(sizeof(int32_t) * (size_t)B),
            *tok_u = malloc(sizeof(int32_t) * (size_t)B);
    for (int32_t i = 0; i < B * S; i++)
        src[i] =
            1 + (int32_t)(qkv_rng_uniform(7, 0, 0, (uint64_t)i) * 63.0f); /* 1 .. 63, never pad */
    for (int32_t b = 0; b < B; b++)
        len[b] = S;
    printf("%s\n", qkv_version());
    printf("config S: d_model 256, 4 heads, FFN 1024, 3 + 3 layers, vocab 64, source %d, batch %d, "
           "%d new tokens, %d thread(s), median of %d\n\n",
           S, B, T, qkv_get_num_threads(), reps);
    printf("| search | KV cache | decode s | tokens/s | speed-up |\n|---|---|---|---|---|\n");
    for (int k = 0; k < 2; k++) {
        qkv_decode_params p = qkv_decode_default_params();
        p.strategy = k ? QKV_DECODE_BEAM : QKV_DECODE_GREEDY;
        p.beam_size = K;
        p.n_best = 1;
        p.max_len = T;
        p.eos_id = -1; /* every hypothesis decodes exactly T tokens */
        p.length_penalty = QKV_LENGTH_PENALTY_NONE;
        char name[32];
        snprintf(name, sizeof name, k ? "beam %d" : "greedy", K);
        const double cached = time_decode(m, src, len, B, &p, reps, tok_c);
        if (cached < 0) return 1;
        printf("| %s | yes | %.3f | %.0f | |\n", name, cached, (double)B * T / cached);
        fflush(stdout);
        if (!uncached) continue;
        p.use_cache = false;
        const double plain = time_decode(m, src, len, B, &p, reps, tok_u);
        if (plain < 0) return 1;
        printf("| %s | no | %.3f | %.0f | cache %.2fx |\n", name, plain, (double)B * T / plain,
               plain / cached);
        if (memcmp(tok_c, tok_u, sizeof(int32_t) * (size_t)B) != 0)
            printf("  (note: first tokens differ with and without the cache)\n");
        fflush(stdout);
    }
    free(src);
    free(len);
    free(tok_c);
    free(tok_u);
    qkv_model_free(m);
    return 0;
}
