/*
 * kernels/select.h: a branch-free select for loops the compiler should vectorise.
 *
 *   keep_or_zero(v, keep) = keep ? v : +0,   keep in {0, 1}
 *
 * written as an AND of v's bits with 0 or ~0. GCC (12) does not if-convert `c ? v : 0` on
 * floats (it keeps a branch per element, which mispredicts when c is random, as dropout's is),
 * but it vectorises the integer AND. The result is bit for bit the select's (+0 when dropped).
 *
 * GCC's -O2 vectorises a loop only when no scalar epilogue is needed (its "very cheap" cost
 * model), so callers run the loop over QKV_VECTOR_BODY(n) elements, a multiple of 16 (the AVX-512
 * width of floats, two AVX2 vectors), and finish the rest in a second loop.
 */
#ifndef QKV_KERNELS_SELECT_H
#define QKV_KERNELS_SELECT_H

#include "../core/internal.h"

#include <stdint.h>
#include <string.h>

#ifdef QKV_DOUBLE
typedef uint64_t qkv__real_bits;
#else
typedef uint32_t qkv__real_bits;
#endif

static inline qkv_real keep_or_zero(qkv_real v, qkv__real_bits keep) {
    qkv__real_bits bits;
    memcpy(&bits, &v, sizeof bits);
    bits &= (qkv__real_bits)0 - keep;
    memcpy(&v, &bits, sizeof v);
    return v;
}

#define QKV_VECTOR_BODY(n) ((n) & ~(int64_t)15)

#endif
