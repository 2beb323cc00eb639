/*
 * test_hugepages.c: transparent huge pages for the parameter blocks (src/core/hugepages.c).
 *
 * - Advice changes no contents: a fresh anonymous mapping advised at an unaligned address still
 *   reads zero everywhere and keeps what is written; NULL and buffers under 2 MiB are ignored.
 *   (A mapping of its own, so the advice cannot reach heap memory that later allocations share.)
 * - A finalized table's parameter blocks of 32 MiB and more carry the advice: their mapping in
 *   /proc/self/smaps has the "hg" flag (whether the kernel then finds free huge pages is up to it,
 *   so AnonHugePages is not checked); a small table's blocks do not. Skipped without THP or Linux.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "core/internal.h"
#include "testutil.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

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
#if defined(__linux__)
    const size_t n = ((size_t)6 << 20) + 12345;
    void *map = mmap(NULL, n + 64, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(map != MAP_FAILED);
    if (map == MAP_FAILED) return;
    unsigned char *p = (unsigned char *)map + 24; /* not even 64-aligned */
    qkv__advise_huge_pages(p, n);
    size_t nonzero = 0;
    for (size_t i = 0; i < n; i++) nonzero += p[i] != 0;
    CHECK_MSG(nonzero == 0, "%zu bytes of an advised calloc'd buffer are not zero", nonzero);
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 31 + 7);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) wrong += p[i] != (unsigned char)(i * 31 + 7);
    CHECK_MSG(wrong == 0, "%zu bytes of an advised buffer did not keep what was written", wrong);
    munmap(map, n + 64);
#endif
}

/* Whether the mapping of /proc/self/smaps that holds address `at` carries the "hg" flag
 * (MADV_HUGEPAGE was applied to it): 1 yes, 0 no, -1 when smaps cannot be read. */
static int advised_huge(uintptr_t at) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[1024];
    bool inside = false;
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        char *dash = strchr(line, '-'), *space = strchr(line, ' ');
        if (dash && space && dash < space && sscanf(line, "%lx-%lx ", &a, &b) == 2)
            inside = a <= at && at < b;
        else if (inside && !strncmp(line, "VmFlags:", 8))
            found = strstr(line, " hg") != NULL;
    }
    fclose(f);
    return found;
}

TEST(hugepages_advised_on_large_parameter_blocks) {
#if !defined(__linux__)
    SKIP("madvise(MADV_HUGEPAGE) is Linux's");
#else
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) SKIP("this kernel has no transparent huge pages");
    fclose(f);
    qkv_params *p = NULL;
    CHECK_OK(qkv_params_new(&p));
    qkv_tensor *big = NULL, *small = NULL;
    CHECK_OK(qkv_params_add(p, "big", 2, (int64_t[]){4096, 4096}, &big)); /* 64 MiB in float */
    CHECK_OK(qkv_params_finalize(p));
    if (big && big->data) {
        const uintptr_t mid = (uintptr_t)big->data + sizeof(qkv_real) * 4096 * 2048;
        const int hg = advised_huge(mid);
        if (hg < 0) {
            qkv_params_free(p);
            SKIP("/proc/self/smaps cannot be read");
        }
        CHECK_MSG(hg == 1, "the middle of a %zu MiB parameter block is not advised for huge pages",
                  sizeof(qkv_real) * 4096 * 4096 >> 20);
    }
    qkv_params_free(p);
    /* a table under 32 MiB may share the heap with other allocations: not advised */
    CHECK_OK(qkv_params_new(&p));
    CHECK_OK(qkv_params_add(p, "small", 2, (int64_t[]){1024, 1024}, &small));
    CHECK_OK(qkv_params_finalize(p));
    if (small && small->data) CHECK(advised_huge((uintptr_t)small->data + (sizeof(qkv_real) << 19)) == 0);
    qkv_params_free(p);
#endif
}
