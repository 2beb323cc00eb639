/*
 * gemm_packed.c: C = alpha op(A) op(B) + beta C, float, row-major, for large products on CPUs
 * with AVX-512F (Intel's, AMD's Zen 4): qkv's own packed GEMM, each operand packed once per
 * product and shared by all threads.
 *
 * Why: qkv_gemm cannot let OpenBLAS thread a product (its split changes the bits with the thread
 * count), so it cuts C into tiles fixed by the shape and makes one single-threaded BLAS call per
 * tile, and every call packs its rows of A and its columns of B afresh: each operand is packed
 * 2-4 times, and the tiles cost ~10 % against one whole-product call (gemm.c, "Determinism across
 * thread counts"). Here the packed panels are made once and shared, and the result still does not
 * depend on the thread count, because the split never touches the order of any sum.
 *
 * Loops (Goto & van de Geijn, TOMS 2008; the packing of BLIS, Van Zee & van de Geijn 2015), row
 * mode (more than 384 rows):
 *
 *   jo (NCO = 4096 columns of C)
 *    pc (KC = 512 of the k dimension)      op(B)[pc.., jo..] packed by all threads into NR-column
 *                                          micro-panels (KC x NR, k-major), shared; barrier
 *     chunks of rows claimed by the        op(A)[rows, pc..] packed into MR-row micro-panels,
 *     threads (at most MC_MAX = 192)       at most 192 x 512 floats (384 KiB)
 *      jc (NC = 256 columns)               KC x NC of packed B (512 KiB) stays in L2
 *       ir (MR = 12 rows)                  the A micro-panel (12 x KC, 24 KiB) stays in L1
 *        jr (NR = 32 columns)              micro-kernel: C[12 x 32] (+)= A-panel B-panel
 *    barrier, except after the last slice (the next slice overwrites packed B)
 *
 * Column mode (up to 384 rows): each thread takes an even share of C's columns, and per k slice
 * packs all of op(A) (at most 384 x 512 floats, 768 KiB) and its own columns of op(B) NC at a
 * time, then runs the ir / jr loops above: A is packed once per thread (little, as it has few
 * rows), B once, and no thread waits for another. With fewer rows than threads have chunks the
 * shared-B row mode would leave threads idle or re-read B from L3 (0.83-0.93x OpenBLAS's tiles at
 * 128-256 rows, against 1.05-1.23x in this mode). From about 384 rows on, row mode is as fast or
 * faster: each thread packing all of A costs more than sharing B (0.98-1.15x at 512-1024 rows,
 * `bench_gemm --packed-modes`, BENCHMARKS.md).
 *
 * From a packed copy (qkv__gemm_packed_nt_copy: a decoding session's weight, packed once per
 * batch by weight_copies.c): op(B) is not packed, so row mode has no barrier (each claimed chunk
 * of rows runs through every k slice), and it takes over from column mode from 4 row panels per
 * thread (96 rows at 2 threads): 1.1-1.3x packing at every product on config S's decoding products
 * (bench_gemm --packed-copy, BENCHMARKS.md). The copy holds every slice's panels
 * side by side, slice pc at copy + pc ncols (ncols: n rounded up to NR), in the layout above.
 *
 * The micro-kernel holds the 12 x 32 tile of C in 24 zmm accumulators; per step p it loads
 * 32 values of B (2 zmm), broadcasts 12 of A from memory and issues 24 FMAs. It runs at the
 * core's FMA peak from L1 (~170 GFLOP/s, Emerald Rapids, one core), and the product at ~99 % of
 * OpenBLAS 0.3.21's SkylakeX kernel on one thread; with shared packing, 1.06-1.26x qkv_gemm's
 * tiled OpenBLAS on config B's training products at 2 threads (BENCHMARKS.md).
 * Loop order: the A panel stays in L1 rather than the B panel (BLIS's order): a 32-wide B panel of
 * 512 k is 64 KiB, more than the 48 KiB L1.
 *
 * Rounding: for every element, each KC slice of the k sum is accumulated in order p = 0, 1, ..
 * from zero (FMA), then C = beta C + alpha acc (first slice, beta = 0 not reading C) or
 * C += alpha acc (later slices), slices in increasing k (qkv__gemm_packed_bias, for qkv_linear:
 * bias + alpha acc in the first slice, the bits of beta = 1 on C's rows holding the bias, without
 * writing them first: config-B's encoder -4 %, BENCHMARKS.md): the scheme of the
 * portable qkv_gemm_blocked, and for the same reason the bits do not depend on the tile, the thread
 * count or which thread computes what. They differ from OpenBLAS's in the last bits; a product's
 * bits depend on its shape and on the CPU (the products that qualify here on an AVX-512 CPU and
 * through OpenBLAS elsewhere), never on threads.
 *
 * Memory: the packed slices live in one buffer per calling thread (row mode: packed B
 * KC x min(n, NCO) floats, 8 MiB at most, and KC x MC_MAX per OpenMP thread, 384 KiB each; column
 * mode: at most 1.25 MiB per OpenMP thread), kept between calls and freed when that thread exits,
 * so the hot loop never allocates. When it cannot be allocated, qkv__gemm_packed returns false and
 * the caller computes the product with BLAS.
 */
#include "gemm.h"

#include <stdatomic.h>

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(QKV_NO_CLONES) && \
    !defined(QKV_DOUBLE)
#include <immintrin.h>
#include <pthread.h>

#include "../transpose16.h"
#include "../work_claim.h"
#ifdef QKV_WITH_OPENMP
#include <omp.h>
#endif

#define AVX512 __attribute__((target("avx512f")))

enum {
    MR = 12,           /* rows of the micro-tile */
    NR = 32,           /* columns of the micro-tile: two zmm */
    KC = 512,          /* the k slice: part of the bits */
    MC_MAX = 192,      /* rows of A packed at a time (16 micro-panels, 384 KiB) */
    NC = 256,          /* columns of packed B swept per A block: 512 KiB of L2 */
    NCO = 4096,        /* columns of B packed per pass: bounds the buffer to 8 MiB */
    COL_MODE_ROWS = 384, /* up to this many rows, threads split the columns instead */
    COPY_ROW_PANELS = 4, /* from a packed copy of op(B), which row mode no longer packs nor waits
                          * for: rows from 4 MR-row panels per thread (bench_gemm --packed-copy) */
    B_AHEAD = 32,        /* steps of k (4 KiB of B's panel) prefetched ahead into L1 */
};

static inline int64_t min64(int64_t x, int64_t y) { return x < y ? x : y; }

/* first_lanes(n): the mask of a 16-lane vector's first n lanes (transpose16.h): for a run of n
 * columns, first_lanes(n) covers its first vector and first_lanes(n - 16) its second. */
#define first_lanes qkv__first_lanes

/* The micro-kernel: acc = sum over p < kc of ap[p][0..12) (outer) bp[p][0..32), in order of p,
 * then C[0..mr)[0..nr) = beta C + alpha acc (beta = 0: C not read; beta = 1: C + alpha acc), or,
 * with a bias (the first slice of qkv__gemm_packed_bias), bias + alpha acc: the operation beta = 1
 * does on rows of C that hold the bias, without C being written first and read here. */
AVX512 static void micro_tile(int64_t kc, const float *restrict ap, const float *restrict bp,
                              int mr, int nr, float alpha, float beta, const float *bias, float *c,
                              int64_t ldc) {
    __m512 acc[MR][2];
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    /* C's rows on their way to L1 while the k loop runs (it is ~12 cycles a step) */
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++)
        if (i < mr) {
            _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
            _mm_prefetch((const char *)(c + i * ldc + 16), _MM_HINT_T0);
        }
    for (int64_t p = 0; p < kc; p++, ap += MR, bp += NR) {
        /* B's micro-panel (64 KiB) streams from L2 at every tile while A's holds L1: fetched
         * B_AHEAD steps early, 1.03-1.16x on config B's and S's products (Emerald Rapids, 2
         * threads, best of 5-6 alternating runs; BENCHMARKS.md). Near the last
         * panel's end the address lies past the buffer: computed as an integer (no pointer
         * arithmetic outside an object), and a prefetch never faults. */
        const uintptr_t ahead = (uintptr_t)bp + B_AHEAD * NR * sizeof(float);
        _mm_prefetch((const char *)ahead, _MM_HINT_T0);
        _mm_prefetch((const char *)(ahead + 64), _MM_HINT_T0);
        const __m512 b0 = _mm512_load_ps(bp), b1 = _mm512_load_ps(bp + 16);
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++) {
            const __m512 a = _mm512_set1_ps(ap[i]);
            acc[i][0] = _mm512_fmadd_ps(a, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(a, b1, acc[i][1]);
        }
    }
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    const __mmask16 m0 = first_lanes(nr), m1 = first_lanes(nr - 16);
    const __m512 bias0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps(),
                 bias1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) {
        if (i >= mr) break;
        float *ci = c + i * ldc;
        __m512 r0 = _mm512_mul_ps(va, acc[i][0]), r1 = _mm512_mul_ps(va, acc[i][1]);
        if (bias) {
            r0 = _mm512_add_ps(bias0, r0);
            r1 = _mm512_add_ps(bias1, r1);
        } else if (beta == 1) {
            r0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, ci), r0);
            r1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, ci + 16), r1);
        } else if (beta != 0) {
            r0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, ci), r0);
            r1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, ci + 16), r1);
        }
        _mm512_mask_storeu_ps(ci, m0, r0);
        _mm512_mask_storeu_ps(ci + 16, m1, r1);
    }
}

/* dst[p ds + l] = src[l ld + p] for lanes l < rows (<= 16; lanes rows..16 zero), p < kc, storing
 * the lanes in `keep`: 16 x 16 blocks transposed in registers (transpose16.h). Packs a row-major
 * operand whose k runs along its rows. */
AVX512 static void pack_transposed(int rows, int64_t kc, const float *src, int64_t ld, float *restrict dst,
                                   int64_t ds, __mmask16 keep) {
    for (int64_t p = 0; p < kc; p += 16) {
        const int64_t rem = min64(16, kc - p);
        __m512 o[16];
        qkv__transpose16(rows, rem, src + p, ld, o);
        for (int q = 0; q < rem; q++) _mm512_mask_storeu_ps(dst + (p + q) * ds, keep, o[q]);
    }
}

/* Panels of `width` (12 or 32) columns, dst[q][p][l] = src[p ld + q width + l] for columns
 * q width + l < cols (zero past them), p < kc. Packs an operand whose rows run along k, a row at
 * a time across all the panels: reading each panel down its kc rows instead (one or two cache
 * lines from each of 512 rows 4-32 KiB apart) made this copy 4 % of a config-B training step. */
AVX512 static void pack_straight(int64_t cols, int width, int64_t kc, const float *src, int64_t ld,
                                 float *restrict dst) {
    const int64_t panels = (cols + width - 1) / width, last = cols - (panels - 1) * width;
    const __mmask16 w0 = first_lanes(width), w1 = first_lanes(width - 16), l0 = first_lanes(last),
                    l1 = first_lanes(last - 16);
    for (int64_t p = 0; p < kc; p++) {
        const float *row = src + p * ld;
        float *d = dst + p * width;
        for (int64_t q = 0; q < panels; q++, row += width, d += width * kc) {
            const __mmask16 m0 = q + 1 < panels ? w0 : l0, m1 = q + 1 < panels ? w1 : l1;
            _mm512_mask_storeu_ps(d, w0, _mm512_maskz_loadu_ps(m0, row));
            if (w1) _mm512_mask_storeu_ps(d + 16, w1, _mm512_maskz_loadu_ps(m1, row + 16));
        }
    }
}

/* MR-row micro-panels of op(A)[0..mc)[0..kc): ap[r / MR][p][r % MR], rows mc.. of the last zero.
 * `a` points at op(A)[0][0] of the block: A is (mc, kc) with leading dimension lda, or (kc, mc)
 * when trans. */
static void pack_a(bool trans, int64_t mc, int64_t kc, const float *a, int64_t lda, float *restrict ap) {
    if (trans) {
        pack_straight(mc, MR, kc, a, lda, ap);
        return;
    }
    for (int64_t ir = 0; ir < mc; ir += MR, ap += MR * kc)
        pack_transposed((int)min64(MR, mc - ir), kc, a + ir * lda, lda, ap, MR, first_lanes(MR));
}

/* NR-column micro-panels of op(B)[0..kc)[0..nc): bp[j / NR][p][j % NR], columns nc.. of the last
 * zero. `b` points at op(B)[0][0]: B is (kc, nc) with leading dimension ldb, or (nc, kc) when
 * trans. Straight copies go NC columns at a time (8 panels written side by side). */
static void pack_b(bool trans, int64_t kc, int64_t nc, const float *b, int64_t ldb, float *restrict bp) {
    for (int64_t j = 0; j < nc; j += trans ? NR : NC) {
        const int64_t cols = min64(trans ? NR : NC, nc - j);
        if (trans) {
            pack_transposed((int)min64(16, cols), kc, b + j * ldb, ldb, bp + j * kc, NR, 0xffff);
            pack_transposed((int)(cols > 16 ? cols - 16 : 0), kc, b + (j + 16) * ldb, ldb, bp + j * kc + 16, NR,
                            0xffff);
        } else {
            pack_straight(cols, NR, kc, b + j, ldb, bp + j * kc);
        }
    }
}

/* The calling thread's packing buffer, kept between calls and freed when the thread exits (a
 * pthread key's destructor). */
static pthread_key_t buffer_key;
static pthread_once_t buffer_once = PTHREAD_ONCE_INIT;
static bool buffer_key_ok;
static _Thread_local float *buffer;
static _Thread_local size_t buffer_floats;

static void buffer_free(void *p) { free(p); }
static void buffer_key_make(void) { buffer_key_ok = pthread_key_create(&buffer_key, buffer_free) == 0; }

static float *buffer_get(size_t floats) {
    if (buffer && buffer_floats >= floats) return buffer;
    if (pthread_once(&buffer_once, buffer_key_make) != 0 || !buffer_key_ok) return NULL;
    const size_t bytes = (floats * sizeof(float) + 63) & ~(size_t)63;
    float *fresh = aligned_alloc(64, bytes);
    if (!fresh) return NULL;
    free(buffer);
    buffer = fresh;
    buffer_floats = floats;
    if (pthread_setspecific(buffer_key, buffer) != 0) { /* not freed at exit: drop it now */
        free(buffer);
        buffer = NULL;
        buffer_floats = 0;
        return NULL;
    }
    return buffer;
}

/* One thread's share of a slice: micro-panels [p0, p1) of A's rows (MR rows each), MC_MAX rows of
 * A packed at a time, against the packed slice of B (no columns, panels of NR). */
static void thread_rows(bool trans_a, int64_t p0, int64_t p1, int64_t m, int64_t no, int64_t kc,
                        float alpha, const float *a, int64_t lda, int64_t pc, const float *bp,
                        float beta, const float *bias, float *c, int64_t ldc, float *ap) {
    for (int64_t q = p0; q < p1; q += MC_MAX / MR) {
        const int64_t ic = q * MR, mc = min64(min64(MC_MAX, (p1 - q) * MR), m - ic);
        pack_a(trans_a, mc, kc, trans_a ? a + pc * lda + ic : a + ic * lda + pc, lda, ap);
        for (int64_t jc = 0; jc < no; jc += NC) {
            const int64_t j1 = min64(jc + NC, no);
            for (int64_t ir = 0; ir < mc; ir += MR)
                for (int64_t jr = jc; jr < j1; jr += NR)
                    micro_tile(kc, ap + ir * kc, bp + jr * kc, (int)min64(MR, mc - ir),
                               (int)min64(NR, no - jr), alpha, beta, bias ? bias + jr : NULL,
                               c + (ic + ir) * ldc + jr, ldc);
        }
    }
}

static _Atomic bool packed_enabled = true; /* relaxed: a benchmark's switch, no ordering */
static _Atomic int64_t column_rows = -1; /* a benchmark's bound, -1: the rule; relaxed as above */

void qkv__gemm_packed_enable(bool on) { atomic_store_explicit(&packed_enabled, on, memory_order_relaxed); }

void qkv__gemm_packed_column_rows(int64_t rows) {
    atomic_store_explicit(&column_rows, rows < 0 ? -1 : rows, memory_order_relaxed);
}

/* CPUs with AVX-512F. Measured on Intel Emerald Rapids and AMD Zen 4 (BENCHMARKS.md; on Zen 4
 * 1.09-1.16x OpenBLAS's tiles on config B's products, although Zen 4 runs a 512-bit
 * FMA as two 256-bit halves: one zmm FMA per cycle is the arithmetic of two ymm ones, and the
 * packing saved does not depend on the width). */
bool qkv__gemm_packed_available(void) { return __builtin_cpu_supports("avx512f"); }

bool qkv__gemm_uses_packed(int64_t m, int64_t n, int64_t k) {
    return m >= QKV_PACKED_MIN_ROWS && n >= QKV_PACKED_MIN_COLS && k >= QKV_PACKED_MIN_DEPTH &&
           m * n * k >= QKV_PACKED_MIN_WORK && atomic_load_explicit(&packed_enabled, memory_order_relaxed) &&
           qkv__gemm_packed_available();
}

/* Row mode's share of a slice's MR-row panels [0, panels): the next chunk [*p0, *p1), false when
 * none is left. `claimed` counts the panels taken over all slices, so this slice's run from
 * `base` (the barrier after packing B orders the slices). Chunks shrink as the work does
 * (work_claim.h; at most one A block of MC_MAX rows), so a thread slowed by another process leaves
 * little for the others to wait on at the barrier, where equal static shares left the faster
 * thread waiting (libgomp's spin 5 % of a config-B step). Which thread computes a row does not
 * change its bits. */
static bool claim_rows(_Atomic int64_t *claimed, int64_t base, int64_t panels, int team, int64_t *p0, int64_t *p1) {
    return qkv__claim_chunk(claimed, base, panels, team, MC_MAX / MR, p0, p1);
}

/* Column mode, for few rows: the thread's columns [j0, j1) of C, NC at a time, against all m rows
 * of op(A), packed once per k slice by each thread (m <= COL_MODE_ROWS: at most 768 KiB). op(B)'s
 * panels come from `copy` (a packed copy of all of op(B), ncols floats per k, written here first
 * when fill) or, without one, are packed into bp. */
static void thread_columns(bool trans_a, bool trans_b, int64_t m, int64_t j0, int64_t j1, int64_t k,
                           float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                           float beta, const float *bias, float *c, int64_t ldc, float *ap,
                           float *bp, float *copy, int64_t ncols, bool fill) {
    for (int64_t pc = 0; pc < k; pc += KC) {
        const int64_t kc = min64(KC, k - pc);
        pack_a(trans_a, m, kc, trans_a ? a + pc * lda : a + pc, lda, ap);
        for (int64_t jc = j0; jc < j1; jc += NC) {
            const int64_t nc = min64(NC, j1 - jc);
            float *bs = copy ? copy + pc * ncols + jc * kc : bp;
            if (!copy || fill)
                pack_b(trans_b, kc, nc, trans_b ? b + jc * ldb + pc : b + pc * ldb + jc, ldb, bs);
            for (int64_t ir = 0; ir < m; ir += MR)
                for (int64_t jr = 0; jr < nc; jr += NR)
                    micro_tile(kc, ap + ir * kc, bs + jr * kc, (int)min64(MR, m - ir),
                               (int)min64(NR, nc - jr), alpha, pc == 0 ? beta : 1,
                               pc == 0 && bias ? bias + jc + jr : NULL, c + ir * ldc + jc + jr,
                               ldc);
        }
    }
}

/* Row mode from a packed copy of op(B) (no packing of B, no barrier): chunks of A's MR-row panels
 * claimed as in row mode, each chunk taken through every k slice in order by the thread that
 * claimed it. */
static void thread_rows_from_copy(bool trans_a, int64_t m, int64_t n, int64_t k, float alpha,
                                  const float *a, int64_t lda, const float *copy, int64_t ncols,
                                  float beta, const float *bias, float *c, int64_t ldc, float *ap,
                                  _Atomic int64_t *claimed, int team) {
    const int64_t panels = (m + MR - 1) / MR;
    for (int64_t p0, p1; claim_rows(claimed, 0, panels, team, &p0, &p1);)
        for (int64_t pc = 0; pc < k; pc += KC)
            thread_rows(trans_a, p0, p1, m, n, min64(KC, k - pc), alpha, a, lda, pc,
                        copy + pc * ncols, pc == 0 ? beta : 1, pc == 0 ? bias : NULL, c, ldc, ap);
}

/* qkv__gemm_packed, and qkv__gemm_packed_bias with beta = 0 and a bias (else NULL); with `copy`,
 * op(B)'s panels come from that packed copy of all of it (qkv__gemm_packed_copy_floats(n, k)
 * floats), written first when fill. */
static bool packed(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                   const float *bias, float *c, int64_t ldc, float *copy, bool fill) {
    if (m <= 0 || n <= 0 || k <= 0 || alpha == 0) return false; /* the caller's BLAS semantics */
    int threads = 1;
#ifdef QKV_WITH_OPENMP
    threads = omp_in_parallel() ? 1 : omp_get_max_threads();
#endif
    const int64_t panels = (m + MR - 1) / MR; /* of A's rows */
    const int64_t b_panels = (min64(n, NCO) + NR - 1) / NR, n_panels = (n + NR - 1) / NR;
    const int64_t forced = atomic_load_explicit(&column_rows, memory_order_relaxed);
    const bool by_columns = (forced >= 0 ? m <= forced : copy ? panels < COPY_ROW_PANELS * threads : m <= COL_MODE_ROWS) &&
                            n_panels >= threads;
    const int64_t ncols = n_panels * NR; /* a k row of the copy */
    const int64_t per_thread = by_columns ? panels * MR * KC + (copy ? 0 : NC * KC) : MC_MAX * KC;
    float *buf = buffer_get((size_t)((by_columns || copy ? 0 : b_panels * NR * KC) + threads * per_thread));
    if (!buf) return false;
    _Atomic int64_t claimed = 0; /* row mode: the MR-row panels taken so far, over all slices */
#ifdef QKV_WITH_OPENMP
#pragma omp parallel num_threads(threads)
#endif
    {
        int tid = 0, team = 1;
#ifdef QKV_WITH_OPENMP
        tid = omp_get_thread_num();
        team = omp_get_num_threads();
#endif
        if (by_columns) { /* NR-column panels of C split evenly over the threads */
            float *ap = buf + tid * per_thread;
            const int64_t j0 = n_panels * tid / team * NR, j1 = min64(n, n_panels * (tid + 1) / team * NR);
            if (j0 < j1) /* filling a copy: this thread's panels of it, which only it reads */
                thread_columns(trans_a, trans_b, m, j0, j1, k, alpha, a, lda, b, ldb, beta, bias, c,
                               ldc, ap, copy ? NULL : ap + panels * MR * KC, copy, ncols, fill);
        } else if (copy) { /* row mode from the copy: filled by all (a barrier), then no waits */
            if (fill) {
                const int64_t q0 = n_panels * tid / team, q1 = n_panels * (tid + 1) / team, j = q0 * NR;
                for (int64_t pc = 0; q0 < q1 && pc < k; pc += KC) {
                    const int64_t kc = min64(KC, k - pc);
                    pack_b(trans_b, kc, min64((q1 - q0) * NR, n - j), trans_b ? b + j * ldb + pc : b + pc * ldb + j,
                           ldb, copy + pc * ncols + j * kc);
                }
#ifdef QKV_WITH_OPENMP
#pragma omp barrier
#endif
            }
            thread_rows_from_copy(trans_a, m, n, k, alpha, a, lda, copy, ncols, beta, bias, c, ldc,
                                  buf + tid * per_thread, &claimed, team);
        } else { /* MR-row panels of C claimed in shrinking chunks, packed B shared */
            float *bp = buf, *ap = buf + b_panels * NR * KC + tid * per_thread;
            int64_t base = 0; /* `claimed` at the start of this slice */
            for (int64_t jo = 0; jo < n; jo += NCO) {
                const int64_t no = min64(NCO, n - jo), no_panels = (no + NR - 1) / NR;
                for (int64_t pc = 0; pc < k; pc += KC) {
                    const int64_t kc = min64(KC, k - pc);
                    const int64_t q0 = no_panels * tid / team, q1 = no_panels * (tid + 1) / team, j = jo + q0 * NR;
                    if (q0 < q1)
                        pack_b(trans_b, kc, min64((q1 - q0) * NR, n - j), trans_b ? b + j * ldb + pc : b + pc * ldb + j,
                               ldb, bp + q0 * NR * kc);
#ifdef QKV_WITH_OPENMP
#pragma omp barrier
#endif
                    for (int64_t p0, p1; claim_rows(&claimed, base, panels, team, &p0, &p1);)
                        thread_rows(trans_a, p0, p1, m, no, kc, alpha, a, lda, pc, bp,
                                    pc == 0 ? beta : 1, pc == 0 && bias ? bias + jo : NULL, c + jo,
                                    ldc, ap);
                    base += panels;
#ifdef QKV_WITH_OPENMP
                    if (pc + KC < k || jo + NCO < n) { /* the next slice overwrites packed B */
#pragma omp barrier
                    }
#endif
                }
            }
        }
    }
    return true;
}

bool qkv__gemm_packed(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                      float *c, int64_t ldc) {
    return packed(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, NULL, c, ldc, NULL, false);
}

bool qkv__gemm_packed_bias(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                           const float *a, int64_t lda, const float *b, int64_t ldb,
                           const float *bias, float *c, int64_t ldc) {
    return packed(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, 0, bias, c, ldc, NULL, false);
}

size_t qkv__gemm_packed_copy_floats(int64_t n, int64_t k) {
    return (size_t)((n + NR - 1) / NR) * NR * (size_t)k;
}

bool qkv__gemm_packed_nt_copy(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                              const float *w, int64_t ldw, float *copy, bool fill,
                              const float *bias, float *y, int64_t ldy) {
    return packed(false, true, m, n, k, 1, x, ldx, w, ldw, 0, bias, y, ldy, copy, fill);
}
#else
void qkv__gemm_packed_enable(bool on) { (void)on; }
void qkv__gemm_packed_column_rows(int64_t rows) { (void)rows; }
bool qkv__gemm_packed_available(void) { return false; }
bool qkv__gemm_uses_packed(int64_t m, int64_t n, int64_t k) {
    (void)m, (void)n, (void)k;
    return false;
}
bool qkv__gemm_packed(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                      int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb,
        (void)beta, (void)c, (void)ldc;
    return false;
}
bool qkv__gemm_packed_bias(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                           const float *a, int64_t lda, const float *b, int64_t ldb,
                           const float *bias, float *c, int64_t ldc) {
    (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda,
        (void)b, (void)ldb, (void)bias, (void)c, (void)ldc;
    return false;
}
size_t qkv__gemm_packed_copy_floats(int64_t n, int64_t k) {
    (void)n, (void)k;
    return 0;
}
bool qkv__gemm_packed_nt_copy(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                              const float *w, int64_t ldw, float *copy, bool fill,
                              const float *bias, float *y, int64_t ldy) {
    (void)m, (void)n, (void)k, (void)x, (void)ldx, (void)w, (void)ldw, (void)copy, (void)fill,
        (void)bias, (void)y, (void)ldy;
    return false;
}
#endif
