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
 * takes the small-M kernel (src/kernels/gemm/gemm_small_m.c) on AVX2 / FMA CPUs.
 *
 *   build/release/bench_gemm --decode-step [--threads N] [--lanes 8|16]
 *
 * A config-B greedy decoding step's products with its weights streamed from memory, as a decode
 * meets them: the 6 decoder layers' weights (self-attention in / out, cross-attention query / out,
 * feed-forward up / down) and the output projection, 26 M floats (104 MB, far past the caches) in
 * separate 64-byte-aligned buffers, x W^T through each in turn with M = 1, 4 and 16 rows; qkv_gemm
 * (the small-M kernel at these M: 1, 4, 8, 16 and 80 rows) and cblas_sgemm alternate, and on
 * CPUs that run them the weight panels (src/kernels/gemm/gemm_panels.c) from copies filled beforehand,
 * as a session's steps after its first two read them; 3 warm-up passes, then the median of 15
 * passes: ms per pass, GB/s of weights, GFLOP/s (BENCHMARKS.md).
 *
 *   build/release/bench_gemm --few-rows [--threads N] [--lanes 8|16]
 *
 * Where the small-M kernel pays: for weight-shaped B (config B's and S's decoder weights, GPT-2's,
 * and head-sized k = 64 products) and M = 16 .. 256 rows, the median time of 7 samples of qkv_gemm
 * with the small-M rule off (BLAS in qkv_gemm's tiles; qkv__gemm_small_m_enable) against the
 * small-M kernel itself, alternating, operands in cache; prints BLAS time / kernel time (> 1: the
 * kernel is faster). The basis of the 96-row rule (BENCHMARKS.md).
 * --lanes 8|16 makes the small-M kernel run on that many lanes instead of the CPU's default (16
 * on CPUs with AVX-512F, 8 elsewhere): the two widths on one machine (BENCHMARKS.md).
 *
 *   build/release/bench_gemm --packed [--threads N]
 *
 * Where the packed AVX-512 GEMM pays (src/kernels/gemm/gemm_packed.c; CPUs with AVX-512F): the
 * products of a config-B, S and GPT-2 training step (forward x W^T, backward dY W and dY^T X)
 * and smaller ones near its thresholds, qkv_gemm with the packed GEMM off (OpenBLAS in
 * qkv_gemm's tiles; qkv__gemm_packed_enable) against on, alternating, operands in cache; the
 * median of 7 samples of each, GFLOP/s of both and tiles time / packed time (> 1: packed is
 * faster; "-" where the rule sends the shape to BLAS anyway).
 *
 *   build/release/bench_gemm --packed-modes [--threads N]
 *
 * The packed GEMM's two ways of sharing a product between threads (each thread a share of C's
 * columns, packing all of A; or of its rows, the packed B shared), each forced in turn through
 * qkv__gemm_packed_column_rows on the same products, M = 128 .. 1024 rows against config B's
 * weights, alternating, operands in cache; the median of 7 samples of each and columns time / rows
 * time (> 1: rows are faster). The basis of the 384-row bound (BENCHMARKS.md).
 *
 *   build/release/bench_gemm --packed-copy [--threads N]
 *
 * A decoding session's products that the packed GEMM takes, packing the weight at every product
 * against from the session's packed copy of it, the copy's products split by columns and by rows
 * (packed_copy below; BENCHMARKS.md).
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
#include "kernels/gemm/gemm.h" /* the small-M kernel and its switch (--few-rows) */

static const char ME[] = "bench_gemm"; /* the program in option messages */

#include <math.h>
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

static int few_rows(void) {
    if (!qkv__gemm_small_m_available()) {
        fprintf(stderr, "bench_gemm: --few-rows: this CPU or build has no small-M kernel (x86-64 with AVX2 and FMA, "
                        "float)\n");
        return 1;
    }
    static const int64_t shapes[][2] = {{1536, 512}, {512, 512},  {2048, 512}, {512, 2048}, {8000, 512},
                                        {768, 256},  {1024, 256}, {256, 1024}, {2304, 768}, {3072, 768},
                                        {768, 3072}, {256, 64},   {1024, 64}}; /* (N, K) of B */
    static const int64_t rows[] = {16, 32, 64, 80, 96, 128, 256};
    enum { N_ROWS = sizeof rows / sizeof *rows, SAMPLES = 7 };
    qkv_real *a = aligned_alloc(64, sizeof(qkv_real) * 256 * 3072), *b = aligned_alloc(64, sizeof(qkv_real) * 8000 * 512),
             *c = aligned_alloc(64, sizeof(qkv_real) * 256 * 8000);
    if (!a || !b || !c) {
        fprintf(stderr, "bench_gemm: out of memory\n");
        free(a), free(b), free(c);
        return 1;
    }
    for (int64_t i = 0; i < 256 * 3072; i++) a[i] = (qkv_real)((i % 17) * 0.01 - 0.08);
    for (int64_t i = 0; i < 8000 * 512; i++) b[i] = (qkv_real)((i % 13) * 0.01 - 0.06);
    printf("qkv %s, %d thread(s): BLAS (qkv_gemm's tiles) time / small-M kernel time, median of %d\n",
           qkv_version(), qkv_get_num_threads(), SAMPLES);
    printf("%-12s", "N x K");
    for (int r = 0; r < N_ROWS; r++) printf(" %7s%-3lld", "M=", (long long)rows[r]);
    printf("\n");
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int64_t n = shapes[s][0], k = shapes[s][1];
        printf("%5lld x %-4lld", (long long)n, (long long)k);
        for (int r = 0; r < N_ROWS; r++) {
            const int64_t m = rows[r], reps = 1 + 20000000 / (n * k); /* ~20 M multiply-adds per row */
            double t[2][SAMPLES];
            for (int pass = 0; pass < SAMPLES + 2; pass++)
                for (int which = 0; which < 2; which++) { /* 0: BLAS tiles, 1: the kernel */
                    const double t0 = bench_now();
                    for (int64_t i = 0; i < reps; i++) {
                        if (which) qkv__gemm_small_m(m, n, k, 1, a, k, b, k, 0, c, n);
                        else {
                            qkv__gemm_small_m_enable(false);
                            qkv_gemm(false, true, m, n, k, 1, a, k, b, k, 0, c, n);
                            qkv__gemm_small_m_enable(true);
                        }
                    }
                    if (pass >= 2) t[which][pass - 2] = bench_now() - t0;
                }
            qsort(t[0], SAMPLES, sizeof(double), cmp_double);
            qsort(t[1], SAMPLES, sizeof(double), cmp_double);
            printf(" %9.2fx", t[0][SAMPLES / 2] / t[1][SAMPLES / 2]);
        }
        printf("\n");
    }
    free(a), free(b), free(c);
    return 0;
}

/* A (m x k) and B (k x n) filled with small repeating values (the same ones in every table) and C
 * (m x n), 64-byte aligned; false (with a message, nothing left allocated) when out of memory. */
static bool operands(int64_t m, int64_t n, int64_t k, qkv_real **a, qkv_real **b, qkv_real **c) {
    *a = aligned_alloc(64, sizeof(qkv_real) * (size_t)(m * k));
    *b = aligned_alloc(64, sizeof(qkv_real) * (size_t)(k * n));
    *c = aligned_alloc(64, sizeof(qkv_real) * (size_t)(m * n));
    if (!*a || !*b || !*c) {
        fprintf(stderr, "bench_gemm: out of memory\n");
        free(*a), free(*b), free(*c);
        return false;
    }
    for (int64_t i = 0; i < m * k; i++) (*a)[i] = (qkv_real)((i % 17) * 0.01 - 0.08);
    for (int64_t i = 0; i < k * n; i++) (*b)[i] = (qkv_real)((i % 13) * 0.01 - 0.06);
    return true;
}

static int packed_table(void) {
    if (!qkv__gemm_packed_available()) {
        fprintf(stderr, "bench_gemm: --packed: this CPU or build has no packed GEMM (x86-64 with AVX-512F, "
                        "float)\n");
        return 1;
    }
    static const struct {
        const char *name;
        bool ta, tb;
        int64_t m, n, k;
    } shapes[] = {
        {"B qkv proj", false, true, 2048, 1536, 512},    {"B out proj", false, true, 2048, 512, 512},
        {"B ffn up", false, true, 2048, 2048, 512},      {"B ffn down", false, true, 2048, 512, 2048},
        {"B logits", false, true, 2048, 8000, 512},      {"B cross kv", false, true, 2048, 1024, 512},
        {"B dX ffn down", false, false, 2048, 2048, 512}, {"B dX ffn up", false, false, 2048, 512, 2048},
        {"B dX logits", false, false, 2048, 512, 8000},  {"B dW qkv", true, false, 1536, 512, 2048},
        {"B dW ffn up", true, false, 2048, 512, 2048},   {"B dW ffn down", true, false, 512, 2048, 2048},
        {"B dW logits", true, false, 8000, 512, 2048},   {"S qkv proj", false, true, 2048, 768, 256},
        {"S ffn up", false, true, 2048, 1024, 256},      {"S dW ffn down", true, false, 256, 1024, 2048},
        {"GPT-2 qkv", false, true, 256, 2304, 768},      {"GPT-2 logits", false, true, 256, 50304, 768},
        {"GPT-2 dW fc", true, false, 3072, 768, 256},    {"B encoder 1024", false, true, 1024, 2048, 512},
        {"mid 256", false, true, 256, 512, 256},         {"mid 128", false, true, 128, 512, 512},
        {"small 64", false, true, 64, 256, 256},         {"heads 64", false, true, 512, 512, 64},
        {"small 64x128", false, true, 64, 128, 128},     {"rows 32", false, true, 32, 512, 512},
        {"small 128x64", false, true, 128, 128, 64},     {"rows 96 NN", false, false, 96, 512, 512},
        {"depth 32", false, false, 512, 512, 32},        {"tiny 64", false, false, 64, 64, 64},
        {"thin m 32", false, false, 32, 1024, 256},       {"thin n 32", false, false, 256, 32, 1024},
        {"thin n 32 NT", false, true, 1024, 32, 512},     {"tall 2048x64", false, true, 2048, 64, 64},
        {"depth 16", false, false, 1024, 1024, 16},
    };
    enum { SAMPLES = 7 };
    printf("qkv %s, %d thread(s): OpenBLAS in qkv_gemm's tiles against the packed GEMM, median of %d\n",
           qkv_version(), qkv_get_num_threads(), SAMPLES);
    printf("%-16s %-4s %-18s %10s %10s %8s\n", "product", "op", "M x N x K", "tiles GF/s", "packed", "ratio");
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const bool ta = shapes[s].ta, tb = shapes[s].tb;
        const int64_t m = shapes[s].m, n = shapes[s].n, k = shapes[s].k;
        qkv_real *a, *b, *c;
        if (!operands(m, n, k, &a, &b, &c)) return 1;
        const int64_t lda = ta ? m : k, ldb = tb ? k : n, reps = 1 + 200000000 / (m * n * k);
        const bool packed = qkv__gemm_uses_packed(m, n, k);
        double t[2][SAMPLES];
        for (int pass = 0; pass < SAMPLES + 1; pass++)
            for (int which = 0; which < 2; which++) { /* 0: BLAS tiles, 1: packed */
                qkv__gemm_packed_enable(which == 1);
                const double t0 = bench_now();
                for (int64_t i = 0; i < reps; i++) qkv_gemm(ta, tb, m, n, k, 1, a, lda, b, ldb, 0, c, n);
                if (pass >= 1) t[which][pass - 1] = (bench_now() - t0) / (double)reps;
            }
        qkv__gemm_packed_enable(true);
        qsort(t[0], SAMPLES, sizeof(double), cmp_double);
        qsort(t[1], SAMPLES, sizeof(double), cmp_double);
        const double flop = 2.0 * (double)m * (double)n * (double)k * 1e-9;
        char dims[48];
        snprintf(dims, sizeof dims, "%lldx%lldx%lld", (long long)m, (long long)n, (long long)k);
        printf("%-16s %c%c   %-18s %10.1f %10.1f ", shapes[s].name, ta ? 'T' : 'N', tb ? 'T' : 'N', dims,
               flop / t[0][SAMPLES / 2], flop / t[1][SAMPLES / 2]);
        if (packed) printf("%7.3fx\n", t[0][SAMPLES / 2] / t[1][SAMPLES / 2]);
        else printf("%8s\n", "-");
        free(a), free(b), free(c);
    }
    return 0;
}

/* --packed-modes: the packed GEMM's two thread splits on the same products, A (M, K) B (N, K)^T as
 * qkv_linear multiplies, M around the bound between them (gemm_packed.c, "Column mode"). */
static int packed_modes(void) {
    if (!qkv__gemm_packed_available()) {
        fprintf(stderr, "bench_gemm: --packed-modes: this CPU or build has no packed GEMM (x86-64 with AVX-512F, "
                        "float)\n");
        return 1;
    }
    static const int64_t ms[] = {128, 256, 384, 512, 768, 1024}, nk[][2] = {{512, 512}, {512, 2048}, {2048, 512}};
    enum { SAMPLES = 7 };
    printf("qkv %s, %d thread(s): the packed GEMM splitting C's columns against its rows, median of %d\n",
           qkv_version(), qkv_get_num_threads(), SAMPLES);
    printf("%-18s %12s %12s %9s\n", "M x N x K", "columns GF/s", "rows GF/s", "rows/col");
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++)
        for (size_t j = 0; j < sizeof nk / sizeof *nk; j++) {
            const int64_t m = ms[i], n = nk[j][0], k = nk[j][1];
            qkv_real *a, *b, *c;
            if (!operands(m, n, k, &a, &b, &c)) return 1;
            const int64_t reps = 1 + 200000000 / (m * n * k);
            double t[2][SAMPLES];
            for (int pass = 0; pass < SAMPLES + 1; pass++)
                for (int which = 0; which < 2; which++) { /* 0: columns, 1: rows */
                    qkv__gemm_packed_column_rows(which == 0 ? INT64_MAX : 0);
                    const double t0 = bench_now();
                    for (int64_t r = 0; r < reps; r++) qkv_gemm(false, true, m, n, k, 1, a, k, b, k, 0, c, n);
                    if (pass >= 1) t[which][pass - 1] = (bench_now() - t0) / (double)reps;
                }
            qkv__gemm_packed_column_rows(-1);
            qsort(t[0], SAMPLES, sizeof(double), cmp_double);
            qsort(t[1], SAMPLES, sizeof(double), cmp_double);
            const double flop = 2.0 * (double)m * (double)n * (double)k * 1e-9;
            char dims[48];
            snprintf(dims, sizeof dims, "%lldx%lldx%lld", (long long)m, (long long)n, (long long)k);
            printf("%-18s %12.1f %12.1f %8.3fx\n", dims, flop / t[0][SAMPLES / 2], flop / t[1][SAMPLES / 2],
                   t[0][SAMPLES / 2] / t[1][SAMPLES / 2]);
            free(a), free(b), free(c);
        }
    return 0;
}

/* --packed-copy: a decoding session's products that the packed GEMM takes, packing W at every
 * product (qkv_gemm) against multiplying from its packed copy (qkv__gemm_packed_nt_copy, the
 * session's weight copies), the copy's threads split by C's columns and by its rows, alternating,
 * operands in cache: config S's decoder weights at 64 (greedy) to 480 rows (beam 5 is 320), config
 * B's at 400 (beam 5 of 80 sentences). The median of 7 samples of each and the time packing W
 * divided by the copy's time in the faster split (src/kernels/gemm/weight_copies.c). */
static int packed_copy(void) {
#ifndef QKV_DOUBLE
    if (!qkv__gemm_packed_available()) {
        fprintf(stderr, "bench_gemm: --packed-copy: this CPU or build has no packed GEMM (x86-64 with AVX-512F, "
                        "float)\n");
        return 1;
    }
    static const int64_t shapes[][3] = {
        {64, 256, 256},  {64, 768, 256},  {64, 1024, 256},  {96, 256, 256},   {128, 256, 256},
        {128, 1024, 256}, {192, 256, 256}, {192, 1024, 256}, {320, 256, 256},  {320, 768, 256},
        {320, 1024, 256}, {320, 256, 1024}, {480, 256, 256}, {480, 1024, 256}, {400, 1536, 512},
        {400, 512, 512},  {400, 2048, 512}, {400, 512, 2048}};
    enum { SAMPLES = 7 };
    printf("qkv %s, %d thread(s): the packed GEMM packing W at each product against from its copy, median of %d\n",
           qkv_version(), qkv_get_num_threads(), SAMPLES);
    printf("%-18s %10s %12s %12s %9s\n", "M x N x K", "pack GF/s", "copy col", "copy rows", "pack/copy");
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const int64_t m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
        qkv_real *a, *b, *c;
        if (!operands(m, n, k, &a, &b, &c)) return 1;
        const size_t floats = qkv__gemm_packed_copy_floats(n, k);
        float *copy = aligned_alloc(64, (sizeof(float) * floats + 63) & ~(size_t)63);
        if (!copy || !qkv__gemm_packed_nt_copy(m, n, k, a, k, b, k, copy, true, NULL, c, n)) {
            fprintf(stderr, "bench_gemm: --packed-copy: out of memory\n");
            return 1;
        }
        const int64_t reps = 1 + 100000000 / (m * n * k);
        double t[3][SAMPLES];
        for (int pass = 0; pass < SAMPLES + 1; pass++)
            for (int which = 0; which < 3; which++) { /* packing W, the copy by columns, by rows */
                qkv__gemm_packed_column_rows(which == 1 ? INT64_MAX : which == 2 ? 0 : -1);
                const double t0 = bench_now();
                for (int64_t r = 0; r < reps; r++)
                    if (which == 0) qkv_gemm(false, true, m, n, k, 1, a, k, b, k, 0, c, n);
                    else qkv__gemm_packed_nt_copy(m, n, k, a, k, b, k, copy, false, NULL, c, n);
                if (pass >= 1) t[which][pass - 1] = (bench_now() - t0) / (double)reps;
            }
        qkv__gemm_packed_column_rows(-1);
        for (int which = 0; which < 3; which++) qsort(t[which], SAMPLES, sizeof(double), cmp_double);
        const double flop = 2.0 * (double)m * (double)n * (double)k * 1e-9, best = fmin(t[1][SAMPLES / 2], t[2][SAMPLES / 2]);
        char dims[48];
        snprintf(dims, sizeof dims, "%lldx%lldx%lld", (long long)m, (long long)n, (long long)k);
        printf("%-18s %10.1f %12.1f %12.1f %8.3fx\n", dims, flop / t[0][SAMPLES / 2], flop / t[1][SAMPLES / 2],
               flop / t[2][SAMPLES / 2], t[0][SAMPLES / 2] / best);
        free(a), free(b), free(c), free(copy);
    }
    return 0;
#else
    fprintf(stderr, "bench_gemm: --packed-copy: the packed GEMM is a float kernel\n");
    return 1;
#endif
}

static int decode_step(void) {
    enum { LAYERS = 6, PER_LAYER = 6, N_W = LAYERS * PER_LAYER + 1, PASSES = 15, WARMUP = 3, MAX_M = 96 };
    static const int64_t layer_shapes[PER_LAYER][2] = {{1536, 512}, {512, 512}, {512, 512},
                                                        {512, 512}, {2048, 512}, {512, 2048}}; /* (N, K) */
    qkv_real *w[N_W] = {0};
    float *panels[N_W] = {0}; /* the weight panels' copies, where the CPU runs them */
    int64_t wn[N_W], wk[N_W];
#ifndef QKV_DOUBLE
    const int impls = qkv__gemm_panels_available() ? 3 : 2;
#else
    const int impls = 2;
#endif
    double bytes = 0, macs_per_row = 0;
    for (int i = 0; i < N_W; i++) {
        wn[i] = i < LAYERS * PER_LAYER ? layer_shapes[i % PER_LAYER][0] : 8000;
        wk[i] = i < LAYERS * PER_LAYER ? layer_shapes[i % PER_LAYER][1] : 512;
        const size_t size = sizeof(qkv_real) * (size_t)(wn[i] * wk[i]); /* a multiple of 64 */
        if (!(w[i] = aligned_alloc(64, size))) {
            fprintf(stderr, "bench_gemm: out of memory\n");
            for (int j = 0; j < i; j++) free(w[j]);
            return 1;
        }
        for (int64_t j = 0; j < wn[i] * wk[i]; j++) w[i][j] = (qkv_real)((j % 13) * 0.01 - 0.06);
#ifndef QKV_DOUBLE
        if (impls == 3 && !(panels[i] = aligned_alloc(64, sizeof(float) * qkv__panels_floats(wn[i], wk[i])))) {
            fprintf(stderr, "bench_gemm: out of memory\n");
            for (int j = 0; j <= i; j++) free(w[j]), free(panels[j]);
            return 1;
        }
#endif
        bytes += (double)size;
        macs_per_row += (double)(wn[i] * wk[i]);
    }
    qkv_real *a = aligned_alloc(64, sizeof(qkv_real) * MAX_M * 2048), *c = aligned_alloc(64, sizeof(qkv_real) * MAX_M * 8000);
    /* the panels' x transposed, one copy per thread */
    float *at = aligned_alloc(64, sizeof(float) * qkv__panels_at_floats(MAX_M, 2048));
    if (!a || !c || !at) {
        fprintf(stderr, "bench_gemm: out of memory\n");
        for (int i = 0; i < N_W; i++) free(w[i]), free(panels[i]);
        free(a), free(c), free(at);
        return 1;
    }
    for (int64_t i = 0; i < MAX_M * 2048; i++) a[i] = (qkv_real)((i % 17) * 0.01 - 0.08);
#ifndef QKV_DOUBLE
    for (int i = 0; i < N_W && impls == 3; i++) /* filled once: what a session's later steps read */
        qkv__gemm_panels(1, wn[i], wk[i], a, w[i], panels[i], true, NULL, c, at);
#endif
    printf("qkv %s, %d thread(s); a config-B decoding step's weights: %.1f MB, streamed each pass\n", qkv_version(),
           qkv_get_num_threads(), bytes / 1e6);
    printf("%-6s %-10s %10s %10s %10s\n", "rows", "impl", "ms/pass", "GB/s", "GFLOP/s");
    static const int64_t rows[] = {1, 4, 8, 16, 80};
    static const char *const names[3] = {"qkv", "cblas", "panels"};
    for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
        const int64_t m = rows[r];
        double t[3][PASSES];
        for (int pass = 0; pass < WARMUP + PASSES; pass++)
            for (int which = 0; which < impls; which++) { /* alternate: drift hits all alike */
                const double t0 = bench_now();
                for (int i = 0; i < N_W; i++) {
#ifndef QKV_DOUBLE
                    if (which == 2) {
                        qkv__gemm_panels(m, wn[i], wk[i], a, w[i], panels[i], false, NULL, c, at);
                        continue;
                    }
#endif
                    run(which ? IMPL_CBLAS : IMPL_QKV, true, m, wn[i], wk[i], a, w[i], c);
                }
                if (pass >= WARMUP) t[which][pass - WARMUP] = bench_now() - t0;
            }
        for (int which = 0; which < impls; which++) {
            qsort(t[which], PASSES, sizeof(double), cmp_double);
            const double med = t[which][PASSES / 2];
            printf("%-6lld %-10s %10.2f %10.1f %10.1f\n", (long long)m, names[which], med * 1e3,
                   bytes / med / 1e9, 2 * macs_per_row * (double)m / med / 1e9);
        }
    }
    for (int i = 0; i < N_W; i++) free(w[i]), free(panels[i]);
    free(a), free(c), free(at);
    return 0;
}

int main(int argc, char **argv) {
    bench_blas_kernels(argv);
    int threads = 0, lanes = 0;
    double seconds = 1.0;
    bool with_blocked = true, want_ceiling = false, json = false, decode = false, decode_stream = false,
         rows_table = false, packed = false, modes = false, copy = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads")) {
            if (!cli_int_option(ME, argc, argv, &i, 1, 1024, &threads)) return 2;
        } else if (!strcmp(argv[i], "--lanes")) {
            if (!cli_int_option(ME, argc, argv, &i, 8, 16, &lanes)) return 2;
            if (lanes != 8 && lanes != 16) {
                fprintf(stderr, "bench_gemm: --lanes takes 8 or 16, not %d\n", lanes);
                return 2;
            }
        } else if (!strcmp(argv[i], "--seconds")) {
            if (!cli_real_option(ME, argc, argv, &i, 0, 3600, true, &seconds)) return 2;
        } else if (!strcmp(argv[i], "--no-blocked")) with_blocked = false;
        else if (!strcmp(argv[i], "--ceiling")) want_ceiling = true;
        else if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "--decode")) decode = true;
        else if (!strcmp(argv[i], "--decode-step")) decode_stream = true;
        else if (!strcmp(argv[i], "--few-rows")) rows_table = true;
        else if (!strcmp(argv[i], "--packed")) packed = true;
        else if (!strcmp(argv[i], "--packed-modes")) modes = true;
        else if (!strcmp(argv[i], "--packed-copy")) copy = true;
        else {
            fprintf(stderr, "usage: bench_gemm [--threads N] [--seconds S] [--no-blocked] [--decode]\n"
                            "       bench_gemm --decode-step [--threads N] [--lanes 8|16]\n"
                            "       bench_gemm --few-rows [--threads N] [--lanes 8|16]\n"
                            "       bench_gemm --packed [--threads N]\n"
                            "       bench_gemm --packed-modes [--threads N]\n"
                            "       bench_gemm --packed-copy [--threads N]\n"
                            "       bench_gemm --ceiling [--threads N] [--json]\n");
            return 2;
        }
    }
#ifndef QKV_WITH_BLAS
    fprintf(stderr, "bench_gemm: this build has no BLAS (QKV_WITH_BLAS=OFF): there is no cblas_sgemm to compare with\n");
    return 1;
#endif
    qkv_set_num_threads(threads);
    if (lanes) {
        if (lanes == 16 && !__builtin_cpu_supports("avx512f")) {
            fprintf(stderr, "bench_gemm: --lanes 16 needs a CPU with AVX-512F\n");
            return 1;
        }
        qkv__gemm_small_m_lanes(lanes);
    }
    if (want_ceiling) return ceiling(json);
    if (decode_stream) return decode_step();
    if (rows_table) return few_rows();
    if (packed) return packed_table();
    if (modes) return packed_modes();
    if (copy) return packed_copy();
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
