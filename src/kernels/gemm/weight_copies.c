/*
 * weight_copies.c: a decoding session's copies of its weights, each laid out for the kernel that
 * multiplies by it, so that a decoding step never repacks a weight (qkv__panels: the store behind
 * qkv_session_params.weight_panels).
 *
 * Every step of a decode multiplies the same weights by a few new rows of activations. The
 * kernels that qkv_gemm picks for those products either read W in place (the small-M kernel) or
 * pack it first, at every product (the packed GEMM, which copies op(B) = W^T into 32-column
 * micro-panels). A copy made once per batch takes that work out of the steps, and it keeps the
 * bits of the product it replaces, because the order of every sum is the kernel's, not the
 * layout's:
 *
 * - residue panels (gemm_panels.c) for what qkv_gemm gives the small-M kernel on 16 lanes, 8 to
 *   96 rows against a weight of at least 1 MiB: the step streams W from memory, and from its copy
 *   each thread reads one sequential stream (config-B greedy's steps -12 to -16 %,
 *   BENCHMARKS.md);
 * - the packed GEMM's panels of W^T (qkv__gemm_packed_nt_copy) for what qkv_gemm gives the packed
 *   GEMM, from 32 rows on at any weight size (beam search's 320 rows on config S, 64-row greedy
 *   steps on its 256 x 256 weights): the product no longer packs W, and with more than 384 rows
 *   the threads share it by rows without waiting for each other to pack.
 *
 * Which product a copy serves is the rule of qkv_gemm (qkv__gemm_uses_small_m, then
 * qkv__gemm_uses_packed) applied to its shape, so a session with copies decodes to exactly the
 * bits of one without them (tests/decode/test_session_panels.c), and a weight met at several
 * sizes may have a copy of each kind.
 *
 * The store keys its copies by the weight's address, shape and kind: qkv__linear_compute offers
 * parameters only, whose memory stays put (an arena tensor's address may hold another tensor at
 * the next step). Each copy is filled at its first product after qkv__panels_invalidate, by the
 * threads that then multiply by it. The session invalidates at every batch (qkv_session_encode,
 * qkv_session_start): the weights may change between batches (a training loop's evaluations),
 * never during one. Copies of 2 MiB or more get transparent huge pages (core/hugepages.c): they
 * are written whole at once and read as streams. Memory: as much as the weights copied, for as
 * long as the session lives; where it cannot be had the product runs as without a store.
 */
#include "gemm.h"
#include "../../ops/ops_internal.h"

#include <stdlib.h>

typedef enum { RESIDUE_PANELS, PACKED_PANELS } copy_kind;

struct weight_copy {
    const qkv_real *w; /* the weight it copies (its address, shape and kind are the key) */
    int64_t n, k;
    copy_kind kind;
    float *floats; /* qkv__panels_floats(n, k) or qkv__gemm_packed_copy_floats(n, k) */
    size_t bytes;
    bool filled; /* since the last invalidation */
};

struct qkv__panels {
    struct weight_copy *copies;
    int64_t count, cap;
    float *at; /* residue panels' x transposed, one copy per thread (qkv__panels_at_floats) */
    size_t at_floats;
};

qkv__panels *qkv__panels_new(void) {
    return calloc(1, sizeof(qkv__panels));
}

void qkv__panels_free(qkv__panels *p) {
    if (!p) return;
    for (int64_t i = 0; i < p->count; i++)
        free(p->copies[i].floats);
    free(p->copies);
    free(p->at);
    free(p);
}

void qkv__panels_invalidate(qkv__panels *p) {
    for (int64_t i = 0; p && i < p->count; i++)
        p->copies[i].filled = false;
}

size_t qkv__panels_bytes(const qkv__panels *p) {
    size_t bytes = 0;
    for (int64_t i = 0; p && i < p->count; i++)
        bytes += p->copies[i].bytes;
    return bytes;
}

#ifndef QKV_DOUBLE
/* 64-byte aligned memory for `floats` floats; 2 MiB aligned with huge pages asked for from 2 MiB
 * on. NULL when out of memory. */
static float *copy_alloc(size_t floats, size_t *bytes) {
    const size_t huge = (size_t)2 << 20;
    *bytes = (floats * sizeof(float) + 63) & ~(size_t)63;
    if (*bytes < huge) return aligned_alloc(64, *bytes);
    *bytes = (*bytes + huge - 1) & ~(huge - 1);
    float *f = aligned_alloc(huge, *bytes);
    qkv__advise_huge_pages(f, *bytes);
    return f;
}

/* The copy of w (n, k) of this kind, a new (unfilled) one when there is none; NULL when out of
 * memory. */
static struct weight_copy *copy_of(qkv__panels *p, const qkv_real *w, int64_t n, int64_t k, copy_kind kind) {
    for (int64_t i = 0; i < p->count; i++) {
        struct weight_copy *c = &p->copies[i];
        if (c->w == w && c->n == n && c->k == k && c->kind == kind) return c;
    }
    if (p->count == p->cap) {
        const int64_t cap = p->cap ? 2 * p->cap : 64;
        struct weight_copy *grown = realloc(p->copies, sizeof *grown * (size_t)cap);
        if (!grown) return NULL;
        p->copies = grown;
        p->cap = cap;
    }
    struct weight_copy *c = &p->copies[p->count];
    *c = (struct weight_copy){w, n, k, kind, NULL, 0, false};
    const size_t floats = kind == RESIDUE_PANELS ? qkv__panels_floats(n, k) : qkv__gemm_packed_copy_floats(n, k);
    if (!(c->floats = copy_alloc(floats, &c->bytes))) return NULL;
    p->count++;
    return c;
}

/* The residue panels' product (the small-M kernel's bits). */
static bool residue_linear(qkv__panels *p, int64_t m, int64_t n, int64_t k, const float *x,
                           const float *w, const float *bias, float *y) {
    if (m < QKV_PANELS_MIN_ROWS || n * k * (int64_t)sizeof(float) < QKV_PANELS_MIN_BYTES ||
        !qkv__gemm_panels_available())
        return false;
    const size_t at_floats = qkv__panels_at_floats(m, k);
    if (p->at_floats < at_floats) {
        float *at = aligned_alloc(64, at_floats * sizeof(float));
        if (!at) return false;
        free(p->at);
        p->at = at;
        p->at_floats = at_floats;
    }
    struct weight_copy *c = copy_of(p, w, n, k, RESIDUE_PANELS);
    if (!c) return false;
    qkv__gemm_panels(m, n, k, x, w, c->floats, !c->filled, bias, y, p->at);
    c->filled = true;
    return true;
}

/* The packed GEMM's product from its panels of W^T (its bits). */
static bool packed_linear(qkv__panels *p, int64_t m, int64_t n, int64_t k, const float *x,
                          const float *w, const float *bias, float *y) {
    struct weight_copy *c = copy_of(p, w, n, k, PACKED_PANELS);
    if (!c || !qkv__gemm_packed_nt_copy(m, n, k, x, k, w, k, c->floats, !c->filled, bias, y, n))
        return false;
    c->filled = true;
    return true;
}
#endif

bool qkv__panels_linear(qkv__panels *p, int64_t m, int64_t n, int64_t k, const qkv_real *x,
                        const qkv_real *w, const qkv_real *bias, qkv_real *y) {
#ifdef QKV_DOUBLE
    (void)p, (void)m, (void)n, (void)k, (void)x, (void)w, (void)bias, (void)y;
    return false;
#else
    if (!p || m <= 0 || n <= 0 || k <= 0) return false;
    /* qkv_gemm's rule, in its order (both kernels only ever run in BLAS builds) */
    if (qkv__gemm_uses_small_m(false, true, m, n, k)) return residue_linear(p, m, n, k, x, w, bias, y);
#ifdef QKV_WITH_BLAS
    if (qkv__gemm_uses_packed(m, n, k)) return packed_linear(p, m, n, k, x, w, bias, y);
#endif
    return false;
#endif
}
