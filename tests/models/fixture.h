/*
 * fixture.h: the PyTorch reference fixtures written by scripts/gen_reference.py (tests/data/ref_NAME.safetensors):
 * open a file, read tensors converted to qkv_real (F64/F32) or I32, fill a parameter table, and
 * compare computed values with |qkv - torch| <= PARITY_TOL * max(1, |torch|).
 */
#ifndef QKV_TEST_FIXTURE_H
#define QKV_TEST_FIXTURE_H

#include "testutil.h"

#ifdef QKV_DOUBLE
#define PARITY_TOL 1e-10
#else
#define PARITY_TOL 1e-5
#endif

typedef struct {
    qkv_st_file *file;
    char path[512];
} fixture;

/* Open tests/data/<name>; a failure is a test failure. */
bool fixture_open(fixture *f, const char *name);
/* Copy tensor `name` (n elements) into dst as qkv_real or I32 (want). */
bool fixture_read(const fixture *f, const char *name, void *dst, int64_t n, qkv_dtype want);
/* A step tensor holding tensor `name` in dtype dt. */
qkv_tensor *fixture_tensor(qkv_ctx *ctx, const fixture *f, const char *name, qkv_dtype dt);
/* Fill every parameter of p from "<prefix><parameter name>". */
void fixture_params(const fixture *f, qkv_params *p, const char *prefix);
/* Compare n computed values with tensor `name`. */
void expect_close(const fixture *f, const char *what, const void *got_data, const char *name, int64_t n);
/* loss + sum(y * dout) where dout is the fixture tensor `dout` (loss may be NULL). */
qkv_tensor *dot_loss(qkv_ctx *ctx, const fixture *f, qkv_tensor *loss, qkv_tensor *y, const char *dout);
/* Every parameter's gradient against "grad.param.<name>". */
void expect_param_grads(const fixture *f, qkv_params *p, const char *what);

#endif
