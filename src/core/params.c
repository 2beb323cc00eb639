/*
 * params.c: the parameter table. Parameters are registered by name and shape, then finalize
 * lays them out in registration order in four contiguous 64-byte-aligned blocks: values,
 * gradients, and the optimiser's two moments. One memset zeroes every gradient, one loop updates
 * every parameter, and (later) one all-reduce averages every gradient.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>

struct qkv_params {
    qkv_tensor **tensors;
    char **names;
    int64_t count, cap;
    int64_t numel;
    int64_t *offsets; /* element offset of each tensor inside the blocks */
    qkv_real *blocks[4]; /* 64-byte aligned inside raw_blocks */
    void *raw_blocks[4];
    bool finalized;
    int64_t *slots; /* name hash table: open addressing, linear probing, -1 empty, at most half full */
    uint64_t mask;  /* slots - 1 (a power of two minus one); slots is NULL while the table is empty */
};

/* FNV-1a 64 of a name. */
static uint64_t name_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3u;
    return h;
}

/* The slot holding name, or the empty slot where it would go. */
static uint64_t name_slot(const qkv_params *p, const char *name) {
    uint64_t i = name_hash(name) & p->mask;
    while (p->slots[i] >= 0 && strcmp(p->names[p->slots[i]], name) != 0) i = (i + 1) & p->mask;
    return i;
}

/* Room in the hash table for one more name (doubling it and rehashing when half full). */
static bool name_reserve(qkv_params *p) {
    if (p->slots && (uint64_t)(p->count + 1) * 2 <= p->mask + 1) return true;
    const uint64_t n = p->slots ? 2 * (p->mask + 1) : 64;
    int64_t *slots = malloc(n * sizeof *slots);
    if (!slots) return false;
    for (uint64_t i = 0; i < n; i++) slots[i] = -1;
    free(p->slots);
    p->slots = slots;
    p->mask = n - 1;
    for (int64_t k = 0; k < p->count; k++) p->slots[name_slot(p, p->names[k])] = k;
    return true;
}

qkv_status qkv_params_new(qkv_params **out) {
    if (!out) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_params_new: out is NULL");
    *out = calloc(1, sizeof **out);
    return *out ? QKV_OK : QKV_ERROR(QKV_ERR_OOM, "qkv_params_new: out of memory");
}

void qkv_params_free(qkv_params *p) {
    if (!p) return;
    for (int64_t i = 0; i < p->count; i++) {
        free(p->tensors[i]);
        free(p->names[i]);
    }
    free(p->tensors);
    free(p->names);
    free(p->offsets);
    for (int b = 0; b < 4; b++) free(p->raw_blocks[b]);
    free(p->slots);
    free(p);
}

/* By hash: a model file's header may ask for tens of thousands of tensors, and a linear search
 * per registration made building such a model quadratic (2.5 s for 2 x 1000 layers). */
qkv_tensor *qkv_params_find(const qkv_params *p, const char *name) {
    if (!p || !name || !p->slots) return NULL;
    const int64_t k = p->slots[name_slot(p, name)];
    return k >= 0 ? p->tensors[k] : NULL;
}

qkv_status qkv_params_add(qkv_params *p, const char *name, int ndim, const int64_t *shape,
                          qkv_tensor **out) {
    if (out) *out = NULL;
    if (!p || !name || !name[0] || (ndim > 0 && !shape))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_params_add: NULL or empty argument");
    if (p->finalized)
        return QKV_ERROR(QKV_ERR_STATE, "qkv_params_add: '%s' added after qkv_params_finalize", name);
    if (ndim < 0 || ndim > QKV_MAX_DIMS)
        return QKV_ERROR(QKV_ERR_SHAPE, "qkv_params_add: '%s' has %d dims (at most %d)", name, ndim,
                         QKV_MAX_DIMS);
    if (qkv_params_find(p, name))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_params_add: duplicate parameter name '%s'", name);
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] <= 0 || n > INT64_MAX / 16 / shape[d])
            return QKV_ERROR(QKV_ERR_SHAPE, "qkv_params_add: '%s' dim %d is %lld", name, d,
                             (long long)shape[d]);
        n *= shape[d];
    }
    /* the table as a whole keeps the bound of one tensor, so its byte size never wraps either */
    if (n > INT64_MAX / 16 - p->numel)
        return QKV_ERROR(QKV_ERR_SHAPE, "qkv_params_add: '%s' (%lld values) makes the table larger than 2^59 values",
                         name, (long long)n);
    if (!name_reserve(p)) return QKV_ERROR(QKV_ERR_OOM, "qkv_params_add: out of memory");
    if (p->count == p->cap) {
        int64_t cap = p->cap ? 2 * p->cap : 32;
        qkv_tensor **t = realloc(p->tensors, (size_t)cap * sizeof *t);
        if (!t) return QKV_ERROR(QKV_ERR_OOM, "qkv_params_add: out of memory");
        p->tensors = t;
        char **nm = realloc(p->names, (size_t)cap * sizeof *nm);
        if (!nm) return QKV_ERROR(QKV_ERR_OOM, "qkv_params_add: out of memory");
        p->names = nm;
        p->cap = cap;
    }
    qkv_tensor *t = calloc(1, sizeof *t);
    char *copy = malloc(strlen(name) + 1);
    if (!t || !copy) {
        free(t);
        free(copy);
        return QKV_ERROR(QKV_ERR_OOM, "qkv_params_add: out of memory");
    }
    strcpy(copy, name);
    t->dtype = QKV_REAL;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
    qkv__set_contiguous_strides(t);
    t->flags = QKV_PARAM | QKV_REQUIRES_GRAD;
    t->name = copy;
    p->tensors[p->count] = t;
    p->names[p->count] = copy;
    p->slots[name_slot(p, copy)] = p->count;
    p->count++;
    p->numel += n;
    if (out) *out = t;
    return QKV_OK;
}

qkv_status qkv__params_add_prefixed(qkv_params *p, const char *prefix, const char *name, int ndim,
                                    const int64_t *shape, qkv_tensor **out) {
    char full[256];
    int n = snprintf(full, sizeof full, "%s%s", prefix ? prefix : "", name);
    if (n < 0 || (size_t)n >= sizeof full)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "parameter name '%s%s' is too long", prefix ? prefix : "", name);
    return qkv_params_add(p, full, ndim, shape, out);
}

qkv_status qkv_params_finalize(qkv_params *p) {
    if (!p) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_params_finalize: NULL table");
    if (p->finalized) return QKV_ERROR(QKV_ERR_STATE, "qkv_params_finalize: called twice");
    p->offsets = malloc((size_t)(p->count ? p->count : 1) * sizeof *p->offsets);
    if (!p->offsets) return QKV_ERROR(QKV_ERR_OOM, "qkv_params_finalize: out of memory");
    size_t bytes = (size_t)(p->numel ? p->numel : 1) * sizeof(qkv_real);
    bytes = (bytes + QKV_ARENA_ALIGN - 1) & ~(size_t)(QKV_ARENA_ALIGN - 1);
    /* calloc, aligned by hand: its large allocations are fresh pages the kernel zeroes when they
     * are first touched, so the gradient and moment blocks of a model that only decodes cost
     * neither time nor resident memory. (aligned_alloc + memset touched all four: 900 MB written
     * for config B before a decode could start, and 0.95 GB of peak RSS for a 0.23 GB model.) */
    for (int b = 0; b < 4; b++) {
        p->raw_blocks[b] = calloc(1, bytes + QKV_ARENA_ALIGN);
        if (!p->raw_blocks[b])
            return QKV_ERROR(QKV_ERR_OOM, "qkv_params_finalize: out of memory (%zu bytes x 4)", bytes);
        const uintptr_t at = ((uintptr_t)p->raw_blocks[b] + QKV_ARENA_ALIGN - 1) & ~(uintptr_t)(QKV_ARENA_ALIGN - 1);
        p->blocks[b] = (qkv_real *)at;
        /* 2 MiB pages, 512x fewer faults (hugepages.c); only from 32 MiB, glibc's largest mmap
         * threshold, so the block is a fresh mapping of its own and not a part of the heap that
         * calloc may clear and later allocations would share */
        if (bytes >= ((size_t)32 << 20)) qkv__advise_huge_pages(p->blocks[b], bytes);
    }
    int64_t off = 0;
    for (int64_t i = 0; i < p->count; i++) {
        qkv_tensor *t = p->tensors[i];
        p->offsets[i] = off;
        t->data = p->blocks[QKV_BLOCK_DATA] + off;
        t->grad = p->blocks[QKV_BLOCK_GRAD] + off;
        off += qkv_tensor_numel(t);
    }
    p->finalized = true;
    return QKV_OK;
}

int64_t qkv_params_count(const qkv_params *p) { return p ? p->count : 0; }
int64_t qkv_params_numel(const qkv_params *p) { return p ? p->numel : 0; }
qkv_tensor *qkv_params_get(const qkv_params *p, int64_t i) {
    return (p && i >= 0 && i < p->count) ? p->tensors[i] : NULL;
}
qkv_real *qkv_params_block(const qkv_params *p, qkv_param_block which) {
    if (!p || !p->finalized || which < QKV_BLOCK_DATA || which > QKV_BLOCK_V) return NULL;
    return p->blocks[which];
}
void qkv_params_zero_grad(qkv_params *p) {
    if (p && p->finalized) qkv__zero_bytes(p->blocks[QKV_BLOCK_GRAD], (size_t)p->numel * sizeof(qkv_real));
}

/* ---- initialisers --------------------------------------------------------------------------- */

/* Both initialisers give element i the value qkv_rng_uniform / qkv_rng_normal give index i, but
 * draw 16 Philox blocks per qkv__philox_blocks call (64 uniforms, or 32 normals: a normal takes a
 * pair of words) instead of a whole block per element, and spread the groups over the threads:
 * each value depends on its index alone, so none depends on the thread count. */
enum { INIT_GROUP_WORDS = 4 * QKV_PHILOX_LANES, INIT_PARALLEL_MIN = 1 << 16 };

void qkv_init_uniform(qkv_tensor *t, double lo, double hi, uint64_t seed, uint64_t stream) {
    qkv_real *x = (qkv_real *)t->data;
    const int64_t n = qkv_tensor_numel(t), per = INIT_GROUP_WORDS, groups = (n + per - 1) / per;
#pragma omp parallel for schedule(static) if (n >= INIT_PARALLEL_MIN)
    for (int64_t g = 0; g < groups; g++) {
        uint32_t r[INIT_GROUP_WORDS];
        qkv__philox_blocks(seed, 0, stream, (uint64_t)g * QKV_PHILOX_LANES, r);
        const int64_t i0 = g * per, m = n - i0 < per ? n - i0 : per;
        for (int64_t k = 0; k < m; k++) /* qkv_rng_uniform: word i % 4 of block i / 4 */
            x[i0 + k] = (qkv_real)(lo + (hi - lo) * ((float)(r[k] >> 8) * (1.0f / 16777216.0f)));
    }
}

void qkv_init_normal(qkv_tensor *t, double mean, double std, uint64_t seed, uint64_t stream) {
    qkv_real *x = (qkv_real *)t->data;
    const int64_t n = qkv_tensor_numel(t), per = INIT_GROUP_WORDS / 2, groups = (n + per - 1) / per;
#pragma omp parallel for schedule(static) if (n >= INIT_PARALLEL_MIN)
    for (int64_t g = 0; g < groups; g++) {
        uint32_t r[INIT_GROUP_WORDS];
        qkv__philox_blocks(seed, 0, stream, (uint64_t)g * QKV_PHILOX_LANES, r);
        const int64_t i0 = g * per, m = n - i0 < per ? n - i0 : per;
        for (int64_t k = 0; k < m; k++) { /* qkv_rng_normal: words 2 (i % 2), +1 of block i / 2 */
            const double u1 = ((double)(r[2 * k] >> 8) + 1.0) / 16777217.0; /* (0, 1) */
            const double u2 = (double)(r[2 * k + 1] >> 8) / 16777216.0;
            x[i0 + k] = (qkv_real)(mean + std * (sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2)));
        }
    }
}

void qkv_init_constant(qkv_tensor *t, double value) {
    qkv_real *x = (qkv_real *)t->data;
    for (int64_t i = 0, n = qkv_tensor_numel(t); i < n; i++) x[i] = (qkv_real)value;
}

void qkv_init_xavier_uniform(qkv_tensor *t, uint64_t seed, uint64_t stream) {
    double fan_out = t->ndim >= 1 ? (double)t->shape[0] : 1.0;
    double fan_in = t->ndim >= 2 ? (double)(qkv_tensor_numel(t) / t->shape[0]) : fan_out;
    double a = sqrt(6.0 / (fan_in + fan_out));
    qkv_init_uniform(t, -a, a, seed, stream);
}
