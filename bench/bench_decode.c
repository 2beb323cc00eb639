/*
 * bench_decode.c: decoding throughput of an encoder-decoder Transformer, greedy and beam search,
 * with the KV cache and without it (every step re-runs the whole decoder over the prefix, as
 * PyTorch's nn.Transformer and its translation tutorial do).
 *
 *   bench_decode [--config S|B] [--threads N] [--batch B] [--len T] [--reps R] [--beam K]
 *                [--no-uncached] [--no-panels] [--search greedy|beam|both] [--json]
 *
 * Model: configuration S (default) or B of bench_common.h (the anchors' ../shared/anchors/
 * RESULTS.md), random weights (seeded); random source ids of the configuration's source length,
 * decode batch 64 (S) / 16 (B) and 32 new tokens unless --batch / --len say otherwise. Every
 * hypothesis is decoded to exactly T new tokens (no EOS, as the anchor's decode: BOS-only start,
 * no early stop; no length penalty), so
 *   tokens/s = B * T / seconds (one hypothesis per input; beam search runs B * K rows).
 * The time covers the whole qkv_decode call (session creation, encoder, search). Median of R
 * runs after one warm-up. --search runs one of the two searches only (default both).
 * --phases times the parts of a cached greedy decode instead (encoder with the cross-attention
 * caches, the first step, the other steps, the argmax), median of R runs on one session, as
 * qkv_decode reuses its session between calls; the session's creation is printed once.
 * --no-panels decodes without the sessions' weight panels (qkv_session_params.weight_panels).
 * --json prints one JSON line per row instead of the table (what
 * bench/compare.sh reads; bench/torch_bench.py --mode decode prints the same keys).
 */
#include "bench_common.h"

static const char ME[] = "bench_decode"; /* the program in option messages */

/* Processor seconds of the whole process (every thread) so far. */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Median seconds of reps decodes (after a warm-up) in t[0 .. reps) (sorted), or a negative
 * number on error; *cpu_med: the median processor seconds (all threads) of the same decodes,
 * which other processes on the machine disturb less than the wall clock. */
static double time_decode(qkv_decoder *d, const int32_t *src, const int32_t *len, int32_t B,
                          const qkv_decode_params *p, int reps, double *t, int32_t *first_tokens,
                          double *cpu_med) {
    double cpu[64]; /* reps <= 64 (main checks) */
    for (int r = -1; r < reps; r++) {
        qkv_hypotheses h;
        const double c0 = cpu_now(), t0 = bench_now();
        const qkv_status st = qkv_decoder_decode(d, src, len, B, p, &h);
        const double t1 = bench_now();
        if (r >= 0) cpu[r] = cpu_now() - c0;
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
    *cpu_med = bench_median(cpu, reps);
    return bench_median(t, reps);
}

/* The parts of one cached greedy decode through the session API (what dec_greedy does, without
 * its bookkeeping): encode, the BOS step, T - 1 single-token steps with an argmax over the logits
 * between them (this benchmark's own scalar loop, not the library's). As qkv_decode keeps its
 * session with the model between calls, one session serves every run: its creation is timed once
 * (the first call's cost), and the runs find its arena and caches already mapped, where a fresh
 * session would page-fault in every byte during its first encode (config B: 0.29 against
 * 0.25 s). Prints the median seconds of each part over reps runs after one warm-up. */
static int time_phases(const qkv_model *m, const int32_t *src, int32_t B, int32_t S, int32_t T,
                       int reps, bool panels) {
    enum { ENCODE, FIRST, STEPS, ARGMAX, NPH };
    static const char *names[NPH] = {"encode + cross K/V", "first step (BOS)", "other steps",
                                     "argmax of the logits (this benchmark's loop)"};
    double *t = calloc((size_t)NPH * (size_t)reps, sizeof *t);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)B);
    const int32_t V = m->cfg.tgt_vocab;
    qkv_session_params sp = qkv_session_default_params();
    sp.max_rows = B;
    sp.max_len = T;
    sp.max_src_len = S;
    sp.weight_panels = panels;
    qkv_session *s = NULL;
    const double t_new = bench_now();
    qkv_status st = t && tok ? qkv_session_new(m, &sp, &s) : QKV_ERR_OOM;
    const double session_new = bench_now() - t_new;
    for (int r = -1; r < reps && !st; r++) {
        double ph[NPH] = {0};
        double t1 = bench_now();
        st = qkv_session_encode(s, src, B, S);
        double t0 = bench_now();
        ph[ENCODE] = t0 - t1;
        for (int32_t b = 0; b < B; b++)
            tok[b] = 1;
        for (int32_t i = 0; i < T && !st; i++) {
            qkv_tensor *logits = NULL;
            t1 = bench_now();
            st = qkv_session_step(s, tok, 1, &logits);
            t0 = bench_now();
            ph[i ? STEPS : FIRST] += t0 - t1;
            if (st) break;
            const qkv_real *l = logits->data;
            for (int32_t b = 0; b < B; b++) {
                int32_t best = 1;
                for (int32_t v = 2; v < V; v++)
                    if (l[(size_t)b * V + v] > l[(size_t)b * V + best]) best = v;
                tok[b] = best;
            }
            ph[ARGMAX] += bench_now() - t0;
        }
        for (int k = 0; r >= 0 && k < NPH; k++)
            t[k * reps + r] = ph[k];
    }
    qkv_session_free(s);
    if (st) {
        fprintf(stderr, "bench_decode: %s\n", t && tok ? qkv_last_error() : "out of memory");
        free(t);
        free(tok);
        return 1;
    }
    double total = 0;
    for (int k = 0; k < NPH; k++)
        total += bench_median(t + k * reps, reps);
    printf("| part | seconds | share |\n|---|---|---|\n");
    for (int k = 0; k < NPH; k++) {
        const double med = bench_median(t + k * reps, reps);
        printf("| %s | %.4f | %.1f %% |\n", names[k], med, 100 * med / total);
    }
    printf("| sum | %.4f | |\n", total);
    printf("\nsession_new (the first call only; later calls reuse the session): %.4f s\n", session_new);
    free(t);
    free(tok);
    return 0;
}

static void print_json(const bench_config *c, const char *search, int32_t K, bool cache, int32_t B,
                       int32_t S, int32_t T, int reps, const double *t, double med,
                       double cpu_med) {
    printf("{\"impl\": \"qkv\", \"mode\": \"decode\", \"config\": \"%s\", \"threads\": %d, "
           "\"search\": \"%s\", \"beam\": %d, \"cache\": %s, \"batch\": %d, \"src_len\": %d, "
           "\"new_tokens\": %d, \"reps\": %d, \"decode_s_median\": %.6g, \"decode_s_min\": %.6g, "
           "\"decode_s_max\": %.6g, \"tok_per_s\": %.6g, \"cpu_s_median\": %.6g, \"peak_rss_mib\": %.1f}\n",
           c->name, qkv_get_num_threads(), search, K, cache ? "true" : "false", B, S, T, reps, med,
           t[0], t[reps - 1], (double)B * T / med, cpu_med, bench_peak_rss_mib());
}

/* The command line (usage below). */
typedef struct decode_opts {
    const bench_config *c;
    int threads, reps;
    int32_t B, T, K; /* 0: the configuration's batch and length */
    bool uncached, json, phases, panels;
    int first_search, last_search; /* 0 greedy, 1 beam */
} decode_opts;

/* -1 to go on, else the exit code. */
static int parse_options(int argc, char **argv, decode_opts *o) {
    *o = (decode_opts){.c = bench_find_config("S"), .reps = 3, .K = 5, .uncached = true, .panels = true,
                       .last_search = 1};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc) {
            if (!(o->c = bench_find_config(argv[++i]))) return 2;
        } else if (!strcmp(argv[i], "--threads")) {
            if (!cli_int_option(ME, argc, argv, &i, 1, 1024, &o->threads)) return 2;
        } else if (!strcmp(argv[i], "--batch")) {
            if (!cli_int_option(ME, argc, argv, &i, 1, 4096, &o->B)) return 2;
        } else if (!strcmp(argv[i], "--len")) {
            if (!cli_int_option(ME, argc, argv, &i, 1, 4096, &o->T)) return 2;
        } else if (!strcmp(argv[i], "--reps")) {
            if (!cli_int_option(ME, argc, argv, &i, 1, 64, &o->reps)) return 2;
        } else if (!strcmp(argv[i], "--beam")) {
            if (!cli_int_option(ME, argc, argv, &i, 1, 64, &o->K)) return 2;
        } else if (!strcmp(argv[i], "--no-uncached"))
            o->uncached = false;
        else if (!strcmp(argv[i], "--no-panels"))
            o->panels = false;
        else if (!strcmp(argv[i], "--json"))
            o->json = true;
        else if (!strcmp(argv[i], "--phases"))
            o->phases = true;
        else if (!strcmp(argv[i], "--search") && i + 1 < argc) {
            const char *w = argv[++i];
            o->first_search = !strcmp(w, "beam");
            o->last_search = strcmp(w, "greedy") != 0;
            if (strcmp(w, "greedy") && strcmp(w, "beam") && strcmp(w, "both")) {
                fprintf(stderr, "bench_decode: --search %s is not greedy, beam or both\n", w);
                return 2;
            }
        }
        else {
            fprintf(stderr, "usage: bench_decode [--config S|B] [--threads N] [--batch B] "
                            "[--len T] [--reps R] [--beam K] [--no-uncached] "
                            "[--no-panels] [--search greedy|beam|both] [--phases] [--json]\n");
            return 2;
        }
    }
    return -1;
}

int main(int argc, char **argv) {
    bench_blas_kernels(argv);
    decode_opts o;
    const int parsed = parse_options(argc, argv, &o);
    if (parsed >= 0) return parsed;
    const bench_config *c = o.c;
    const int threads = o.threads, reps = o.reps;
    int32_t B = o.B, T = o.T;
    const int32_t K = o.K;
    const bool uncached = o.uncached, json = o.json, phases = o.phases, panels = o.panels;
    const int first_search = o.first_search;
    int last_search = o.last_search;
    if (c->arch != QKV_ARCH_ENCODER_DECODER) {
        fprintf(stderr, "bench_decode: config %s is not an encoder-decoder (S or B)\n", c->name);
        return 2;
    }
    if (!B) B = c->decode_batch;
    if (!T) T = c->decode_len;
    const int32_t S = c->src_len;
    if (B < 1 || T < 1 || reps < 1 || reps > 64 || K < 1) {
        fprintf(stderr, "bench_decode: batch, len and beam must be >= 1, reps 1 .. 64\n");
        return 2;
    }
    if (threads > 0) qkv_set_num_threads(threads);
    const qkv_model_config mc = bench_model_config(c);
    qkv_model *m = NULL;
    qkv_decoder *decoder = NULL; /* keeps its session from one repetition to the next, as a server would */
    if (qkv_model_new(&mc, 1, &m) || qkv_decoder_new(m, &decoder)) {
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
        if (!phases)
            printf("| search | KV cache | decode s | tokens/s | speed-up |\n|---|---|---|---|---|\n");
    }
    int rc = 0;
    if (phases) {
        rc = time_phases(m, src, B, S, T, reps, panels);
        last_search = -1;
    }
    for (int k = first_search; k <= last_search && !rc; k++) {
        qkv_decode_params p = qkv_decode_default_params();
        p.strategy = k ? QKV_DECODE_BEAM : QKV_DECODE_GREEDY;
        p.beam_size = K;
        p.n_best = 1;
        p.max_len = T;
        p.eos_id = -1; /* every hypothesis decodes exactly T tokens */
        p.length_penalty = QKV_LENGTH_PENALTY_NONE;
        p.weight_panels = panels;
        char name[32];
        snprintf(name, sizeof name, k ? "beam %d" : "greedy", K);
        const char *search = k ? "beam" : "greedy";
        double cpu_c = 0, cpu_u = 0;
        const double cached = time_decode(decoder, src, len, B, &p, reps, t, tok_c, &cpu_c);
        if (cached < 0) {
            rc = 1;
            break;
        }
        if (json)
            print_json(c, search, k ? K : 1, true, B, S, T, reps, t, cached, cpu_c);
        else
            printf("| %s | yes | %.3f | %.0f | |\n", name, cached, (double)B * T / cached);
        fflush(stdout);
        if (!uncached) continue;
        p.use_cache = false;
        const double plain = time_decode(decoder, src, len, B, &p, reps, t, tok_u, &cpu_u);
        if (plain < 0) {
            rc = 1;
            break;
        }
        if (json)
            print_json(c, search, k ? K : 1, false, B, S, T, reps, t, plain, cpu_u);
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
    qkv_decoder_free(decoder);
    qkv_model_free(m);
    return rc;
}
