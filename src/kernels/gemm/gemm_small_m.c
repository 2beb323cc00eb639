/*
 * gemm_small_m.c: C = alpha A B^T + beta C for a few rows of A against a large row-major B, the
 * product of every linear layer in a decoding step (A = the M <= 16 hypotheses' activations
 * (M, K), B = a weight (N, K) as PyTorch stores it, C (M, N)).
 *
 * Why not BLAS: OpenBLAS packs both operands of every call into its panel layout. With M = 16
 * rows the weight is packed (read, written, read again) to be used 16 times: in a config-B greedy
 * decode `sgemm_incopy` took 28 % of the samples against 46 % for the kernel itself
 * (BENCHMARKS.md). Here the weight is read once, in place:
 *
 *   for each block of NB = 3 rows of B (3 K floats, in L1 after the first use)
 *     for each block of MB <= 4 rows of A
 *       12 accumulators acc[m][n] (8 lanes each) += A[m, k .. k+8) * B[n, k .. k+8)   (FMA)
 *       C[m, n] = alpha * hsum(acc[m][n]) + beta C[m, n]
 *
 * 7 loads (3 of B, 4 of A) feed 12 FMAs per 8 values of k. The k tail (K mod 8) is a masked
 * load of the same lanes. Each C element is summed in the same order (lane l holds the k = l
 * mod 8 terms, then a fixed pairwise reduction of the 8 lanes) whatever M, the blocking and the
 * thread count, so the result is deterministic; it differs from BLAS's order in the last bits.
 * Row blocks of B are spread over OpenMP threads.
 *
 * On CPUs with AVX-512F the kernel runs on 16 lanes instead (block_wide: 4 rows of A x 6 rows of B,
 * 24 accumulators of the 32 registers, 10 loads per 24 FMAs; the next block's rows of B prefetched
 * while A's rows use this one, a share of k per pass over A's rows so the requests spread over
 * the whole block instead of crowding the first pass; a full block's 24 sums reduced together,
 * reduce24): 1.35x the AVX2 kernel's speed on a config-B decoding step's weights streamed from
 * memory at M = 16 (Intel Emerald Rapids), and the spread prefetches with the joint reduction
 * another 1.1x; on AMD Zen 4, 1.08x at M = 16 (BENCHMARKS.md). Both widths also prefetch a B of
 * at least STREAM_BYTES into L2 further ahead (FAR_ROWS).
 * Lane l then holds the k = l mod 16 terms and the two halves are added before hsum8's order. The
 * lane count is part of the bits: CPUs that take the 16 lanes and those that do not round
 * differently (docs/design.md, determinism); on one CPU it is fixed (qkv__gemm_small_m_lanes lets
 * the tests run both).
 *
 * qkv__gemm_small_m_bias (qkv_linear's y = x W^T + b) adds the bias where each element is stored,
 * s + b[j]: what beta = 1 computed on rows of C holding the bias, without writing them first.
 *
 * Used in BLAS builds (float) on x86-64 CPUs with AVX2 and FMA by qkv_gemm and by the batched
 * products of qkv__gemm_batched2 (gemm.c), for !trans_a && trans_b with m <= QKV_SMALL_M_ROWS and
 * n k >= 4096, or m <= QKV_SMALL_M_WEIGHT_ROWS against a weight-sized B (qkv__gemm_uses_small_m):
 * a decoding step's linear layers (up to 96 rows: beams and batches of hypotheses), and attention
 * scores Q K^T of at most 16 queries against L keys when L d_head >= 4096. Against OpenBLAS
 * through qkv_gemm's tiles (bench_gemm --few-rows, Emerald Rapids, weights in cache, 1 or 2
 * threads): 1.3-2.4x at 32 rows, 1.0-1.6x at 64-96, about even at 128, mostly slower at 256;
 * slower from 32 rows when k = 64 (head-sized). Everything else, and builds
 * without BLAS, run as before (BLAS or the portable blocked GEMM).
 */
#include "gemm.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(QKV_NO_CLONES) && !defined(QKV_DOUBLE)
#include <immintrin.h>
#ifdef QKV_WITH_OPENMP
#include <omp.h>
#endif

enum { NB = 3, MB = 4 };

/* A B of at least STREAM_BYTES (an L2 of the CPUs measured, which a decoding step's other
 * weights evict between two uses) comes from the L3 or memory: its blocks are also prefetched
 * FAR_ROWS rows ahead into L2 (_MM_HINT_T1), on top of the next block towards L1, so the L1
 * prefetches find their lines in the L2 instead of waiting on memory with a few misses in
 * flight. Measured on AMD Zen 4 (BENCHMARKS.md): a config-B step's products
 * streamed at M = 1 1.26x, M = 16 1.16x on one thread, M = 16 1.11-1.18x on two; 12 rows ahead
 * was the best of 12, 18, 24, 36, 60. Below STREAM_BYTES the extra prefetches would cost
 * instructions for lines that are likely in L2 already (M = 1 against a 768 x 256 B in L2: 0.82x).
 * Prefetches change no result. */
enum { FAR_ROWS = 12 };
#define STREAM_BYTES ((int64_t)1 << 20)

/* The sum of the 8 lanes, in a fixed order: (0+4, 1+5, 2+6, 3+7), then pairs, then the two. */
__attribute__((target("avx2,fma"), always_inline)) static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* One (mb x NB) block of C; b[0 .. NB) are rows of B (a repeated row stands in for a missing
 * one at the end of B, its results discarded by the caller through nb), next the rows to prefetch
 * towards L1 and far (unless NULL) the rows to prefetch into L2 (STREAM_BYTES). mb is a constant at
 * each call site, so the loops unroll into straight register code. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
block_mxn(int mb, int nb, int64_t k, float alpha, const float *a, int64_t lda,
          const float *const b[NB], const float *const next[NB], const float *const *far,
          float beta, const float *bias, float *c, int64_t ldc, __m256i tail_mask) {
    __m256 acc[MB][NB]; /* in registers: every loop over i and j below is unrolled */
#pragma GCC unroll 4
    for (int i = 0; i < mb; i++)
#pragma GCC unroll 3
        for (int j = 0; j < NB; j++) acc[i][j] = _mm256_setzero_ps();
    const int64_t k8 = k & ~(int64_t)7;
    for (int64_t p = 0; p < k8; p += 8) {
        __m256 bv[NB];
#pragma GCC unroll 3
        for (int j = 0; j < NB; j++) {
            bv[j] = _mm256_loadu_ps(b[j] + p);
            _mm_prefetch((const char *)(next[j] + p), _MM_HINT_T0); /* the next block's rows */
            if (far) _mm_prefetch((const char *)(far[j] + p), _MM_HINT_T1);
        }
#pragma GCC unroll 4
        for (int i = 0; i < mb; i++) {
            const __m256 av = _mm256_loadu_ps(a + i * lda + p);
#pragma GCC unroll 3
            for (int j = 0; j < NB; j++) acc[i][j] = _mm256_fmadd_ps(av, bv[j], acc[i][j]);
        }
    }
    if (k8 < k) { /* the masked lanes read nothing and add 0 * 0 */
        __m256 bv[NB];
#pragma GCC unroll 3
        for (int j = 0; j < NB; j++) bv[j] = _mm256_maskload_ps(b[j] + k8, tail_mask);
#pragma GCC unroll 4
        for (int i = 0; i < mb; i++) {
            const __m256 av = _mm256_maskload_ps(a + i * lda + k8, tail_mask);
#pragma GCC unroll 3
            for (int j = 0; j < NB; j++) acc[i][j] = _mm256_fmadd_ps(av, bv[j], acc[i][j]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < mb; i++)
#pragma GCC unroll 3
        for (int j = 0; j < nb; j++) {
            const float s = alpha * hsum8(acc[i][j]);
            c[i * ldc + j] = bias        ? s + bias[j]
                             : beta == 0 ? s
                                         : s + beta * c[i * ldc + j]; /* beta 0 ignores NaN in C */
        }
}

/* Rows j0 .. j1 of B (columns of C), all rows of A. */
__attribute__((target("avx2,fma"))) static void rows_of_b(int64_t m, int64_t j0, int64_t j1,
                                                          int64_t k, float alpha, const float *a,
                                                          int64_t lda, const float *b, int64_t ldb,
                                                          float beta, const float *bias, float *c,
                                                          int64_t ldc, bool stream) {
    int32_t lanes[8];
    for (int l = 0; l < 8; l++) lanes[l] = l < (k & 7) ? -1 : 0;
    const __m256i tail_mask = _mm256_loadu_si256((const __m256i *)lanes);
    for (int64_t j = j0; j < j1; j += NB) {
        const int nb = j1 - j < NB ? (int)(j1 - j) : NB; /* never past this chunk's columns */
        const float *rows[NB], *next[NB], *far_rows[NB];
        for (int t = 0; t < NB; t++) {
            rows[t] = b + (j + (t < nb ? t : 0)) * ldb;
            next[t] = j + NB + t < j1 ? rows[t] + NB * ldb : rows[t];
            far_rows[t] = j + FAR_ROWS + t < j1 ? rows[t] + FAR_ROWS * ldb : rows[t];
        }
        const float *const *far = stream ? far_rows : NULL, *bias_j = bias ? bias + j : NULL;
        int64_t i = 0;
        for (; i + 4 <= m; i += 4)
            block_mxn(4, nb, k, alpha, a + i * lda, lda, rows, next, far, beta, bias_j,
                      c + i * ldc + j, ldc, tail_mask);
        switch (m - i) {
        case 3:
            block_mxn(3, nb, k, alpha, a + i * lda, lda, rows, next, far, beta, bias_j,
                      c + i * ldc + j, ldc, tail_mask);
            break;
        case 2:
            block_mxn(2, nb, k, alpha, a + i * lda, lda, rows, next, far, beta, bias_j,
                      c + i * ldc + j, ldc, tail_mask);
            break;
        case 1:
            block_mxn(1, nb, k, alpha, a + i * lda, lda, rows, next, far, beta, bias_j,
                      c + i * ldc + j, ldc, tail_mask);
            break;
        default: break;
        }
    }
}

/* The 16-lane kernel (AVX-512F). */
enum { NB_WIDE = 6, MB_WIDE = 4 };

/* The sum of the 16 lanes: lanes l and l + 8 first, then hsum8's order. */
__attribute__((target("avx512f,avx2,fma"), always_inline)) static inline float hsum16(__m512 v) {
    const __m256 lo = _mm512_castps512_ps256(v);
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    return hsum8(_mm256_add_ps(lo, hi));
}

/*
 * hsum16 of all 24 accumulators of a full block at once: the same additions on the same operands
 * (so the same bits), four levels each adding two vectors that a shuffle pairs up, 69 vector
 * operations instead of 24 x 8. With sums r = i NB_WIDE + j (flat index of acc[i][j]):
 *   level 1: lanes l + l+8         two sums per vector, 8 partials each     (12 vectors)
 *   level 2: lanes l + l+4 of each  four sums, one per 128-bit lane, 4 each (6 vectors)
 *   level 3: elements 0+2, 1+3      eight sums, 2 partials each             (3 vectors)
 *   level 4: elements 0+1           sixteen sums                             (2 vectors)
 * Sum r < 16 ends in element e = r / 4 of 128-bit lane g = r % 4 of the first vector (out[4 g +
 * e]); sum r >= 16 in the second, the same way with r - 16. An addition's operands may come in
 * the other order; a + b == b + a exactly.
 */
#define ACC(r) acc[(r) / NB_WIDE][(r) % NB_WIDE] /* sum r's accumulator */
__attribute__((target("avx512f,avx2,fma"), always_inline)) static inline void reduce24(__m512 acc[MB_WIDE][NB_WIDE],
                                                                                         float out[32]) {
    __m512 v1[12], v2[6], v3[3];
#pragma GCC unroll 12
    for (int p = 0; p < 12; p++)
        v1[p] = _mm512_add_ps(_mm512_shuffle_f32x4(ACC(2 * p), ACC(2 * p + 1), _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_f32x4(ACC(2 * p), ACC(2 * p + 1), _MM_SHUFFLE(3, 2, 3, 2)));
#pragma GCC unroll 6
    for (int q = 0; q < 6; q++)
        v2[q] = _mm512_add_ps(_mm512_shuffle_f32x4(v1[2 * q], v1[2 * q + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm512_shuffle_f32x4(v1[2 * q], v1[2 * q + 1], _MM_SHUFFLE(3, 1, 3, 1)));
#pragma GCC unroll 3
    for (int w = 0; w < 3; w++)
        v3[w] = _mm512_add_ps(_mm512_shuffle_ps(v2[2 * w], v2[2 * w + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_ps(v2[2 * w], v2[2 * w + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    _mm512_storeu_ps(out, _mm512_add_ps(_mm512_shuffle_ps(v3[0], v3[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                        _mm512_shuffle_ps(v3[0], v3[1], _MM_SHUFFLE(3, 1, 3, 1))));
    _mm512_storeu_ps(out + 16, _mm512_add_ps(_mm512_shuffle_ps(v3[2], v3[2], _MM_SHUFFLE(2, 0, 2, 0)),
                                             _mm512_shuffle_ps(v3[2], v3[2], _MM_SHUFFLE(3, 1, 3, 1))));
}
#undef ACC

/* One (mb x NB_WIDE) block of C, as block_mxn on 16 lanes. next are rows of B to prefetch, one
 * cache line per step of k in [pf_lo, pf_hi), and far (unless NULL) rows to prefetch into L2 with
 * them. The empty asm statements keep each loaded vector in a
 * register: without them the compiler re-reads A from memory for each of its 6 FMAs. */
__attribute__((target("avx512f,avx2,fma"), always_inline)) static inline void
block_wide(int mb, int nb, int64_t k, float alpha, const float *a, int64_t lda,
           const float *const b[NB_WIDE], const float *const *next, const float *const *far,
           int64_t pf_lo, int64_t pf_hi, float beta, const float *bias, float *c, int64_t ldc,
           __mmask16 tail_mask) {
    __m512 acc[MB_WIDE][NB_WIDE];
#pragma GCC unroll 4
    for (int i = 0; i < mb; i++)
#pragma GCC unroll 6
        for (int j = 0; j < NB_WIDE; j++) acc[i][j] = _mm512_setzero_ps();
    const int64_t k16 = k & ~(int64_t)15;
    for (int64_t p = 0; p < k16; p += 16) {
        __m512 bv[NB_WIDE];
#pragma GCC unroll 6
        for (int j = 0; j < NB_WIDE; j++) {
            bv[j] = _mm512_loadu_ps(b[j] + p);
            __asm__("" : "+v"(bv[j]));
            if (p >= pf_lo && p < pf_hi) {
                _mm_prefetch((const char *)(next[j] + p), _MM_HINT_T0);
                if (far) _mm_prefetch((const char *)(far[j] + p), _MM_HINT_T1);
            }
        }
#pragma GCC unroll 4
        for (int i = 0; i < mb; i++) {
            __m512 av = _mm512_loadu_ps(a + i * lda + p);
            __asm__("" : "+v"(av));
#pragma GCC unroll 6
            for (int j = 0; j < NB_WIDE; j++) acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
        }
    }
    if (k16 < k) { /* the masked lanes read nothing and add 0 * 0 */
        __m512 bv[NB_WIDE];
#pragma GCC unroll 6
        for (int j = 0; j < NB_WIDE; j++) bv[j] = _mm512_maskz_loadu_ps(tail_mask, b[j] + k16);
#pragma GCC unroll 4
        for (int i = 0; i < mb; i++) {
            const __m512 av = _mm512_maskz_loadu_ps(tail_mask, a + i * lda + k16);
#pragma GCC unroll 6
            for (int j = 0; j < NB_WIDE; j++) acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
        }
    }
    float sums[32];
    if (mb == MB_WIDE) reduce24(acc, sums); /* a full block's sums together, hsum16's additions */
#pragma GCC unroll 4
    for (int i = 0; i < mb; i++)
#pragma GCC unroll 6
        for (int j = 0; j < nb; j++) {
            const int r = i * NB_WIDE + j; /* where reduce24 left sum r */
            const float s = alpha * (mb == MB_WIDE ? sums[r < 16 ? (r % 4) * 4 + r / 4 : 16 + (r % 4) * 4 + (r - 16) / 4]
                                                   : hsum16(acc[i][j]));
            c[i * ldc + j] = bias        ? s + bias[j]
                             : beta == 0 ? s
                                         : s + beta * c[i * ldc + j]; /* beta 0 ignores NaN in C */
        }
}

/* rows_of_b with the 16-lane blocks; the rows of A past the last 4 go one at a time. */
__attribute__((target("avx512f,avx2,fma"))) static void
rows_of_b_wide(int64_t m, int64_t j0, int64_t j1, int64_t k, float alpha, const float *a,
               int64_t lda, const float *b, int64_t ldb, float beta, const float *bias, float *c,
               int64_t ldc, bool stream) {
    const __mmask16 tail_mask = (__mmask16)((1u << (k & 15)) - 1);
    for (int64_t j = j0; j < j1; j += NB_WIDE) {
        const int nb = j1 - j < NB_WIDE ? (int)(j1 - j) : NB_WIDE;
        const float *rows[NB_WIDE], *next[NB_WIDE], *far_rows[NB_WIDE];
        for (int t = 0; t < NB_WIDE; t++) {
            rows[t] = b + (j + (t < nb ? t : 0)) * ldb;
            next[t] = j + NB_WIDE + t < j1 ? rows[t] + NB_WIDE * ldb : rows[t];
            far_rows[t] = j + FAR_ROWS + t < j1 ? rows[t] + FAR_ROWS * ldb : rows[t];
        }
        const float *const *far = stream ? far_rows : NULL, *bias_j = bias ? bias + j : NULL;
        /* pass q of the P passes over A's rows prefetches k in [q span, (q + 1) span) */
        const int64_t passes = m / MB_WIDE + m % MB_WIDE, span = ((k + passes - 1) / passes + 15) & ~(int64_t)15;
        int64_t i = 0, q = 0;
        for (; i + MB_WIDE <= m; i += MB_WIDE, q++)
            block_wide(MB_WIDE, nb, k, alpha, a + i * lda, lda, rows, next, far, q * span,
                       (q + 1) * span, beta, bias_j, c + i * ldc + j, ldc, tail_mask);
        for (; i < m; i++, q++)
            block_wide(1, nb, k, alpha, a + i * lda, lda, rows, next, far, q * span, (q + 1) * span,
                       beta, bias_j, c + i * ldc + j, ldc, tail_mask);
    }
}

/* 16 lanes on CPUs with AVX-512F, 8 elsewhere: faster on Intel Emerald Rapids and on AMD Zen 4
 * (BENCHMARKS.md, `bench_gemm --decode-step --lanes 8|16`), although Zen 4 runs a 512-bit FMA as two 256-bit halves and its 32 KiB L1 does not hold a 6-row block of
 * B at k = 2048. A test may ask for either width where the CPU can run it
 * (qkv__gemm_small_m_lanes). */
static int requested_lanes = 0;

void qkv__gemm_small_m_lanes(int lanes) {
    requested_lanes = lanes == 8 || lanes == 16 ? lanes : 0;
}

static bool wide_lanes(void) { return __builtin_cpu_supports("avx512f") && requested_lanes != 8; }

bool qkv__gemm_small_m_wide(void) {
    return qkv__gemm_small_m_available() && wide_lanes();
}

bool qkv__gemm_small_m_available(void) {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* qkv__gemm_small_m, and qkv__gemm_small_m_bias with a bias (else NULL; beta then unused). */
static void small_m(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                    const float *b, int64_t ldb, float beta, const float *bias, float *c,
                    int64_t ldc) {
    if (m <= 0 || n <= 0) return;
    if (alpha == 0) { /* BLAS semantics: A and B are not read (no NaN from them), C = beta C */
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++)
                c[i * ldc + j] = bias ? bias[j] : beta == 0 ? 0 : beta * c[i * ldc + j];
        return;
    }
    /* Chunks of B's rows, one per iteration: at most CHUNK rows, as many chunks as a multiple of
     * the thread count, each a whole number of blocks (BLOCK rows) but the last: two threads split
     * n = 512 as 264 + 248 rows, where fixed chunks of 144 rows gave 288 + 224 and left one
     * thread waiting. The split changes no result: each element of C is one block's sum over k,
     * whatever the chunks. */
    enum { CHUNK = 144, BLOCK = 6 };
    _Static_assert(BLOCK % NB == 0 && BLOCK % NB_WIDE == 0 && CHUNK % BLOCK == 0,
                   "chunks hold whole blocks of B's rows");
    const bool parallel = m * n * k > ((int64_t)1 << 18);
    int64_t chunks = (n + CHUNK - 1) / CHUNK;
#ifdef QKV_WITH_OPENMP
    const int64_t threads = parallel ? omp_get_max_threads() : 1;
    chunks = (chunks + threads - 1) / threads * threads;
#else
    (void)parallel;
#endif
    const int64_t blocks = (n + BLOCK - 1) / BLOCK,
                  chunk = (blocks + chunks - 1) / chunks * BLOCK; /* rows per chunk */
    const bool wide = wide_lanes();
    const bool stream = n * k * (int64_t)sizeof(float) >= STREAM_BYTES;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (parallel)
#endif
    for (int64_t t = 0; t < chunks; t++) {
        const int64_t j0 = t * chunk, j1 = j0 + chunk < n ? j0 + chunk : n;
        if (j0 >= n) continue;
        if (wide)
            rows_of_b_wide(m, j0, j1, k, alpha, a, lda, b, ldb, beta, bias, c, ldc, stream);
        else
            rows_of_b(m, j0, j1, k, alpha, a, lda, b, ldb, beta, bias, c, ldc, stream);
    }
}

void qkv__gemm_small_m(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                       const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    small_m(m, n, k, alpha, a, lda, b, ldb, beta, NULL, c, ldc);
}

void qkv__gemm_small_m_bias(int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                            int64_t lda, const float *b, int64_t ldb, const float *bias, float *c,
                            int64_t ldc) {
    small_m(m, n, k, alpha, a, lda, b, ldb, 0, bias, c, ldc);
}
#else
bool qkv__gemm_small_m_available(void) { return false; }
bool qkv__gemm_small_m_wide(void) {
    return false;
}
void qkv__gemm_small_m_lanes(int lanes) { (void)lanes; }

void qkv__gemm_small_m(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda, const float *b,
                       int64_t ldb, float beta, float *c, int64_t ldc) {
    (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb, (void)beta, (void)c, (void)ldc;
}
void qkv__gemm_small_m_bias(int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                            int64_t lda, const float *b, int64_t ldb, const float *bias, float *c,
                            int64_t ldc) {
    (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb, (void)bias,
        (void)c, (void)ldc;
}
#endif
