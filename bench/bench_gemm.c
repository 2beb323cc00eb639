/*
 * bench_gemm.c: GEMM throughput through qkv against raw cblas_sgemm, same shapes, same run.
 *
 *   build/release/bench_gemm [--threads N] [--seconds S]
 *
 * For each shape (the Transformer shapes of ../shared/anchors/RESULTS.md, row-major, C = A B^T as
 * qkv_linear calls it, and C = A B): 2 warm-up calls, then 7 alternating samples of each
 * implementation, each sample repeating the call for about S/7 seconds (default S = 1). Prints the
 * median GFLOP/s = 2 M N K / t of qkv_gemm (what every op uses), raw cblas_sgemm, the portable
 * blocked fallback (qkv_gemm_blocked), and the ratio qkv / cblas. A benchmark, not a test.
 * --decode: the shapes of a config-B decoding step instead (M = 1, 4, 16 rows, one per
 * hypothesis, against each weight of a decoder layer and the output projection), where qkv_gemm
 * takes the small-M kernel (src/kernels/gemm_small_m.c) on AVX2 / FMA CPUs.
 *
 *   build/release/bench_gemm --ceiling [--threads N] [--json]
 *
 * The sgemm ceiling (what bench/compare.sh divides achieved GFLOP/s by, measured in the same
 * run): raw cblas_sgemm, row-major C = A B, 2048 x 2048 x 2048 at N threads, 2 warm-up calls, then
 * 9 samples of ~0.2 s each; the median GFLOP/s (as ../shared/anchors/sgemm_peak.c, whose
 * medians at large shapes define the anchors' ~215 GFLOP/s ceiling).
 */
#define _POSIX_C_SOURCE 200809L
#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef QKV_WITH_BLAS
#include <cblas.h>
#endif

typedef enum { IMPL_QKV, IMPL_CBLAS, IMPL_BLOCKED } impl;

static void run(impl which, bool tb, int64_t m, int64_t n, int64_t k, const qkv_real *a, const qkv_real *b,
                qkv_real *c) {
    const int64_t ldb = tb ? k : n;
    switch (which) {
    case IMPL_QKV: qkv_gemm(false, tb, m, n, k, 1, a, k, b, ldb, 0, c, n); break;
    case IMPL_BLOCKED: qkv_gemm_blocked(false, tb, m, n, k, 1, a, k, b, ldb, 0, c, n); break;
    case IMPL_CBLAS:
#ifdef QKV_WITH_BLAS
#ifdef QKV_DOUBLE
        cblas_dgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, 1, a, (int)k,
                    b, (int)ldb, 0, c, (int)n);
#else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, 1, a, (int)k,
                    b, (int)ldb, 0, c, (int)n);
#endif
#endif
        break;
    }
}

/* GFLOP/s of one sample: repeat until `seconds` have passed. */
static double sample(impl which, bool tb, int64_t m, int64_t n, int64_t k, const qkv_real *a, const qkv_real *b,
                     qkv_real *c, double seconds) {
    int reps = 0;
    double t0 = bench_now(), t;
    do {
        run(which, tb, m, n, k, a, b, c);
        reps++;
        t = bench_now() - t0;
    } while (t < seconds);
    return 2.0 * (double)m * (double)n * (double)k * reps / t * 1e-9;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The --ceiling mode (see the header). */
static int ceiling(bool json) {
    enum { N = 2048, SAMPLES = 9 };
    qkv_real *a = malloc(sizeof(qkv_real) * N * N), *b = malloc(sizeof(qkv_real) * N * N),
             *c = malloc(sizeof(qkv_real) * N * N);
    if (!a || !b || !c) {
        fprintf(stderr, "bench_gemm: out of memory\n");
        return 1;
    }
    for (int64_t i = 0; i < (int64_t)N * N; i++) {
        a[i] = (qkv_real)((i % 17) * 0.01 - 0.08);
        b[i] = (qkv_real)((i % 13) * 0.01 - 0.06);
    }
    for (int r = 0; r < 2; r++) run(IMPL_CBLAS, false, N, N, N, a, b, c);
    double g[SAMPLES];
    for (int r = 0; r < SAMPLES; r++) g[r] = sample(IMPL_CBLAS, false, N, N, N, a, b, c, 0.2);
    qsort(g, SAMPLES, sizeof(double), cmp_double);
    if (json)
        printf("{\"impl\": \"cblas_sgemm\", \"mode\": \"ceiling\", \"threads\": %d, \"m\": %d, \"n\": %d, "
               "\"k\": %d, \"samples\": %d, \"gflops_median\": %.6g, \"gflops_min\": %.6g, "
               "\"gflops_max\": %.6g}\n",
               qkv_get_num_threads(), N, N, N, SAMPLES, g[SAMPLES / 2], g[0], g[SAMPLES - 1]);
    else
        printf("sgemm ceiling: cblas_sgemm %dx%dx%d, %d thread(s): median %.1f GFLOP/s (min %.1f, "
               "max %.1f, %d samples)\n",
               N, N, N, qkv_get_num_threads(), g[SAMPLES / 2], g[0], g[SAMPLES - 1], SAMPLES);
    free(a), free(b), free(c);
    return 0;
}

int main(int argc, char **argv) {
    bench_blas_kernels(argv);
    int threads = 0;
    double seconds = 1.0;
    bool with_blocked = true, want_ceiling = false, json = false, decode = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--no-blocked")) with_blocked = false;
        else if (!strcmp(argv[i], "--ceiling")) want_ceiling = true;
        else if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "--decode")) decode = true;
        else {
            fprintf(stderr, "usage: bench_gemm [--threads N] [--seconds S] [--no-blocked] [--decode]\n"
                            "       bench_gemm --ceiling [--threads N] [--json]\n");
            return 2;
        }
    }
#ifndef QKV_WITH_BLAS
    fprintf(stderr, "bench_gemm: this build has no BLAS (QKV_WITH_BLAS=OFF): there is no cblas_sgemm to compare with\n");
    return 1;
#endif
    qkv_set_num_threads(threads);
    if (want_ceiling) return ceiling(json);
    typedef struct {
        const char *name;
        int64_t m, n, k;
        bool tb;
    } shape;
    static const shape decode_shapes[] = {
        {"self in_proj M=1", 1, 1536, 512, true},  {"self in_proj M=4", 4, 1536, 512, true},
        {"self in_proj M=16", 16, 1536, 512, true}, {"out_proj M=16", 16, 512, 512, true},
        {"linear1 M=16", 16, 2048, 512, true},      {"linear2 M=16", 16, 512, 2048, true},
        {"logits M=1", 1, 8000, 512, true},         {"logits M=16", 16, 8000, 512, true},
        {"linear1 M=32 (BLAS)", 32, 2048, 512, true},
    };
    static const shape train_shapes[] = {
        {"square 512", 512, 512, 512, false},    {"square 1024", 1024, 1024, 1024, false},
        {"qkv proj (linear)", 2048, 1536, 512, true}, {"out proj (linear)", 2048, 512, 512, true},
        {"ffn up (linear)", 2048, 2048, 512, true},   {"ffn down (linear)", 2048, 512, 2048, true},
        {"logits (linear)", 2048, 8000, 512, true},   {"attn scores 64x64x64", 64, 64, 64, true},
    };
    const shape *shapes = decode ? decode_shapes : train_shapes;
    const size_t n_shapes = decode ? sizeof decode_shapes / sizeof *decode_shapes
                                   : sizeof train_shapes / sizeof *train_shapes;
    printf("qkv %s, %d thread(s), %.1f s per shape per implementation\n", qkv_version(), qkv_get_num_threads(),
           seconds);
    printf("%-20s %-16s %10s %10s %10s %9s\n", "shape", "M x N x K", "qkv GF/s", "cblas GF/s", "blocked", "qkv/cblas");
    enum { SAMPLES = 7 };
    for (size_t s = 0; s < n_shapes; s++) {
        const int64_t m = shapes[s].m, n = shapes[s].n, k = shapes[s].k;
        qkv_real *a = malloc(sizeof(qkv_real) * (size_t)(m * k)), *b = malloc(sizeof(qkv_real) * (size_t)(k * n)),
                 *c = malloc(sizeof(qkv_real) * (size_t)(m * n));
        if (!a || !b || !c) {
            fprintf(stderr, "bench_gemm: out of memory\n");
            return 1;
        }
        for (int64_t i = 0; i < m * k; i++) a[i] = (qkv_real)((i % 17) * 0.01 - 0.08);
        for (int64_t i = 0; i < k * n; i++) b[i] = (qkv_real)((i % 13) * 0.01 - 0.06);
        double g[3][SAMPLES];
        const int n_impl = with_blocked ? 3 : 2;
        for (int w = 0; w < n_impl; w++)
            for (int r = 0; r < 2; r++) run((impl)w, shapes[s].tb, m, n, k, a, b, c);
        for (int r = 0; r < SAMPLES; r++) /* alternate so drift hits every implementation alike */
            for (int w = 0; w < n_impl; w++)
                g[w][r] = sample((impl)w, shapes[s].tb, m, n, k, a, b, c, seconds / SAMPLES / (w == 2 ? 2 : 1));
        for (int w = 0; w < n_impl; w++) qsort(g[w], SAMPLES, sizeof(double), cmp_double);
        char dims[48];
        snprintf(dims, sizeof dims, "%lldx%lldx%lld", (long long)m, (long long)n, (long long)k);
        printf("%-20s %-16s %10.1f %10.1f %10.1f %9.2f\n", shapes[s].name, dims, g[0][SAMPLES / 2], g[1][SAMPLES / 2],
               with_blocked ? g[2][SAMPLES / 2] : 0.0, g[0][SAMPLES / 2] / g[1][SAMPLES / 2]);
        free(a), free(b), free(c);
    }
    return 0;
}
