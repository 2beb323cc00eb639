/*
 * batcher.c: length-bucketed batches under a token budget, deterministic per (seed, epoch).
 *
 * Plan of epoch e (a pure function of the dataset, the options, the seed and e):
 *   1. key of example j = (bucket, r, j): bucket = (width - 1) / bucket_width, r = a 48-bit
 *      Philox number of the example's dataset index (two qkv_rng_uniform draws of 24 bits,
 *      step e, stream 0); without shuffle the key is (width, 0, j);
 *   2. sort by key, cut greedily: a batch takes the next example while
 *      (rows + 1) * max(widest, width) <= max_tokens and rows + 1 <= max_rows;
 *   3. with shuffle, visit the batches in a Fisher-Yates permutation (stream 1).
 * Width = max(src_len, tgt_len + 1) with decoder arrays, max(src_len, tgt_len) without: the
 * columns of the widest padded array, so rows * width bounds every array of the batch. This is
 * fairseq's max_tokens rule (batch_by_size) with a seeded shuffle inside length buckets.
 *
 * The position (epoch, next batch) is all the state a resume needs: seek re-plans the epoch.
 */
#include "data_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sort_key {
    uint64_t a, b;
    int64_t j;
} sort_key;

struct qkv_batcher {
    const qkv_dataset *d;
    qkv_batch_opts o;
    int64_t m;      /* examples batched */
    int64_t *ex;    /* (m) their dataset indices */
    int64_t *width; /* (m) */
    uint64_t fingerprint;
    /* the current epoch's plan */
    uint64_t epoch;
    int64_t nb;     /* batches */
    int64_t next;   /* the next batch to hand out */
    int64_t *order; /* (m) positions j in batch order */
    int64_t *start; /* (m + 1) batch b holds order[start[b] .. start[b + 1]) */
    int64_t *perm;  /* (m) the visiting order of the batches */
    sort_key *keys; /* (m) scratch */
    /* the arrays of the last batch */
    int32_t *src, *tgt, *dec_in, *dec_out, *src_len, *tgt_len;
    int64_t *example;
    int64_t cap_src, cap_tgt, cap_dec_in, cap_dec_out, cap_src_len, cap_tgt_len, cap_example;
};

qkv_batch_opts qkv_batch_default_opts(int64_t max_tokens) {
    return (qkv_batch_opts){.max_tokens = max_tokens,
                            .bucket_width = 1,
                            .shuffle = true,
                            .seed = 1,
                            .pad_id = QKV_VOCAB_PAD,
                            .bos_id = QKV_VOCAB_BOS,
                            .eos_id = QKV_VOCAB_EOS};
}

/* ---- fingerprint: FNV-1a 64 over little-endian integers ---- */

static uint64_t fnv64_u64(uint64_t h, uint64_t x) {
    for (int i = 0; i < 8; i++) {
        h ^= (x >> (8 * i)) & 0xFF;
        h *= 0x100000001B3ull;
    }
    return h;
}

static uint64_t fingerprint(const qkv_batcher *b) {
    uint64_t h = 0xCBF29CE484222325ull;
    const qkv_batch_opts *o = &b->o;
    uint64_t opts[] = {(uint64_t)o->max_tokens, (uint64_t)o->max_rows, (uint64_t)o->bucket_width,
                       (uint64_t)o->shuffle,    (uint64_t)o->decoder,  o->seed,
                       (uint64_t)o->pad_id,     (uint64_t)o->bos_id,   (uint64_t)o->eos_id,
                       (uint64_t)b->m};
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++)
        h = fnv64_u64(h, opts[i]);
    for (int64_t j = 0; j < b->m; j++) {
        qkv_example e;
        qkv_dataset_get(b->d, b->ex[j], &e);
        h = fnv64_u64(h, (uint64_t)b->ex[j]);
        h = fnv64_u64(h, (uint64_t)e.src_len);
        for (int64_t k = 0; k < e.src_len; k++)
            h = fnv64_u64(h, (uint64_t)(uint32_t)e.src[k]);
        h = fnv64_u64(h, (uint64_t)e.tgt_len);
        for (int64_t k = 0; k < e.tgt_len; k++)
            h = fnv64_u64(h, (uint64_t)(uint32_t)e.tgt[k]);
    }
    return h ? h : 1; /* 0 means "unchecked" in a saved position */
}

/* ---- the plan ---- */

/* 48 random bits for (seed, epoch, stream, i) from two 24-bit uniforms. */
static uint64_t rand48(uint64_t seed, uint64_t epoch, uint64_t stream, uint64_t i) {
    uint64_t hi = (uint64_t)(qkv_rng_uniform(seed, epoch, stream, 2 * i) * 16777216.0f);
    uint64_t lo = (uint64_t)(qkv_rng_uniform(seed, epoch, stream, 2 * i + 1) * 16777216.0f);
    return hi << 24 | lo;
}

static int by_key(const void *pa, const void *pb) {
    const sort_key *a = pa, *b = pb;
    if (a->a != b->a) return a->a < b->a ? -1 : 1;
    if (a->b != b->b) return a->b < b->b ? -1 : 1;
    return (a->j > b->j) - (a->j < b->j);
}

static void plan(qkv_batcher *b, uint64_t epoch) {
    const qkv_batch_opts *o = &b->o;
    int64_t bw = o->bucket_width > 1 ? o->bucket_width : 1;
    for (int64_t j = 0; j < b->m; j++) {
        int64_t w = b->width[j];
        if (o->shuffle)
            b->keys[j] = (sort_key){(uint64_t)((w > 0 ? w - 1 : 0) / bw),
                                    rand48(o->seed, epoch, 0, (uint64_t)b->ex[j]), j};
        else
            b->keys[j] = (sort_key){(uint64_t)w, 0, j};
    }
    qsort(b->keys, (size_t)b->m, sizeof *b->keys, by_key);
    int64_t nb = 0, rows = 0, widest = 0;
    for (int64_t k = 0; k < b->m; k++) {
        int64_t j = b->keys[k].j, w = b->width[j];
        int64_t wider = w > widest ? w : widest;
        bool fits = (wider == 0 || rows + 1 <= o->max_tokens / wider) &&
                    (!o->max_rows || rows + 1 <= o->max_rows);
        if (rows > 0 && !fits) {
            nb++;
            rows = 0;
            wider = w;
        }
        if (rows == 0) b->start[nb] = k;
        b->order[k] = j;
        rows++;
        widest = wider;
    }
    if (rows > 0) nb++;
    b->start[nb] = b->m;
    for (int64_t i = 0; i < nb; i++)
        b->perm[i] = i;
    if (o->shuffle)
        for (int64_t i = nb - 1; i > 0; i--) {
            int64_t r = (int64_t)(rand48(o->seed, epoch, 1, (uint64_t)i) % (uint64_t)(i + 1));
            int64_t t = b->perm[i];
            b->perm[i] = b->perm[r];
            b->perm[r] = t;
        }
    b->nb = nb;
    b->epoch = epoch;
    b->next = 0;
}

/* ---- public ---- */

qkv_status qkv_batcher_new(const qkv_dataset *d, const qkv_batch_opts *opts, qkv_batcher **out) {
    if (!d || !opts || !out)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_batcher_new: NULL argument");
    *out = NULL;
    const qkv_batch_opts *o = opts;
    if (o->max_tokens <= 0 || o->max_rows < 0 || o->bucket_width < 0)
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "qkv_batcher_new: max_tokens (%lld) must be > 0, max_rows (%lld) and "
                         "bucket_width (%lld) >= 0",
                         (long long)o->max_tokens, (long long)o->max_rows,
                         (long long)o->bucket_width);
    if (o->n_subset < 0 || (o->n_subset > 0 && !o->subset))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_batcher_new: subset of %lld examples is NULL",
                         (long long)o->n_subset);
    int64_t n = qkv_dataset_size(d);
    int64_t m = o->subset ? o->n_subset : n;
    if (m == 0)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_batcher_new: %s: no examples to batch",
                         qkv_dataset_name(d));
    qkv_batcher *b = calloc(1, sizeof *b);
    if (!b) return QKV_ERROR(QKV_ERR_OOM, "qkv_batcher_new: out of memory");
    b->d = d;
    b->o = *o;
    b->o.subset = NULL;
    b->m = m;
    b->ex = malloc((size_t)m * sizeof *b->ex);
    b->width = malloc((size_t)m * sizeof *b->width);
    b->order = malloc((size_t)m * sizeof *b->order);
    b->start = malloc((size_t)(m + 1) * sizeof *b->start);
    b->perm = malloc((size_t)m * sizeof *b->perm);
    b->keys = malloc((size_t)m * sizeof *b->keys);
    unsigned char *used = o->subset ? calloc((size_t)n, 1) : NULL;
    qkv_status st = QKV_OK;
    if (!b->ex || !b->width || !b->order || !b->start || !b->perm || !b->keys ||
        (o->subset && n && !used))
        st = QKV_ERROR(QKV_ERR_OOM, "qkv_batcher_new: out of memory");
    for (int64_t j = 0; !st && j < m; j++) {
        int64_t i = o->subset ? o->subset[j] : j;
        if (i < 0 || i >= n) {
            st = QKV_ERROR(
                QKV_ERR_INVALID_ARG,
                "qkv_batcher_new: subset[%lld] = %lld is not an example of %s (0 .. %lld)",
                (long long)j, (long long)i, qkv_dataset_name(d), (long long)n - 1);
            break;
        }
        if (used) {
            if (used[i]) {
                st = QKV_ERROR(QKV_ERR_INVALID_ARG,
                               "qkv_batcher_new: subset[%lld] = %lld appears twice", (long long)j,
                               (long long)i);
                break;
            }
            used[i] = 1;
        }
        qkv_example e;
        qkv_dataset_get(d, i, &e);
        int64_t t = e.tgt_len + (o->decoder ? 1 : 0);
        int64_t w = e.src_len > t ? e.src_len : t;
        if (w > o->max_tokens) {
            st = QKV_ERROR(QKV_ERR_INVALID_ARG,
                           "qkv_batcher_new: %s:%lld: example %lld is %lld tokens wide (source "
                           "%lld, target %lld%s), more than max_tokens %lld",
                           qkv_dataset_name(d), (long long)e.line, (long long)i, (long long)w,
                           (long long)e.src_len, (long long)e.tgt_len, o->decoder ? " + 1" : "",
                           (long long)o->max_tokens);
            break;
        }
        b->ex[j] = i;
        b->width[j] = w;
    }
    free(used);
    if (st) {
        qkv_batcher_free(b);
        return st;
    }
    b->fingerprint = fingerprint(b);
    plan(b, 0);
    *out = b;
    return QKV_OK;
}

void qkv_batcher_free(qkv_batcher *b) {
    if (!b) return;
    free(b->ex);
    free(b->width);
    free(b->order);
    free(b->start);
    free(b->perm);
    free(b->keys);
    free(b->src);
    free(b->tgt);
    free(b->dec_in);
    free(b->dec_out);
    free(b->src_len);
    free(b->tgt_len);
    free(b->example);
    free(b);
}

/* p (with *cap elements of elem bytes) grown to hold max(need, 1) elements; on failure p is
 * returned unchanged and *ok cleared. */
static void *reserve(void *p, int64_t *cap, int64_t need, size_t elem, bool *ok) {
    if (need < 1) need = 1;
    if (!*ok || need <= *cap) return p;
    void *q = realloc(p, (size_t)need * elem);
    if (!q) {
        *ok = false;
        return p;
    }
    *cap = need;
    return q;
}

/* Fill the arrays of batch `index` (a position in the plan) into the batcher's buffers. */
static qkv_status fill(qkv_batcher *b, int64_t index, qkv_batch *out) {
    const qkv_batch_opts *o = &b->o;
    int64_t pb = b->perm[index];
    int64_t k0 = b->start[pb], rows = b->start[pb + 1] - k0;
    int64_t S = 0, T = 0, W = 0;
    for (int64_t r = 0; r < rows; r++) {
        qkv_example e;
        qkv_dataset_get(b->d, b->ex[b->order[k0 + r]], &e);
        if (e.src_len > S) S = e.src_len;
        if (e.tgt_len > T) T = e.tgt_len;
        int64_t w = b->width[b->order[k0 + r]];
        if (w > W) W = w;
    }
    int64_t D = o->decoder ? T + 1 : 0;
    bool ok = true;
    b->src = reserve(b->src, &b->cap_src, rows * S, sizeof *b->src, &ok);
    b->tgt = reserve(b->tgt, &b->cap_tgt, rows * T, sizeof *b->tgt, &ok);
    b->dec_in = reserve(b->dec_in, &b->cap_dec_in, rows * D, sizeof *b->dec_in, &ok);
    b->dec_out = reserve(b->dec_out, &b->cap_dec_out, rows * D, sizeof *b->dec_out, &ok);
    b->src_len = reserve(b->src_len, &b->cap_src_len, rows, sizeof *b->src_len, &ok);
    b->tgt_len = reserve(b->tgt_len, &b->cap_tgt_len, rows, sizeof *b->tgt_len, &ok);
    b->example = reserve(b->example, &b->cap_example, rows, sizeof *b->example, &ok);
    if (!ok)
        return QKV_ERROR(QKV_ERR_OOM, "qkv_batcher_next: out of memory (%lld rows)",
                         (long long)rows);
    for (int64_t r = 0; r < rows; r++) {
        int64_t i = b->ex[b->order[k0 + r]];
        qkv_example e;
        qkv_dataset_get(b->d, i, &e);
        int32_t *s = b->src + r * S, *t = b->tgt + r * T;
        for (int64_t c = 0; c < S; c++)
            s[c] = c < e.src_len ? e.src[c] : o->pad_id;
        for (int64_t c = 0; c < T; c++)
            t[c] = c < e.tgt_len ? e.tgt[c] : o->pad_id;
        if (D) {
            int32_t *di = b->dec_in + r * D, *dout = b->dec_out + r * D;
            for (int64_t c = 0; c < D; c++) {
                di[c] = c == 0 ? o->bos_id : c <= e.tgt_len ? e.tgt[c - 1] : o->pad_id;
                dout[c] = c < e.tgt_len ? e.tgt[c] : c == e.tgt_len ? o->eos_id : o->pad_id;
            }
        }
        b->src_len[r] = (int32_t)e.src_len;
        b->tgt_len[r] = (int32_t)e.tgt_len;
        b->example[r] = i;
    }
    *out = (qkv_batch){.epoch = b->epoch,
                       .index = index,
                       .rows = rows,
                       .src_cols = S,
                       .tgt_cols = T,
                       .dec_cols = D,
                       .tokens = rows * W,
                       .src = b->src,
                       .tgt = b->tgt,
                       .dec_in = D ? b->dec_in : NULL,
                       .dec_out = D ? b->dec_out : NULL,
                       .src_len = b->src_len,
                       .tgt_len = b->tgt_len,
                       .example = b->example};
    return QKV_OK;
}

/* After the last batch of an epoch the next epoch is planned at once, so the position, the
 * number of batches and a saved checkpoint always refer to the epoch of the next batch. */
qkv_status qkv_batcher_next(qkv_batcher *b, qkv_batch *out) {
    if (!b || !out) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_batcher_next: NULL argument");
    qkv_status st = fill(b, b->next, out);
    if (st) return st;
    if (++b->next == b->nb) plan(b, b->epoch + 1);
    return QKV_OK;
}

int64_t qkv_batcher_num_batches(const qkv_batcher *b) {
    return b ? b->nb : 0;
}

qkv_batch_pos qkv_batcher_tell(const qkv_batcher *b) {
    if (!b) return (qkv_batch_pos){0};
    return (qkv_batch_pos){b->epoch, b->next, b->fingerprint};
}

qkv_status qkv_batcher_seek(qkv_batcher *b, qkv_batch_pos pos) {
    if (!b) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_batcher_seek: NULL argument");
    if (pos.fingerprint && pos.fingerprint != b->fingerprint)
        return QKV_ERROR(QKV_ERR_STATE,
                         "qkv_batcher_seek: %s: the position was saved for other data or batch "
                         "options (fingerprint %016llx, this batcher %016llx)",
                         qkv_dataset_name(b->d), (unsigned long long)pos.fingerprint,
                         (unsigned long long)b->fingerprint);
    uint64_t old_epoch = b->epoch;
    int64_t old_next = b->next;
    if (pos.epoch != b->epoch) plan(b, pos.epoch);
    if (pos.batch < 0 || pos.batch > b->nb) {
        int64_t nb = b->nb;
        if (old_epoch != b->epoch) plan(b, old_epoch);
        b->next = old_next;
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "qkv_batcher_seek: batch %lld is not in epoch %llu (0 .. %lld batches)",
                         (long long)pos.batch, (unsigned long long)pos.epoch, (long long)nb);
    }
    b->next = pos.batch;
    if (b->next == b->nb) plan(b, b->epoch + 1); /* the end of an epoch: the next one */
    return QKV_OK;
}

void qkv_batch_pos_format(qkv_batch_pos pos, char *buf, size_t size) {
    if (!buf || !size) return;
    snprintf(buf, size, "epoch=%llu batch=%lld fingerprint=%016llx", (unsigned long long)pos.epoch,
             (long long)pos.batch, (unsigned long long)pos.fingerprint);
}

/* "<name>=<decimal>" at *s followed by a space or the end; advances *s. */
static bool field_dec(const char **s, const char *name, int64_t *out) {
    size_t n = strlen(name);
    if (strncmp(*s, name, n) != 0 || (*s)[n] != '=') return false;
    const char *p = *s + n + 1, *e = p;
    while (*e >= '0' && *e <= '9')
        e++;
    if (!qkv__parse_uint(p, (size_t)(e - p), INT64_MAX, out)) return false;
    *s = e;
    return true;
}

qkv_status qkv_batch_pos_parse(const char *s, qkv_batch_pos *out) {
    if (!s || !out) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_batch_pos_parse: NULL argument");
    const char *p = s;
    int64_t epoch, batch;
    uint64_t fp = 0;
    bool ok = field_dec(&p, "epoch", &epoch) && *p++ == ' ' && field_dec(&p, "batch", &batch) &&
              *p++ == ' ' && strncmp(p, "fingerprint=", 12) == 0;
    if (ok) {
        p += 12;
        int digits = 0;
        for (; digits < 16; digits++, p++) {
            int v = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
            if (v < 0) break;
            fp = fp << 4 | (uint64_t)v;
        }
        ok = digits == 16 && *p == '\0';
    }
    if (!ok) {
        char q[200];
        return QKV_ERROR(QKV_ERR_FORMAT,
                         "qkv_batch_pos_parse: %s is not 'epoch=E batch=B fingerprint=<16 hex "
                         "digits>'",
                         qkv__quote(q, sizeof q, s, strlen(s)));
    }
    *out = (qkv_batch_pos){(uint64_t)epoch, batch, fp};
    return QKV_OK;
}
