/* fixture.c: reading the PyTorch fixtures (see fixture.h). */
#include "fixture.h"

#include <stdio.h>

bool fixture_open(fixture *f, const char *name) {
    snprintf(f->path, sizeof f->path, "%s/%s", qkv_test_data_dir(), name);
    qkv_status st = qkv_st_open(f->path, &f->file);
    CHECK_MSG(st == QKV_OK, "cannot open fixture %s: %s", f->path, qkv_last_error());
    return st == QKV_OK;
}

/* Copy a fixture tensor (F64/F32 -> qkv_real, I32 as is) into dst (n elements). */
bool fixture_read(const fixture *f, const char *name, void *dst, int64_t n, qkv_dtype want) {
    qkv_st_entry e;
    if (qkv_st_find(f->file, name, &e) != QKV_OK) {
        qkv_test_fail(__FILE__, __LINE__, "%s: no tensor '%s'", f->path, name);
        return false;
    }
    int64_t numel = 1;
    for (int d = 0; d < e.ndim; d++) numel *= e.shape[d];
    if (numel != n) {
        qkv_test_fail(__FILE__, __LINE__, "%s: '%s' has %lld elements, expected %lld", f->path, name,
                      (long long)numel, (long long)n);
        return false;
    }
    for (int64_t i = 0; i < n; i++) {
        double v;
        if (!strcmp(e.dtype_name, "F64")) {
            memcpy(&v, (const char *)e.data + 8 * i, 8);
        } else if (!strcmp(e.dtype_name, "F32")) {
            float x;
            memcpy(&x, (const char *)e.data + 4 * i, 4);
            v = x;
        } else {
            int32_t x;
            memcpy(&x, (const char *)e.data + 4 * i, 4);
            v = x;
        }
        if (want == QKV_I32)
            ((int32_t *)dst)[i] = (int32_t)v;
        else
            ((qkv_real *)dst)[i] = (qkv_real)v;
    }
    return true;
}

qkv_tensor *fixture_tensor(qkv_ctx *ctx, const fixture *f, const char *name, qkv_dtype dt) {
    qkv_st_entry e;
    if (qkv_st_find(f->file, name, &e) != QKV_OK) {
        qkv_test_fail(__FILE__, __LINE__, "%s: no tensor '%s'", f->path, name);
        return NULL;
    }
    qkv_tensor *t = qkv_tensor_new(ctx, dt, e.ndim, e.shape);
    if (t && !fixture_read(f, name, t->data, qkv_tensor_numel(t), dt)) return NULL;
    return t;
}

/* Fill every parameter of p from "<prefix><name>" in the fixture. */
void fixture_params(const fixture *f, qkv_params *p, const char *prefix) {
    for (int64_t i = 0; i < qkv_params_count(p); i++) {
        qkv_tensor *t = qkv_params_get(p, i);
        char key[256];
        snprintf(key, sizeof key, "%s%s", prefix, t->name);
        fixture_read(f, key, t->data, qkv_tensor_numel(t), QKV_REAL);
    }
}

void expect_close(const fixture *f, const char *what, const void *got_data, const char *name, int64_t n) {
    if (!got_data) {
        qkv_test_fail(__FILE__, __LINE__, "%s: no value computed (%s)", what, qkv_last_error());
        return;
    }
    qkv_real *want = malloc(sizeof(qkv_real) * (size_t)n);
    if (fixture_read(f, name, want, n, QKV_REAL)) {
        double d = tu_max_rel_diff((const qkv_real *)got_data, want, n);
        CHECK_MSG(d <= PARITY_TOL, "%s vs torch '%s': max relative difference %.3g > %g", what, name, d, PARITY_TOL);
    }
    free(want);
}

/* loss = sum_k sum(y_k * dout_k): the scalar whose gradients the fixtures hold. */
qkv_tensor *dot_loss(qkv_ctx *ctx, const fixture *f, qkv_tensor *loss, qkv_tensor *y, const char *dout) {
    qkv_tensor *d = fixture_tensor(ctx, f, dout, QKV_REAL);
    qkv_tensor *term = qkv_sum(ctx, qkv_mul(ctx, y, d));
    return loss ? qkv_add(ctx, loss, term) : term;
}

void expect_param_grads(const fixture *f, qkv_params *p, const char *what) {
    for (int64_t i = 0; i < qkv_params_count(p); i++) {
        qkv_tensor *t = qkv_params_get(p, i);
        char key[256], label[300];
        snprintf(key, sizeof key, "grad.param.%s", t->name);
        snprintf(label, sizeof label, "%s: grad of %s", what, t->name);
        expect_close(f, label, t->grad, key, qkv_tensor_numel(t));
    }
}

