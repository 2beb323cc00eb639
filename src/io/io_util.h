/*
 * io_util.h (internal): small helpers shared by the safetensors reader/writer and the parameter
 * checkpoint code: host byte order and shape formatting.
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

#endif
