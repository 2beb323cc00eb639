/*
 * test_hugepages.c: transparent huge pages for the parameter blocks (src/core/hugepages.c).
 *
 * - Advice changes no contents: a calloc'd buffer advised at an unaligned address still reads
 *   zero everywhere and keeps what is written; NULL and buffers under 2 MiB are ignored.
 * - Where the kernel offers huge pages on request (transparent_hugepage "madvise" or "always"),
 *   the parameter blocks of a finalized table are backed by them once touched: /proc/self/smaps
 *   shows AnonHugePages inside the data block. Skipped where THP is off or not Linux.
 */
#include "core/internal.h"
#include "testutil.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TEST(hugepages_advice_keeps_contents) {
    qkv__advise_huge_pages(NULL, (size_t)8 << 20);
    char small[4096];
    memset(small, 7, sizeof small);
    qkv__advise_huge_pages(small, sizeof small); /* under 2 MiB: ignored */
    CHECK(small[0] == 7 && small[sizeof small - 1] == 7);
    const size_t n = ((size_t)6 << 20) + 12345;
    unsigned char *raw = calloc(1, n + 64);
    CHECK(raw != NULL);
    if (!raw) return;
    unsigned char *p = raw + 24; /* not even 64-aligned */
    qkv__advise_huge_pages(p, n);
    size_t nonzero = 0;
    for (size_t i = 0; i < n; i++) nonzero += p[i] != 0;
    CHECK_MSG(nonzero == 0, "%zu bytes of an advised calloc'd buffer are not zero", nonzero);
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 31 + 7);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) wrong += p[i] != (unsigned char)(i * 31 + 7);
    CHECK_MSG(wrong == 0, "%zu bytes of an advised buffer did not keep what was written", wrong);
    free(raw);
}

/* kB of AnonHugePages in the mappings of /proc/self/smaps that overlap [lo, hi); -1 when the
 * file cannot be read. */
static long huge_kib_in(uintptr_t lo, uintptr_t hi) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    long kib = 0;
    bool inside = false;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        long v;
        if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' '))
            inside = a < hi && b > lo;
        else if (inside && sscanf(line, "AnonHugePages: %ld kB", &v) == 1)
            kib += v;
    }
    fclose(f);
    return kib;
}

TEST(hugepages_back_the_parameter_blocks) {
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char mode[128] = "";
    if (f) {
        if (!fgets(mode, sizeof mode, f)) mode[0] = 0;
        fclose(f);
    }
    if (!strstr(mode, "[madvise]") && !strstr(mode, "[always]"))
        SKIP("transparent huge pages are off (or not Linux)");
    qkv_params *p = NULL;
    CHECK_OK(qkv_params_new(&p));
    qkv_tensor *w = NULL;
    CHECK_OK(qkv_params_add(p, "w", 2, (int64_t[]){2048, 2048}, &w)); /* 16 MiB */
    CHECK_OK(qkv_params_finalize(p));
    if (!w || !w->data) {
        qkv_params_free(p);
        return;
    }
    qkv_real *x = w->data;
    for (int64_t i = 0; i < 2048 * 2048; i++) x[i] = (qkv_real)1;
    const uintptr_t lo = (uintptr_t)x, hi = lo + sizeof(qkv_real) * 2048 * 2048;
    const long kib = huge_kib_in(lo, hi);
    CHECK_MSG(kib > 0, "no huge page backs the 16 MiB parameter block (AnonHugePages %ld kB; THP %s)", kib,
              mode);
    qkv_params_free(p);
}
