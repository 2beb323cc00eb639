/*
 * kernels/work_claim.h: a team's threads taking units of work (panels of a product) in shrinking
 * chunks from a shared counter, instead of equal static shares.
 *
 *   chunk = min(left, max_chunk, max(2, left / (2 team)))       left: units not yet claimed
 *
 * Why: on a shared machine one thread is often slowed by another process for a while; with equal
 * shares the other finishes first and waits at the region's end (libgomp's spin). Claimed chunks
 * halve as the work runs out, so the slowed thread leaves at most a small chunk for the team to
 * wait on (Polychronopoulos & Kuck's guided self-scheduling, 1987). Only for work whose results do
 * not depend on which thread computes which unit: the kernels using it compute every element of a
 * chunk alone, in the same order, whoever claims it.
 */
#ifndef QKV_KERNELS_WORK_CLAIM_H
#define QKV_KERNELS_WORK_CLAIM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* The next chunk [*u0, *u1) of units [0, total), counted from `base` on the counter (which can run
 * on over several rounds of `total` units each); false when none is left. Relaxed atomics: the
 * units are disjoint, and the region's barrier orders everything else. */
static inline bool qkv__claim_chunk(_Atomic int64_t *claimed, int64_t base, int64_t total, int team,
                                    int64_t max_chunk, int64_t *u0, int64_t *u1) {
    int64_t cur = atomic_load_explicit(claimed, memory_order_relaxed), chunk;
    do {
        const int64_t left = base + total - cur, share = left / (2 * (int64_t)team);
        if (left <= 0) return false;
        chunk = share > 2 ? share : 2;
        if (chunk > max_chunk) chunk = max_chunk;
        if (chunk > left) chunk = left;
    } while (!atomic_compare_exchange_weak_explicit(claimed, &cur, cur + chunk, memory_order_relaxed,
                                                    memory_order_relaxed));
    *u0 = cur - base;
    *u1 = cur - base + chunk;
    return true;
}

#endif
