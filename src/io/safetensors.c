/*
 * safetensors.c: the reader of HuggingFace safetensors files (see qkv_io.h for the format and the
 * validation rules; the reference is huggingface/safetensors, safetensors/src/tensor.rs:
 * read_metadata / Metadata::validate), and the table of safetensors dtypes.
 *
 * The whole file goes into one 64-byte-aligned allocation, placed so that the data buffer (after
 * the 8 + N header bytes) starts on a 64-byte boundary. The header is parsed by the strict parser
 * of json.c; tensor entries point into the allocation and into the JSON tree, which the file
 * keeps, so nothing is copied twice. The writer is safetensors_write.c.
 */
#include "json.h"
#include "qkv/qkv_io.h"

#include "../core/internal.h"
#include "io_util.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define ST_ALIGN 64

struct qkv_st_file {
    char *label;                 /* path, or "<memory>" */
    unsigned char *alloc;        /* owns the bytes */
    const unsigned char *buffer; /* data buffer (64-byte aligned) */
    uint64_t buffer_size;
    qkv_json_doc *doc;     /* owns names, dtype names, metadata strings */
    qkv_st_entry *entries; /* sorted by data offset */
    int64_t n;
    const qkv_st_entry **by_name; /* sorted by name */
    const qkv_json_value **meta;  /* "__metadata__" members, header order */
    int64_t n_meta;
};

/* ---- dtypes ---------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    size_t size;
} st_dtypes[] = {{"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
                 {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
                 {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};

/* The canonical name string (static) and size of a dtype name; NULL when unknown. */
static const char *st_dtype_lookup(const char *name, size_t len, size_t *size) {
    for (size_t i = 0; i < sizeof st_dtypes / sizeof *st_dtypes; i++)
        if (strlen(st_dtypes[i].name) == len && memcmp(st_dtypes[i].name, name, len) == 0) {
            if (size) *size = st_dtypes[i].size;
            return st_dtypes[i].name;
        }
    return NULL;
}

size_t qkv_st_dtype_size(const char *dtype_name) {
    size_t size = 0;
    if (dtype_name) st_dtype_lookup(dtype_name, strlen(dtype_name), &size);
    return size;
}

static bool st_to_qkv_dtype(const char *name, qkv_dtype *out) {
    if (!strcmp(name, "F32"))
        *out = QKV_F32;
    else if (!strcmp(name, "F64"))
        *out = QKV_F64;
    else if (!strcmp(name, "I32"))
        *out = QKV_I32;
    else
        return false;
    return true;
}

/* ---- reader ---------------------------------------------------------------------------------- */

static uint64_t read_le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

#define FORMAT_ERROR(...) QKV_ERROR(QKV_ERR_FORMAT, __VA_ARGS__)

typedef struct {
    uint64_t begin, end;
    int64_t header_index;
    qkv_st_entry entry;
} st_pending;

static int by_offsets(const void *a, const void *b) {
    const st_pending *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->header_index < y->header_index ? -1 : (x->header_index > y->header_index);
}

static int by_entry_name(const void *a, const void *b) {
    return strcmp((*(const qkv_st_entry *const *)a)->name, (*(const qkv_st_entry *const *)b)->name);
}

static const char *type_of(const qkv_json_value *v) {
    return qkv_json_type_name(v->type);
}

static qkv_status parse_metadata(qkv_st_file *f, const qkv_json_value *m) {
    const char *file = f->label;
    if (m->type != QKV_JSON_OBJECT)
        return FORMAT_ERROR("%s: __metadata__ must be an object of strings, got %s", file,
                            type_of(m));
    f->meta = malloc((size_t)(m->count ? m->count : 1) * sizeof *f->meta);
    if (!f->meta) return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", file);
    for (int64_t i = 0; i < m->count; i++) {
        const qkv_json_value *v = &m->items[i];
        if (strlen(v->key) != v->key_len)
            return FORMAT_ERROR("%s: __metadata__ key \"%.200s\" contains a NUL character", file,
                                v->key);
        if (v->type != QKV_JSON_STRING)
            return FORMAT_ERROR("%s: __metadata__ value of \"%.200s\" must be a string, got %s",
                                file, v->key, type_of(v));
        if (strlen(v->str) != v->len)
            return FORMAT_ERROR("%s: __metadata__ value of \"%.200s\" contains a NUL character",
                                file, v->key);
        f->meta[f->n_meta++] = v;
    }
    return QKV_OK;
}

/* Validate one tensor entry (everything but its place among the others). */
static qkv_status parse_tensor(qkv_st_file *f, const qkv_json_value *v, st_pending *t) {
    const char *file = f->label, *name = v->key;
    if (strlen(v->key) != v->key_len)
        return FORMAT_ERROR("%s: tensor name \"%.200s\" contains a NUL character", file, name);
    if (v->type != QKV_JSON_OBJECT)
        return FORMAT_ERROR("%s: tensor '%.200s': entry must be an object, got %s", file, name,
                            type_of(v));
    const qkv_json_value *dtype = NULL, *shape = NULL, *offsets = NULL;
    for (int64_t i = 0; i < v->count; i++) {
        const qkv_json_value *fld = &v->items[i];
        if (!strcmp(fld->key, "dtype"))
            dtype = fld;
        else if (!strcmp(fld->key, "shape"))
            shape = fld;
        else if (!strcmp(fld->key, "data_offsets"))
            offsets = fld;
        else
            return FORMAT_ERROR("%s: tensor '%.200s': unknown field \"%.100s\"", file, name,
                                fld->key);
    }
    const char *missing = !dtype ? "dtype" : !shape ? "shape" : !offsets ? "data_offsets" : NULL;
    if (missing)
        return FORMAT_ERROR("%s: tensor '%.200s': missing field \"%s\"", file, name, missing);

    qkv_st_entry *e = &t->entry;
    e->name = v->key;
    if (dtype->type != QKV_JSON_STRING)
        return FORMAT_ERROR("%s: tensor '%.200s': \"dtype\" must be a string, got %s", file, name,
                            type_of(dtype));
    size_t elem = 0;
    e->dtype_name = st_dtype_lookup(dtype->str, dtype->len, &elem);
    if (!e->dtype_name)
        return FORMAT_ERROR("%s: tensor '%.200s': unknown dtype \"%.40s\"", file, name, dtype->str);
    e->known_dtype = st_to_qkv_dtype(e->dtype_name, &e->dtype);

    if (shape->type != QKV_JSON_ARRAY)
        return FORMAT_ERROR(
            "%s: tensor '%.200s': \"shape\" must be a list of non-negative integers, "
            "got %s",
            file, name, type_of(shape));
    if (shape->count > QKV_ST_MAX_DIMS)
        return FORMAT_ERROR("%s: tensor '%.200s': \"shape\" has %lld dims (at most %d)", file, name,
                            (long long)shape->count, QKV_ST_MAX_DIMS);
    e->ndim = (int)shape->count;
    for (int d = 0; d < e->ndim; d++) {
        uint64_t dim;
        const qkv_json_value *s = &shape->items[d];
        if (!qkv_json_u64(s, &dim))
            return FORMAT_ERROR(
                "%s: tensor '%.200s': \"shape\"[%d] must be a non-negative integer, "
                "got %s%.40s",
                file, name, d, s->type == QKV_JSON_INT ? "" : type_of(s),
                s->type == QKV_JSON_INT ? s->str : "");
        if (dim > (uint64_t)INT64_MAX)
            return FORMAT_ERROR("%s: tensor '%.200s': \"shape\"[%d] = %llu is too large", file,
                                name, d, (unsigned long long)dim);
        e->shape[d] = (int64_t)dim;
    }
    uint64_t numel;
    char sbuf[256];
    qkv__shape64_str(e->shape, e->ndim, sbuf, sizeof sbuf);
    if (!qkv__st_sizes(e->shape, e->ndim, elem, &numel, &e->nbytes))
        return FORMAT_ERROR("%s: tensor '%.200s': shape %s of %s overflows 64-bit sizes", file,
                            name, sbuf, e->dtype_name);

    if (offsets->type != QKV_JSON_ARRAY || offsets->count != 2 ||
        !qkv_json_u64(&offsets->items[0], &t->begin) || !qkv_json_u64(&offsets->items[1], &t->end))
        return FORMAT_ERROR(
            "%s: tensor '%.200s': \"data_offsets\" must be two non-negative integers "
            "[begin, end]",
            file, name);
    if (t->begin > t->end)
        return FORMAT_ERROR("%s: tensor '%.200s': \"data_offsets\" [%llu, %llu] decrease", file,
                            name, (unsigned long long)t->begin, (unsigned long long)t->end);
    if (t->end - t->begin != e->nbytes)
        return FORMAT_ERROR("%s: tensor '%.200s': shape %s of %s needs %llu bytes but data_offsets "
                            "[%llu, %llu] span %llu",
                            file, name, sbuf, e->dtype_name, (unsigned long long)e->nbytes,
                            (unsigned long long)t->begin, (unsigned long long)t->end,
                            (unsigned long long)(t->end - t->begin));
    if (t->end > f->buffer_size)
        return FORMAT_ERROR("%s: tensor '%.200s': data_offsets [%llu, %llu] extend past the end of "
                            "the %llu-byte data buffer",
                            file, name, (unsigned long long)t->begin, (unsigned long long)t->end,
                            (unsigned long long)f->buffer_size);
    return QKV_OK;
}

/* Sorted by offsets, the tensors must tile [0, buffer_size) exactly. */
static qkv_status check_tiling(const qkv_st_file *f, const st_pending *t, int64_t n) {
    const char *file = f->label;
    uint64_t pos = 0;
    for (int64_t i = 0; i < n; i++) {
        if (t[i].begin < pos)
            return FORMAT_ERROR("%s: tensor '%.200s' (data_offsets [%llu, %llu]) overlaps tensor "
                                "'%.200s' ([%llu, %llu])",
                                file, t[i].entry.name, (unsigned long long)t[i].begin,
                                (unsigned long long)t[i].end, t[i - 1].entry.name,
                                (unsigned long long)t[i - 1].begin,
                                (unsigned long long)t[i - 1].end);
        if (t[i].begin > pos) {
            if (i == 0)
                return FORMAT_ERROR("%s: hole of %llu bytes at the start of the data buffer (the "
                                    "first tensor, '%.200s', begins at %llu)",
                                    file, (unsigned long long)t[i].begin, t[i].entry.name,
                                    (unsigned long long)t[i].begin);
            return FORMAT_ERROR("%s: hole of %llu bytes between tensor '%.200s' (ends at %llu) and "
                                "tensor '%.200s' (begins at %llu)",
                                file, (unsigned long long)(t[i].begin - pos), t[i - 1].entry.name,
                                (unsigned long long)pos, t[i].entry.name,
                                (unsigned long long)t[i].begin);
        }
        pos = t[i].end;
    }
    if (pos != f->buffer_size)
        return FORMAT_ERROR("%s: the data buffer has %llu bytes but the tensors cover only %llu "
                            "(trailing bytes after the last tensor)",
                            file, (unsigned long long)f->buffer_size, (unsigned long long)pos);
    return QKV_OK;
}

/* Validate bytes[0, len) (inside f->alloc, owned by f) and fill f. */
static qkv_status st_parse_into(qkv_st_file *f, const unsigned char *bytes, size_t len) {
    const char *file = f->label;
    if (len < 8)
        return FORMAT_ERROR("%s: file is %zu bytes, shorter than the 8-byte header size field",
                            file, len);
    uint64_t hn = read_le64(bytes);
    if (hn == 0) return FORMAT_ERROR("%s: header size is 0", file);
    if (hn > QKV_ST_MAX_HEADER)
        return FORMAT_ERROR("%s: header size %llu exceeds the limit of %u bytes", file,
                            (unsigned long long)hn, QKV_ST_MAX_HEADER);
    if (hn > len - 8)
        return FORMAT_ERROR("%s: header size %llu exceeds the %zu bytes after the size field "
                            "(truncated file?)",
                            file, (unsigned long long)hn, len - 8);
    f->buffer = bytes + 8 + hn;
    f->buffer_size = len - 8 - hn;

    qkv_json_error jerr;
    qkv_status st = qkv_json_parse((const char *)bytes + 8, (size_t)hn, &f->doc, &jerr);
    if (st == QKV_ERR_OOM) return QKV_ERROR(st, "%s: out of memory parsing the header", file);
    if (st != QKV_OK)
        return FORMAT_ERROR("%s: header is not valid JSON: %s at byte %zu of the header", file,
                            jerr.message, jerr.offset);
    const qkv_json_value *root = qkv_json_root(f->doc);
    if (root->type != QKV_JSON_OBJECT)
        return FORMAT_ERROR("%s: header must be a JSON object, got %s", file, type_of(root));

    st_pending *pend = malloc((size_t)(root->count ? root->count : 1) * sizeof *pend);
    if (!pend) return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", file);
    int64_t n = 0;
    for (int64_t i = 0; i < root->count && st == QKV_OK; i++) {
        const qkv_json_value *v = &root->items[i];
        if (!strcmp(v->key, "__metadata__") && v->key_len == 12) {
            st = parse_metadata(f, v);
            continue;
        }
        memset(&pend[n], 0, sizeof pend[n]);
        pend[n].header_index = i;
        st = parse_tensor(f, v, &pend[n]);
        n++;
    }
    if (st == QKV_OK) {
        qsort(pend, (size_t)n, sizeof *pend, by_offsets);
        st = check_tiling(f, pend, n);
    }
    if (st == QKV_OK) {
        f->entries = malloc((size_t)(n ? n : 1) * sizeof *f->entries);
        f->by_name = malloc((size_t)(n ? n : 1) * sizeof *f->by_name);
        if (!f->entries || !f->by_name) st = QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", file);
    }
    if (st == QKV_OK) {
        for (int64_t i = 0; i < n; i++) {
            f->entries[i] = pend[i].entry;
            f->entries[i].data = f->buffer + pend[i].begin;
            f->by_name[i] = &f->entries[i];
        }
        f->n = n;
        qsort(f->by_name, (size_t)n, sizeof *f->by_name, by_entry_name);
    }
    free(pend);
    return st;
}

static qkv_st_file *st_new(const char *label) {
    qkv_st_file *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->label = malloc(strlen(label) + 1);
    if (!f->label) {
        free(f);
        return NULL;
    }
    strcpy(f->label, label);
    return f;
}

/* Room for len bytes placed so that byte 8 + N (the data buffer) is 64-byte aligned, where N is
 * the header size the first 8 bytes announce (taken as 0 when it is unusable). */
static unsigned char *st_alloc(const unsigned char *first8, size_t have, size_t len, size_t *pad) {
    uint64_t hn = have >= 8 ? read_le64(first8) : 0;
    if (hn > QKV_ST_MAX_HEADER) hn = 0;
    *pad = (size_t)((ST_ALIGN - (8 + hn) % ST_ALIGN) % ST_ALIGN);
    if (len > SIZE_MAX - 2 * ST_ALIGN) return NULL;
    size_t bytes = (len + *pad + ST_ALIGN) & ~(size_t)(ST_ALIGN - 1);
    return aligned_alloc(ST_ALIGN, bytes);
}

qkv_status qkv_st_parse(const void *buf, size_t len, qkv_st_file **out) {
    if (out) *out = NULL;
    if (!out || (!buf && len)) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_st_parse: NULL argument");
    qkv_st_file *f = st_new("<memory>");
    size_t pad = 0;
    if (f) f->alloc = st_alloc(buf, len, len, &pad);
    if (!f || !f->alloc) {
        qkv_st_close(f);
        return QKV_ERROR(QKV_ERR_OOM, "qkv_st_parse: out of memory (%zu bytes)", len);
    }
    if (len) memcpy(f->alloc + pad, buf, len);
    qkv_status st = st_parse_into(f, f->alloc + pad, len);
    if (st != QKV_OK) {
        qkv_st_close(f);
        return st;
    }
    *out = f;
    return QKV_OK;
}

static bool read_full(int fd, unsigned char *p, size_t n, int *err) {
    while (n) {
        ssize_t r = read(fd, p, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            *err = r < 0 ? errno : 0;
            return false;
        }
        p += r;
        n -= (size_t)r;
    }
    return true;
}

qkv_status qkv_st_open(const char *path, qkv_st_file **out) {
    if (out) *out = NULL;
    if (!path || !out) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_st_open: NULL argument");
    int fd = -1;
    uint64_t file_size = 0;
    qkv_status opened = qkv__open_regular(NULL, path, &fd, &file_size);
    if (opened) return opened;
    if (file_size > (uint64_t)(SIZE_MAX / 2)) {
        close(fd);
        return QKV_ERROR(QKV_ERR_OOM, "%s: file too large for memory", path);
    }
    size_t len = (size_t)file_size;
    unsigned char first8[8];
    int err = 0;
    size_t have = len < 8 ? len : 8;
    qkv_st_file *f = NULL;
    qkv_status st = QKV_OK;
    size_t pad = 0;
    if (!read_full(fd, first8, have, &err)) {
        st =
            QKV_ERROR(QKV_ERR_IO, "%s: read failed: %s", path, err ? strerror(err) : "file shrank");
    } else if (!(f = st_new(path)) || !(f->alloc = st_alloc(first8, have, len, &pad))) {
        st = QKV_ERROR(QKV_ERR_OOM, "%s: out of memory (%zu bytes)", path, len);
    } else {
        memcpy(f->alloc + pad, first8, have);
        if (!read_full(fd, f->alloc + pad + have, len - have, &err))
            st = QKV_ERROR(QKV_ERR_IO, "%s: read failed: %s", path,
                           err ? strerror(err) : "file shrank while reading");
    }
    close(fd);
    if (st == QKV_OK) st = st_parse_into(f, f->alloc + pad, len);
    if (st != QKV_OK) {
        qkv_st_close(f);
        return st;
    }
    *out = f;
    return QKV_OK;
}

void qkv_st_close(qkv_st_file *f) {
    if (!f) return;
    qkv_json_free(f->doc);
    free(f->entries);
    free(f->by_name);
    free(f->meta);
    free(f->alloc);
    free(f->label);
    free(f);
}

int64_t qkv_st_count(const qkv_st_file *f) {
    return f ? f->n : 0;
}

qkv_status qkv_st_get(const qkv_st_file *f, int64_t i, qkv_st_entry *out) {
    if (!f || !out) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_st_get: NULL argument");
    if (i < 0 || i >= f->n)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_st_get: %s: index %lld out of range [0, %lld)",
                         f->label, (long long)i, (long long)f->n);
    *out = f->entries[i];
    return QKV_OK;
}

qkv_status qkv_st_find(const qkv_st_file *f, const char *name, qkv_st_entry *out) {
    if (!f || !name || !out) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_st_find: NULL argument");
    int64_t lo = 0, hi = f->n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->by_name[mid]->name, name);
        if (c == 0) {
            *out = *f->by_name[mid];
            return QKV_OK;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: no tensor named '%.200s'", f->label, name);
}

int64_t qkv_st_metadata_count(const qkv_st_file *f) {
    return f ? f->n_meta : 0;
}

qkv_status qkv_st_metadata_at(const qkv_st_file *f, int64_t i, const char **key,
                              const char **value) {
    if (!f || !key || !value)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_st_metadata_at: NULL argument");
    if (i < 0 || i >= f->n_meta)
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "qkv_st_metadata_at: index %lld out of range [0, %lld)", (long long)i,
                         (long long)f->n_meta);
    *key = f->meta[i]->key;
    *value = f->meta[i]->str;
    return QKV_OK;
}

const char *qkv_st_metadata_get(const qkv_st_file *f, const char *key) {
    if (!f || !key) return NULL;
    for (int64_t i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta[i]->key, key)) return f->meta[i]->str;
    return NULL;
}
