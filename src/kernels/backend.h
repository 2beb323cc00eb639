/*
 * backend.h: a backend is one table of every kernel the ops run: the family tables (element-wise,
 * norms, softmax, attention scores, fused attention, losses, embeddings, positional encodings),
 * the matrix products and the optional fast paths. A context dispatches to one backend
 * (ctx->backend), chosen in one place, qkv__backend_of, from the public qkv_kernels. Ops call
 * kernels only through it, so a new backend (CUDA) is a folder of kernels and one table here;
 * an optional entry left NULL sends the op down its general path, which every backend can run.
 *
 *   cpu  OpenMP, BLAS and the CPU GEMM kernels (src/kernels/gemm/): the product
 *   ref  naive loops written to be obviously right: the oracle every test compares cpu with
 */
#ifndef QKV_KERNELS_BACKEND_H
#define QKV_KERNELS_BACKEND_H

#include "attend_cached.h"
#include "attention.h"
#include "elementwise.h"
#include "embedding.h"
#include "layout.h"
#include "loss.h"
#include "norm.h"
#include "optim.h"
#include "posenc.h"
#include "sdpa.h"
#include "softmax.h"

typedef struct qkv_backend {
    const char *name;
    qkv_kernels kind;  /* what qkv_ctx_kernels reports */
    qkv_device device; /* where its kernels read and write: every op's tensors must be there */
    const qkv_elementwise_kernels *elementwise;
    const qkv_norm_kernels *norm;
    const qkv_softmax_kernels *softmax;
    const qkv_attention_kernels *attention;
    const qkv_sdpa_kernels *sdpa;
    const qkv_loss_kernels *loss;
    const qkv_embedding_kernels *embedding;
    const qkv_posenc_kernels *posenc;
    const qkv_optim_kernels *optim; /* the training step's arithmetic on the parameter blocks */
    const qkv_layout_kernels *layout; /* copies between strided views and their scatter-add */
    /* C = alpha op(A) op(B) + beta C, row-major (qkv_gemm's contract) */
    void (*gemm)(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, qkv_real alpha, const qkv_real *a,
                 int64_t lda, const qkv_real *b, int64_t ldb, qkv_real beta, qkv_real *c, int64_t ldc);
    /* Optional. Batches of products, each with gemm's bits: strided (qkv_gemm_batched) and in
     * head-view layouts read in place (qkv__gemm_batched2). NULL: the op makes its operands
     * contiguous and runs gemm per matrix. */
    void (*gemm_batched)(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n, int64_t k, qkv_real alpha,
                         const qkv_real *a, int64_t lda, int64_t stride_a, const qkv_real *b, int64_t ldb,
                         int64_t stride_b, qkv_real beta, qkv_real *c, int64_t ldc, int64_t stride_c);
    void (*gemm_batched2)(bool trans_a, bool trans_b, int64_t n_outer, int64_t n_inner, int64_t m, int64_t n,
                          int64_t k, qkv_real alpha, const qkv_real *a, qkv__mat_layout la, const qkv_real *b,
                          qkv__mat_layout lb, qkv_real beta, qkv_real *c, qkv__mat_layout lc);
    /* Optional. y (m, n) = x (m, k) W^T + bias in one pass with the bits of bias rows then gemm
     * with beta = 1; false when this product is not one it takes (y untouched). */
    bool (*linear_bias)(int64_t m, int64_t n, int64_t k, const qkv_real *x, int64_t ldx, const qkv_real *w,
                        int64_t ldw, const qkv_real *bias, qkv_real *y, int64_t ldy);
    /* Optional. One query per row attending over a KV cache where it lies (attend_cached.h);
     * false with the context's error set. NULL: the general attention path. */
    bool (*attend_cached)(qkv_ctx *ctx, const qkv_attend_cached_problem *p);
    /* Whether a decoding session's weight panels (src/kernels/gemm/gemm_panels.c) give this
     * backend's gemm bits: the session then multiplies from them. */
    bool weight_panels;
    /* Set only in the copies of a backend that a decoding session runs its steps on
     * (src/infer/session.c); NULL / false in the tables below. */
    struct qkv__panels *panels; /* the session's weight panels */
    /* Optional, set with panels: y (m, n) = x (m, k) W^T (+ bias) from the session's panels of the
     * parameter W (the bits of gemm's small-M kernel); false when it does not take this product
     * (y untouched). The linear op calls it for a parameter's weight before anything else. */
    bool (*linear_panels)(const struct qkv_backend *be, int64_t m, int64_t n, int64_t k, const qkv_real *x,
                          const qkv_real *w, const qkv_real *bias, qkv_real *y);
    /* The session's arena measure run: every op allocates what it always does, but the products,
     * the cached attention and its gathers write zeros instead of computing, so the run reaches
     * the arena's high-water mark without streaming the weights. Outputs are meaningless. */
    bool measure_only;
} qkv_backend;

extern const qkv_backend qkv_backend_cpu;
extern const qkv_backend qkv_backend_ref;

/* linear_panels of a session's backend copy: qkv__panels_linear on be->panels. */
bool qkv__backend_linear_panels(const qkv_backend *be, int64_t m, int64_t n, int64_t k, const qkv_real *x,
                                const qkv_real *w, const qkv_real *bias, qkv_real *y);

/* The backend of a kernel set: the one place a context's kernels are chosen. NULL for a value
 * that names no backend (the API's checks of qkv_kernels ask here). */
const qkv_backend *qkv__backend_of(qkv_kernels kind);

#endif
