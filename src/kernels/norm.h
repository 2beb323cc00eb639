/*
 * kernels/norm.h: kernel table of the normalisation family (LayerNorm and RMSNorm).
 *
 * One pair of kernels serves both: RMSNorm is LayerNorm without centring and without bias.
 * Over each row of x (N, C):
 *   center:  mu = mean(x),  rstd = 1 / sqrt(mean((x - mu)^2) + eps)        (LayerNorm)
 *   !center: mu = 0,        rstd = 1 / sqrt(mean(x^2) + eps)                (RMSNorm)
 *   xhat = (x - mu) rstd,   y = xhat * w + b     (w = 1 and b = 0 when NULL)
 * Backward with g = dy * w:
 *   dx = rstd (g - [center] mean(g) - xhat mean(g xhat)),  dw = sum_rows dy xhat,  db = sum_rows
 * dy. The statistics are kept in double (the saved tensors are F64 in every build): with a float
 * mean, x - mu loses most of its digits in rows whose mean is large against their spread.
 * Both implementations compute in double. The reference sums dw and db over the rows in order;
 * the fast kernel sums fixed chunks of rows, then the chunks in order (never by thread).
 */
#ifndef QKV_KERNELS_NORM_H
#define QKV_KERNELS_NORM_H

#include "../core/internal.h"

typedef struct qkv_norm_kernels {
    /* y (N, C); saves mean (N) when center (NULL otherwise) and rstd (N). w, b may be NULL. */
    void (*fwd)(bool center, int64_t N, int64_t C, double eps, const qkv_real *x, const qkv_real *w,
                const qkv_real *b, qkv_real *y, double *mean, double *rstd);
    /* dx (N, C), dw (C), db (C) accumulate (+=), but dx is stored (=) when dx_overwrite; any of
     * them may be NULL. mean NULL: mu = 0. scratch: bwd_scratch(N, C) bytes (8-aligned) of work
     * space for the dw / db partial sums (only read when dw or db is given). */
    void (*bwd)(bool center, int64_t N, int64_t C, const qkv_real *x, const qkv_real *w,
                const double *mean, const double *rstd, const qkv_real *dy, qkv_real *dx,
                bool dx_overwrite, qkv_real *dw, qkv_real *db, double *scratch);
    size_t (*bwd_scratch)(int64_t N, int64_t C);
    /* Inference's residual sum and norm in one pass per row: f (N, C) = x + f, the sum rounded
     * to qkv_real as an add op rounds it, then y (N, C) = fwd of that sum, with fwd's bits; no
     * statistics kept. x and f must not overlap. */
    void (*add_fwd)(bool center, int64_t N, int64_t C, double eps, const qkv_real *x, qkv_real *f,
                    const qkv_real *w, const qkv_real *b, qkv_real *y);
} qkv_norm_kernels;

extern const qkv_norm_kernels qkv_norm_ref;
extern const qkv_norm_kernels qkv_norm_cpu;

#endif
