/* ops/dense.h: linear maps and matrix products (BLAS sgemm/dgemm behind qkv_gemm). */
#ifndef QKV_OPS_DENSE_H
#define QKV_OPS_DENSE_H
#include "../qkv_tensor.h"
#ifdef __cplusplus
extern "C" {
#endif

/* y = x W^T + b, as torch.nn.functional.linear.
 * x (..., in), weight (out, in), bias (out) or NULL  ->  y (..., out). */
QKV_API qkv_tensor *qkv_linear(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *weight, qkv_tensor *bias);

/* dropout(relu(x W^T + b), p) as one op: the bits of qkv_linear then qkv_relu_dropout (same
 * random stream), without keeping the pre-activation (the ReLU and dropout run in place on the
 * GEMM output; the backward needs only y). In evaluation mode (or p = 0) the dropout is off. */
QKV_API qkv_tensor *qkv_linear_relu_dropout(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *weight, qkv_tensor *bias,
                                            double p);

/* c = op(a) op(b), op = transpose of the last two dims when the flag is set.
 * 2-D: a (M, K), b (K, N) -> (M, N). Batched (bmm): a (..., M, K), b (..., K, N) where b's
 * leading dims equal the trailing leading dims of a (broadcast over the rest): b (K, N) is
 * shared by every batch entry, b (H, K, N) under a (B, H, M, K) is one matrix per head. */
QKV_API qkv_tensor *qkv_matmul(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b, bool trans_a,
                               bool trans_b);

/* Row-major C = alpha op(A) op(B) + beta C on qkv_real. The fast path is BLAS (or the portable
 * cache-blocked fallback when built without BLAS); qkv_gemm_ref is the naive triple loop. */
QKV_API void qkv_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, qkv_real alpha,
                      const qkv_real *a, int64_t lda, const qkv_real *b, int64_t ldb,
                      qkv_real beta, qkv_real *c, int64_t ldc);
/* `batch` independent products C_s = alpha op(A_s) op(B_s) + beta C_s with A_s = a + s stride_a,
 * B_s = b + s stride_b (stride 0: one B shared by all), C_s = c + s stride_c; the C_s must not
 * overlap. Small products are spread over OpenMP threads, one single-threaded GEMM each; large
 * ones run one after the other through qkv_gemm. Either way each C_s gets the bits qkv_gemm gives
 * on the same operands, whatever the thread count. */
QKV_API void qkv_gemm_batched(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                              qkv_real alpha, const qkv_real *a, int64_t lda, int64_t stride_a,
                              const qkv_real *b, int64_t ldb, int64_t stride_b, qkv_real beta, qkv_real *c,
                              int64_t ldc, int64_t stride_c);
QKV_API void qkv_gemm_ref(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                          qkv_real alpha, const qkv_real *a, int64_t lda, const qkv_real *b,
                          int64_t ldb, qkv_real beta, qkv_real *c, int64_t ldc);
/* The portable blocked GEMM used when BLAS is off (exposed so tests cover it in every build). */
QKV_API void qkv_gemm_blocked(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                              qkv_real alpha, const qkv_real *a, int64_t lda, const qkv_real *b,
                              int64_t ldb, qkv_real beta, qkv_real *c, int64_t ldc);

#ifdef __cplusplus
}
#endif
#endif
