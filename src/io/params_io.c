/*
 * params_io.c: save / load a parameter table as a safetensors file.
 *
 * Save writes every parameter in registration order under its name (the PyTorch state_dict key)
 * in the build's real dtype, so a float build writes F32 (what PyTorch models hold) and the
 * double build F64; both round trips are exact. Load accepts F32 and F64 in either build
 * (F32 -> double is exact, F64 -> float rounds to nearest), checks the whole file against the
 * table first (every parameter present with its exact shape, no other tensor), and only then
 * copies, so a failed load leaves the parameters untouched.
 */
#include "qkv/qkv_io.h"

#include "../core/internal.h"
#include "io_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

qkv_status qkv_params_save(const qkv_params *p, const char *path, const char *const *meta_keys,
                           const char *const *meta_values, int64_t n_meta) {
    if (!p || !path) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_params_save: NULL argument");
    if (!qkv_params_block(p, QKV_BLOCK_DATA))
        return QKV_ERROR(QKV_ERR_STATE, "qkv_params_save: %s: the table is not finalized", path);
    int64_t n = qkv_params_count(p);
    qkv_st_tensor *t = malloc((size_t)(n ? n : 1) * sizeof *t);
    if (!t) return QKV_ERROR(QKV_ERR_OOM, "qkv_params_save: out of memory");
    for (int64_t i = 0; i < n; i++) {
        const qkv_tensor *x = qkv_params_get(p, i);
        t[i] = (qkv_st_tensor){x->name, qkv_dtype_name(QKV_REAL), x->ndim, x->shape, x->data};
    }
    qkv_status st = qkv_st_save(path, t, n, meta_keys, meta_values, n_meta);
    free(t);
    return st;
}

/* "'a', 'b', 'c' and 4 more" into buf. */
static void name_list(char *buf, size_t size, const char **names, int64_t n) {
    size_t k = 0;
    buf[0] = '\0';
    for (int64_t i = 0; i < n && i < 5 && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, "%s'%.80s'", i ? ", " : "", names[i]);
    if (n > 5 && k < size) snprintf(buf + k, size - k, " and %lld more", (long long)(n - 5));
}

/* Element i of little-endian F32 / F64 data as a double (data may be unaligned). */
static double load_elem(const unsigned char *data, int64_t i, size_t size, bool swap) {
    unsigned char b[8];
    for (size_t k = 0; k < size; k++)
        b[k] = data[(size_t)i * size + (swap ? size - 1 - k : k)];
    if (size == 4) {
        float f;
        memcpy(&f, b, 4);
        return f;
    }
    double d;
    memcpy(&d, b, 8);
    return d;
}

/* Every parameter present with the right dtype and shape, no extra tensor. */
static qkv_status check_file(const qkv_params *p, const qkv_st_file *f, const char *path,
                             const char **names) {
    int64_t n = qkv_params_count(p), nf = qkv_st_count(f), missing = 0, extra = 0;
    char list[512];
    for (int64_t i = 0; i < n; i++) {
        qkv_st_entry e;
        if (qkv_st_find(f, qkv_params_get(p, i)->name, &e) != QKV_OK)
            names[missing++] = qkv_params_get(p, i)->name;
    }
    if (missing) {
        name_list(list, sizeof list, names, missing);
        return QKV_ERROR(QKV_ERR_FORMAT, "%s: %lld parameter%s missing from the file: %s", path,
                         (long long)missing, missing == 1 ? " is" : "s are", list);
    }
    if (nf != n) { /* every parameter was found, so the file has nf - n others */
        for (int64_t i = 0; i < nf; i++) {
            qkv_st_entry e;
            qkv_st_get(f, i, &e);
            if (!qkv_params_find(p, e.name)) names[extra++] = e.name;
        }
        name_list(list, sizeof list, names, extra);
        return QKV_ERROR(QKV_ERR_FORMAT,
                         "%s: the file has %lld tensor%s that %s not a parameter: "
                         "%s",
                         path, (long long)extra, extra == 1 ? "" : "s", extra == 1 ? "is" : "are",
                         list);
    }
    for (int64_t i = 0; i < n; i++) {
        const qkv_tensor *x = qkv_params_get(p, i);
        qkv_st_entry e;
        qkv_st_find(f, x->name, &e);
        if (!e.known_dtype || (e.dtype != QKV_F32 && e.dtype != QKV_F64))
            return QKV_ERROR(QKV_ERR_FORMAT,
                             "%s: tensor '%.200s' has dtype %s; parameters load "
                             "from F32 or F64",
                             path, x->name, e.dtype_name);
        bool same = e.ndim == x->ndim;
        for (int d = 0; same && d < e.ndim; d++)
            same = e.shape[d] == x->shape[d];
        if (!same) {
            char fs[160], ps[160];
            qkv__shape64_str(e.shape, e.ndim, fs, sizeof fs);
            qkv__shape64_str(x->shape, x->ndim, ps, sizeof ps);
            return QKV_ERROR(QKV_ERR_SHAPE,
                             "%s: tensor '%.200s' has shape %s in the file but the "
                             "parameter is %s",
                             path, x->name, fs, ps);
        }
    }
    return QKV_OK;
}

/* Every value of every parameter in the file finite once converted to qkv_real (an F64 value
 * beyond float's range is not): a model with a NaN or infinite weight (a training run that
 * diverged, a damaged file) would compute NaN everywhere, and a decoder would turn that into
 * some token sequence or none, so such a file is refused with the first bad value named. */
static qkv_status check_finite(const qkv_params *p, const qkv_st_file *f, const char *path,
                               bool swap) {
    for (int64_t i = 0, n = qkv_params_count(p); i < n; i++) {
        const qkv_tensor *x = qkv_params_get((qkv_params *)p, i);
        qkv_st_entry e;
        qkv_st_find(f, x->name, &e);
        const size_t size = qkv_dtype_size(e.dtype);
        const int64_t numel = qkv_tensor_numel(x);
        int64_t bad = -1;
        if (e.dtype == QKV_F32 && !swap && (uintptr_t)e.data % sizeof(float) == 0) {
            const float *v = e.data; /* the common case, without a call per element */
            for (int64_t k = 0; k < numel && bad < 0; k++)
                if (!isfinite(v[k])) bad = k;
        } else {
            for (int64_t k = 0; k < numel && bad < 0; k++)
                if (!isfinite((qkv_real)load_elem((const unsigned char *)e.data, k, size, swap)))
                    bad = k;
        }
        if (bad >= 0) {
            const double v = load_elem((const unsigned char *)e.data, bad, size, swap);
            const char *what = v != v ? "NaN" : isinf(v) ? "an infinite value"
                                                         : "a value beyond float's range";
            return QKV_ERROR(QKV_ERR_FORMAT,
                             "%s: tensor '%.200s' holds %s at element %lld; a model with "
                             "non-finite parameters computes NaN (a diverged training run?)",
                             path, x->name, what, (long long)bad);
        }
    }
    return QKV_OK;
}

qkv_status qkv_params_load(qkv_params *p, const char *path) {
    if (!p || !path) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_params_load: NULL argument");
    if (!qkv_params_block(p, QKV_BLOCK_DATA))
        return QKV_ERROR(QKV_ERR_STATE, "qkv_params_load: %s: the table is not finalized", path);
    qkv_st_file *f = NULL;
    qkv_status st = qkv_st_open(path, &f);
    if (st != QKV_OK) return st;
    int64_t n = qkv_params_count(p), nf = qkv_st_count(f);
    const char **names = malloc((size_t)((n > nf ? n : nf) + 1) * sizeof *names);
    st = names ? check_file(p, f, path, names)
               : QKV_ERROR(QKV_ERR_OOM, "qkv_params_load: out of memory");
    free(names);
    const bool swap = !qkv__host_little_endian();
    if (st == QKV_OK) st = check_finite(p, f, path, swap);
    for (int64_t i = 0; st == QKV_OK && i < n; i++) {
        qkv_tensor *x = qkv_params_get(p, i);
        qkv_st_entry e;
        qkv_st_find(f, x->name, &e);
        qkv_real *dst = (qkv_real *)x->data;
        int64_t numel = qkv_tensor_numel(x);
        if (e.dtype == QKV_REAL && !swap) {
            memcpy(dst, e.data, (size_t)e.nbytes);
        } else {
            size_t size = qkv_dtype_size(e.dtype);
            for (int64_t k = 0; k < numel; k++)
                dst[k] = (qkv_real)load_elem((const unsigned char *)e.data, k, size, swap);
        }
    }
    qkv_st_close(f);
    return st;
}
