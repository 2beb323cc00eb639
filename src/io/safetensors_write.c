/*
 * safetensors_write.c: the atomic writer of HuggingFace safetensors files (qkv_st_save; see
 * qkv_io.h for the layout; the reference is huggingface/safetensors, safetensors/src/tensor.rs:
 * prepare / serialize_to_file, whose header is serde_json's compact output).
 *
 * The arguments are checked first (names, dtypes, shapes, sizes, duplicates, UTF-8), then the
 * header is built in memory with serde_json's string escapes, so that the bytes equal
 * HuggingFace's, and padded with spaces to a multiple of 8 bytes. Header and data stream through
 * a 64 KiB staging buffer (byte-swapped to little-endian on big-endian hosts) into
 * <path>.tmp.<pid>.<n> (qkv__create_temp), which is fsynced and renamed over <path>.
 */
#include "json.h"
#include "qkv/qkv_io.h"

#include "../core/internal.h"
#include "io_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* A growable string for the header. */
typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}
static void sb_str(sbuf *b, const char *s) {
    sb_put(b, s, strlen(s));
}
static void sb_u64(sbuf *b, uint64_t v) {
    char t[24];
    sb_put(b, t, (size_t)snprintf(t, sizeof t, "%llu", (unsigned long long)v));
}

/* A JSON string literal, escaped as serde_json does (so our bytes equal HuggingFace's). */
static void sb_json_string(sbuf *b, const char *s) {
    static const char hex[] = "0123456789abcdef";
    sb_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[7] = {'\\', 0, 0, 0, 0, 0, 0};
        size_t n = 2;
        switch (*p) {
        case '"':
            esc[1] = '"';
            break;
        case '\\':
            esc[1] = '\\';
            break;
        case '\b':
            esc[1] = 'b';
            break;
        case '\f':
            esc[1] = 'f';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        default:
            if (*p >= 0x20) {
                sb_put(b, (const char *)p, 1);
                continue;
            }
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[*p >> 4];
            esc[5] = hex[*p & 15];
            n = 6;
        }
        sb_put(b, esc, n);
    }
    sb_put(b, "\"", 1);
}

static bool valid_utf8(const char *s) {
    return qkv_json_utf8_valid(s, strlen(s));
}

static int by_cstr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first duplicate among n strings, NULL if all differ. tmp holds n pointers. */
static const char *find_duplicate(const char **tmp, int64_t n) {
    qsort(tmp, (size_t)n, sizeof *tmp, by_cstr);
    for (int64_t i = 1; i < n; i++)
        if (!strcmp(tmp[i - 1], tmp[i])) return tmp[i];
    return NULL;
}

/* Staging buffer in front of write(2). err holds the first errno (0: all good). */
typedef struct {
    int fd;
    int err;
    unsigned char buf[65536];
    size_t n;
} st_writer;

static void w_flush(st_writer *w) {
    const unsigned char *p = w->buf;
    size_t n = w->n;
    w->n = 0;
    while (n && !w->err) {
        ssize_t r = write(w->fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) { /* a 0-byte write cannot make progress: treat as a full disk */
            w->err = r < 0 ? errno : ENOSPC;
            break;
        }
        p += r;
        n -= (size_t)r;
    }
}

/* Append n bytes; elem > 1 swaps each element to little-endian on big-endian hosts. */
static void w_put(st_writer *w, const unsigned char *p, size_t n, size_t elem) {
    bool swap = elem > 1 && !qkv__host_little_endian();
    while (n && !w->err) {
        size_t room = sizeof w->buf - w->n;
        if (swap) room -= room % elem;
        if (room == 0) {
            w_flush(w);
            continue;
        }
        size_t k = n < room ? n : room;
        memcpy(w->buf + w->n, p, k);
        if (swap)
            for (size_t i = 0; i < k; i += elem)
                for (size_t a = 0, z = elem - 1; a < z; a++, z--) {
                    unsigned char t = w->buf[w->n + i + a];
                    w->buf[w->n + i + a] = w->buf[w->n + i + z];
                    w->buf[w->n + i + z] = t;
                }
        w->n += k;
        p += k;
        n -= k;
        if (w->n == sizeof w->buf) w_flush(w);
    }
}

static qkv_status build_header(const qkv_st_tensor *t, int64_t n, const char *const *mk,
                               const char *const *mv, int64_t n_meta, const uint64_t *nbytes,
                               sbuf *h) {
    sb_str(h, "{");
    if (n_meta > 0) {
        sb_str(h, "\"__metadata__\":{");
        for (int64_t i = 0; i < n_meta; i++) {
            if (i) sb_str(h, ",");
            sb_json_string(h, mk[i]);
            sb_str(h, ":");
            sb_json_string(h, mv[i]);
        }
        sb_str(h, "}");
        if (n) sb_str(h, ",");
    }
    uint64_t off = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i) sb_str(h, ",");
        sb_json_string(h, t[i].name);
        sb_str(h, ":{\"dtype\":");
        sb_json_string(h, t[i].dtype_name);
        sb_str(h, ",\"shape\":[");
        for (int d = 0; d < t[i].ndim; d++) {
            if (d) sb_str(h, ",");
            sb_u64(h, (uint64_t)t[i].shape[d]);
        }
        sb_str(h, "],\"data_offsets\":[");
        sb_u64(h, off);
        sb_str(h, ",");
        sb_u64(h, off + nbytes[i]);
        sb_str(h, "]}");
        off += nbytes[i];
    }
    sb_str(h, "}");
    while (!h->oom && h->n % 8)
        sb_str(h, " ");
    return h->oom ? QKV_ERROR(QKV_ERR_OOM, "qkv_st_save: out of memory building the header")
                  : QKV_OK;
}

/* Check the arguments; fills nbytes[i]. tmp holds max(n, n_meta) pointers. */
static qkv_status check_save_args(const char *path, const qkv_st_tensor *t, int64_t n,
                                  const char *const *mk, const char *const *mv, int64_t n_meta,
                                  uint64_t *nbytes, const char **tmp) {
    uint64_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        const char *nm = t[i].name;
        if (!nm || !nm[0])
            return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_st_save: %s: tensor %lld has no name", path,
                             (long long)i);
        if (!strcmp(nm, "__metadata__") || !valid_utf8(nm))
            return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_st_save: %s: tensor name '%.200s' is %s",
                             path, nm, valid_utf8(nm) ? "reserved" : "not valid UTF-8");
        size_t elem = qkv_st_dtype_size(t[i].dtype_name);
        if (!elem)
            return QKV_ERROR(QKV_ERR_INVALID_ARG,
                             "qkv_st_save: %s: tensor '%.200s': unknown dtype "
                             "'%.40s'",
                             path, nm, t[i].dtype_name ? t[i].dtype_name : "(null)");
        if (t[i].ndim < 0 || t[i].ndim > QKV_ST_MAX_DIMS || (t[i].ndim > 0 && !t[i].shape))
            return QKV_ERROR(QKV_ERR_INVALID_ARG,
                             "qkv_st_save: %s: tensor '%.200s': %d dims "
                             "(0 .. %d, shape non-NULL)",
                             path, nm, t[i].ndim, QKV_ST_MAX_DIMS);
        for (int d = 0; d < t[i].ndim; d++)
            if (t[i].shape[d] < 0)
                return QKV_ERROR(QKV_ERR_INVALID_ARG,
                                 "qkv_st_save: %s: tensor '%.200s': dim %d "
                                 "is negative (%lld)",
                                 path, nm, d, (long long)t[i].shape[d]);
        uint64_t numel;
        if (!qkv__st_sizes(t[i].shape, t[i].ndim, elem, &numel, &nbytes[i]) ||
            nbytes[i] > UINT64_MAX - total)
            return QKV_ERROR(QKV_ERR_INVALID_ARG,
                             "qkv_st_save: %s: tensor '%.200s': size "
                             "overflows",
                             path, nm);
        total += nbytes[i];
        if (nbytes[i] && !t[i].data)
            return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_st_save: %s: tensor '%.200s': data is NULL",
                             path, nm);
        tmp[i] = nm;
    }
    const char *dup = find_duplicate(tmp, n);
    if (dup)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_st_save: %s: duplicate tensor name '%.200s'",
                         path, dup);
    for (int64_t i = 0; i < n_meta; i++) {
        if (!mk[i] || !mv[i])
            return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_st_save: %s: metadata %lld is NULL", path,
                             (long long)i);
        if (!valid_utf8(mk[i]) || !valid_utf8(mv[i]))
            return QKV_ERROR(QKV_ERR_INVALID_ARG,
                             "qkv_st_save: %s: metadata '%.200s' is not valid "
                             "UTF-8",
                             path, mk[i]);
        tmp[i] = mk[i];
    }
    dup = find_duplicate(tmp, n_meta);
    if (dup)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_st_save: %s: duplicate metadata key '%.200s'",
                         path, dup);
    return QKV_OK;
}

static qkv_status write_file(const char *path, const sbuf *h, const qkv_st_tensor *t, int64_t n,
                             const uint64_t *nbytes) {
    st_writer *w = malloc(sizeof *w);
    if (!w) return QKV_ERROR(QKV_ERR_OOM, "qkv_st_save: out of memory");
    char *tmp = NULL;
    qkv_status created = qkv__create_temp("qkv_st_save", path, &tmp, &w->fd);
    if (created) {
        free(w);
        return created;
    }
    w->err = 0;
    w->n = 0;
    unsigned char size_field[8];
    for (int i = 0; i < 8; i++)
        size_field[i] = (unsigned char)((uint64_t)h->n >> (8 * i));
    w_put(w, size_field, 8, 1);
    w_put(w, (const unsigned char *)h->p, h->n, 1);
    for (int64_t i = 0; i < n; i++)
        if (nbytes[i]) w_put(w, t[i].data, (size_t)nbytes[i], qkv_st_dtype_size(t[i].dtype_name));
    w_flush(w);
    const char *what = "write";
    if (!w->err && fsync(w->fd) != 0) w->err = errno, what = "fsync";
    if (close(w->fd) != 0 && !w->err) w->err = errno, what = "close";
    if (!w->err && rename(tmp, path) != 0) w->err = errno, what = "rename";
    int e = w->err;
    free(w);
    if (e) unlink(tmp);
    free(tmp);
    if (e) return QKV_ERROR(QKV_ERR_IO, "qkv_st_save: %s: %s failed: %s", path, what, strerror(e));
    qkv__fsync_parent_dir(path);
    return QKV_OK;
}

qkv_status qkv_st_save(const char *path, const qkv_st_tensor *tensors, int64_t n,
                       const char *const *meta_keys, const char *const *meta_values,
                       int64_t n_meta) {
    if (!path || !path[0] || n < 0 || n_meta < 0 || (n && !tensors) ||
        (n_meta && (!meta_keys || !meta_values)))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_st_save: NULL or negative argument");
    int64_t m = (n > n_meta ? n : n_meta) + 1;
    uint64_t *nbytes = malloc((size_t)(n + 1) * sizeof *nbytes);
    const char **tmp_names = malloc((size_t)m * sizeof *tmp_names);
    sbuf h = {0};
    qkv_status st = QKV_OK;
    if (!nbytes || !tmp_names) st = QKV_ERROR(QKV_ERR_OOM, "qkv_st_save: out of memory");
    if (st == QKV_OK)
        st = check_save_args(path, tensors, n, meta_keys, meta_values, n_meta, nbytes, tmp_names);
    if (st == QKV_OK) st = build_header(tensors, n, meta_keys, meta_values, n_meta, nbytes, &h);
    if (st == QKV_OK && h.n > QKV_ST_MAX_HEADER)
        st = QKV_ERROR(QKV_ERR_INVALID_ARG,
                       "qkv_st_save: %s: header of %zu bytes exceeds the "
                       "%u-byte limit of readers",
                       path, h.n, QKV_ST_MAX_HEADER);
    if (st == QKV_OK) st = write_file(path, &h, tensors, n, nbytes);
    free(h.p);
    free(tmp_names);
    free(nbytes);
    return st;
}
