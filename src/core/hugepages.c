/*
 * hugepages.c: transparent huge pages for the parameter blocks (madvise MADV_HUGEPAGE).
 *
 * A buffer's first touch costs one page fault per 4 KiB page: the kernel maps and zeroes it. In
 * the KVM guests we measure on, a fault costs 2-10 us of system time when both threads fault at
 * once (they shoot down each other's TLB entries): a config-B training process took ~966,000
 * faults and 9 s of system time before its first step ended, a third of them for the parameter,
 * gradient and Adam blocks (4 x 225 MB). With 2 MiB pages one fault maps 512 times as much, and a
 * stream over the weights (a decoding step reads all of them) walks 512x fewer page-table entries.
 * Where transparent huge pages are set to "madvise" (Debian's default) a region gets them only
 * when asked, hence this call on the parameter blocks of 32 MiB and more (fresh mappings of their
 * own: glibc mmaps every allocation above 32 MiB), right after their calloc and before anything
 * touches them: training starts faster, with less system time, the same steps and peak RSS
 * (BENCHMARKS.md). Not on the step arena or a session's caches: there the 2 MiB faults made config
 * B's encoder slower (presumably each fault zeroing 2 MiB that the encoder then reads back from
 * memory, where a 4 KiB fault is zeroed just before its use). Advice only: the 2 MiB-aligned part of the
 * buffer is advised, a failure or a kernel without THP changes nothing, no result depends on it,
 * and untouched memory stays unallocated (a decoding model's gradient and moment blocks).
 *
 * Reference: Linux Documentation/admin-guide/mm/transhuge.rst.
 */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#include "internal.h"

#include <stdint.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

void qkv__advise_huge_pages(void *p, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)2 << 20;
    if (!p || bytes < huge) return;
    const uintptr_t start = ((uintptr_t)p + huge - 1) & ~(huge - 1),
                    end = ((uintptr_t)p + bytes) & ~(huge - 1);
    if (end > start) (void)madvise((void *)start, (size_t)(end - start), MADV_HUGEPAGE);
#else
    (void)p, (void)bytes;
#endif
}
