/*
 * kernels/transpose16.h: a 16 x 16 block of floats transposed in AVX-512 registers, the step of
 * every packing that turns rows of k into k-major vectors (gemm_packed.c, gemm_panels.c).
 *
 *   out[q] lane r = row r element q      (row r: lanes r < rows loaded, the rest zero; elements
 *                                         q < cols, the rest zero)
 *
 * Three rounds of two-input shuffles (unpack, shuffle_ps, shuffle_f32x4 twice): 64 shuffles per
 * 256 values, no gathers. Only for files compiled for x86-64 with GCC or Clang, inside functions
 * that enable "avx512f".
 */
#ifndef QKV_KERNELS_TRANSPOSE16_H
#define QKV_KERNELS_TRANSPOSE16_H

#include <immintrin.h>
#include <stdint.h>

/* The lanes of a vector holding n values: all for n >= 16, none for n <= 0. */
static inline __mmask16 qkv__first_lanes(int64_t n) {
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* out[q] = (src[0 ld + q], src[1 ld + q], .., src[15 ld + q]) for q < 16: rows past `rows` and
 * elements past `cols` (both <= 16) read as zero and are never read. */
__attribute__((target("avx512f"), always_inline)) static inline void
qkv__transpose16(int rows, int64_t cols, const float *src, int64_t ld, __m512 out[16]) {
    const __mmask16 km = qkv__first_lanes(cols);
    __m512 r[16], t[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) {
        r[i] = i < rows ? _mm512_maskz_loadu_ps(km, src + i * ld) : _mm512_setzero_ps();
    }
    /* t[2i], t[2i+1]: rows 2i and 2i+1 interleaved (k = 4L + 0, 1 and 4L + 2, 3 in lane L) */
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* r[4i + j], lane L: rows 4i .. 4i+3 at k = 4L + j */
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        r[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    /* out[k]: lane L of r[4i + j] for i = 0..3 gathers rows 0..15 at k = 4L + j */
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        const __m512 x = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88),
                     y = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xDD);
        const __m512 z = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88),
                     w = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xDD);
        out[j] = _mm512_shuffle_f32x4(x, z, 0x88);
        out[8 + j] = _mm512_shuffle_f32x4(x, z, 0xDD);
        out[4 + j] = _mm512_shuffle_f32x4(y, w, 0x88);
        out[12 + j] = _mm512_shuffle_f32x4(y, w, 0xDD);
    }
}

#endif
