/* softmax_ref.c: the reference (oracle) softmax kernels: plain loops, double math. */
#include "softmax.h"

#include <math.h>

/* max of a row, NaN if the row holds one. */
static double row_max(const qkv_real *x, int64_t C) {
    double m = -INFINITY;
    for (int64_t c = 0; c < C; c++)
        if (x[c] > m || isnan(x[c])) m = x[c];
    return m;
}

static void fwd(bool log_, int64_t N, int64_t C, const qkv_real *x, qkv_real *y) {
    for (int64_t r = 0; r < N; r++) {
        const qkv_real *xr = x + r * C;
        qkv_real *yr = y + r * C;
        const double m = row_max(xr, C);
        if (m == -INFINITY) { /* every element is -inf: fully masked */
            for (int64_t c = 0; c < C; c++)
                yr[c] = log_ ? -(qkv_real)INFINITY : 0;
            continue;
        }
        double s = 0;
        for (int64_t c = 0; c < C; c++)
            s += exp((double)xr[c] - m);
        for (int64_t c = 0; c < C; c++)
            yr[c] = (qkv_real)(log_ ? ((double)xr[c] - m) - log(s) : exp((double)xr[c] - m) / s);
    }
}

static void bwd(bool log_, int64_t N, int64_t C, const qkv_real *y, const qkv_real *dy,
                qkv_real *dx) {
    for (int64_t r = 0; r < N; r++) {
        const qkv_real *yr = y + r * C, *dyr = dy + r * C;
        qkv_real *dxr = dx + r * C;
        if (log_) {
            if (row_max(yr, C) == -INFINITY) continue; /* fully masked row: zero gradient */
            double sdy = 0;
            for (int64_t c = 0; c < C; c++)
                sdy += dyr[c];
            for (int64_t c = 0; c < C; c++)
                dxr[c] += (qkv_real)(dyr[c] - exp((double)yr[c]) * sdy);
        } else { /* a masked row has y = 0, so its gradient is 0 by the formula */
            double dot = 0;
            for (int64_t c = 0; c < C; c++)
                dot += (double)dyr[c] * (double)yr[c];
            for (int64_t c = 0; c < C; c++)
                dxr[c] += (qkv_real)((double)yr[c] * (dyr[c] - dot));
        }
    }
}

static void argmax(int64_t N, int64_t C, const qkv_real *x, int32_t *out) {
    for (int64_t r = 0; r < N; r++) {
        int64_t best = 0;
        for (int64_t c = 1; c < C; c++)
            if (qkv__argmax_better(x[r * C + c], x[r * C + best])) best = c;
        out[r] = (int32_t)best;
    }
}

const qkv_softmax_kernels qkv_softmax_ref = {fwd, bwd, argmax};
