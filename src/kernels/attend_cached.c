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
 * added, never fused), eight (or four) keys' dot products at a time, their final sums reduced
 * together and scaled, and their maximum kept, in vector registers; up to 64 dimensions of o per
 * pass over the keys, the sum l running in that pass. The portable loops carry one chain of
 * dependent additions per 8 values, so they wait on the adder's latency; eight keys, or eight
 * blocks of 8 dimensions, give as many independent chains. Keys are prefetched PREFETCH_KEYS
 * ahead while scoring, and each key's value vector as its score is computed, so the weighted sum
 * finds them in cache: a step reads the keys of rows written many products ago; and the next
 * task's keys and values into L2 meanwhile; but no key the thread's previous row read, nor one
 * of this row's that the next row reads (a beam's siblings share their source's keys and their
 * prefix's). With the eight-key groups, S beam 5's attention regions take 17-20 % less time
 * (BENCHMARKS.md).
 *
 * Reference: the forward of qkv_sdpa (kernels/sdpa_cpu.c, sdpa_ref.c) with T = 1; fairseq's and
 * CTranslate2's incremental decoders attend the new position over the cache the same way.
 */
#include "attend_cached.h"
#include "backend.h"
#include "rowreduce.h"

#include <math.h>
#include <stdatomic.h>

#ifdef QKV_WITH_OPENMP
#include <omp.h>
#endif

#define GRAIN 65536 /* multiply-adds below which a call stays on one thread */
/* Rows attended one after the other per head: the beams of a sentence (consecutive rows) read
 * one copy of its cross-attention keys and values, and siblings share their prefix's keys, so a
 * head's keys come from memory once per block and from L1 for its other rows (faster than row by
 * row, all heads of a row before the next; BENCHMARKS.md). */
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

/* out lane i = dot(q, k[i], D) for eight keys at once, D a multiple of 8. The eight partial-sum
 * registers are reduced together, by dot's tree: their 128-bit halves added (a_i + a_i+4, keys i
 * and i + 4 sharing a register), then two rounds of horizontal adds, ((a0 + a4) + (a1 + a5)) +
 * ((a2 + a6) + (a3 + a7)) landing in lane i: sum8's operations, once for eight keys. */
__attribute__((target("avx2"))) static void dot8_avx2(const float *q, const float *const k[8], int64_t D,
                                                       float out[8]) {
    __m256 acc[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_ps();
    for (int64_t d = 0; d < D; d += 8) {
        const __m256 qv = _mm256_loadu_ps(q + d);
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) acc[i] = _mm256_add_ps(acc[i], _mm256_mul_ps(qv, _mm256_loadu_ps(k[i] + d)));
    }
    __m256 half[4]; /* half[i]: key i's (a0 + a4, .., a3 + a7), then key i + 4's */
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        half[i] = _mm256_add_ps(_mm256_permute2f128_ps(acc[i], acc[i + 4], 0x20),
                                _mm256_permute2f128_ps(acc[i], acc[i + 4], 0x31));
    _mm256_storeu_ps(out, _mm256_hadd_ps(_mm256_hadd_ps(half[0], half[1]), _mm256_hadd_ps(half[2], half[3])));
}

/* dot(q, k, D) for one key, D a multiple of 8. */
__attribute__((target("avx2"))) static float dot1_avx2(const float *q, const float *k, int64_t D) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t d = 0; d < D; d += 8) acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + d)));
    return sum8(acc);
}

/* weighted_block for nb blocks of 8 dimensions at once (nb <= 8, a constant at each call site).
 * With `sum`, the multiplier is 1 / l instead of inv, l = sum_j p_j summed in the loop in order of
 * j: the portable loops' l (a skipped p_j = +0 adds nothing to it), its chain of dependent adds
 * now running beside the vector work instead of before it. Returns the multiplier. */
__attribute__((target("avx2"), always_inline)) static inline float weighted_blocks_avx2(
    int nb, bool sum, const float *restrict p, const float *restrict v, int64_t S, const int64_t *restrict off,
    float inv, float *restrict o) {
    __m256 acc[8];
    float l = 0;
#pragma GCC unroll 8
    for (int b = 0; b < nb; b++) acc[b] = _mm256_setzero_ps();
    for (int64_t j = 0; j < S; j++) {
        if (p[j] == 0) continue; /* as weighted_block */
        if (sum) l += p[j];
        const __m256 pj = _mm256_set1_ps(p[j]);
        const float *vj = v + off[j];
#pragma GCC unroll 8
        for (int b = 0; b < nb; b++) acc[b] = _mm256_add_ps(acc[b], _mm256_mul_ps(pj, _mm256_loadu_ps(vj + 8 * b)));
    }
    if (sum) inv = 1 / l;
    const __m256 iv = _mm256_set1_ps(inv);
#pragma GCC unroll 8
    for (int b = 0; b < nb; b++) _mm256_storeu_ps(o + 8 * b, _mm256_mul_ps(acc[b], iv));
    return inv;
}

/* o = (sum_j p_j v_j) / (sum_j p_j), D a positive multiple of 8: the sum of the p_j in the
 * first pass over the keys. */
__attribute__((target("avx2"))) static void weighted_avx2(const float *restrict p, const float *restrict v, int64_t S,
                                                          const int64_t *restrict off, float *restrict o, int64_t D) {
    const int64_t first = D >= 64 ? 64 : 8;
    const float inv = first == 64 ? weighted_blocks_avx2(8, true, p, v, S, off, 0, o)
                                  : weighted_blocks_avx2(1, true, p, v, S, off, 0, o);
    int64_t d = first;
    for (; d + 64 <= D; d += 64) weighted_blocks_avx2(8, false, p, v + d, S, off, inv, o + d);
    for (; d < D; d += 8) weighted_blocks_avx2(1, false, p, v + d, S, off, inv, o + d);
}
#else
void qkv__attend_cached_vector(bool on) { (void)on; }
#endif

#define PREFETCH_KEYS 4
/* The prefetch helpers are always inlined: GCC's IPA finds a function whose only effects are
 * prefetches `const` and deletes its calls as dead code. */
/* The cache lines of one key's (or value's) D elements, towards L1. */
QKV_ROW_INLINE void prefetch_vector(const qkv_real *x, int64_t D) {
    for (int64_t d = 0; d < D; d += 64 / (int64_t)sizeof(qkv_real)) __builtin_prefetch(x + d);
}
/* The same towards L2 only (the next task's keys and values, attend_one). */
QKV_ROW_INLINE void prefetch_vector_l2(const qkv_real *x, int64_t D) {
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

/* One task: row n under head h (attend_one). */
typedef struct {
    const qkv_real *q;        /* (D) the row's query */
    const qkv_real *k, *v;    /* the head's keys and values: key j at k + off[j], value at v + off[j] */
    const int64_t *off;       /* (S) */
    const int32_t *pad;       /* (S) the row's padding flags, or NULL */
    int64_t S, D;
    qkv_real scale;
    const int64_t *prev_off;  /* (S) the key offsets of this thread's previous task when it ran
                               * under the same head (the previous row of the block), or NULL */
    const qkv_real *next_k, *next_v; /* the next task's keys and values, or NULL */
    const int64_t *next_off;
} task;

/* Prefetches for key j (see attend_one): each skipped where the previous task read the same key,
 * or where the next task reads this one. */
QKV_ROW_INLINE void prefetch_key(const task *t, int64_t j) {
    if (t->next_k && t->next_k + t->next_off[j] != t->k + t->off[j]) {
        prefetch_vector_l2(t->next_k + t->next_off[j], t->D);
        prefetch_vector_l2(t->next_v + t->next_off[j], t->D);
    }
    const int64_t ahead = j + PREFETCH_KEYS;
    if (ahead < t->S && !(t->prev_off && t->prev_off[ahead] == t->off[ahead]))
        prefetch_vector(t->k + t->off[ahead], t->D);
    if (!(t->prev_off && t->prev_off[j] == t->off[j])) prefetch_vector(t->v + t->off[j], t->D);
}

/* s[j] = scale q.k_j (-inf for a padded key), one key at a time; returns max_j s[j] (-inf when
 * every key is padded; a NaN score never becomes the maximum). */
static qkv_real scores_portable(const task *t, qkv_real *restrict s) {
    qkv_real mx = (qkv_real)-INFINITY;
    for (int64_t j = 0; j < t->S; j++) {
        if (t->pad && t->pad[j]) {
            s[j] = (qkv_real)-INFINITY;
            continue;
        }
        prefetch_key(t, j);
        s[j] = t->scale * dot(t->q, t->k + t->off[j], t->D);
        mx = s[j] > mx ? s[j] : mx;
    }
    return mx;
}

#ifdef ATTEND_AVX2
/* Any of the n flags set. */
static inline bool any_padded(const int32_t *pad, int n) {
    int32_t any = 0;
    for (int i = 0; i < n; i++) any |= pad[i];
    return any != 0;
}

/* scores_portable's scores with the AVX2 dot products (D a multiple of 8), eight or four keys at
 * a time where none of them is padded. The maximum is kept per lane, max(s, m) keeping m when s
 * is NaN as `s > m ? s : m` does: the same maximum, except that of +0 and -0 it may keep the
 * other one, which changes no s_j - max and so no output. */
__attribute__((target("avx2"))) static float scores_avx2(const task *t, float *restrict s) {
    const int64_t S = t->S;
    const __m256 scale = _mm256_set1_ps(t->scale);
    __m256 mx8 = _mm256_set1_ps(-INFINITY);
    float mx = -INFINITY;
    int64_t j = 0;
    while (j < S) {
        const int group = j + 8 <= S && !(t->pad && any_padded(t->pad + j, 8))   ? 8
                          : j + 4 <= S && !(t->pad && any_padded(t->pad + j, 4)) ? 4
                                                                                 : 1;
        if (group == 1 && t->pad && t->pad[j]) {
            s[j++] = -INFINITY;
            continue;
        }
        const float *keys[8];
        for (int i = 0; i < group; i++) {
            prefetch_key(t, j + i);
            keys[i] = t->k + t->off[j + i];
        }
        if (group == 8) {
            float dots[8];
            dot8_avx2(t->q, keys, t->D, dots);
            const __m256 sc = _mm256_mul_ps(scale, _mm256_loadu_ps(dots));
            _mm256_storeu_ps(s + j, sc);
            mx8 = _mm256_max_ps(sc, mx8);
        } else if (group == 4) {
            float dots[4];
            dot4_avx2(t->q, keys, t->D, dots);
            const __m128 sc = _mm_mul_ps(_mm256_castps256_ps128(scale), _mm_loadu_ps(dots));
            _mm_storeu_ps(s + j, sc);
            mx8 = _mm256_max_ps(_mm256_insertf128_ps(_mm256_set1_ps(-INFINITY), sc, 0), mx8);
        } else {
            s[j] = t->scale * dot1_avx2(t->q, keys[0], t->D);
            mx = s[j] > mx ? s[j] : mx;
        }
        j += group;
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, mx8);
    for (int i = 0; i < 8; i++) mx = lanes[i] > mx ? lanes[i] : mx;
    return mx;
}
#endif

/* s[i] = e^(s[i] - mx) for i < S, compiled per vector width (qkv__exp_r is the same arithmetic in
 * every lane and at every width, so the same bits). */
QKV_CLONES static void attend_exp_shift(qkv_real *restrict s, int64_t S, qkv_real mx) {
    qkv__row_exp_shift(s, mx, S); /* a masked score, -inf - mx = -inf, gives +0 */
}

/* The task t: o (D) = sum_j softmax_j(s_j) v_j over its keys; s holds S reals (the scores, then
 * the probabilities). Each key and value is prefetched towards L1 as it is scored, unless this
 * thread's previous task read it (a beam's siblings, one after the other under a head, share
 * their source's keys and their prefix's: in L1 already, where the prefetches would only cost
 * issue slots and miss-buffer entries). Unless t->next_k is NULL, the keys
 * next_k + next_off[j] and values next_v + next_off[j] of this thread's next task that are not
 * this task's are prefetched into L2 while the keys j are scored, so that task finds them there
 * instead of starting a new stream from memory (config-B greedy decoding's steps ~3-6 % faster,
 * BENCHMARKS.md). */
static void attend_one(const task *t, qkv_real *restrict s, bool vec, qkv_real *restrict o) {
    const int64_t S = t->S, D = t->D;
#ifdef ATTEND_AVX2
    const qkv_real mx = vec ? scores_avx2(t, s) : scores_portable(t, s);
#else
    const qkv_real mx = scores_portable(t, s);
#endif
    if (mx == (qkv_real)-INFINITY) { /* no allowed key: o = 0; a NaN score (the maximum skips
                                        * them) makes o NaN, as in the fused kernel */
        bool nan = false;
        for (int64_t j = 0; j < S; j++)
            nan = nan || s[j] != s[j];
        for (int64_t d = 0; d < D; d++)
            o[d] = nan ? (qkv_real)NAN : 0;
        return;
    }
    attend_exp_shift(s, S, mx);
#ifdef ATTEND_AVX2
    if (vec) {
        weighted_avx2(s, t->v, S, t->off, o, D);
        return;
    }
#endif
    qkv_real l = 0; /* the sum in order of j */
    for (int64_t j = 0; j < S; j++)
        l += s[j];
    const qkv_real inv = 1 / l;
    int64_t d = 0;
    for (; d + 8 <= D; d += 8)
        weighted_block(s, t->v + d, S, t->off, inv, o + d);
    for (; d < D; d++) { /* the same sums, one dimension at a time */
        qkv_real acc = 0;
        for (int64_t j = 0; j < S; j++)
            if (s[j] != 0) acc += s[j] * t->v[t->off[j] + d];
        o[d] = acc * inv;
    }
}

bool qkv__attend_cached(qkv_ctx *ctx, const qkv_attend_cached_problem *p) {
    const int64_t tasks = p->N * p->H;
    if (tasks <= 0) return true;
#ifdef ATTEND_AVX2
    const bool vec = p->D >= 8 && p->D % 8 == 0 && atomic_load_explicit(&vector_enabled, memory_order_relaxed) &&
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
    if (ctx->backend->measure_only) { /* the arena measure run (backend.h): zeros, no key read */
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
                const task one = {.q = p->q + n * p->q_sn + h * p->q_sh,
                                  .k = p->k + h * p->kv_sh,
                                  .v = p->v + h * p->kv_sh,
                                  .off = off + (n - n0) * p->S,
                                  .pad = p->key_padding ? p->key_padding + n * p->S : NULL,
                                  .S = p->S,
                                  .D = p->D,
                                  .scale = (qkv_real)p->scale,
                                  .prev_off = n > n0 ? off + (n - 1 - n0) * p->S : NULL,
                                  .next_k = pf ? p->k + nh * p->kv_sh : NULL,
                                  .next_v = pf ? p->v + nh * p->kv_sh : NULL,
                                  .next_off = off + (nn - n0) * p->S};
                attend_one(&one, (qkv_real *)mine, vec, p->o + n * p->o_sn + h * p->D);
            }
        }
    }
    return true;
}
