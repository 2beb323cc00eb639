/*
 * internal.h: what op implementations share: the context layout, arena allocation, sticky errors,
 * argument checks, and the tape.
 *
 * How an op is written (see src/ops/dense.c for a complete example and docs/adding-an-op.md):
 *
 *   qkv_tensor *qkv_relu(qkv_ctx *ctx, qkv_tensor *x) {
 *       if (!QKV_OP_BEGIN(ctx, "relu", x)) return NULL;         // sticky error / NULL inputs
 *       if (!qkv__check_real(ctx, "relu", x, "x")) return NULL;  // dtype
 *       x = qkv__contig(ctx, x);                                 // kernels want contiguous data
 *       qkv_tensor *y = qkv__alloc_like(ctx, x);                 // output from the step arena
 *       if (!y) return NULL;
 *       ctx->backend->elementwise->unary_fwd(...);              // the context's backend
 *       qkv_tape_entry *e = qkv__record(ctx, &relu_op, y, 1, &x); // NULL when not recording
 *       if (e) e->saved[0] = ...;                                // what backward needs
 *       return y;
 *   }
 *   static void relu_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
 *       qkv_real *dx = qkv__grad(ctx, e->in[0]);                 // zeroed on first use; NULL
 *       if (dx) ... dx[i] += ...;                                // when no gradient is needed
 *   }
 */
#ifndef QKV_INTERNAL_H
#define QKV_INTERNAL_H

#include "qkv/qkv_ops.h"
#include "qkv/qkv_tensor.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Function multi-versioning for hot loops: the function is compiled for AVX-512, AVX2 and the
 * x86-64 baseline, and the dynamic loader picks the best the CPU has (GCC / clang target_clones,
 * an ifunc). The build has no -march flag, so this is how vector code reaches a modern CPU.
 * Only code whose result does not depend on the vector width may use it: integer code, float
 * code without reductions, or reductions with a fixed number of partial sums in a fixed order
 * (kernels/rowreduce.h). FMA contraction is off project-wide (-ffp-contract=off). A cloned
 * function's name must be unique across the library even when static: clang emits its resolver
 * as a global symbol (name.resolver), and two files with the same name fail to link. */
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(QKV_NO_CLONES) && \
    (!defined(__clang__) || __clang_major__ >= 14)
#define QKV_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define QKV_CLONES
#endif

#define QKV_ARENA_ALIGN 64
#define QKV_MAX_IN 6
#define QKV_MAX_SAVED 4

/* ---- arena -------------------------------------------------------------------------------- */

typedef struct qkv_arena_chunk {
    struct qkv_arena_chunk *next;
    size_t size; /* usable bytes after the header */
    size_t used;
    unsigned char *data; /* 64-byte aligned */
} qkv_arena_chunk;

typedef struct qkv_arena {
    qkv_arena_chunk *chunks; /* newest first */
    size_t used;             /* bytes handed out this step (sum over chunks) */
    size_t peak;             /* high-water mark over all steps */
    size_t initial;          /* size of the first chunk */
    uint64_t mallocs;        /* number of malloc calls made */
    bool poison;
    void **allocs; /* QKV_ARENA_PER_ALLOC (sanitizer builds): one malloc per allocation */
    size_t n_allocs, cap_allocs;
} qkv_arena;

void qkv__arena_init(qkv_arena *a, size_t initial, bool poison);
/* Ask for transparent huge pages on the 2 MiB-aligned part of a fresh, untouched buffer of at
 * least 2 MiB (hugepages.c: the parameter blocks); advice only, nothing depends on it. */
void qkv__advise_huge_pages(void *p, size_t bytes);
void qkv__arena_free(qkv_arena *a);
void qkv__arena_reset(qkv_arena *a);
void *qkv__arena_alloc(qkv_arena *a, size_t bytes); /* 64-aligned, NULL on OOM */

/* ---- tape --------------------------------------------------------------------------------- */

typedef struct qkv_tape_entry qkv_tape_entry;

typedef struct qkv_op_desc {
    const char *name;
    /* Accumulate d(out) (e->out->grad) into the gradients of the inputs. */
    void (*backward)(qkv_ctx *ctx, qkv_tape_entry *e);
} qkv_op_desc;

struct qkv_tape_entry {
    const qkv_op_desc *op;
    qkv_tape_entry *prev;
    int n_in;
    qkv_tensor *in[QKV_MAX_IN];
    qkv_tensor *out;
    qkv_tensor *saved[QKV_MAX_SAVED]; /* tensors the backward needs (mean, rstd, lse, ...) */
    double f[8];                      /* scalar attributes copied by value (eps, scale, p) */
    int64_t i[8];                     /* integer attributes (kind, window, seed stream) */
    void *extra;                      /* op-specific struct copied into the arena */
};

/* ---- context ------------------------------------------------------------------------------ */

#define QKV_SPARE_GRADS 64

struct qkv_ctx {
    qkv_arena arena;
    qkv_tape_entry *tape; /* last entry; walk ->prev */
    int64_t tape_size;
    bool backward_done;
    qkv_status status;
    bool grad_enabled;
    bool training;
    const struct qkv_backend *backend; /* the kernels every op runs (src/kernels/backend.h) */
    uint64_t seed, step;
    uint64_t rng_calls; /* random ops issued this step: the Philox stream of the next one */
    /* Gradient buffers released during backward (src/core/tape.c), reused by qkv__grad. */
    struct {
        void *data;
        size_t bytes;
    } spare_grads[QKV_SPARE_GRADS];
    int n_spare_grads;
};

/* ---- errors ------------------------------------------------------------------------------- */

/* Set the thread-local message (and, when ctx is given, the sticky status if it is still OK).
 * Always returns NULL so ops can `return QKV_FAIL(...)`. */
void *qkv__fail(qkv_ctx *ctx, qkv_status st, const char *file, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
#define QKV_FAIL(ctx, st, ...) qkv__fail((ctx), (st), __FILE__, __LINE__, __VA_ARGS__)
/* For calls that return a status rather than a tensor. */
qkv_status qkv__error(qkv_status st, const char *file, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
#define QKV_ERROR(st, ...) qkv__error((st), __FILE__, __LINE__, __VA_ARGS__)

/* Internal invariant (a bug in qkv, never user input): print file:line and abort. */
#define QKV_ASSERT(cond)                                                                          \
    do {                                                                                          \
        if (!(cond)) qkv__assert_fail(#cond, __FILE__, __LINE__);                                 \
    } while (0)
void qkv__assert_fail(const char *cond, const char *file, int line);

/* ---- op helpers --------------------------------------------------------------------------- */

/* False (and NULL to return) when ctx is NULL, carries an error, or an input is NULL. */
bool qkv__op_begin(qkv_ctx *ctx, const char *op, const char *file, int line, int n,
                   qkv_tensor *const *in);
#define QKV_OP_BEGIN(ctx, op, ...)                                                                \
    qkv__op_begin((ctx), (op), __FILE__, __LINE__,                                                \
                  (int)(sizeof((qkv_tensor *[]){__VA_ARGS__}) / sizeof(qkv_tensor *)),            \
                  (qkv_tensor *[]){__VA_ARGS__})

/* dtype checks that fail with "op: argument x must be F32, got I32 (2, 3)". */
bool qkv__check_dtype(qkv_ctx *ctx, const char *op, const qkv_tensor *t, const char *arg,
                      qkv_dtype want, const char *file, int line);
#define qkv__check_real(ctx, op, t, arg) qkv__check_dtype(ctx, op, t, arg, QKV_REAL, __FILE__, __LINE__)
#define qkv__check_i32(ctx, op, t, arg) qkv__check_dtype(ctx, op, t, arg, QKV_I32, __FILE__, __LINE__)

/* A contiguous tensor of the given shape (uninitialised / zeroed) from the step arena. */
qkv_tensor *qkv__alloc(qkv_ctx *ctx, qkv_dtype dt, int ndim, const int64_t *shape);
qkv_tensor *qkv__alloc_like(qkv_ctx *ctx, const qkv_tensor *t);
/* A new tensor (not a view: a gradient of its own) of t's dtype and shape holding t's storage, for
 * an op that writes its output over an input whose values nothing reads again. t must own its
 * storage (not a view) and be contiguous. */
qkv_tensor *qkv__alloc_over(qkv_ctx *ctx, qkv_tensor *t);
/* Raw step memory for saved statistics, scratch, etc. */
void *qkv__scratch(qkv_ctx *ctx, size_t bytes);
/* t itself when contiguous, else a recorded contiguous copy (qkv_contiguous). */
qkv_tensor *qkv__contig(qkv_ctx *ctx, qkv_tensor *t);

/* Product of the leading dims (all but the last): the "rows" of a last-dim op. */
int64_t qkv__rows(const qkv_tensor *t);
static inline int64_t qkv__last(const qkv_tensor *t) { return t->ndim ? t->shape[t->ndim - 1] : 1; }
static inline qkv_real *qkv__data(const qkv_tensor *t) { return (qkv_real *)t->data; }
static inline int32_t *qkv__idata(const qkv_tensor *t) { return (int32_t *)t->data; }

/* Recording. qkv__record returns NULL when nothing is recorded (gradients disabled or no input
 * requires one); otherwise it marks out as requiring a gradient and links a new entry. */
bool qkv__needs_grad(const qkv_ctx *ctx, int n, qkv_tensor *const *in);
qkv_tape_entry *qkv__record(qkv_ctx *ctx, const qkv_op_desc *op, qkv_tensor *out, int n,
                            qkv_tensor *const *in);
/* For non-differentiable ops: an error if recording would be needed. */
bool qkv__refuse_grad(qkv_ctx *ctx, const char *op, int n, qkv_tensor *const *in);

/* Gradient buffer of t (allocated zeroed on first use; views alias their base's gradient).
 * NULL when t does not require a gradient. */
qkv_real *qkv__grad(qkv_ctx *ctx, qkv_tensor *t);
/* The same for a backward that writes every element of t's gradient: when nothing has reached
 * it yet (t not a view), the buffer comes unzeroed and *overwrite is true, and the caller must
 * store its contribution (=) rather than add it (+=); otherwise as qkv__grad, *overwrite false.
 * Saves zeroing a buffer and reading the zeros back (a config-S training step zeroed ~250 MB).
 * The values are those of zeroing and adding, but for the sign of an exact zero (0 + -0 is +0):
 * as in PyTorch, whose autograd keeps the first contribution as it is. */
qkv_real *qkv__grad_into(qkv_ctx *ctx, qkv_tensor *t, bool *overwrite);

/* qkv_params_add of "<prefix><name>" (modules register under their state_dict prefix). */
qkv_status qkv__params_add_prefixed(qkv_params *p, const char *prefix, const char *name, int ndim,
                                    const int64_t *shape, qkv_tensor **out);

/* Create the temporary of an atomic write of path, "<path>.tmp.<pid>.<n>" (n a process-wide
 * counter), exclusively: *fd open for writing, *tmp its malloc'd name (src/core/fileio.c). Every
 * writer of the library and the CLI names its temporaries so; `qkv train` removes those of dead
 * processes by that pattern. */
qkv_status qkv__create_temp(const char *who, const char *path, char **tmp, int *fd);
/* Write data[0, n) to path atomically (src/core/fileio.c); who names the caller in errors. */
qkv_status qkv__write_file_atomic(const char *who, const char *path, const void *data, size_t n);
/* fsync the directory holding path (after a rename), best effort. */
void qkv__fsync_parent_dir(const char *path);
/* Open path for reading only when it is a regular file (src/core/fileio.c): the type is checked
 * on a descriptor opened without blocking, so a FIFO never blocks and a directory or a device
 * (/dev/zero) is an error naming what it is. *size is the file's size at open, the bound of
 * every read of it. who names the caller in errors. */
qkv_status qkv__open_regular(const char *who, const char *path, int *fd, uint64_t *size);
/* A regular file of at most max_bytes, whole, NUL-terminated (qkv_file_read with who). */
qkv_status qkv__read_regular(const char *who, const char *path, uint64_t max_bytes, char **data, size_t *len);

/* qkv_blas_kernel_advice's rule on its inputs (src/core/blas_kernel.c; exposed for its test): OpenBLAS's
 * core name, OPENBLAS_CORETYPE (NULL when unset), whether OpenBLAS was built with DYNAMIC_ARCH,
 * and the CPU's AVX-512 (F, DQ, BW, VL) and AVX2 + FMA. */
const char *qkv__blas_kernel_advice_for(const char *corename, const char *coretype_env, bool dynamic_arch,
                                        bool avx512, bool avx2_fma);

/* Batches of matrices in a 2-level layout: matrix (i, j), i < n_outer, j < n_inner, starts at
 * p + i outer + j inner and has leading dimension ld. Head views (B, H, L, D) of a (B, L, C)
 * projection are such a batch: outer = L C, inner = D, ld = C. qkv__gemm_batched2 is
 * qkv_gemm_batched (src/kernels/gemm/gemm.c) over such batches: the bits of qkv_gemm per matrix. */
typedef struct qkv__mat_layout {
    int64_t ld, outer, inner;
} qkv__mat_layout;
/* The layout of a 4-D tensor (B, H, rows, cols) whose last dim is contiguous (stride 1) as such
 * a batch; false when it is not one (then make it contiguous). */
static inline bool qkv__head_layout(const qkv_tensor *t, qkv__mat_layout *l) {
    if (t->ndim != 4 || t->stride[3] != 1) return false;
    /* no two elements share memory (gradients are written through the same layout): sorted by
     * stride, each stride must pass the extent of the smaller ones */
    int order[4] = {0, 1, 2, 3};
    for (int i = 1; i < 4; i++)
        for (int j = i; j > 0 && t->stride[order[j]] < t->stride[order[j - 1]]; j--) {
            const int tmp = order[j];
            order[j] = order[j - 1], order[j - 1] = tmp;
        }
    int64_t extent = 0; /* largest offset reachable with the dims seen so far */
    for (int i = 0; i < 4; i++) {
        const int d = order[i];
        if (t->shape[d] > 1 && t->stride[d] <= extent) return false;
        extent += (t->shape[d] - 1) * t->stride[d];
    }
    *l = (qkv__mat_layout){t->stride[2], t->stride[0], t->stride[1]};
    return true;
}

/* A buffer for the temporaries of one op call (backward, or a forward kernel's scratch), from the
 * pool of released gradient buffers when one of that size is free (else the arena);
 * qkv__grad_scratch_release returns it to the pool.
 * Contents are undefined. NULL with the context's error set when out of memory. */
qkv_real *qkv__grad_scratch(qkv_ctx *ctx, size_t bytes);
void qkv__grad_scratch_release(qkv_ctx *ctx, void *p, size_t bytes);

/* memset(p, 0, bytes), over the threads from 1 MiB up (chunks of 256 KiB): the gradients of a
 * step's activations and of the parameters are zeroed every step, and the other threads would
 * otherwise wait while one core writes them. */
void qkv__zero_bytes(void *p, size_t bytes);

/* Row-major contiguous strides for t's shape. */
void qkv__set_contiguous_strides(qkv_tensor *t);

/* Philox stream for the next random op of this step. */
uint64_t qkv__next_stream(qkv_ctx *ctx);

/* Sixteen consecutive Philox blocks at once (src/core/rng.c): out[4 l + k] = word k of block
 * first_block + l for counter (block low, block high, stream, step) and key seed, i.e. the
 * random words of elements 4 first_block .. 4 first_block + 63 in qkv_rng_uniform's numbering.
 * AVX-512F or AVX2 where the CPU has it, else portable C (qkv__philox_blocks_c, exposed for its
 * test); bit-identical to qkv_philox4x32 either way. qkv__philox_widest(256) keeps it to AVX2
 * (tests; 512, the default, lets it choose). */
#define QKV_PHILOX_LANES 16
void qkv__philox_blocks(uint64_t seed, uint64_t step, uint64_t stream, uint64_t first_block,
                        uint32_t out[4 * QKV_PHILOX_LANES]);
void qkv__philox_blocks_c(uint64_t seed, uint64_t step, uint64_t stream, uint64_t first_block,
                          uint32_t out[4 * QKV_PHILOX_LANES]);
void qkv__philox_widest(int bits);

#endif
