/*
 * split.c: the split rule every data set of qkv uses (docs/data.md, "Split rule"):
 *
 *   h = FNV-1a 32-bit(key): h = 0x811C9DC5; for each byte b: h = (h ^ b) * 0x01000193 mod 2^32
 *   bucket = h % 100;  bucket < train_end -> train, < dev_end -> dev, else test.
 *
 * Reference: Fowler, Noll, Vo, "FNV hash" (IETF draft-eastlake-fnv). A pure function of the key,
 * so a word (with all its variants) or a sentence lands in the same split on every machine.
 */
#include "data_internal.h"

uint32_t qkv_fnv1a32(const void *data, size_t len) {
    const unsigned char *p = data;
    uint32_t h = 0x811C9DC5u;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x01000193u;
    }
    return h;
}

qkv_split qkv_split_of(const char *key, size_t len, int train_end, int dev_end) {
    uint32_t bucket = qkv_fnv1a32(key, len) % 100u;
    if ((int64_t)bucket < train_end) return QKV_SPLIT_TRAIN;
    if ((int64_t)bucket < dev_end) return QKV_SPLIT_DEV;
    return QKV_SPLIT_TEST;
}

const char *qkv_split_name(qkv_split s) {
    switch (s) {
    case QKV_SPLIT_TRAIN:
        return "train";
    case QKV_SPLIT_DEV:
        return "dev";
    case QKV_SPLIT_TEST:
        return "test";
    }
    return "?";
}
