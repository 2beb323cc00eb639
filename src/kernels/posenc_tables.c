/*
 * posenc_tables.c: the fixed position tables of the posenc family (kernels/posenc.h): ALiBi's
 * distance bias (Press et al. 2022), the sinusoidal encoding (Vaswani et al. 2017, section 3.5)
 * and the 2-D sin-cos encoding of image patches (MAE, He et al. 2022). They read no tensor, so
 * the reference and fast tables share these definitions.
 */
#include "posenc.h"

#include <math.h>

void qkv__alibi_table(int64_t H, int64_t T, int64_t S, int64_t offset, const qkv_real *m, qkv_real *bias) {
    for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < T; i++) {
            qkv_real *row = bias + (h * T + i) * S;
            const int64_t p = offset + i;
            for (int64_t j = 0; j < S; j++) { /* -m |p - j|, and +0 (not -0) on the diagonal */
                const int64_t dist = p > j ? p - j : j - p;
                row[j] = dist ? (qkv_real)(-(double)m[h] * (double)dist) : 0;
            }
        }
}

void qkv__sinusoidal_table(int64_t T, int64_t C, int64_t offset, qkv_real *pe) {
    const double log_step = -log(10000.0) / (double)C;
    for (int64_t t = 0; t < T; t++) {
        const double p = (double)(offset + t);
        qkv_real *row = pe + t * C;
        for (int64_t c = 0; c < C; c += 2) {
            const double angle = p * exp((double)c * log_step);
            row[c] = (qkv_real)sin(angle);
            if (c + 1 < C) row[c + 1] = (qkv_real)cos(angle);
        }
    }
}

void qkv__sincos_2d_table(int64_t rows, int64_t cols, int64_t C, qkv_real *pe) {
    const int64_t Q = C / 4;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            qkv_real *row = pe + (r * cols + c) * C;
            for (int64_t k = 0; k < Q; k++) {
                const double w = 1.0 / pow(10000.0, (double)k / (double)Q);
                row[k] = (qkv_real)sin((double)r * w);
                row[Q + k] = (qkv_real)cos((double)r * w);
                row[2 * Q + k] = (qkv_real)sin((double)c * w);
                row[3 * Q + k] = (qkv_real)cos((double)c * w);
            }
        }
}
