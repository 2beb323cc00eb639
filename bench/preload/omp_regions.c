/*
 * omp_regions.c: where a run's OpenMP parallel regions spend their time, and which of them run on
 * one thread while the others wait.
 *
 *   bash bench/omp_regions.sh build/release/bench_decode --config B --threads 2 --reps 3 \
 *       --search greedy --no-uncached --phases
 *
 * An LD_PRELOAD shim in front of libgomp's GOMP_parallel (what GCC emits for `#pragma omp
 * parallel`, `parallel for` included): every call is passed on to the real one (dlsym(RTLD_NEXT))
 * and timed on the calling thread, by the outlined function it runs (`fwd._omp_fn.0`) and by
 * whether its team has one thread (an `if` clause that kept a small loop serial: the other threads
 * spin in libgomp meanwhile) or more. At exit it prints to stderr, per function, the calls and
 * seconds of each kind, and the process's wall time; the functions are printed as offsets into
 * their module, which bench/omp_regions.sh turns into names with nm (static functions have no
 * dynamic symbol). Wall time between regions, on the main thread alone, is the process time less
 * all regions. A benchmark tool: built with GCC's OpenMP (libgomp) only (CMakeLists.txt).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

typedef void (*gomp_parallel_fn)(void (*)(void *), void *, unsigned, unsigned);

enum { MAX_FUNCTIONS = 256 };

typedef struct {
    void (*fn)(void *);
    uint64_t calls[2]; /* [0] one-thread teams, [1] larger ones */
    double seconds[2];
} region_tally;

static region_tally tally[MAX_FUNCTIONS];
static int n_tally;
static double process_start;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

__attribute__((constructor)) static void start(void) {
    process_start = now();
}

/* Regions are entered from the main thread only (qkv never nests them), so no lock. */
void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags) {
    static gomp_parallel_fn real;
    if (!real) real = (gomp_parallel_fn)dlsym(RTLD_NEXT, "GOMP_parallel");
    const double t0 = now();
    real(fn, data, num_threads, flags);
    const double dt = now() - t0;
    int i = 0;
    while (i < n_tally && tally[i].fn != fn)
        i++;
    if (i == MAX_FUNCTIONS) return;
    if (i == n_tally) tally[n_tally++].fn = fn;
    const int many = num_threads != 1; /* 0: the default team, 1: an if clause that was false */
    tally[i].calls[many]++;
    tally[i].seconds[many] += dt;
}

__attribute__((destructor)) static void report(void) {
    double one = 0, many = 0;
    fprintf(stderr, "omp_regions: module offset calls-1 s-1 calls-N s-N\n");
    for (int i = 0; i < n_tally; i++) {
        Dl_info info;
        const int found = dladdr((void *)tally[i].fn, &info);
        fprintf(stderr, "omp_regions: %s %#lx %llu %.6f %llu %.6f\n",
                found && info.dli_fname && *info.dli_fname ? info.dli_fname : "?",
                found ? (unsigned long)((char *)(void *)tally[i].fn - (char *)info.dli_fbase) : 0UL,
                (unsigned long long)tally[i].calls[0], tally[i].seconds[0],
                (unsigned long long)tally[i].calls[1], tally[i].seconds[1]);
        one += tally[i].seconds[0];
        many += tally[i].seconds[1];
    }
    fprintf(stderr, "omp_regions: total one-thread %.6f s, parallel %.6f s, process %.6f s\n", one,
            many, now() - process_start);
}
