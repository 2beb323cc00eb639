/*
 * bench_bandwidth.c: the machine's memory bandwidth, with 1 .. N OpenMP threads.
 *
 *   build/release/bench_bandwidth [--mib M] [--threads N] [--reps R] [--json]
 *
 * Two loops over buffers of M MiB (default 100, about one config-B decoding step's fp32 weights,
 * far past the caches), each thread taking a contiguous slice:
 *   read: x ^= a[i] over uint64 words, four 64-byte lines a pass into four vector registers
 *         (a loop compiled per vector width), GB/s = M MiB / seconds. The loop must be
 *         vectorised at the CPU's width or it measures itself, not the memory: a scalar loop
 *         reads no faster than ~17 GB/s even from the L2, and `omp simd` at the baseline's SSE2
 *         width read 128 MiB at 15.5-15.7 GB/s on two Emerald Rapids cores where this loop reads
 *         27.0-27.8 in the same minutes (BENCHMARKS.md, whose read figures of 11.6 GB/s were
 *         a scalar loop's limit);
 *   copy: b[i] = a[i] (read + write), GB/s = 2 M MiB / seconds.
 * Best of R repetitions (default 10) after one untimed pass that faults the pages in.
 * What it is for: the floor of memory-bound work (greedy decoding streams every weight once per
 * step; the element-wise half of a training step reads and writes activations), and how much a
 * second thread adds to it (BENCHMARKS.md). A benchmark, not a test.
 */
#define _POSIX_C_SOURCE 200809L
#include "bench_common.h"
#include "core/internal.h" /* QKV_CLONES */

static const char ME[] = "bench_bandwidth"; /* the program in option messages */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef QKV_WITH_OPENMP
#include <omp.h>
#endif

/* The XOR of a[0 .. n): four 64-byte lines a pass into four registers' worth of lanes (GCC's
 * vector extension; one zmm each in the AVX-512 clone, two ymm or four xmm in the others), in a
 * function compiled per vector width (QKV_CLONES: an OpenMP region's outlined body would get the
 * baseline's SSE2). */
#ifdef __GNUC__
typedef uint64_t line64 __attribute__((vector_size(64)));
QKV_CLONES static uint64_t read_slice(const uint64_t *a, int64_t n) {
    line64 x0 = {0}, x1 = {0}, x2 = {0}, x3 = {0}, v;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        memcpy(&v, a + i, 64), x0 ^= v;
        memcpy(&v, a + i + 8, 64), x1 ^= v;
        memcpy(&v, a + i + 16, 64), x2 ^= v;
        memcpy(&v, a + i + 24, 64), x3 ^= v;
    }
    x0 ^= x1 ^ x2 ^ x3;
    uint64_t x = 0;
    for (int l = 0; l < 8; l++) x ^= x0[l];
    for (; i < n; i++) x ^= a[i];
    return x;
}
#else
static uint64_t read_slice(const uint64_t *a, int64_t n) { /* C11 without GNU's vectors */
    uint64_t x[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) x[l] ^= a[i + l];
    for (; i < n; i++) x[0] ^= a[i];
    for (int l = 1; l < 8; l++) x[0] ^= x[l];
    return x[0];
}
#endif

static uint64_t read_xor(const uint64_t *a, int64_t n) {
    uint64_t x = 0;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel reduction(^ : x)
    {
        const int64_t team = omp_get_num_threads(), id = omp_get_thread_num();
        const int64_t i0 = n * id / team, i1 = n * (id + 1) / team;
        x ^= read_slice(a + i0, i1 - i0);
    }
#else
    x = read_slice(a, n);
#endif
    return x;
}

static void copy(const uint64_t *a, uint64_t *b, int64_t n) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (int64_t i = 0; i < n; i++) b[i] = a[i];
}

int main(int argc, char **argv) {
    double mib = 100;
    int max_threads = 2, reps = 10;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mib")) {
            if (!cli_real_option(ME, argc, argv, &i, 1, 65536, false, &mib)) return 2;
        } else if (!strcmp(argv[i], "--threads")) {
            if (!cli_int_option(ME, argc, argv, &i, 1, 1024, &max_threads)) return 2;
        } else if (!strcmp(argv[i], "--reps")) {
            if (!cli_int_option(ME, argc, argv, &i, 1, 10000, &reps)) return 2;
        } else if (!strcmp(argv[i], "--json")) json = true;
        else {
            fprintf(stderr, "usage: bench_bandwidth [--mib M] [--threads N] [--reps R] [--json]\n");
            return 2;
        }
    }
    if (!(mib >= 1 && mib <= 65536) || max_threads < 1 || max_threads > 1024 || reps < 1 || reps > 10000) {
        fprintf(stderr, "bench_bandwidth: --mib must be in [1, 65536], --threads in [1, 1024], --reps in [1, 10000]\n");
        return 2;
    }
    const int64_t n = (int64_t)(mib * 1048576.0 / sizeof(uint64_t));
    const double bytes = (double)n * sizeof(uint64_t);
    uint64_t *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    if (!a || !b) {
        fprintf(stderr, "bench_bandwidth: cannot allocate 2 x %.0f MiB\n", mib);
        return 1;
    }
    for (int64_t i = 0; i < n; i++) a[i] = (uint64_t)i * 0x9E3779B97F4A7C15ull;
    memset(b, 0, (size_t)n * sizeof *b);
    uint64_t sink = 0;
    if (!json) printf("buffers of %.0f MiB, best of %d\n", mib, reps);
    for (int t = 1; t <= max_threads; t++) {
#ifdef QKV_WITH_OPENMP
        omp_set_num_threads(t);
#else
        if (t > 1) break;
#endif
        double best_read = 0, best_copy = 0;
        sink ^= read_xor(a, n);
        copy(a, b, n);
        for (int r = 0; r < reps; r++) {
            double t0 = bench_now();
            sink ^= read_xor(a, n);
            double read = bytes / (bench_now() - t0) / 1e9;
            t0 = bench_now();
            copy(a, b, n);
            double cp = 2 * bytes / (bench_now() - t0) / 1e9;
            if (read > best_read) best_read = read;
            if (cp > best_copy) best_copy = cp;
        }
        if (json)
            printf("{\"mode\": \"bandwidth\", \"threads\": %d, \"mib\": %.0f, \"read_gb_s\": %.2f, \"copy_gb_s\": %.2f}\n", t,
                   mib, best_read, best_copy);
        else
            printf("%d thread(s): read %.1f GB/s, copy (read + write) %.1f GB/s\n", t, best_read, best_copy);
    }
    free(a);
    free(b);
    volatile uint64_t keep = sink; /* the reads have an observable result */
    (void)keep;
    return 0;
}
