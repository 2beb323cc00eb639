/*
 * bench_philox.c: how fast dropout's random words are made, per implementation.
 *
 *   build/release/bench_philox [--words-m M] [--reps R]
 *
 * qkv__philox_blocks (src/core/rng.c) makes the words of 16 Philox4x32-10 blocks at a time (64
 * words: dropout's groups of 64 elements, one word each). On one thread, each implementation the
 * CPU has in turn (AVX-512F, AVX2, portable C), M million words (default 128) per repetition,
 * the blocks' counters running on as a dropout's do; prints the best of R (default 5) in ns per
 * word, and a checksum of the words, equal across implementations (they make the same words;
 * tests/core/test_core.c checks that word for word). A benchmark, not a test (BENCHMARKS.md).
 */
#define _POSIX_C_SOURCE 200809L
#include "bench_common.h"
#include "core/internal.h" /* qkv__philox_blocks and its switch */

static const char ME[] = "bench_philox"; /* the program in option messages */

#include <stdint.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    int words_m = 128, reps = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--words-m")) {
            if (!cli_int_option(ME, argc, argv, &i, 1, 100000, &words_m)) return 2;
        } else if (!strcmp(argv[i], "--reps")) {
            if (!cli_int_option(ME, argc, argv, &i, 1, 1000, &reps)) return 2;
        } else {
            fprintf(stderr, "usage: bench_philox [--words-m M] [--reps R]\n");
            return 2;
        }
    }
    const int64_t calls = (int64_t)words_m * 1000000 / (4 * QKV_PHILOX_LANES);
    static const struct {
        const char *name;
        int widest; /* qkv__philox_widest; 0: the portable C version, called directly */
    } impls[] = {{"AVX-512F", 512}, {"AVX2", 256}, {"portable C", 0}};
    printf("qkv %s: Philox4x32-10 words for dropout, one thread, %d M words, best of %d\n", qkv_version(),
           words_m, reps);
    printf("%-12s %12s %20s\n", "version", "ns / word", "checksum");
    for (size_t k = 0; k < sizeof impls / sizeof *impls; k++) {
        if ((impls[k].widest == 512 && !__builtin_cpu_supports("avx512f")) ||
            (impls[k].widest == 256 && !__builtin_cpu_supports("avx2"))) {
            printf("%-12s %12s\n", impls[k].name, "- (CPU)");
            continue;
        }
        qkv__philox_widest(impls[k].widest ? impls[k].widest : 512);
        double best = 0;
        uint64_t sum = 0;
        for (int r = 0; r < reps; r++) {
            uint32_t out[4 * QKV_PHILOX_LANES];
            uint64_t s = 0;
            const double t0 = bench_now();
            for (int64_t c = 0; c < calls; c++) {
                if (impls[k].widest)
                    qkv__philox_blocks(42, 7, 3, (uint64_t)c * QKV_PHILOX_LANES, out);
                else
                    qkv__philox_blocks_c(42, 7, 3, (uint64_t)c * QKV_PHILOX_LANES, out);
                s += out[c & (4 * QKV_PHILOX_LANES - 1)];
            }
            const double t = bench_now() - t0;
            if (r == 0 || t < best) best = t;
            sum = s;
        }
        printf("%-12s %12.3f %20llu\n", impls[k].name, best * 1e9 / (double)(calls * 4 * QKV_PHILOX_LANES),
               (unsigned long long)sum);
    }
    qkv__philox_widest(512);
    return 0;
}
