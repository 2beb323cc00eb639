/*
 * bench_attention.c: time and memory of the fused attention op qkv_sdpa, forward + backward,
 * for the fast tiled kernel (FlashAttention-2 style) and the reference kernel.
 *
 *   bench_attention [--threads N] [--max-t T] [--ref-max-t T]
 *
 * Shapes: B = 1, H = 8, D = Dv = 64, T = S = 128 .. 4096, causal and non-causal. q, k, v are
 * parameters (outside the step arena, gradients preallocated), so the arena peak of a step is
 * the op's own memory: the output, lse, the copy of dy and scratch. For comparison the table
 * shows what one (B, H, T, S) score matrix would take. The reference kernel runs up to
 * T = --ref-max-t (default 1024): it is the test oracle and costs O(T^2) in double.
 * GFLOP/s counts the nominal work: forward 4 B H T S D (two products), backward 2.5x that,
 * halved for causal.
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

typedef struct {
    double fwd_s, bwd_s; /* best of the repetitions */
    size_t peak;         /* arena high-water mark of one step */
    bool ok;
} result;

/* Forward + backward of one configuration on one kernel set; repeats while under ~1 s. */
static result run(qkv_kernels kernels, int64_t T, bool causal) {
    const int64_t B = 1, H = 8, D = 64;
    result r = {1e30, 1e30, 0, false};
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
    qkv_mask mask;
    memset(&mask, 0, sizeof mask);
    mask.causal = causal;
    mask.window_left = mask.window_right = -1;
    double total = 0;
    for (int rep = 0; rep < 20 && (rep < 2 || total < 1.0); rep++) {
        qkv_ctx_reset(ctx);
        qkv_params_zero_grad(p);
        qkv_tensor *dyt = qkv_tensor_from(ctx, QKV_REAL, 4, shape, dy);
        const double t0 = now();
        qkv_tensor *o = qkv_sdpa(ctx, q, k, v, 0.125, &mask, NULL);
        const double t1 = now();
        const qkv_status st = qkv_backward_from(ctx, o, dyt);
        const double t2 = now();
        if (!o || st != QKV_OK) {
            fprintf(stderr, "bench_attention: %s\n", qkv_last_error());
            break;
        }
        r.fwd_s = t1 - t0 < r.fwd_s ? t1 - t0 : r.fwd_s;
        r.bwd_s = t2 - t1 < r.bwd_s ? t2 - t1 : r.bwd_s;
        total += t2 - t0;
        r.ok = true;
    }
    r.peak = qkv_ctx_arena_peak(ctx);
    qkv_ctx_free(ctx);
    free(dy);
    qkv_params_free(p);
    return r;
}

static double mib(double bytes) {
    return bytes / (1024.0 * 1024.0);
}

int main(int argc, char **argv) {
    int64_t max_t = 4096, ref_max_t = 1024;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            qkv_set_num_threads(atoi(argv[++i]));
        else if (!strcmp(argv[i], "--max-t") && i + 1 < argc)
            max_t = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--ref-max-t") && i + 1 < argc)
            ref_max_t = atoll(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--threads N] [--max-t T] [--ref-max-t T]\n", argv[0]);
            return 2;
        }
    }
    printf("qkv %s, %d thread(s); sdpa forward + backward, B = 1, H = 8, D = Dv = 64, T = S\n",
           qkv_version(), qkv_get_num_threads());
    printf("times: best of up to 20 runs (ms); peak: step-arena high-water mark (MiB); "
           "scores: one (B, H, T, S) matrix (MiB)\n\n");
    printf("%-6s %5s | %9s %9s %8s %8s | %9s %9s %8s | %7s %9s\n", "mask", "T", "fast fwd",
           "fast bwd", "GFLOP/s", "peak", "ref fwd", "ref bwd", "peak", "speedup", "scores");
    for (int causal = 0; causal < 2; causal++)
        for (int64_t T = 128; T <= max_t; T *= 2) {
            const result f = run(QKV_KERNELS_FAST, T, causal);
            const double flops = 4.0 * 8 * (double)T * (double)T * 64 * 3.5 * (causal ? 0.5 : 1);
            const double scores = 8.0 * (double)T * (double)T * sizeof(qkv_real);
            printf("%-6s %5lld | %9.2f %9.2f %8.2f %8.2f |", causal ? "causal" : "full",
                   (long long)T, 1e3 * f.fwd_s, 1e3 * f.bwd_s, flops / (f.fwd_s + f.bwd_s) / 1e9,
                   mib((double)f.peak));
            if (T <= ref_max_t) {
                const result r = run(QKV_KERNELS_REF, T, causal);
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
