/*
 * gemm/gemm.h: the CPU backend's matrix products beyond BLAS (src/kernels/gemm/): the small-M
 * kernel that reads W in place, the packed AVX-512 GEMM, a decoding session's weight panels, the
 * fused bias epilogues and the head-view batches. qkv_gemm (gemm.c) chooses among them and BLAS
 * by the rules written beside each; every choice gives the bits its rule promises, whatever the
 * thread count. Ops reach them only through the backend table (src/kernels/backend.h); tests and
 * bench/bench_gemm.c call them directly.
 */
#ifndef QKV_KERNELS_GEMM_H
#define QKV_KERNELS_GEMM_H

#include "../../core/internal.h"

/* C = alpha A B^T + beta C, float, A (m, k) and B (n, k) row-major, for few rows m: B is read in
 * place, not packed (src/kernels/gemm/gemm_small_m.c). Only where qkv__gemm_small_m_available()
 * (x86-64 with AVX2 and FMA). qkv_gemm and qkv__gemm_batched2 use it for the products where
 * qkv__gemm_uses_small_m is true: BLAS float builds, !trans_a && trans_b, and either
 * m <= QKV_SMALL_M_ROWS with n k >= 4096, or m <= QKV_SMALL_M_WEIGHT_ROWS with B the size of a
 * weight (k >= 256, n k >= 2^17: a linear layer of a beam or a batch of hypotheses, where BLAS's
 * packing of B for every tile of rows costs more than the kernel saves; BENCHMARKS.md). */
#define QKV_SMALL_M_ROWS 16
#define QKV_SMALL_M_WEIGHT_ROWS 96
/* For bench/bench_gemm.c --few-rows: false sends every product to BLAS (qkv_gemm's tiles), as if
 * the rule never held; true (the default) restores it. Not thread-safe; not for library code. */
void qkv__gemm_small_m_enable(bool on);
bool qkv__gemm_small_m_available(void);
/* For the tests and bench_gemm --lanes: the small-M kernel on 8 lanes (AVX2) or 16 (AVX-512F, where
 * the CPU has it), or back to the default choice (0: 16 where the CPU has AVX-512F). */
void qkv__gemm_small_m_lanes(int lanes);
bool qkv__gemm_uses_small_m(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k);
void qkv__gemm_small_m(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda, const float *b,
                       int64_t ldb, float beta, float *c, int64_t ldc);
/* Whether the small-M kernel runs on 16 lanes (AVX-512F, unless a test asked for 8). */
bool qkv__gemm_small_m_wide(void);
/* C = alpha A B^T + bias (n values added to every row): the bits of C filled with the bias rows
 * and qkv__gemm_small_m with beta = 1 (s + bias), without C written first and read back. */
void qkv__gemm_small_m_bias(int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                            int64_t lda, const float *b, int64_t ldb, const float *bias, float *c,
                            int64_t ldc);

/* A decoding session's weight copies (src/kernels/gemm/weight_copies.c), each laid out for the kernel
 * that multiplies by it, so that a step never repacks a weight: residue panels
 * (src/kernels/gemm/gemm_panels.c) for the few rows that the small-M kernel would take, with its bits,
 * and the packed GEMM's panels of W^T (qkv__gemm_packed_nt_copy) for the products it would take,
 * with its bits. A qkv__panels holds one copy per weight and kind it has met (as much memory as
 * those weights), filled at the weight's first product after qkv__panels_invalidate; a decoding
 * session owns one and invalidates it for every batch, since the weights may change between
 * batches. */
typedef struct qkv__panels qkv__panels;
qkv__panels *qkv__panels_new(void); /* NULL when out of memory */
void qkv__panels_free(qkv__panels *p);
void qkv__panels_invalidate(qkv__panels *p);    /* every copy is refilled at its next use */
size_t qkv__panels_bytes(const qkv__panels *p); /* the copies' memory */
/* y (m, n) = x (m, k) W^T + bias (NULL: none), all contiguous, w memory that stays put while the
 * store lives (a parameter's: the copies are keyed by its address), if a copy applies: a float
 * product that qkv_gemm would give the small-M kernel on 16 lanes, with m >= QKV_PANELS_MIN_ROWS
 * and W of at least QKV_PANELS_MIN_BYTES, or one it would give the packed GEMM. False (nothing
 * written) otherwise, or when memory for W's copy cannot be had: the caller computes the product
 * as before, with the same bits. */
#define QKV_PANELS_MIN_ROWS 8
#define QKV_PANELS_MIN_BYTES ((int64_t)1 << 20)
bool qkv__panels_linear(qkv__panels *p, int64_t m, int64_t n, int64_t k, const qkv_real *x,
                        const qkv_real *w, const qkv_real *bias, qkv_real *y);
/* The kernel alone, for tests and benchmarks: the panels of W (n, k) (qkv__panels_floats(n, k)
 * floats, 64-byte aligned) are filled from w first when pack is true, then y = x W^T (+ bias)
 * computed from them; at (qkv__panels_at_floats(m, k) floats, 64-byte aligned, sized under the
 * thread count of the call) holds each thread's copy of x transposed. */
size_t qkv__panels_floats(int64_t n, int64_t k);
size_t qkv__panels_at_floats(int64_t m, int64_t k); /* omp_get_max_threads() ceil(m / 16) 16 k */
bool qkv__gemm_panels_available(void); /* x86-64 with AVX-512F, the small kernel on 16 lanes */
void qkv__gemm_panels(int64_t m, int64_t n, int64_t k, const float *x, const float *w,
                      float *panels, bool pack, const float *bias, float *y, float *at);

/* C = alpha op(A) op(B) + beta C, float, with qkv's own packed AVX-512 GEMM: each operand packed
 * once per product and shared by the threads, bits independent of the thread count
 * (src/kernels/gemm/gemm_packed.c). qkv_gemm uses it where qkv__gemm_uses_packed: BLAS float builds
 * on CPUs with AVX-512F (qkv__gemm_packed_available), products of at least
 * QKV_PACKED_MIN_ROWS x QKV_PACKED_MIN_COLS x QKV_PACKED_MIN_DEPTH and QKV_PACKED_MIN_WORK
 * multiply-adds, the small-M kernel's products excepted. qkv__gemm_packed returns false without
 * touching C where its packing buffer cannot be allocated (or for alpha = 0, k = 0), and the
 * caller then computes the product with BLAS. */
#define QKV_PACKED_MIN_ROWS 32
#define QKV_PACKED_MIN_COLS 64
#define QKV_PACKED_MIN_DEPTH 16
#define QKV_PACKED_MIN_WORK (((int64_t)1 << 18) + 1)
bool qkv__gemm_packed_available(void);
bool qkv__gemm_uses_packed(int64_t m, int64_t n, int64_t k);
bool qkv__gemm_packed(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                      int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
/* C = alpha op(A) op(B) + bias, the bias (n values) added to every row in the first slice's
 * epilogue: the bits of C filled with the bias rows, then qkv__gemm_packed with beta = 1, without
 * C written and read once more. Returns false as qkv__gemm_packed does, C untouched. */
bool qkv__gemm_packed_bias(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                           const float *a, int64_t lda, const float *b, int64_t ldb,
                           const float *bias, float *c, int64_t ldc);
/* A packed copy of op(B) = W^T for W (n, k) (the panels every such product packs, all k slices
 * and columns; qkv__gemm_packed_copy_floats(n, k) floats, 64-byte aligned), and y = x W^T (+ bias)
 * from it, filled from w first when fill: the bits of qkv__gemm_packed_bias (bias) or of
 * qkv__gemm_packed with alpha 1 and beta 0 (no bias) on the same product, which never packs W
 * again. For a decoding session's store (qkv__panels_linear). Returns false as they do, y
 * untouched, and then the copy is not filled either. */
size_t qkv__gemm_packed_copy_floats(int64_t n, int64_t k);
bool qkv__gemm_packed_nt_copy(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                              const float *w, int64_t ldw, float *copy, bool fill,
                              const float *bias, float *y, int64_t ldy);
/* y = x W^T + bias for qkv_linear, in one pass where qkv_gemm would take the small-M kernel or the
 * packed GEMM (the same bits as bias rows then qkv_gemm with beta = 1). False: not taken, y
 * untouched; the caller does the two steps. */
bool qkv__gemm_nt_bias(int64_t m, int64_t n, int64_t k, const qkv_real *x, int64_t ldx,
                       const qkv_real *w, int64_t ldw, const qkv_real *bias, qkv_real *y,
                       int64_t ldy);
/* For bench/bench_gemm.c: false sends these products back to BLAS (qkv_gemm's tiles); true (the
 * default) restores the rule. Not thread-safe; not for library code. */
void qkv__gemm_packed_enable(bool on);
/* For bench/bench_gemm.c --packed-modes and --packed-copy: products of up to `rows` rows split C's
 * columns over the threads, larger ones its rows (gemm_packed.c, "Column mode"), with or without
 * a packed copy of op(B); a negative value restores the rule. Not thread-safe; not for library
 * code. */
void qkv__gemm_packed_column_rows(int64_t rows);

/* qkv_gemm_batched (gemm.c) over batches in a 2-level layout (qkv__mat_layout, internal.h): the
 * bits of qkv_gemm per matrix. */
void qkv__gemm_batched2(bool trans_a, bool trans_b, int64_t n_outer, int64_t n_inner, int64_t m, int64_t n, int64_t k,
                        qkv_real alpha, const qkv_real *a, qkv__mat_layout la, const qkv_real *b, qkv__mat_layout lb,
                        qkv_real beta, qkv_real *c, qkv__mat_layout lc);

#endif
