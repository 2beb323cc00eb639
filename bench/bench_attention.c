/*
 * bench_attention.c: time and memory of the fused attention op qkv_sdpa, forward + backward,
 * for the fast tiled kernel (FlashAttention-2 style) and the reference kernel.
 *
 *   bench_attention [--threads N] [--max-t T] [--ref-max-t T]
 *   bench_attention --seq T [--batch B] [--reps R] [--causal] [--dropout P] [--threads N] [--json]
 *
 * Table mode (the first form): B = 1, H = 8, D = Dv = 64, T = S = 128 .. --max-t, causal and
 * non-causal, best of up to 20 runs (at least 2, while under ~1 s). The reference kernel runs up
 * to T = --ref-max-t (default 1024): it is the test oracle and costs O(T^2) in double.
 * Single-case mode (--seq; what bench/compare.sh runs beside bench/torch_bench.py --mode
 * attention): the fast kernel only, B = --batch (default 1), H = 8, D = 64, no mask unless
 * --causal, one warm-up then R runs (default 3), median of forward + backward. --dropout P runs
 * qkv_sdpa_dropout in training mode (the mask drawn and regenerated inside the kernel).
 *
 * q, k, v are parameters (outside the step arena, gradients preallocated), so the arena peak of
 * a step is the op's own memory: the output, lse, the copy of dy and scratch. "extra RSS" is the
 * process's peak resident memory minus its resident memory just before the warm-up (inputs
 * allocated), the measure the PyTorch side uses. For comparison the table shows what one
 * (B, H, T, S) score matrix would take. GFLOP/s counts the nominal work: forward 4 B H T S D (two
 * products), backward 2.5x that (FlashAttention-2 recomputes the scores), halved for causal;
 * the single-case JSON also gives the materialising algorithm's 3 x 4 B H T S D (the anchors').
 */
#include "bench_common.h"

static const char ME[] = "bench_attention"; /* the program in option messages */

enum { MAX_REPS = 20 };

typedef struct {
    double fwd_s, bwd_s;  /* best of the repetitions */
    double median_s;      /* median of forward + backward */
    size_t peak;          /* arena high-water mark of one step */
    double extra_rss_mib; /* process peak RSS minus RSS before the first run */
    int reps;
    bool ok;
} result;

/* Forward + backward of one configuration on one kernel set: `warmup` untimed runs, then at
 * least min_reps and at most max_reps (<= MAX_REPS) timed runs, stopping after min_reps once
 * `seconds` have been spent. */
static result run(qkv_kernels kernels, int64_t B, int64_t T, bool causal, double dropout,
                  int warmup, int min_reps, int max_reps, double seconds) {
    const int64_t H = 8, D = 64;
    result r = {1e30, 1e30, 0, 0, 0, 0, false};
    double times[MAX_REPS];
    qkv_params *p = NULL;
    qkv_tensor *q, *k, *v;
    const int64_t shape[4] = {B, H, T, D};
    if (qkv_params_new(&p) || qkv_params_add(p, "q", 4, shape, &q) ||
        qkv_params_add(p, "k", 4, shape, &k) || qkv_params_add(p, "v", 4, shape, &v) ||
        qkv_params_finalize(p)) {
        fprintf(stderr, "bench_attention: %s\n", qkv_last_error());
        qkv_params_free(p);
        return r;
    }
    qkv_init_uniform(q, -1, 1, 1, 0);
    qkv_init_uniform(k, -1, 1, 1, 1);
    qkv_init_uniform(v, -1, 1, 1, 2);
    qkv_real *dy = malloc(sizeof(qkv_real) * (size_t)(B * H * T * D));
    for (int64_t i = 0; i < B * H * T * D; i++)
        dy[i] = (qkv_real)((double)(i % 17) / 17.0 - 0.5);
    qkv_ctx_params cp = qkv_ctx_default_params();
    cp.kernels = kernels;
    cp.arena_bytes = (size_t)1 << 20;
    qkv_ctx *ctx = NULL;
    if (qkv_ctx_new(&cp, &ctx)) {
        fprintf(stderr, "bench_attention: %s\n", qkv_last_error());
        free(dy);
        qkv_params_free(p);
        return r;
    }
    qkv_ctx_set_training(ctx, dropout > 0);
    qkv_mask mask;
    memset(&mask, 0, sizeof mask);
    mask.causal = causal;
    mask.window_left = mask.window_right = -1;
    double total = 0;
    const double rss0 = bench_rss_mib();
    for (int rep = -warmup; rep < max_reps && (rep < min_reps || total < seconds); rep++) {
        qkv_ctx_reset(ctx);
        qkv_params_zero_grad(p);
        qkv_tensor *dyt = qkv_tensor_from(ctx, QKV_REAL, 4, shape, dy);
        const double t0 = bench_now();
        qkv_tensor *o = qkv_sdpa_dropout(ctx, q, k, v, 0.125, &mask, NULL, dropout);
        const double t1 = bench_now();
        const qkv_status st = qkv_backward_from(ctx, o, dyt);
        const double t2 = bench_now();
        if (!o || st != QKV_OK) {
            fprintf(stderr, "bench_attention: %s\n", qkv_last_error());
            r.ok = false;
            break;
        }
        if (rep < 0) continue;
        times[r.reps++] = t2 - t0;
        r.fwd_s = t1 - t0 < r.fwd_s ? t1 - t0 : r.fwd_s;
        r.bwd_s = t2 - t1 < r.bwd_s ? t2 - t1 : r.bwd_s;
        total += t2 - t0;
        r.ok = true;
    }
    if (r.reps) r.median_s = bench_median(times, r.reps);
    r.extra_rss_mib = bench_peak_rss_mib() - rss0;
    r.peak = qkv_ctx_arena_peak(ctx);
    qkv_ctx_free(ctx);
    free(dy);
    qkv_params_free(p);
    return r;
}

static double mib(double bytes) {
    return bytes / (1024.0 * 1024.0);
}

/* Single-case mode: one line of text or JSON. */
static int single(int64_t B, int64_t T, bool causal, double dropout, int reps, bool json) {
    const result f = run(QKV_KERNELS_FAST, B, T, causal, dropout, 1, reps, reps, 0);
    if (!f.ok) return 1;
    const double nominal =
        4.0 * (double)(B * 8) * (double)T * (double)T * 64 * 3.5 * (causal ? 0.5 : 1);
    const double materialized = 3 * 4.0 * (double)(B * 8) * (double)T * (double)T * 64;
    const double scores = (double)(B * 8) * (double)T * (double)T * sizeof(qkv_real);
    if (json)
        printf("{\"impl\": \"qkv\", \"mode\": \"attention\", \"kernel\": \"sdpa tiled\", "
               "\"batch\": %lld, \"heads\": 8, \"head_dim\": 64, \"seq\": %lld, \"causal\": %s, "
               "\"threads\": %d, \"reps\": %d, \"fwd_bwd_s_median\": %.6g, \"fwd_s_min\": %.6g, "
               "\"bwd_s_min\": %.6g, \"gflops_nominal\": %.6g, \"gflops\": %.6g, "
               "\"arena_peak_mib\": %.2f, \"extra_peak_mib\": %.1f, \"peak_rss_mib\": %.1f, "
               "\"nxn_tensor_mib\": %.1f}\n",
               (long long)B, (long long)T, causal ? "true" : "false", qkv_get_num_threads(), f.reps,
               f.median_s, f.fwd_s, f.bwd_s, nominal / f.median_s / 1e9,
               materialized / f.median_s / 1e9, mib((double)f.peak), f.extra_rss_mib,
               bench_peak_rss_mib(), mib(scores));
    else
        printf("B %lld, H 8, D 64, T %lld, %s, dropout %g: forward + backward median %.4f s of %d; "
               "%.1f GFLOP/s (nominal); arena peak %.1f MiB; extra RSS %.0f MiB; one score matrix "
               "%.0f MiB\n",
               (long long)B, (long long)T, causal ? "causal" : "no mask", dropout, f.median_s,
               f.reps, nominal / f.median_s / 1e9, mib((double)f.peak), f.extra_rss_mib,
               mib(scores));
    return 0;
}

int main(int argc, char **argv) {
    bench_blas_kernels(argv);
    int64_t max_t = 4096, ref_max_t = 1024, seq = 0, batch = 1;
    int reps = 3;
    double dropout = 0;
    bool causal_one = false, json = false;
    for (int i = 1; i < argc; i++) {
        int v = 0;
        if (!strcmp(argv[i], "--threads")) {
            if (!cli_int_option(ME, argc, argv, &i, 1, 1024, &v)) return 2;
            qkv_set_num_threads(v);
        } else if (!strcmp(argv[i], "--max-t")) {
            if (!cli_int_option(ME, argc, argv, &i, 1, 1 << 20, &v)) return 2;
            max_t = v;
        } else if (!strcmp(argv[i], "--ref-max-t")) {
            if (!cli_int_option(ME, argc, argv, &i, 0, 1 << 20, &v)) return 2;
            ref_max_t = v;
        } else if (!strcmp(argv[i], "--seq")) {
            if (!cli_int_option(ME, argc, argv, &i, 1, 1 << 20, &v)) return 2;
            seq = v;
        } else if (!strcmp(argv[i], "--batch")) {
            if (!cli_int_option(ME, argc, argv, &i, 1, 4096, &v)) return 2;
            batch = v;
        } else if (!strcmp(argv[i], "--reps")) {
            if (!cli_int_option(ME, argc, argv, &i, 1, 20, &reps)) return 2;
        } else if (!strcmp(argv[i], "--causal"))
            causal_one = true;
        else if (!strcmp(argv[i], "--dropout")) {
            double p = 0;
            if (!cli_real_option(ME, argc, argv, &i, 0, 1, false, &p)) return 2;
            dropout = p;
        } else if (!strcmp(argv[i], "--json"))
            json = true;
        else {
            fprintf(
                stderr,
                "usage: %s [--threads N] [--max-t T] [--ref-max-t T]\n"
                "       %s --seq T [--batch B] [--reps R] [--causal] [--dropout P] [--threads N] "
                "[--json]\n",
                argv[0], argv[0]);
            return 2;
        }
    }
    if (seq) {
        if (seq < 1 || batch < 1 || reps < 1 || reps > MAX_REPS || !(dropout >= 0 && dropout < 1)) {
            fprintf(stderr,
                    "bench_attention: --seq and --batch must be >= 1, --reps 1 .. %d, --dropout in "
                    "[0, 1)\n",
                    MAX_REPS);
            return 2;
        }
        return single(batch, seq, causal_one, dropout, reps, json);
    }
    printf("qkv %s, %d thread(s); sdpa forward + backward, B = 1, H = 8, D = Dv = 64, T = S\n",
           qkv_version(), qkv_get_num_threads());
    printf("times: best of up to 20 runs (ms); peak: step-arena high-water mark (MiB); "
           "scores: one (B, H, T, S) matrix (MiB)\n\n");
    printf("%-6s %5s | %9s %9s %8s %8s | %9s %9s %8s | %7s %9s\n", "mask", "T", "fast fwd",
           "fast bwd", "GFLOP/s", "peak", "ref fwd", "ref bwd", "peak", "speedup", "scores");
    for (int causal = 0; causal < 2; causal++)
        for (int64_t T = 128; T <= max_t; T *= 2) {
            const result f = run(QKV_KERNELS_FAST, 1, T, causal, 0, 0, 2, MAX_REPS, 1.0);
            const double flops = 4.0 * 8 * (double)T * (double)T * 64 * 3.5 * (causal ? 0.5 : 1);
            const double scores = 8.0 * (double)T * (double)T * sizeof(qkv_real);
            printf("%-6s %5lld | %9.2f %9.2f %8.2f %8.2f |", causal ? "causal" : "full",
                   (long long)T, 1e3 * f.fwd_s, 1e3 * f.bwd_s, flops / (f.fwd_s + f.bwd_s) / 1e9,
                   mib((double)f.peak));
            if (T <= ref_max_t) {
                const result r = run(QKV_KERNELS_REF, 1, T, causal, 0, 0, 2, MAX_REPS, 1.0);
                printf(" %9.2f %9.2f %8.2f | %6.1fx", 1e3 * r.fwd_s, 1e3 * r.bwd_s,
                       mib((double)r.peak), (r.fwd_s + r.bwd_s) / (f.fwd_s + f.bwd_s));
            } else {
                printf(" %9s %9s %8s | %7s", "-", "-", "-", "-");
            }
            printf(" %9.1f\n", mib(scores));
            fflush(stdout);
        }
    return 0;
}
