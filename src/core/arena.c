/*
 * arena.c: the step arena, a chunked bump allocator.
 *
 * Every step tensor, saved statistic, gradient buffer and tape entry of one step comes from
 * here; qkv_ctx_reset() releases them all at once. Chunks are never moved, so pointers stay
 * valid during a step. At reset, if the step needed more than one chunk, the chunks are
 * replaced by a single block of the high-water mark, so a training loop calls malloc only
 * during its first step(s).
 *
 * Built with QKV_ARENA_PER_ALLOC (the sanitizer build), every allocation is its own malloc so
 * AddressSanitizer sees the bounds of each tensor.
 */
#include "internal.h"

#include <stdlib.h>

static size_t align_up(size_t n) { return (n + QKV_ARENA_ALIGN - 1) & ~(size_t)(QKV_ARENA_ALIGN - 1); }

#ifndef QKV_ARENA_PER_ALLOC
static qkv_arena_chunk *chunk_new(qkv_arena *a, size_t size) {
    qkv_arena_chunk *c = malloc(sizeof *c);
    if (!c) return NULL;
    c->data = aligned_alloc(QKV_ARENA_ALIGN, align_up(size ? size : QKV_ARENA_ALIGN));
    if (!c->data) {
        free(c);
        return NULL;
    }
    a->mallocs++;
    c->size = size;
    c->used = 0;
    c->next = NULL;
    return c;
}
#endif

static void chunks_free(qkv_arena_chunk *c) {
    while (c) {
        qkv_arena_chunk *next = c->next;
        free(c->data);
        free(c);
        c = next;
    }
}

void qkv__arena_init(qkv_arena *a, size_t initial, bool poison) {
    memset(a, 0, sizeof *a);
    a->initial = align_up(initial ? initial : ((size_t)16 << 20));
    a->poison = poison;
}

void qkv__arena_free(qkv_arena *a) {
    chunks_free(a->chunks);
    for (size_t i = 0; i < a->n_allocs; i++) free(a->allocs[i]);
    free(a->allocs);
    memset(a, 0, sizeof *a);
}

void qkv__arena_reset(qkv_arena *a) {
#ifdef QKV_ARENA_PER_ALLOC
    for (size_t i = 0; i < a->n_allocs; i++) free(a->allocs[i]);
    a->n_allocs = 0;
#else
    if (a->chunks && a->chunks->next) {
        /* More than one chunk was needed: replace them by one block of the high-water mark. */
        size_t want = a->peak;
        chunks_free(a->chunks);
        a->chunks = chunk_new(a, want); /* on failure the next alloc retries */
    } else if (a->chunks) {
        a->chunks->used = 0;
    }
#endif
    a->used = 0;
}

void *qkv__arena_alloc(qkv_arena *a, size_t bytes) {
    size_t n = align_up(bytes ? bytes : 1);
    if (n < bytes) return NULL; /* overflow */
    void *p;
#ifdef QKV_ARENA_PER_ALLOC
    if (a->n_allocs == a->cap_allocs) {
        size_t cap = a->cap_allocs ? 2 * a->cap_allocs : 256;
        void **grown = realloc(a->allocs, cap * sizeof *grown);
        if (!grown) return NULL;
        a->allocs = grown;
        a->cap_allocs = cap;
    }
    p = aligned_alloc(QKV_ARENA_ALIGN, n);
    if (!p) return NULL;
    a->mallocs++;
    a->allocs[a->n_allocs++] = p;
#else
    qkv_arena_chunk *c = a->chunks;
    if (!c || c->size - c->used < n) {
        size_t size = a->initial;
        if (c && size < 2 * c->size) size = 2 * c->size;
        if (size < n) size = n;
        qkv_arena_chunk *fresh = chunk_new(a, size);
        if (!fresh) return NULL;
        fresh->next = c;
        a->chunks = c = fresh;
    }
    p = c->data + c->used;
    c->used += n;
#endif
    a->used += n;
    if (a->used > a->peak) a->peak = a->used;
    if (a->poison) memset(p, 0xFF, n); /* all-ones bytes are NaN in F32 and F64 */
    return p;
}
