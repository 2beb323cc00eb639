/*
 * qkv_tensor.h: tensors, the context (step arena + tape + sticky error), parameters, RNG.
 *
 * Model code is forward code only. Each op runs eagerly, writes its output into the context's
 * step arena and, when gradients are enabled and an input requires one, records a tape entry.
 * qkv_backward() replays the tape in reverse; every backward kernel accumulates (+=) into the
 * gradients of its inputs.
 *
 * Errors inside a chain of ops are sticky: the first failing op records its message (op name,
 * shapes, file:line) on the context and returns NULL; every later op sees the error and returns
 * NULL at once, so forward code checks qkv_ctx_status() once at the end.
 *
 * Dimension order and weight layouts are PyTorch's: shapes are outermost first, (B, T, C), and a
 * linear weight is (out, in) with y = x W^T + b.
 */
#ifndef QKV_TENSOR_H
#define QKV_TENSOR_H

#include "qkv_base.h"
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define QKV_MAX_DIMS 4

typedef enum qkv_dtype { QKV_F32 = 0, QKV_F64 = 1, QKV_I32 = 2 } qkv_dtype;

/* The real type of this build. The library is built twice in CI: float (the product) and
 * double (-DQKV_DOUBLE, used by the finite-difference gradient tests). A program must be compiled
 * with the same setting as the library it links (qkv_real_dtype() tells at run time). */
#ifdef QKV_DOUBLE
typedef double qkv_real;
#define QKV_REAL QKV_F64
#else
typedef float qkv_real;
#define QKV_REAL QKV_F32
#endif

QKV_API qkv_dtype qkv_real_dtype(void);
QKV_API size_t qkv_dtype_size(qkv_dtype dt);
QKV_API const char *qkv_dtype_name(qkv_dtype dt); /* "F32", "F64", "I32" (safetensors names) */

enum {
    QKV_REQUIRES_GRAD = 1u << 0, /* backward computes a gradient for this tensor */
    QKV_PARAM = 1u << 1,         /* lives in a parameter table; grad is preallocated */
    QKV_VIEW = 1u << 2,          /* shares data (and grad) with t->base */
    QKV_NO_DECAY = 1u << 3       /* parameters: the optimiser applies no weight decay (set it on
                                    biases and norm gains after qkv_params_add) */
};

/* Where a tensor's data and gradient live. Every backend so far computes on host memory; a device
 * backend (CUDA) adds its constant, and an op refuses a tensor that is not on its context's
 * backend's device. */
typedef enum qkv_device { QKV_DEVICE_HOST = 0 } qkv_device;

typedef struct qkv_tensor {
    qkv_dtype dtype;
    int32_t ndim;                 /* 0 .. QKV_MAX_DIMS; 0 is a scalar */
    int64_t shape[QKV_MAX_DIMS];  /* outermost first */
    int64_t stride[QKV_MAX_DIMS]; /* in elements; row-major contiguous unless a view */
    void *data;
    void *grad;   /* same layout as data; NULL until backward needs it */
    uint32_t flags;
    const char *name;         /* parameters: the PyTorch state_dict key */
    struct qkv_tensor *base;  /* views: the tensor that owns the memory */
    int64_t offset;           /* views: element offset of data inside base->data */
    qkv_device device;        /* QKV_DEVICE_HOST (zero) for every tensor so far */
} qkv_tensor;

QKV_API int64_t qkv_tensor_numel(const qkv_tensor *t);
QKV_API bool qkv_tensor_is_contiguous(const qkv_tensor *t);
QKV_API bool qkv_tensor_same_shape(const qkv_tensor *a, const qkv_tensor *b);
/* "(2, 3, 4) F32" into buf; returns buf. */
QKV_API char *qkv_tensor_shape_str(const qkv_tensor *t, char *buf, size_t size);

/* ---------------------------------------------------------------------------------------------
 * Context
 * ------------------------------------------------------------------------------------------- */

typedef struct qkv_ctx qkv_ctx;

typedef enum qkv_kernels {
    QKV_KERNELS_FAST = 0, /* OpenMP + BLAS kernels */
    QKV_KERNELS_REF = 1   /* naive reference kernels: the test oracle */
} qkv_kernels;

typedef struct qkv_ctx_params {
    size_t arena_bytes;  /* initial step-arena size; it grows as needed (default 16 MiB) */
    bool poison;         /* fill fresh arena memory with NaN (also: env QKV_ARENA_POISON=1) */
    qkv_kernels kernels; /* which kernel set the ops dispatch to */
    uint64_t seed;       /* RNG seed for dropout and sampling */
} qkv_ctx_params;

QKV_API qkv_ctx_params qkv_ctx_default_params(void);
QKV_API qkv_status qkv_ctx_new(const qkv_ctx_params *p, qkv_ctx **out);
QKV_API void qkv_ctx_free(qkv_ctx *ctx); /* accepts NULL */

/* Start a new step: drop every step tensor and the tape, clear the sticky error, and advance
 * the RNG step counter. Grows the arena to the last step's high-water mark in one block, so
 * from the second step on no malloc happens. */
QKV_API void qkv_ctx_reset(qkv_ctx *ctx);

/* The sticky error of the context (QKV_OK if every op so far succeeded). */
QKV_API qkv_status qkv_ctx_status(const qkv_ctx *ctx);

/* Record ops on the tape when an input requires a gradient (default true). */
QKV_API void qkv_ctx_set_grad_enabled(qkv_ctx *ctx, bool enabled);
QKV_API bool qkv_ctx_grad_enabled(const qkv_ctx *ctx);
/* Training mode turns dropout on (default false: evaluation). */
QKV_API void qkv_ctx_set_training(qkv_ctx *ctx, bool training);
QKV_API bool qkv_ctx_training(const qkv_ctx *ctx);
/* Dispatch to kernel set k from now on; a value that names no kernel set changes nothing. */
QKV_API void qkv_ctx_set_kernels(qkv_ctx *ctx, qkv_kernels k);
QKV_API qkv_kernels qkv_ctx_kernels(const qkv_ctx *ctx);

/* RNG position: (seed, step); step advances on every qkv_ctx_reset. Checkpoints save both. */
QKV_API void qkv_ctx_set_rng(qkv_ctx *ctx, uint64_t seed, uint64_t step);
QKV_API void qkv_ctx_get_rng(const qkv_ctx *ctx, uint64_t *seed, uint64_t *step);

/* Step-arena bytes in use now, and the most ever used in one step (the high-water mark). */
QKV_API size_t qkv_ctx_arena_used(const qkv_ctx *ctx);
QKV_API size_t qkv_ctx_arena_peak(const qkv_ctx *ctx);
/* How many times the arena called malloc since the context was created. */
QKV_API uint64_t qkv_ctx_arena_mallocs(const qkv_ctx *ctx);

/* ---------------------------------------------------------------------------------------------
 * Step tensors (live until the next qkv_ctx_reset)
 * ------------------------------------------------------------------------------------------- */

/* Uninitialised (NaN-filled when poisoning is on). */
QKV_API qkv_tensor *qkv_tensor_new(qkv_ctx *ctx, qkv_dtype dt, int ndim, const int64_t *shape);
QKV_API qkv_tensor *qkv_tensor_zeros(qkv_ctx *ctx, qkv_dtype dt, int ndim, const int64_t *shape);
/* A copy of `data` (numel elements of dt). */
QKV_API qkv_tensor *qkv_tensor_from(qkv_ctx *ctx, qkv_dtype dt, int ndim, const int64_t *shape,
                                    const void *data);
/* Mark a step tensor as a leaf that needs a gradient (inputs of gradient checks). */
QKV_API void qkv_tensor_requires_grad(qkv_tensor *t);

/* Views share memory (and gradient) with their base; no copy, no tape entry.
 * reshape needs a contiguous input; permute reorders dimensions by stride. */
QKV_API qkv_tensor *qkv_reshape(qkv_ctx *ctx, qkv_tensor *t, int ndim, const int64_t *shape);
QKV_API qkv_tensor *qkv_permute(qkv_ctx *ctx, qkv_tensor *t, const int *perm);
/* Elements start .. start+length-1 along dim (torch.narrow). Parameters may be narrowed too: the
 * view's gradient aliases the parameter's gradient block. */
QKV_API qkv_tensor *qkv_narrow(qkv_ctx *ctx, qkv_tensor *t, int dim, int64_t start, int64_t length);

/* ---------------------------------------------------------------------------------------------
 * Backward
 * ------------------------------------------------------------------------------------------- */

/* d(loss)/d(loss) = 1, then replay the tape in reverse. loss must have one element. */
QKV_API qkv_status qkv_backward(qkv_ctx *ctx, qkv_tensor *loss);
/* The same with an explicit upstream gradient dy (same shape as y): computes the gradients of
 * sum(y * dy). */
QKV_API qkv_status qkv_backward_from(qkv_ctx *ctx, qkv_tensor *y, const qkv_tensor *dy);
/* Number of entries on the tape (for tests and tracing). */
QKV_API int64_t qkv_tape_size(const qkv_ctx *ctx);

/* ---------------------------------------------------------------------------------------------
 * Parameters: one contiguous block each for values, gradients and two optimiser moments, all in
 * registration order.
 * ------------------------------------------------------------------------------------------- */

typedef struct qkv_params qkv_params;

typedef enum qkv_param_block {
    QKV_BLOCK_DATA = 0,
    QKV_BLOCK_GRAD = 1,
    QKV_BLOCK_M = 2, /* first optimiser moment (Adam m, SGD momentum) */
    QKV_BLOCK_V = 3  /* second optimiser moment (Adam v) */
} qkv_param_block;

QKV_API qkv_status qkv_params_new(qkv_params **out);
QKV_API void qkv_params_free(qkv_params *p); /* accepts NULL */
/* Register a parameter before qkv_params_finalize. The returned tensor pointer stays valid for
 * the life of the table; its data pointer is set by finalize. Names must be unique. A tensor or
 * table of more than 2^59 values is QKV_ERR_SHAPE. */
QKV_API qkv_status qkv_params_add(qkv_params *p, const char *name, int ndim, const int64_t *shape,
                                  qkv_tensor **out);
/* Allocate the four blocks (64-byte aligned, zeroed) and point every parameter into them. */
QKV_API qkv_status qkv_params_finalize(qkv_params *p);
QKV_API int64_t qkv_params_count(const qkv_params *p);  /* number of tensors */
QKV_API int64_t qkv_params_numel(const qkv_params *p);  /* number of scalars */
QKV_API qkv_tensor *qkv_params_get(const qkv_params *p, int64_t i);
QKV_API qkv_tensor *qkv_params_find(const qkv_params *p, const char *name);
/* The whole block (numel scalars), NULL before finalize. */
QKV_API qkv_real *qkv_params_block(const qkv_params *p, qkv_param_block which);
QKV_API void qkv_params_zero_grad(qkv_params *p);

/* Initialisers (deterministic in seed; the stream separates parameters). */
QKV_API void qkv_init_uniform(qkv_tensor *t, double lo, double hi, uint64_t seed, uint64_t stream);
QKV_API void qkv_init_normal(qkv_tensor *t, double mean, double std, uint64_t seed,
                             uint64_t stream);
QKV_API void qkv_init_constant(qkv_tensor *t, double value);
/* Glorot/Xavier uniform for a (fan_out, fan_in) weight: U(-a, a), a = sqrt(6 / (in + out)). */
QKV_API void qkv_init_xavier_uniform(qkv_tensor *t, uint64_t seed, uint64_t stream);

/* ---------------------------------------------------------------------------------------------
 * Counter-based RNG: Philox4x32-10 (Salmon et al., SC'11). A random number is a pure function
 * of (seed, step, stream, index), so results never depend on the thread count or on the order in
 * which elements are visited.
 * ------------------------------------------------------------------------------------------- */

/* The 4 x 32-bit output block for counter (c0, c1, c2, c3) and key (k0, k1). */
QKV_API void qkv_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
/* Uniform in [0, 1) with 24 random bits (exact in float). */
QKV_API float qkv_rng_uniform(uint64_t seed, uint64_t step, uint64_t stream, uint64_t index);
/* Standard normal (Box-Muller on two uniforms of the same block). */
QKV_API double qkv_rng_normal(uint64_t seed, uint64_t step, uint64_t stream, uint64_t index);

#ifdef __cplusplus
}
#endif

#include "qkv_ops.h"

#endif
