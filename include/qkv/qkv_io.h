/*
 * qkv_io.h: safetensors model files (HuggingFace's format) and parameter-table checkpoints.
 *
 * Format: an 8-byte little-endian u64 N, then N bytes of UTF-8 JSON (the header), then the data
 * buffer. The header maps each tensor name to {"dtype": "F32", "shape": [2, 3], "data_offsets":
 * [begin, end]} (offsets relative to the buffer start) and may hold "__metadata__": a
 * string-to-string object. Data is row-major and little-endian. Dtypes: BOOL, U8, I8, F8_E4M3,
 * F8_E5M2 (1 byte), I16, U16, F16, BF16 (2), I32, U32, F32 (4), I64, U64, F64 (8).
 *
 * The reader validates everything before it returns a file: header size (1 .. 100,000,000 bytes
 * and inside the file), strict JSON (src/io/json.h) with nothing after the object but JSON
 * whitespace (writers pad with spaces), known dtypes, shapes of at most 8
 * non-negative dims whose byte size matches the offsets without overflow, offsets that tile the
 * buffer exactly (sorted by offset: contiguous from 0, no hole, no overlap, ending at the end of
 * the file), unique names, string-valued metadata. Every failure is QKV_ERR_FORMAT with a message
 * "<file>: <tensor or field>: <problem>" (QKV_ERR_IO when the file cannot be read).
 *
 * The writer (qkv_st_save) uses HuggingFace's layout: compact JSON (serde_json's escapes) with
 * "__metadata__" first (omitted when there is none), tensors in the given order laid out back to
 * back, header padded with spaces to a multiple of 8 bytes. Given the tensors in the order
 * HuggingFace sorts them (by dtype, then name) and at most one metadata key (it writes a hash
 * map), the bytes are identical. It writes to "<path>.tmp.<pid>", fsyncs, and renames over <path>,
 * so readers never see a half-written file; on any failure the temporary file is removed (two
 * threads of one process must not save to the same path at the same time).
 */
#ifndef QKV_IO_H
#define QKV_IO_H

#include "qkv_base.h"
#include "qkv_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QKV_ST_MAX_DIMS 8
#define QKV_ST_MAX_HEADER 100000000u /* the reference implementation's limit (bytes) */

/* ---- reader ---------------------------------------------------------------------------------- */

typedef struct qkv_st_file qkv_st_file;

typedef struct qkv_st_entry {
    const char *name;       /* valid until qkv_st_close */
    const char *dtype_name; /* "F32", "BF16", ... (always a known safetensors dtype) */
    qkv_dtype dtype;        /* only meaningful when known_dtype */
    bool known_dtype;       /* the dtype is one of qkv's own (F32, F64, I32) */
    int ndim;               /* 0 .. QKV_ST_MAX_DIMS; 0 is a scalar */
    int64_t shape[QKV_ST_MAX_DIMS];
    const void *data; /* nbytes of little-endian row-major data; at buffer start (64-byte
                         aligned) + begin offset, so aligned when the writer aligned the offsets */
    uint64_t nbytes;
} qkv_st_entry;

/* Read and validate a whole file (it is read into memory; nothing stays open). */
QKV_API qkv_status qkv_st_open(const char *path, qkv_st_file **out);
/* The same on bytes in memory (copied: buf may be freed afterwards). Messages name "<memory>". */
QKV_API qkv_status qkv_st_parse(const void *buf, size_t len, qkv_st_file **out);
QKV_API void qkv_st_close(qkv_st_file *f); /* accepts NULL */

/* Tensors, in the order of their data in the file (which is the writer's order). */
QKV_API int64_t qkv_st_count(const qkv_st_file *f);
QKV_API qkv_status qkv_st_get(const qkv_st_file *f, int64_t i, qkv_st_entry *out);
/* By name (binary search). QKV_ERR_INVALID_ARG naming the tensor when absent. */
QKV_API qkv_status qkv_st_find(const qkv_st_file *f, const char *name, qkv_st_entry *out);

/* "__metadata__" entries, in header order. */
QKV_API int64_t qkv_st_metadata_count(const qkv_st_file *f);
QKV_API qkv_status qkv_st_metadata_at(const qkv_st_file *f, int64_t i, const char **key,
                                      const char **value);
/* The value of key, NULL when absent. */
QKV_API const char *qkv_st_metadata_get(const qkv_st_file *f, const char *key);

/* The size of one element of a safetensors dtype name, 0 when the name is unknown. */
QKV_API size_t qkv_st_dtype_size(const char *dtype_name);

/* ---- writer ---------------------------------------------------------------------------------- */

typedef struct qkv_st_tensor {
    const char *name;       /* unique, non-empty, not "__metadata__", valid UTF-8 */
    const char *dtype_name; /* a safetensors dtype name ("F32") */
    int ndim;               /* 0 .. QKV_ST_MAX_DIMS */
    const int64_t *shape;   /* ndim non-negative dims (may be NULL when ndim == 0) */
    const void *data;       /* numel * dtype size bytes in host byte order (swapped to little
                               endian on big-endian hosts); may be NULL when that is 0 */
} qkv_st_tensor;

/* Write n tensors (in this order) and n_meta metadata pairs (unique keys, UTF-8 strings).
 * Atomic: <path>.tmp.<pid> + fsync + rename. QKV_ERR_IO names the path and the errno text
 * (e.g. "No space left on device"); QKV_ERR_INVALID_ARG for bad tensors or metadata. */
QKV_API qkv_status qkv_st_save(const char *path, const qkv_st_tensor *tensors, int64_t n,
                               const char *const *meta_keys, const char *const *meta_values,
                               int64_t n_meta);

/* ---- whole files ----------------------------------------------------------------------------- */

/* Read path whole into *data (malloc'd, NUL-terminated; *len bytes): a regular file of at most
 * max_bytes. The type is checked on a descriptor opened without blocking, before anything is
 * read: a FIFO, a device (/dev/zero) or a directory is QKV_ERR_IO naming what it is, as is a
 * file larger than max_bytes; the file is read to its size at open. The readers of the library
 * (model, safetensors, data and vocabulary files) take their files this way. */
QKV_API qkv_status qkv_file_read(const char *path, uint64_t max_bytes, char **data, size_t *len);
/* Write data[0, n) to path atomically: a temporary "<path>.tmp.<pid>.<k>" created exclusively,
 * fsynced and renamed over path, then the directory fsynced. A reader sees the old file or the
 * whole new one; on failure (a full disk, a file size limit) the temporary is removed and path is
 * as it was. */
QKV_API qkv_status qkv_file_write_atomic(const char *path, const void *data, size_t n);

/* ---- parameter tables ------------------------------------------------------------------------ */

/* Save every parameter of a finalized table, in registration order, under its name, in the
 * build's real dtype (F32 for the float library, F64 for the double one), so a save/load round
 * trip is exact. Metadata as in qkv_st_save. */
QKV_API qkv_status qkv_params_save(const qkv_params *p, const char *path,
                                   const char *const *meta_keys, const char *const *meta_values,
                                   int64_t n_meta);
/* Load every parameter from a file written by qkv_params_save (or PyTorch/HuggingFace with the
 * same names). Each parameter must be present with exactly its shape, as F32 or F64 (converted to
 * the build's real type, F64 -> F32 rounding to nearest); the file must hold no other tensors.
 * Errors (nothing is modified unless everything matches): QKV_ERR_FORMAT naming the missing or
 * extra tensors, a wrong dtype, or the first NaN / infinite value (a model with one computes NaN),
 * QKV_ERR_SHAPE naming the tensor and both shapes. */
QKV_API qkv_status qkv_params_load(qkv_params *p, const char *path);

#ifdef __cplusplus
}
#endif

#endif
