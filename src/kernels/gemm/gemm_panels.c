/*
 * gemm_panels.c: y = x W^T (+ b) for the 8-96 rows of a decoding step from a copy of the weight W
 * (n, k) repacked for them, with exactly the bits of the small-M kernel on 16 lanes
 * (gemm_small_m.c), which it replaces there. A decoding session keeps the copies
 * (weight_copies.c).
 *
 * Why: at M = 16 a decoding step's products stream every weight from memory once, and the small
 * kernel, which reads W in place (a 4 x 6 block of x rows and W rows, 10 vector loads per 24 FMAs,
 * a horizontal sum per element), waits on that stream. A copy laid out for the product is read
 * as one sequential stream per thread with one vector load of W per 16 FMAs, which comes closer
 * to the in-cache time (BENCHMARKS.md).
 *
 * The bits. The small-M kernel computes element (i, j) as 16 partial sums, lane l taking the
 * terms k = 16 s + l in increasing s with FMA from +0, then the lanes added in a fixed tree:
 *
 *   (((v0+v8) + (v4+v12)) + ((v2+v10) + (v6+v14))) + (((v1+v9) + (v5+v13)) + ((v3+v11) + (v7+v15)))
 *
 * and y = sum (+ b_j). Here the lanes hold 16 rows of W, and k is stored residue-major:
 *
 *   panel[q][off[l] + s][r] = W[16 q + r][16 s + l]      (panel q: rows 16 q .. 16 q + 15 of W)
 *
 * (off[l]: how many k hold the residues before l). Residue l's loop runs
 * acc[i] += x[i][16 s + l] (broadcast) * panel[q][off[l] + s] over s for up to 16 rows i of x at
 * once, so lane r of acc[i] is the small kernel's partial sum l of element (i, 16 q + r): the same
 * FMAs on the same operands in the same order. The 16 partials of each row are kept, added in
 * the same tree lane-wise, and the bias added: the same bits for every m, n, k and thread count
 * (tests/ops/test_gemm_panels.c compares them with memcmp). x is transposed into the same
 * residue-major order (16 x 16 blocks in registers, transpose16.h) at every product, by each
 * thread into a copy of its own: no thread waits for another's half, and none reads the other
 * core's lines of the transpose (with one shared copy behind a barrier, a step's 37 products
 * each paid for that barrier; BENCHMARKS.md); W when its copy is filled, by the thread that then
 * multiplies it, while the panel is still in its cache.
 *
 * Panels in the packed GEMM's order (one sum per element over k) would move the decoding step's
 * products into another bits class (docs/design.md); the residue order keeps the class.
 */
#include "gemm.h"

#include <stdlib.h>
#include <string.h>
#ifdef QKV_WITH_OPENMP
#include <omp.h>
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(QKV_NO_CLONES) && !defined(QKV_DOUBLE)
#include <immintrin.h>

#include "../transpose16.h"
#include "../work_claim.h"

#define AVX512 __attribute__((target("avx512f")))

enum {
    GROUP = 16, /* rows of x per pass over a panel: 16 accumulators (plus W's vector) */
    NEAR = 24,  /* panel slots (64 bytes each) prefetched ahead into L1 .. */
    FAR = 192,  /* .. and into L2 (12 KiB); other distances measured the same or slower
                 * (BENCHMARKS.md) */
    AT_AHEAD = 16, /* x's slots (its transpose, 16 rows in a line) prefetched ahead into L1 */
};

static inline int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}

bool qkv__gemm_panels_available(void) {
    return qkv__gemm_small_m_wide(); /* AVX-512F, and no test asked for 8 lanes */
}

/* off[l] = the first slot of residue l (k = l, l + 16, ..), off[16] = k. */
static void residue_offsets(int64_t k, int64_t off[17]) {
    off[0] = 0;
    for (int l = 0; l < 16; l++)
        off[l + 1] = off[l] + (k > l ? (k - l + 15) / 16 : 0);
}

/* Blocks [b0, b1) of 16 k of `rows` (<= 16) rows of src (leading dimension ld), transposed into
 * the residue-major slots of dst: dst[(off[l] + s) 16 + r] = src[r ld + 16 s + l], lanes past
 * rows zero. The rows' lines AHEAD blocks on are requested meanwhile: each line is read once,
 * often from the other core's cache (x was just written by both threads), and waiting for each
 * in turn made transposing x ~5 % of a config-B step. */
enum { AHEAD = 4 };
AVX512 static void pack_residue(int rows, int64_t k, int64_t b0, int64_t b1, const float *src,
                                int64_t ld, const int64_t off[17], float *restrict dst) {
    for (int64_t s = b0; s < b1; s++) {
        if (s + AHEAD < b1)
            for (int r = 0; r < rows; r++)
                _mm_prefetch((const char *)(src + r * ld + 16 * (s + AHEAD)), _MM_HINT_T0);
        const int64_t cols = min64(16, k - 16 * s);
        __m512 o[16];
        qkv__transpose16(rows, cols, src + 16 * s, ld, o);
        if (cols == 16) { /* unrolled: o stays in registers */
#pragma GCC unroll 16
            for (int l = 0; l < 16; l++)
                _mm512_store_ps(dst + (off[l] + s) * 16, o[l]);
        } else {
            for (int l = 0; l < cols; l++)
                _mm512_store_ps(dst + (off[l] + s) * 16, o[l]);
        }
    }
}

/* Slot t of a panel: acc[i] += x[i][slot t] (broadcast) * the panel's slot t, i < mr. */
AVX512 __attribute__((always_inline)) static inline void
slot_fmas(int mr, const float *restrict at, const float *restrict pan, int64_t t,
          __m512 acc[GROUP]) {
    __m512 wv = _mm512_load_ps(pan + t * 16);
    __asm__("" : "+v"(wv)); /* one load for the 16 FMAs, not one folded into each */
    /* x's line of slot t was last read one panel ago, with a panel's stream since: from k = 512
     * on, the two (64 k bytes each) overflow a 48 KiB L1, and every slot waited on the L2 for x.
     * Past at's end the address is an integer's (no pointer arithmetic outside an object), and a
     * prefetch never faults. */
    _mm_prefetch((const char *)((uintptr_t)(at + t * 16) + AT_AHEAD * 64), _MM_HINT_T0);
    const float *xt = at + t * 16;
#pragma GCC unroll 16
    for (int i = 0; i < GROUP; i++)
        if (i < mr) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(xt[i]), wv, acc[i]);
}

/*
 * Rows i < mr of a group of x (at: its residue-major transpose, at[t][i]) against one panel:
 * per residue, the 16 accumulators over its slots, then the small kernel's tree over the residues,
 * lane-wise (its first level, l + (l + 8), as residue l + 8 ends), and y[i][0 .. nn) = sum (+
 * bias). The panel's stream is prefetched NEAR and FAR slots ahead up to pf_end (NULL: not, the
 * panel was just written). While copies are being filled, next_w (unless NULL) are the 16 rows of W
 * (leading dimension k) the next panel copies: one of their k lines is prefetched per slot, all of
 * them by the end. mr is a constant at each call site but the last group's, so the loops unroll
 * into register code.
 */
AVX512 __attribute__((always_inline)) static inline void
group_panel(int mr, const int64_t off[17], const float *restrict at, const float *restrict pan,
            const float *pf_end, const float *next_w, int64_t k, const float *bias, float *y,
            int64_t ldy, int nn) {
    __m512 part[8][GROUP]; /* residue l < 8's sums, then those plus residue l + 8's */
    /* the slots whose line FAR ahead is still the run's (pf_end - pan: the run's slots left) */
    const int64_t pf_slots = pf_end ? (int64_t)((pf_end - pan) / 16) - FAR : 0;
    for (int l = 0; l < 16; l++) {
        __m512 acc[GROUP];
#pragma GCC unroll 16
        for (int i = 0; i < GROUP; i++)
            acc[i] = _mm512_setzero_ps();
        /* Three loops, so that no slot tests what it prefetches: the tests' compares and
         * branches issued beside the FMAs (products in cache ~2 % faster without them) */
        const int64_t t1 = off[l + 1];
        int64_t t = off[l];
        if (next_w) { /* filling: the next panel's rows of W, one of their k lines per slot */
            for (; t < t1; t++) {
                _mm_prefetch((const char *)(next_w + (t & 15) * k + (t >> 4) * 16), _MM_HINT_T0);
                slot_fmas(mr, at, pan, t, acc);
            }
        }
        for (const int64_t tp = pf_slots < t1 ? pf_slots : t1; t < tp; t++) {
            _mm_prefetch((const char *)(pan + (t + NEAR) * 16), _MM_HINT_T0);
            _mm_prefetch((const char *)(pan + (t + FAR) * 16), _MM_HINT_T1);
            slot_fmas(mr, at, pan, t, acc);
        }
        for (; t < t1; t++)
            slot_fmas(mr, at, pan, t, acc);
        if (l < 8) {
#pragma GCC unroll 16
            for (int i = 0; i < GROUP; i++)
                if (i < mr) part[l][i] = acc[i];
        } else { /* the tree's first level as soon as both its operands exist */
#pragma GCC unroll 16
            for (int i = 0; i < GROUP; i++)
                if (i < mr) part[l - 8][i] = _mm512_add_ps(part[l - 8][i], acc[i]);
        }
    }
    const __mmask16 lanes = qkv__first_lanes(nn);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(lanes, bias) : _mm512_setzero_ps();
    for (int i = 0; i < mr; i++) {
        __m512 s4[4];
        for (int l = 0; l < 4; l++)
            s4[l] = _mm512_add_ps(part[l][i], part[l + 4][i]);
        __m512 sum = _mm512_add_ps(_mm512_add_ps(s4[0], s4[2]), _mm512_add_ps(s4[1], s4[3]));
        if (bias) sum = _mm512_add_ps(sum, b);
        _mm512_mask_storeu_ps(y + i * ldy, lanes, sum);
    }
}

/* One thread's run of panels [q0, q1): filled from w first when pack, then multiplied by every
 * group of x's rows. A function of its own with the AVX-512 target: the body of an OpenMP region
 * is outlined into a function that clang compiles without the enclosing function's target. */
AVX512 static void panel_run(int64_t q0, int64_t q1, int64_t m, int64_t n, int64_t k,
                             const int64_t off[17], const float *at, const float *w, float *panels,
                             bool pack, const float *bias, float *y) {
    const int64_t groups = (m + GROUP - 1) / GROUP, kblocks = (k + 15) / 16;
    const float *run_end = pack ? NULL : panels + q1 * 16 * k;
    for (int64_t q = q0; q < q1; q++) {
        const int nn = (int)min64(16, n - 16 * q);
        float *pan = panels + q * 16 * k;
        if (pack) pack_residue(nn, k, 0, kblocks, w + 16 * q * k, k, off, pan);
        for (int64_t g = 0; g < groups; g++) {
            const int mr = (int)min64(GROUP, m - g * GROUP);
            const float *xt = at + g * GROUP * k, *bq = bias ? bias + 16 * q : NULL;
            const float *next_w = pack && g == 0 && q + 1 < q1 ? w + 16 * (q + 1) * k : NULL;
            float *yq = y + g * GROUP * n + 16 * q;
            if (mr == GROUP)
                group_panel(GROUP, off, xt, pan, run_end, next_w, k, bq, yq, n, nn);
            else if (mr == 8)
                group_panel(8, off, xt, pan, run_end, next_w, k, bq, yq, n, nn);
            else
                group_panel(mr, off, xt, pan, run_end, next_w, k, bq, yq, n, nn);
        }
    }
}

void qkv__gemm_panels(int64_t m, int64_t n, int64_t k, const float *x, const float *w,
                      float *panels, bool pack, const float *bias, float *y, float *at) {
    if (m <= 0 || n <= 0 || k <= 0) return;
    int64_t off[17];
    residue_offsets(k, off);
    const int64_t np = (n + 15) / 16, groups = (m + GROUP - 1) / GROUP, kblocks = (k + 15) / 16;
    const bool parallel = m * n * k > ((int64_t)1 << 18); /* the small kernel's threshold */
    _Atomic int64_t claimed = 0; /* panels taken so far */
    (void)parallel;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel if (parallel)
#endif
    {
#ifdef QKV_WITH_OPENMP
        const int64_t team = omp_get_num_threads(), id = omp_get_thread_num();
#else
        const int64_t team = 1, id = 0;
#endif
        /* x transposed by each thread into its own copy (qkv__panels_at_floats) */
        float *my_at = at + id * groups * GROUP * k;
        for (int64_t g = 0; g < groups; g++)
            pack_residue((int)min64(GROUP, m - g * GROUP), k, 0, kblocks, x + g * GROUP * k, k,
                         off, my_at + g * GROUP * k);
        /* the panels in shrinking chunks claimed by the threads (work_claim.h), which changes no
         * result: every element is one panel's sums, and a panel is filled by the thread that
         * claims it. Equal static shares left the faster thread waiting at the region's end
         * whenever the host slowed the other (BENCHMARKS.md). */
        for (int64_t q0, q1; qkv__claim_chunk(&claimed, 0, np, (int)team, np, &q0, &q1);)
            panel_run(q0, q1, m, n, k, off, my_at, w, panels, pack, bias, y);
    }
}
#else
bool qkv__gemm_panels_available(void) {
    return false;
}
void qkv__gemm_panels(int64_t m, int64_t n, int64_t k, const float *x, const float *w,
                      float *panels, bool pack, const float *bias, float *y, float *at) {
    (void)m, (void)n, (void)k, (void)x, (void)w, (void)panels, (void)pack, (void)bias, (void)y,
        (void)at;
}
#endif

size_t qkv__panels_floats(int64_t n, int64_t k) {
    return (size_t)((n + 15) / 16) * 16 * (size_t)k;
}

size_t qkv__panels_at_floats(int64_t m, int64_t k) {
#ifdef QKV_WITH_OPENMP
    const size_t team = (size_t)omp_get_max_threads(); /* a region's team is never larger */
#else
    const size_t team = 1;
#endif
    return team * qkv__panels_floats(m, k); /* x's groups of 16 rows, as W's panels of 16 */
}
