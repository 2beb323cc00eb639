/*
 * bench_decode.c: decoding throughput of an encoder-decoder Transformer, greedy and beam search,
 * with the KV cache and without it (every step re-runs the whole decoder over the prefix, as
 * PyTorch's nn.Transformer and its translation tutorial do).
 *
 *   bench_decode [--config S|B] [--threads N] [--batch B] [--len T] [--reps R] [--beam K]
 *                [--no-uncached] [--json]
 *
 * Model: configuration S (default) or B of bench_common.h (the anchors' ../shared/anchors/
 * RESULTS.md), random weights (seeded); random source ids of the configuration's source length,
 * decode batch 64 (S) / 16 (B) and 32 new tokens unless --batch / --len say otherwise. Every
 * hypothesis is decoded to exactly T new tokens (no EOS, as the anchor's decode: BOS-only start,
 * no early stop; no length penalty), so
 *   tokens/s = B * T / seconds (one hypothesis per input; beam search runs B * K rows).
 * The time covers the whole qkv_decode call (session creation, encoder, search). Median of R
 * runs after one warm-up. --json prints one JSON line per row instead of the table (what
 * bench/compare.sh reads; bench/torch_bench.py --mode decode prints the same keys).
 */
#include "bench_common.h"

/* Median seconds of reps decodes (after a warm-up) in t[0 .. reps) (sorted), or a negative
 * number on error. */
static double time_decode(const qkv_model *m, const int32_t *src, const int32_t *len, int32_t B,
                          const qkv_decode_params *p, int reps, double *t, int32_t *first_tokens) {
    for (int r = -1; r < reps; r++) {
        qkv_hypotheses h;
        const double t0 = bench_now();
        const qkv_status st = qkv_decode(m, src, len, B, p, &h);
        const double t1 = bench_now();
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
    return bench_median(t, reps);
}

static void print_json(const bench_config *c, const char *search, int32_t K, bool cache, int32_t B,
                       int32_t S, int32_t T, int reps, const double *t, double med) {
    printf("{\"impl\": \"qkv\", \"mode\": \"decode\", \"config\": \"%s\", \"threads\": %d, "
           "\"search\": \"%s\", \"beam\": %d, \"cache\": %s, \"batch\": %d, \"src_len\": %d, "
           "\"new_tokens\": %d, \"reps\": %d, \"decode_s_median\": %.6g, \"decode_s_min\": %.6g, "
           "\"decode_s_max\": %.6g, \"tok_per_s\": %.6g, \"peak_rss_mib\": %.1f}\n",
           c->name, qkv_get_num_threads(), search, K, cache ? "true" : "false", B, S, T, reps, med,
           t[0], t[reps - 1], (double)B * T / med, bench_peak_rss_mib());
}

int main(int argc, char **argv) {
    const bench_config *c = bench_find_config("S");
    int threads = 0, reps = 3;
    int32_t B = 0, T = 0, K = 5;
    bool uncached = true, json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc) {
            if (!(c = bench_find_config(argv[++i]))) return 2;
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
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
        else if (!strcmp(argv[i], "--json"))
            json = true;
        else {
            fprintf(stderr, "usage: bench_decode [--config S|B] [--threads N] [--batch B] "
                            "[--len T] [--reps R] [--beam K] [--no-uncached] [--json]\n");
            return 2;
        }
    }
    if (c->arch != QKV_ARCH_ENCODER_DECODER) {
        fprintf(stderr, "bench_decode: config %s is not an encoder-decoder (S or B)\n", c->name);
        return 2;
    }
    if (!B) B = c->decode_batch;
    if (!T) T = c->decode_len;
    const int32_t S = c->src_len;
    if (B < 1 || T < 1 || reps < 1 || K < 1) {
        fprintf(stderr, "bench_decode: batch, len, reps and beam must be >= 1\n");
        return 2;
    }
    if (threads > 0) qkv_set_num_threads(threads);
    const qkv_model_config mc = bench_model_config(c);
    qkv_model *m = NULL;
    if (qkv_model_new(&mc, 1, &m)) {
        fprintf(stderr, "bench_decode: %s\n", qkv_last_error());
        return 1;
    }
    int32_t *src = malloc(sizeof(int32_t) * (size_t)B * (size_t)S),
            *len = malloc(sizeof(int32_t) * (size_t)B);
    int32_t *tok_c = malloc(sizeof(int32_t) * (size_t)B),
            *tok_u = malloc(sizeof(int32_t) * (size_t)B);
    double *t = malloc(sizeof(double) * (size_t)reps);
    if (!src || !len || !tok_c || !tok_u || !t) {
        fprintf(stderr, "bench_decode: out of memory\n");
        return 1;
    }
    bench_tokens(src, (int64_t)B * S, c->src_vocab, 7, 0); /* 1 .. V - 1, never the pad id */
    for (int32_t b = 0; b < B; b++)
        len[b] = S;
    if (!json) {
        printf("%s\n", qkv_version());
        printf("config %s: d_model %d, %d heads, FFN %d, %d + %d layers, vocab %d, source %d, "
               "batch %d, %d new tokens, %d thread(s), median of %d\n\n",
               c->name, c->d_model, c->n_heads, c->d_ff, c->n_enc, c->n_dec, c->tgt_vocab, S, B, T,
               qkv_get_num_threads(), reps);
        printf("| search | KV cache | decode s | tokens/s | speed-up |\n|---|---|---|---|---|\n");
    }
    int rc = 0;
    for (int k = 0; k < 2 && !rc; k++) {
        qkv_decode_params p = qkv_decode_default_params();
        p.strategy = k ? QKV_DECODE_BEAM : QKV_DECODE_GREEDY;
        p.beam_size = K;
        p.n_best = 1;
        p.max_len = T;
        p.eos_id = -1; /* every hypothesis decodes exactly T tokens */
        p.length_penalty = QKV_LENGTH_PENALTY_NONE;
        char name[32];
        snprintf(name, sizeof name, k ? "beam %d" : "greedy", K);
        const char *search = k ? "beam" : "greedy";
        const double cached = time_decode(m, src, len, B, &p, reps, t, tok_c);
        if (cached < 0) {
            rc = 1;
            break;
        }
        if (json)
            print_json(c, search, k ? K : 1, true, B, S, T, reps, t, cached);
        else
            printf("| %s | yes | %.3f | %.0f | |\n", name, cached, (double)B * T / cached);
        fflush(stdout);
        if (!uncached) continue;
        p.use_cache = false;
        const double plain = time_decode(m, src, len, B, &p, reps, t, tok_u);
        if (plain < 0) {
            rc = 1;
            break;
        }
        if (json)
            print_json(c, search, k ? K : 1, false, B, S, T, reps, t, plain);
        else
            printf("| %s | no | %.3f | %.0f | cache %.2fx |\n", name, plain, (double)B * T / plain,
                   plain / cached);
        if (memcmp(tok_c, tok_u, sizeof(int32_t) * (size_t)B) != 0)
            fprintf(stderr, "bench_decode: first tokens differ with and without the cache\n");
        fflush(stdout);
    }
    free(src);
    free(len);
    free(tok_c);
    free(tok_u);
    free(t);
    qkv_model_free(m);
    return rc;
}
