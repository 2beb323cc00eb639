/*
 * io_util.h (internal): small helpers shared by the safetensors reader/writer and the parameter
 * checkpoint code: host byte order, shape formatting and the overflow-checked byte size of a shape.
 */
#ifndef QKV_IO_UTIL_H
#define QKV_IO_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* safetensors data is little-endian; on a big-endian host every element is byte-swapped. */
static inline bool qkv__host_little_endian(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* "(2, 3)" ("()" for a scalar) into buf. */
static inline void qkv__shape64_str(const int64_t *shape, int ndim, char *buf, size_t size) {
    size_t k = (size_t)snprintf(buf, size, "(");
    for (int d = 0; d < ndim && k < size; d++)
        k += (size_t)snprintf(buf + k, size - k, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (k < size) snprintf(buf + k, size - k, ")");
}

/* numel and nbytes of a shape with overflow checks: numel <= INT64_MAX, nbytes <= UINT64_MAX. */
static inline bool qkv__st_sizes(const int64_t *shape, int ndim, size_t elem, uint64_t *numel,
                                 uint64_t *nbytes) {
    uint64_t n = 1;
    for (int d = 0; d < ndim; d++)
        if (shape[d] == 0) n = 0;
    for (int d = 0; d < ndim && n; d++) {
        uint64_t s = (uint64_t)shape[d];
        if (n > (uint64_t)INT64_MAX / s) return false;
        n *= s;
    }
    if (n && n > UINT64_MAX / elem) return false;
    *numel = n;
    *nbytes = n * elem;
    return true;
}

#endif
