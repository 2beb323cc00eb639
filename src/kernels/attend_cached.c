/*
 * attend_cached.c: one query per (row, head) against a KV cache read in place (see
 * attend_cached.h for the math and the layouts).
 *
 * Per row n and head h, as the reference kernel (sdpa_ref.c) does per query row: scores
 * s_j = scale q.k_j into a per-thread buffer with their maximum m; p_j = exp(s_j - m) in place
 * and l = sum_j p_j; then o = (sum_j p_j v_j) / l, eight dimensions at a time over all keys. A
 * padded key gets p_j = 0 and is never read. Key j of row n is read at an offset computed once per
 * row and thread: through key_rows (the session's table of rows), kv_rows, or in row n itself.
 * A task is a block of ROW_BLOCK rows under one head, the rows one after the other (see
 * ROW_BLOCK). The dot products keep 8 partial sums (lanes d mod 8, added pairwise at the end): a
 * fixed order the compiler can put in vector registers without reassociating anything (-O2, no
 * -ffast-math).
 *
 * On x86-64 CPUs with AVX2 and D a multiple of 8 the same sums run in 256-bit registers, with the
 * same bits: lane i of one register is the partial sum acc[i] above (products rounded, then
 * added, never fused), four keys' dot products at a time and up to 64 dimensions of o per pass
 * over the keys. The portable loops carry one chain of dependent additions per 8 values, so they
 * wait on the adder's latency; four keys, or eight blocks of 8 dimensions, give as many
 * independent chains. Keys are prefetched PREFETCH_KEYS ahead while scoring, and each key's
 * value vector as its score is computed, so the weighted sum finds them in cache: a step reads
 * the keys of rows written many products ago (BENCHMARKS.md, "Session 11"); and the next task's
 * keys and values into L2 meanwhile ("Session 15").
 *
 * Reference: the forward of qkv_sdpa (kernels/sdpa_cpu.c, sdpa_ref.c) with T = 1; fairseq's and
 * CTranslate2's incremental decoders attend the new position over the cache the same way.
 */
#include "attend_cached.h"
#include "rowreduce.h"

#include <math.h>
#include <stdatomic.h>

#ifdef QKV_WITH_OPENMP
#include <omp.h>
#endif

#define GRAIN 65536 /* multiply-adds below which a call stays on one thread */
/* Rows attended one after the other per head: the beams of a sentence (consecutive rows) read
 * one copy of its cross-attention keys and values, and siblings share their prefix's keys, so a
 * head's keys come from memory once per block and from L1 for its other rows (S beam 5 ~4 %
 * faster than row by row, all heads of a row before the next; BENCHMARKS.md, "Session 11"). */
#define ROW_BLOCK 8

/* q . k over D elements in the fixed order above. */
static inline qkv_real dot(const qkv_real *restrict q, const qkv_real *restrict k, int64_t D) {
    qkv_real acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t d = 0;
    for (; d + 8 <= D; d += 8)
        for (int i = 0; i < 8; i++)
            acc[i] += q[d + i] * k[d + i];
    for (int i = 0; d < D; d++, i++)
        acc[i] += q[d] * k[d];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

/* o[0 .. 8) = sum_j p_j v_j[0 .. 8) over keys with p_j > 0, in order of j (eight independent
 * sums: the compiler keeps them in vector registers); v_j = v + off[j]. */
static inline void weighted_block(const qkv_real *restrict p, const qkv_real *restrict v, int64_t S,
                                  const int64_t *restrict off, qkv_real inv, qkv_real *restrict o) {
    qkv_real acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t j = 0; j < S; j++) {
        if (p[j] == 0) continue; /* padded (never read) or underflowed: adds nothing */
        const qkv_real pj = p[j], *restrict vj = v + off[j];
        for (int i = 0; i < 8; i++)
            acc[i] += pj * vj[i];
    }
    for (int i = 0; i < 8; i++)
        o[i] = acc[i] * inv;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(QKV_NO_CLONES) && !defined(QKV_DOUBLE)
#include <immintrin.h>
#define ATTEND_AVX2 1

static _Atomic bool vector_enabled = true; /* relaxed: a test's switch, no ordering */

void qkv__attend_cached_vector(bool on) { atomic_store_explicit(&vector_enabled, on, memory_order_relaxed); }

/* ((a0 + a4) + (a1 + a5)) + ((a2 + a6) + (a3 + a7)): dot's final sum, on the lanes of v. */
__attribute__((target("avx2"), always_inline)) static inline float sum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); /* a_i + a_i+4 */
    s = _mm_hadd_ps(s, s); /* (s0 + s1, s2 + s3, ..) */
    s = _mm_hadd_ps(s, s);
    return _mm_cvtss_f32(s);
}

/* out[i] = dot(q, k[i], D) for four keys at once, D a multiple of 8. */
__attribute__((target("avx2"))) static void dot4_avx2(const float *q, const float *const k[4], int64_t D,
                                                       float out[4]) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t d = 0; d < D; d += 8) {
        const __m256 qv = _mm256_loadu_ps(q + d);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) acc[i] = _mm256_add_ps(acc[i], _mm256_mul_ps(qv, _mm256_loadu_ps(k[i] + d)));
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) out[i] = sum8(acc[i]);
}

/* dot(q, k, D) for one key, D a multiple of 8. */
__attribute__((target("avx2"))) static float dot1_avx2(const float *q, const float *k, int64_t D) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t d = 0; d < D; d += 8) acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + d)));
    return sum8(acc);
}

/* weighted_block for nb blocks of 8 dimensions at once (nb <= 8, a constant at each call site). */
__attribute__((target("avx2"), always_inline)) static inline void weighted_blocks_avx2(
    int nb, const float *restrict p, const float *restrict v, int64_t S, const int64_t *restrict off, float inv,
    float *restrict o) {
    __m256 acc[8];
#pragma GCC unroll 8
    for (int b = 0; b < nb; b++) acc[b] = _mm256_setzero_ps();
    for (int64_t j = 0; j < S; j++) {
        if (p[j] == 0) continue; /* as weighted_block */
        const __m256 pj = _mm256_set1_ps(p[j]);
        const float *vj = v + off[j];
#pragma GCC unroll 8
        for (int b = 0; b < nb; b++) acc[b] = _mm256_add_ps(acc[b], _mm256_mul_ps(pj, _mm256_loadu_ps(vj + 8 * b)));
    }
    const __m256 iv = _mm256_set1_ps(inv);
#pragma GCC unroll 8
    for (int b = 0; b < nb; b++) _mm256_storeu_ps(o + 8 * b, _mm256_mul_ps(acc[b], iv));
}

__attribute__((target("avx2"))) static void weighted_avx2(const float *restrict p, const float *restrict v, int64_t S,
                                                          const int64_t *restrict off, float inv, float *restrict o,
                                                          int64_t D) {
    int64_t d = 0;
    for (; d + 64 <= D; d += 64) weighted_blocks_avx2(8, p, v + d, S, off, inv, o + d);
    for (; d < D; d += 8) weighted_blocks_avx2(1, p, v + d, S, off, inv, o + d);
}
#else
void qkv__attend_cached_vector(bool on) { (void)on; }
#endif

#define PREFETCH_KEYS 4
/* The cache lines of one key's (or value's) D elements, towards L1. */
static inline void prefetch_vector(const qkv_real *x, int64_t D) {
    for (int64_t d = 0; d < D; d += 64 / (int64_t)sizeof(qkv_real)) __builtin_prefetch(x + d);
}
/* The same towards L2 only (the next task's keys and values, attend_one). */
static inline void prefetch_vector_l2(const qkv_real *x, int64_t D) {
    for (int64_t d = 0; d < D; d += 64 / (int64_t)sizeof(qkv_real))
        __builtin_prefetch(x + d, 0, 2);
}

/* off[j] = where key j of row n starts, relative to head h's base: from key_rows, kv_rows or the
 * row itself. */
static void key_offsets(const qkv_attend_cached_problem *p, int64_t n, int64_t *restrict off) {
    const int64_t sj = p->kv_sj, sn = p->kv_sn;
    if (p->key_rows) {
        const int32_t *rows = p->key_rows + n * p->key_rows_ld;
        for (int64_t j = 0; j < p->S; j++) off[j] = rows[j] * sn + j * sj;
    } else {
        const int64_t base = (p->kv_rows ? p->kv_rows[n] : n) * sn;
        for (int64_t j = 0; j < p->S; j++) off[j] = base + j * sj;
    }
}

/* The task of row n, head h; s holds S reals (the scores, then the probabilities), off the S key
 * offsets of row n (key_offsets). Unless next_k is NULL, the keys next_k + next_off[j] and values
 * next_v + next_off[j] of this thread's next task are prefetched into L2 while the keys j are
 * scored four at a time, so that task finds them there instead of starting a new stream from
 * memory (config-B greedy decoding's steps ~3-6 % faster, BENCHMARKS.md "Session 15"). */
static void attend_one(const qkv_attend_cached_problem *p, int64_t n, int64_t h,
                       qkv_real *restrict s, const int64_t *restrict off, bool vec,
                       const qkv_real *next_k, const qkv_real *next_v, const int64_t *next_off) {
    const int64_t S = p->S, D = p->D;
    const qkv_real scale = (qkv_real)p->scale;
    const qkv_real *q = p->q + n * p->q_sn + h * p->q_sh;
    const qkv_real *k = p->k + h * p->kv_sh;
    const qkv_real *v = p->v + h * p->kv_sh;
    const int32_t *pad = p->key_padding ? p->key_padding + n * S : NULL;
    qkv_real *restrict o = p->o + n * p->o_sn + h * D;
    qkv_real mx = (qkv_real)-INFINITY;
    int64_t j = 0;
    while (j < S) {
#ifdef ATTEND_AVX2
        if (vec && j + 4 <= S && !(pad && (pad[j] | pad[j + 1] | pad[j + 2] | pad[j + 3]))) {
            const float *keys[4]; /* four keys at a time where none of them is padded */
            for (int i = 0; i < 4; i++) {
                if (next_k) {
                    prefetch_vector_l2(next_k + next_off[j + i], D);
                    prefetch_vector_l2(next_v + next_off[j + i], D);
                }
                if (j + i + PREFETCH_KEYS < S) prefetch_vector(k + off[j + i + PREFETCH_KEYS], D);
                prefetch_vector(v + off[j + i], D);
                keys[i] = k + off[j + i];
            }
            float dots[4];
            dot4_avx2(q, keys, D, dots);
            for (int i = 0; i < 4; i++, j++) {
                s[j] = scale * dots[i];
                mx = s[j] > mx ? s[j] : mx;
            }
            continue;
        }
#endif
        if (pad && pad[j]) {
            s[j++] = (qkv_real)-INFINITY;
            continue;
        }
        if (j + PREFETCH_KEYS < S) prefetch_vector(k + off[j + PREFETCH_KEYS], D);
        prefetch_vector(v + off[j], D);
#ifdef ATTEND_AVX2
        s[j] = scale * (vec ? dot1_avx2(q, k + off[j], D) : dot(q, k + off[j], D));
#else
        s[j] = scale * dot(q, k + off[j], D);
#endif
        mx = s[j] > mx ? s[j] : mx;
        j++;
    }
    if (mx == (qkv_real)-INFINITY) { /* no allowed key: o = 0 */
        for (int64_t d = 0; d < D; d++)
            o[d] = 0;
        return;
    }
    /* the exponentials in blocks the compiler vectorises (qkv__exp_r is branch-free and takes a
     * masked score, -inf - mx = -inf, to +0), then their sum in order: the same values and the
     * same sum as one loop doing both */
    QKV_LANE_LOOP(i, S, s[i] = qkv__exp_r(s[i] - mx););
    qkv_real l = 0;
    for (j = 0; j < S; j++)
        l += s[j];
    const qkv_real inv = 1 / l;
#ifdef ATTEND_AVX2
    if (vec) {
        weighted_avx2(s, v, S, off, inv, o, D);
        return;
    }
#endif
    int64_t d = 0;
    for (; d + 8 <= D; d += 8)
        weighted_block(s, v + d, S, off, inv, o + d);
    for (; d < D; d++) { /* the same sums, one dimension at a time */
        qkv_real acc = 0;
        for (j = 0; j < S; j++)
            if (s[j] != 0) acc += s[j] * v[off[j] + d];
        o[d] = acc * inv;
    }
}

bool qkv__attend_cached(qkv_ctx *ctx, const qkv_attend_cached_problem *p) {
    const int64_t tasks = p->N * p->H;
    if (tasks <= 0) return true;
#ifdef ATTEND_AVX2
    const bool vec = p->D % 8 == 0 && atomic_load_explicit(&vector_enabled, memory_order_relaxed) &&
                     __builtin_cpu_supports("avx2");
#else
    const bool vec = false;
#endif
#ifdef QKV_WITH_OPENMP
    const bool par = tasks * p->S * p->D * 2 > GRAIN;
    const int threads = par ? omp_get_max_threads() : 1;
#else
    const int threads = 1;
#endif
    /* per thread: S reals (the scores; S rounded up to even keeps what follows 8-byte aligned),
     * then the S key offsets of each row of a block */
    const size_t reals = sizeof(qkv_real) * (size_t)((p->S + 1) & ~(int64_t)1),
                 per_thread = reals + sizeof(int64_t) * (size_t)(ROW_BLOCK * p->S);
    unsigned char *scratch = qkv__scratch(ctx, (per_thread ? per_thread : 1) * (size_t)threads);
    if (!scratch) return false;
    if (ctx->measure_only) { /* the arena measure run (internal.h): zeros, no key read */
        for (int64_t n = 0; n < p->N; n++) memset(p->o + n * p->o_sn, 0, sizeof(qkv_real) * (size_t)(p->H * p->D));
        return true;
    }
#ifdef QKV_WITH_OPENMP
#pragma omp parallel if (par)
#endif
    {
#ifdef QKV_WITH_OPENMP
        unsigned char *mine = scratch + (size_t)omp_get_thread_num() * per_thread;
#else
        unsigned char *mine = scratch;
#endif
        int64_t *off = (int64_t *)(mine + reals), block = -1; /* the block whose offsets off holds */
        const int64_t blocks = (p->N + ROW_BLOCK - 1) / ROW_BLOCK;
#ifdef QKV_WITH_OPENMP
#pragma omp for schedule(static)
#endif
        for (int64_t t = 0; t < blocks * p->H; t++) {
            const int64_t n0 = t / p->H * ROW_BLOCK, n1 = n0 + ROW_BLOCK < p->N ? n0 + ROW_BLOCK : p->N;
            if (t / p->H != block) { /* once per block and thread */
                block = t / p->H;
                for (int64_t n = n0; n < n1; n++) key_offsets(p, n, off + (n - n0) * p->S);
            }
            const int64_t h = t % p->H;
            for (int64_t n = n0; n < n1; n++) {
                /* the next (row, head) of this thread: the next row, or the block's first under
                 * the next head */
                const bool pf = n + 1 < n1 || h + 1 < p->H;
                const int64_t nh = n + 1 < n1 ? h : h + 1, nn = n + 1 < n1 ? n + 1 : n0;
                attend_one(p, n, h, (qkv_real *)mine, off + (n - n0) * p->S, vec,
                           pf ? p->k + nh * p->kv_sh : NULL, pf ? p->v + nh * p->kv_sh : NULL,
                           off + (nn - n0) * p->S);
            }
        }
    }
    return true;
}
