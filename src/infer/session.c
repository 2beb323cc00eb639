/*
 * session.c: the decoding session (qkv_decode.h): per-request state over a read-only model.
 *
 * Memory, all allocated once by qkv_session_new for N = max_rows rows of L = max_len positions:
 *   self K, V per decoder layer   (N, H, L, D) each: the KV cache, filled position by position
 *   cross K, V per decoder layer  (N, H, S, D) each: the encoder memory projected once per batch,
 *                                 one row per source (the first B rows); row r reads src_row[r]
 *   tokens                        (N, L): what each row was fed (beam search reads its paths)
 *   self_rows                     (N, L): the self cache row that holds row r's key position j
 *   src                           (N, S): source ids per row (their padding masks cross-attention)
 *   memory                        (N, S, C): uncached mode only, the encoder output
 *   scratch                       one (N, largest row block) buffer for qkv_session_gather
 * The current rows are a prefix n <= N of each buffer, laid out contiguously for (n, ...), so a
 * header (qkv_tensor) over a buffer is an ordinary contiguous tensor; once a gather has reordered
 * the rows, the self caches' headers span all N rows, since rows past n may hold keys that the
 * table self_rows names. Step tensors live in the session's context arena, which every step
 * resets.
 *
 * Reordering (qkv_session_gather) is CTranslate2's gather over the flat batch x beam axis: rows
 * move in place when the kept rows are increasing (finished rows leaving), otherwise through the
 * scratch buffer, and only the filled positions are copied. What moves with every reorder is the
 * token history and the table self_rows, not the keys and values: each stays in the cache row
 * whose step computed it (a step writes row r's new position into cache row r, a cell no table
 * names yet: every cell is written once, at its position's step), and the attention reads key j
 * of row r from cache row self_rows[r][j] (qkv_layer_cache.self_rows). Beam search so copies 4
 * bytes per position and row instead of 2 x layers x C reals (config S: 6 KiB), and the prefix a
 * hypothesis shares with its siblings is stored once. Until the first reorder of a batch the
 * table is the identity and is not passed (self_rows_used). The cross-attention caches never
 * move (each row reads its source's row through src_row, so the beams of a sentence share one
 * copy: 1 / K of the memory traffic of per-row copies); the source ids and the uncached memory,
 * identical for the beams of a sentence, move only where a position must hold another source's
 * data (src_of tracks which source each position holds).
 *
 * Dims: N rows, L positions, S source length, C d_model, H heads, D = C / H.
 */
#include "infer_internal.h"

#include <stdatomic.h>
#include <stdlib.h>

qkv_session_params qkv_session_default_params(void) {
    qkv_session_params p;
    memset(&p, 0, sizeof p);
    p.max_rows = 1;
    p.max_len = 0;
    p.max_src_len = 0;
    p.use_cache = true;
    p.kernels = QKV_KERNELS_FAST;
    p.arena_bytes = 0;
    p.weight_panels = true;
    return p;
}

/* n * size, or 0 when it overflows size_t. */
static size_t mul_size(size_t n, size_t size) {
    return size && n > SIZE_MAX / size ? 0 : n * size;
}

void qkv__session_sync_headers(qkv_session *s) {
    const int64_t n = s->n, S = s->S, H = s->H, D = s->D, N = s->p.max_rows;
    for (int32_t i = 0; i < s->n_layers; i++) {
        qkv_tensor *h = s->headers + 4 * i;
        for (int k = 0; k < 4; k++) {
            const bool self = k < 2;
            qkv_tensor *t = &h[k];
            memset(t, 0, sizeof *t);
            t->dtype = QKV_REAL;
            t->ndim = 4;
            t->shape[0] = self ? (s->self_rows_used ? N : n) : s->n_src;
            t->shape[1] = H;
            t->shape[2] = self ? s->L : S;
            t->shape[3] = D;
            qkv__set_contiguous_strides(t);
            if (self)
                t->data = s->self_kv + ((size_t)(2 * i + k)) * (size_t)(N * H * s->L * D);
            else if (s->cross_kv)
                t->data = s->cross_kv +
                          ((size_t)(2 * i + k - 2)) * (size_t)(N * H * s->p.max_src_len * D);
        }
        s->caches[i] =
            (qkv_layer_cache){&h[0], &h[1], s->cross_kv ? &h[2] : NULL, s->cross_kv ? &h[3] : NULL,
                              s->cross_kv ? s->src_row : NULL,
                              s->self_rows_used ? s->self_rows : NULL};
    }
    memset(&s->memory_t, 0, sizeof s->memory_t);
    s->memory_t.dtype = QKV_REAL;
    s->memory_t.ndim = 3;
    s->memory_t.shape[0] = n;
    s->memory_t.shape[1] = S;
    s->memory_t.shape[2] = s->C;
    qkv__set_contiguous_strides(&s->memory_t);
    s->memory_t.data = s->memory;
}

/* The measure run: the largest steps (every row at the last position and at the one before) and
 * the first (position 0, where ALiBi takes the fused kernel and its tiles) on zeroed buffers, so
 * the arena reaches its high-water mark now and single-token steps never grow it. They read the
 * keys through the table (self_rows), as steps after a reorder do: the general attention path
 * then gathers K and V into new tensors, at least what it allocates without the table (a view of
 * the whole cache at the last position, a copy of the strided keys at the one before). The steps
 * run on the session's measuring backend (backend.h, measure_only): the products, the cached
 * attention and those gathers are skipped, so the run costs allocations, not three passes over
 * the weights. The session is left as new. */
static qkv_status measure_arena(qkv_session *s) {
    const qkv_session_params *p = &s->p;
    s->n = p->max_rows;
    s->n_src = s->encoder_decoder ? p->max_rows : 0;
    s->S = s->encoder_decoder ? p->max_src_len : 0;
    s->started = true;
    s->self_rows_used = true; /* the paths that read keys through the table use the most */
    qkv__session_sync_headers(s);
    int32_t *zeros = calloc((size_t)p->max_rows, sizeof *zeros);
    qkv_status st = zeros ? QKV_OK : QKV_ERROR(QKV_ERR_OOM, "qkv_session_new: out of memory");
    s->ctx->backend = &s->measuring;
    const int32_t at[3] = {p->max_len - 1, p->max_len - 2, 0};
    for (int k = 0; !st && k < 3; k++) {
        if (at[k] < 0 || (k == 2 && at[2] >= at[1])) continue; /* max_len 1 or 2: done */
        s->t = at[k];
        if (!qkv__session_forward(s, zeros, 1)) st = qkv_ctx_status(s->ctx) ? qkv_ctx_status(s->ctx) : QKV_ERR_STATE;
        qkv_ctx_reset(s->ctx);
    }
    s->ctx->backend = s->backend;
    free(zeros);
    s->n = 0;
    s->n_src = 0;
    s->S = 0;
    s->t = 0;
    s->started = false;
    s->self_rows_used = false;
    qkv__session_sync_headers(s);
    return st;
}

qkv_status qkv_session_new(const qkv_model *m, const qkv_session_params *p, qkv_session **out) {
    if (!out) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_session_new: out is NULL");
    *out = NULL;
    if (!m || !p)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_session_new: NULL model or parameters");
    const qkv_model_config *c = &m->cfg;
    const bool ed = c->arch == QKV_ARCH_ENCODER_DECODER;
    if (!ed && c->arch != QKV_ARCH_DECODER)
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "qkv_session_new: an encoder-only model does not decode");
    if (c->nat)
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "qkv_session_new: a non-autoregressive model (nat) has no "
                         "incremental decoding; use qkv_decode with mask-predict");
    if (p->max_rows < 1)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_session_new: max_rows %d must be >= 1",
                         p->max_rows);
    if (p->max_len < 1 || p->max_len > c->max_len)
        return QKV_ERROR(QKV_ERR_SHAPE,
                         "qkv_session_new: max_len %d is not in 1 .. the model's max_len %d",
                         p->max_len, c->max_len);
    if (ed && (p->max_src_len < 1 || p->max_src_len > c->max_len))
        return QKV_ERROR(QKV_ERR_SHAPE,
                         "qkv_session_new: max_src_len %d is not in 1 .. the model's max_len %d",
                         p->max_src_len, c->max_len);
    if (!qkv__backend_of(p->kernels))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_session_new: unknown kernel set %d",
                         (int)p->kernels);
    qkv_session *s = calloc(1, sizeof *s);
    if (!s) return QKV_ERROR(QKV_ERR_OOM, "qkv_session_new: out of memory");
    static _Atomic uint64_t sessions_made = 0;
    s->serial = atomic_fetch_add_explicit(&sessions_made, 1, memory_order_relaxed) + 1;
    s->m = m;
    s->p = *p;
    s->encoder_decoder = ed;
    s->n_layers = ed ? c->n_decoder_layers : c->n_encoder_layers;
    s->C = c->d_model;
    s->H = c->n_heads;
    s->D = s->C / s->H;
    s->L = p->max_len;
    const size_t N = (size_t)p->max_rows, L = (size_t)p->max_len,
                 Smax = ed ? (size_t)p->max_src_len : 0;
    const size_t C = (size_t)s->C, layers = (size_t)s->n_layers;
    const size_t self_elems = mul_size(mul_size(N * L, C), 2 * layers);
    const size_t cross_elems = mul_size(mul_size(N * Smax, C), 2 * layers);
    const size_t block = (L > Smax ? L : Smax) * C; /* the largest per-row block of one buffer */
    s->scratch_bytes = mul_size(mul_size(N, block), sizeof(qkv_real));
    qkv_status st = QKV_OK;
    if ((self_elems == 0 && layers) || (ed && cross_elems == 0) || s->scratch_bytes == 0)
        st = QKV_ERROR(QKV_ERR_OOM, "qkv_session_new: buffer sizes overflow");
    if (!st) {
        s->self_kv = calloc(self_elems ? self_elems : 1, sizeof(qkv_real));
        s->cross_kv = p->use_cache && ed ? calloc(cross_elems, sizeof(qkv_real)) : NULL;
        s->memory = !p->use_cache && ed ? calloc(N * Smax * C, sizeof(qkv_real)) : NULL;
        s->headers = calloc(4 * layers + 1, sizeof *s->headers);
        s->caches = calloc(layers + 1, sizeof *s->caches);
        s->tokens = calloc(N * L, sizeof *s->tokens);
        s->self_rows = malloc(N * L * sizeof *s->self_rows);
        s->src = calloc(N * (Smax ? Smax : 1), sizeof *s->src);
        s->scratch = malloc(s->scratch_bytes);
        s->src_of = malloc(sizeof(int32_t) * 7 * N);
        if (!s->self_kv || (p->use_cache && ed && !s->cross_kv) ||
            (!p->use_cache && ed && !s->memory) || !s->headers || !s->caches || !s->tokens ||
            !s->self_rows || !s->src || !s->scratch || !s->src_of)
            st = QKV_ERROR(
                QKV_ERR_OOM,
                "qkv_session_new: out of memory for the caches of %zu rows x %zu positions", N, L);
    }
    if (!st) {
        s->src_next = s->src_of + N;
        s->move_from = s->src_of + 2 * N;
        s->move_to = s->src_of + 3 * N;
        s->src_row = s->src_of + 4 * N;
        s->src_row_next = s->src_of + 5 * N;
        s->gather_needed = s->src_of + 6 * N;
        for (size_t r = 0; r < N; r++) {
            s->src_of[r] = -1;
            s->src_row[r] = (int32_t)r;
            for (size_t j = 0; j < L; j++) s->self_rows[r * L + j] = (int32_t)r;
        }
    }
    if (!st) {
        qkv_ctx_params cp = qkv_ctx_default_params();
        cp.kernels = p->kernels;
        if (p->arena_bytes) cp.arena_bytes = p->arena_bytes;
        st = qkv_ctx_new(&cp, &s->ctx);
    }
    /* no panels where they cannot apply; none either when their store cannot be had: the steps
     * then multiply every weight in place, with the same results */
    if (!st && p->weight_panels && (qkv__gemm_panels_available() || qkv__gemm_packed_available()))
        s->panels = qkv__panels_new();
    if (!st) {
        s->backend = s->ctx->backend;
        s->with_panels = *s->backend;
        s->with_panels.panels = s->panels;
        s->with_panels.linear_panels = qkv__backend_linear_panels;
        s->measuring = *s->backend;
        s->measuring.measure_only = true;
    }
    if (!st) {
        qkv_ctx_set_grad_enabled(s->ctx, false);
        st = measure_arena(s);
    }
    if (st) {
        qkv_session_free(s);
        return st;
    }
    *out = s;
    return QKV_OK;
}

void qkv_session_free(qkv_session *s) {
    if (!s) return;
    qkv_ctx_free(s->ctx);
    qkv__panels_free(s->panels);
    free(s->self_kv);
    free(s->cross_kv);
    free(s->memory);
    free(s->headers);
    free(s->caches);
    free(s->tokens);
    free(s->self_rows);
    free(s->src);
    free(s->scratch);
    free(s->src_of);
    free(s);
}

/* *t as a contiguous (B, S, C) header over data; returns t. */
static qkv_tensor *buffer_tensor(qkv_real *data, int64_t B, int64_t S, int64_t C, qkv_tensor *t) {
    memset(t, 0, sizeof *t);
    t->dtype = QKV_REAL;
    t->ndim = 3;
    t->shape[0] = B;
    t->shape[1] = S;
    t->shape[2] = C;
    qkv__set_contiguous_strides(t);
    t->data = data;
    return t;
}

/* Between the encoder's stages: x moves into the session's scratch buffer, the arena is reset,
 * and the mask's key padding is built again from the source ids in the fresh arena. */
typedef struct layer_by_layer {
    qkv_session *s;
    const int32_t *src;
    int32_t B, S;
    qkv_tensor header; /* (B, S, C) over the buffer */
} layer_by_layer;

static qkv_tensor *keep_in_buffer(void *user, qkv_ctx *ctx, qkv_tensor *x, qkv_mask *mask) {
    layer_by_layer *k = user;
    qkv_real *buf = (qkv_real *)k->s->scratch;
    memcpy(buf, qkv__data(x), sizeof(qkv_real) * (size_t)qkv_tensor_numel(x)); /* x is a new tensor: contiguous */
    qkv_ctx_reset(ctx);
    mask->key_padding = dec_padding_of(ctx, k->src, k->B, k->S, k->S, k->s->m->cfg.pad_id);
    return buffer_tensor(buf, k->B, k->S, k->s->C, &k->header);
}

/* The encoder output (B, S, C) of src, in the session's scratch buffer (free until the first
 * gather), or NULL with the context's status set: the model's encoder stack (qkv__encoder_stack,
 * the forward of qkv_model_encode) with the arena reset between layers, so that the arena holds
 * the activations of one layer instead of the whole stack (a sixth of it for config B) and each
 * decode touches, and page-faults in, that much less fresh memory. */
static qkv_real *encode_by_layer(qkv_session *s, const int32_t *src, int32_t B, int32_t S) {
    qkv_ctx *ctx = s->ctx;
    const qkv_model *m = s->m;
    qkv_real *buf = (qkv_real *)s->scratch; /* N max(L, S_max) C reals >= B S C */
    qkv_tensor *ids = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){B, S}, src);
    qkv_tensor *x = qkv__model_embed(ctx, m, m->src_embed, m->src_pos, ids, 0); /* (B, S, C) */
    layer_by_layer k = {.s = s, .src = src, .B = B, .S = S};
    const qkv__stage_hook hook = {keep_in_buffer, &k};
    const qkv_mask none = qkv_mask_none(); /* the hook sets its key padding before each layer */
    qkv_tensor *y = x ? qkv__encoder_stack(ctx, m, x, &none, NULL, &hook) : NULL;
    if (!y || ctx->status) return NULL;
    if (qkv__data(y) != buf) memcpy(buf, qkv__data(y), sizeof(qkv_real) * (size_t)qkv_tensor_numel(y));
    return buf;
}

qkv_status qkv_session_encode(qkv_session *s, const int32_t *src, int32_t B, int32_t S) {
    if (!s || !src) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_session_encode: NULL argument");
    if (!s->encoder_decoder)
        return QKV_ERROR(
            QKV_ERR_INVALID_ARG,
            "qkv_session_encode: a decoder-only model has no encoder (use qkv_session_start)");
    if (B < 1 || B > s->p.max_rows)
        return QKV_ERROR(QKV_ERR_SHAPE, "qkv_session_encode: batch %d is not in 1 .. max_rows %d",
                         B, s->p.max_rows);
    if (S < 1 || S > s->p.max_src_len)
        return QKV_ERROR(QKV_ERR_SHAPE,
                         "qkv_session_encode: source length %d is not in 1 .. max_src_len %d", S,
                         s->p.max_src_len);
    const int32_t Vs = s->m->cfg.src_vocab;
    for (int64_t i = 0; i < (int64_t)B * S; i++)
        if (src[i] < 0 || src[i] >= Vs)
            return QKV_ERROR(
                QKV_ERR_INVALID_ARG,
                "qkv_session_encode: src[%lld][%lld] = %d is outside the source vocabulary (%d)",
                (long long)(i / S), (long long)(i % S), src[i], Vs);
    qkv_ctx *ctx = s->ctx;
    qkv_ctx_reset(ctx);
    s->started = false;
    s->n = B;
    s->n_src = B;
    s->S = S;
    s->t = 0;
    s->self_rows_used = false;
    qkv__panels_invalidate(s->panels); /* the weights may have changed since the last batch */
    memcpy(s->src, src, sizeof(int32_t) * (size_t)B * (size_t)S);
    for (int32_t r = 0; r < s->p.max_rows; r++) {
        s->src_of[r] = r < B ? r : -1;
        s->src_row[r] = r < B ? r : 0;
    }
    qkv__session_sync_headers(s);
    qkv_real *memory = encode_by_layer(s, src, B, S); /* (B, S, C) */
    if (memory && !s->p.use_cache)
        memcpy(s->memory, memory, sizeof(qkv_real) * (size_t)(B * S * s->C));
    for (int32_t i = 0; memory && s->p.use_cache && i < s->n_layers; i++) {
        qkv_ctx_reset(ctx);
        qkv_mha_cache_memory(ctx, &s->m->decoder_layers[i].cross_attn,
                             buffer_tensor(memory, B, S, s->C, &(qkv_tensor){0}),
                             s->caches[i].cross_k, s->caches[i].cross_v);
    }
    qkv_status st = qkv_ctx_status(ctx);
    if (st) {
        s->n = 0;
        s->n_src = 0;
        qkv__session_sync_headers(s);
        return st;
    }
    s->started = true;
    return QKV_OK;
}

qkv_status qkv_session_start(qkv_session *s, int32_t n_rows) {
    if (!s) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_session_start: session is NULL");
    if (s->encoder_decoder)
        return QKV_ERROR(
            QKV_ERR_INVALID_ARG,
            "qkv_session_start: an encoder-decoder session starts with qkv_session_encode");
    if (n_rows < 1 || n_rows > s->p.max_rows)
        return QKV_ERROR(QKV_ERR_SHAPE, "qkv_session_start: %d rows is not in 1 .. max_rows %d",
                         n_rows, s->p.max_rows);
    qkv_ctx_reset(s->ctx);
    s->n = n_rows;
    s->t = 0;
    s->S = 0;
    s->self_rows_used = false;
    s->started = true;
    qkv__panels_invalidate(s->panels); /* as qkv_session_encode */
    qkv__session_sync_headers(s);
    return QKV_OK;
}

/* A buffer of rows: row r is `mid` runs of `run` used elements at stride `stride` (elements of
 * esize bytes), starting at element r * mid * stride. */
typedef struct {
    void *base;
    int64_t mid, stride, run;
    size_t esize;
} row_layout;

/* Row to[k] (k if to is NULL) becomes old row from[k], k < n. in_place when from[k] >= to[k] and
 * both increase: each row is then written after every read from it. */
static void gather_rows(qkv_session *s, const row_layout *g, const int32_t *from, const int32_t *to,
                        int32_t n, bool in_place) {
    unsigned char *base = g->base;
    const size_t row_bytes = (size_t)(g->mid * g->stride) * g->esize,
                 run_bytes = (size_t)g->run * g->esize;
    const size_t packed = (size_t)g->mid * run_bytes; /* one row in the scratch buffer */
    if (run_bytes == 0) return;
#define AT(row, h) (base + (size_t)(row)*row_bytes + (size_t)((h)*g->stride) * g->esize)
    if (in_place) {
        for (int32_t k = 0; k < n; k++) {
            const int32_t dst = to ? to[k] : k;
            if (from[k] != dst)
                for (int64_t h = 0; h < g->mid; h++)
                    memcpy(AT(dst, h), AT(from[k], h), run_bytes);
        }
        return;
    }
    /* A row that stays where it is needs no copy. A destination whose old row is another move's
     * source ("needed") may be written only after that read: its own source goes through the
     * scratch buffer, read before anything is written (a). Every other destination is no one's
     * source, so it is copied straight from its source (b): that source is either not written at
     * all or a needed destination, written only at the end (c). Beam search's destinations are
     * mostly rows whose hypotheses died, so most rows move with one copy instead of two. The rows
     * are independent copies, shared by the threads. */
    int32_t *needed = s->gather_needed; /* (N): 1 when the old row is a source of another row */
    for (int32_t k = 0; k < n; k++) needed[to ? to[k] : k] = 0;
    for (int32_t k = 0; k < n; k++)
        if (from[k] != (to ? to[k] : k)) needed[from[k]] = 1;
    const bool parallel = (size_t)n * packed >= ((size_t)1 << 20);
    (void)parallel; /* read only by the OpenMP pragmas */
#pragma omp parallel for schedule(static) if (parallel)
    for (int32_t k = 0; k < n; k++) { /* (a) */
        const int32_t dst = to ? to[k] : k;
        if (from[k] == dst || !needed[dst]) continue;
        for (int64_t h = 0; h < g->mid; h++)
            memcpy(s->scratch + (size_t)k * packed + (size_t)h * run_bytes, AT(from[k], h), run_bytes);
    }
#pragma omp parallel for schedule(static) if (parallel)
    for (int32_t k = 0; k < n; k++) { /* (b) */
        const int32_t dst = to ? to[k] : k;
        if (from[k] == dst || needed[dst]) continue;
        for (int64_t h = 0; h < g->mid; h++) memcpy(AT(dst, h), AT(from[k], h), run_bytes);
    }
#pragma omp parallel for schedule(static) if (parallel)
    for (int32_t k = 0; k < n; k++) { /* (c) */
        const int32_t dst = to ? to[k] : k;
        if (from[k] == dst || !needed[dst]) continue;
        for (int64_t h = 0; h < g->mid; h++)
            memcpy(AT(dst, h), s->scratch + (size_t)k * packed + (size_t)h * run_bytes, run_bytes);
    }
#undef AT
}

qkv_status qkv_session_gather(qkv_session *s, const int32_t *rows, int32_t n_rows) {
    if (!s || (n_rows > 0 && !rows))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_session_gather: NULL argument");
    if (!s->started)
        return QKV_ERROR(QKV_ERR_STATE, "qkv_session_gather: the session has not started");
    if (n_rows < 0 || n_rows > s->p.max_rows)
        return QKV_ERROR(QKV_ERR_SHAPE, "qkv_session_gather: %d rows is not in 0 .. max_rows %d",
                         n_rows, s->p.max_rows);
    bool identity = n_rows <= s->n, in_place = true;
    for (int32_t i = 0; i < n_rows; i++) {
        if (rows[i] < 0 || rows[i] >= s->n)
            return QKV_ERROR(QKV_ERR_INVALID_ARG,
                             "qkv_session_gather: rows[%d] = %d is not a row (0 .. %d)", i, rows[i],
                             s->n - 1);
        identity = identity && rows[i] == i;
        in_place = in_place && rows[i] >= i && (i == 0 || rows[i] > rows[i - 1]);
    }
    if (!identity) {
        const int64_t L = s->L, S = s->S, C = s->C;
        /* what depends on the row's own tokens: the history, and where its keys and values are
         * (they stay in the rows that computed them) */
        gather_rows(s, &(row_layout){s->self_rows, 1, L, s->t, sizeof(int32_t)}, rows, NULL,
                    n_rows, in_place);
        s->self_rows_used = true;
        gather_rows(s, &(row_layout){s->tokens, 1, L, s->t, sizeof(int32_t)}, rows, NULL, n_rows,
                    in_place);
        /* what depends on the source only (cross-attention caches, source ids, memory): the beams
         * of a sentence share it, so a row moves only where the source it needs is not the one
         * its position already holds */
        int32_t n_move = 0;
        for (int32_t i = 0; i < n_rows; i++) {
            s->src_next[i] = s->src_of[rows[i]];
            if (s->src_next[i] != s->src_of[i]) {
                s->move_from[n_move] = rows[i];
                s->move_to[n_move++] = i;
            }
        }
        gather_rows(s, &(row_layout){s->src, 1, S, S, sizeof(int32_t)}, s->move_from, s->move_to,
                    n_move, in_place);
        if (s->memory)
            gather_rows(s, &(row_layout){s->memory, 1, S * C, S * C, sizeof(qkv_real)},
                        s->move_from, s->move_to, n_move, in_place);
        memcpy(s->src_of, s->src_next, sizeof(int32_t) * (size_t)n_rows);
        /* the cross-attention caches stay one row per source: only the map follows */
        for (int32_t i = 0; i < n_rows; i++)
            s->src_row_next[i] = s->src_row[rows[i]];
        memcpy(s->src_row, s->src_row_next, sizeof(int32_t) * (size_t)n_rows);
    }
    s->n = n_rows;
    qkv__session_sync_headers(s);
    return QKV_OK;
}

int32_t qkv_session_rows(const qkv_session *s) {
    return s ? s->n : 0;
}
int32_t qkv_session_length(const qkv_session *s) {
    return s ? s->t : 0;
}
const qkv_ctx *qkv_session_ctx(const qkv_session *s) {
    return s ? s->ctx : NULL;
}

const int32_t *qkv_session_tokens(const qkv_session *s, int32_t row) {
    if (!s || row < 0 || row >= s->n) return NULL;
    return s->tokens + (size_t)row * (size_t)s->L;
}
