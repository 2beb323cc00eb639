/*
 * rng.c: Philox4x32-10, a counter-based random number generator (Salmon, Moraes, Dror, Shaw,
 * "Parallel random numbers: as easy as 1, 2, 3", SC'11).
 *
 * out = Philox(counter, key): ten rounds of two 32x32->64 multiplications and key-bumped XORs.
 * qkv uses counter = (index / 4 low, index / 4 high, stream, step) and key = seed, so the random
 * number for element i of the stream-th random op in training step `step` is a pure function of
 * those four integers: any thread may compute any element, in any order.
 */
#include "internal.h"

#include <math.h>
#include <stdatomic.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void qkv_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        if (round) {
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* The same ten rounds on QKV_PHILOX_LANES counters at once, in portable C. Every 32-bit word
 * lives in a 64-bit lane so that the compiler can vectorise the lane loops. */
void qkv__philox_blocks_c(uint64_t seed, uint64_t step, uint64_t stream, uint64_t first_block,
                          uint32_t out[4 * QKV_PHILOX_LANES]) {
    enum { L = QKV_PHILOX_LANES };
    uint64_t c0[L], c1[L], c2[L], c3[L];
    for (int l = 0; l < L; l++) {
        const uint64_t b = first_block + (uint64_t)l;
        c0[l] = (uint32_t)b;
        c1[l] = (uint32_t)(b >> 32);
        c2[l] = (uint32_t)stream;
        c3[l] = (uint32_t)step;
    }
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int round = 0; round < 10; round++) {
        for (int l = 0; l < L; l++) {
            const uint64_t p0 = (uint64_t)PHILOX_M0 * c0[l], p1 = (uint64_t)PHILOX_M1 * c2[l];
            const uint64_t n0 = (p1 >> 32) ^ c1[l] ^ k0, n2 = (p0 >> 32) ^ c3[l] ^ k1;
            c1[l] = p1 & 0xFFFFFFFFu;
            c3[l] = p0 & 0xFFFFFFFFu;
            c0[l] = n0;
            c2[l] = n2;
        }
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    for (int l = 0; l < L; l++) {
        out[4 * l] = (uint32_t)c0[l];
        out[4 * l + 1] = (uint32_t)c1[l];
        out[4 * l + 2] = (uint32_t)c2[l];
        out[4 * l + 3] = (uint32_t)c3[l];
    }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(QKV_NO_CLONES)
#define QKV_PHILOX_AVX2 1
#include <immintrin.h>

/* The same with AVX2 intrinsics, 4 blocks per vector (a 32-bit word in each 64-bit lane). No
 * compiler we build with (GCC 12, clang 14) turns the C version's products of zero-extended
 * words into single vpmuludq instructions: it emulates full 64 x 64-bit products, three
 * multiplications and a shift-add chain each. Here each product is one vpmuludq (_mm256_mul_epu32
 * multiplies the low 32 bits of each lane into 64): about 1.7x the C version's words per second,
 * where dropout's Philox words were ~4.5 % of a config-B training step (BENCHMARKS.md). The rounds
 * are unrolled and no lane is masked to 32 bits (see the AVX-512 version): 1.9x the rolled loop
 * with masks on AMD Zen 4 (BENCHMARKS.md). */
__attribute__((target("avx2"))) static void philox_blocks_avx2(uint64_t seed, uint64_t step, uint64_t stream,
                                                                uint64_t first_block,
                                                                uint32_t out[4 * QKV_PHILOX_LANES]) {
    enum { V = QKV_PHILOX_LANES / 4 };
    const __m256i m0 = _mm256_set1_epi64x(PHILOX_M0), m1 = _mm256_set1_epi64x(PHILOX_M1);
    __m256i c0[V], c1[V], c2[V], c3[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) {
        const __m256i b = _mm256_add_epi64(_mm256_set1_epi64x((long long)first_block),
                                           _mm256_set_epi64x(4 * v + 3, 4 * v + 2, 4 * v + 1, 4 * v));
        c0[v] = b; /* only multiplied: its high half is never read (see the AVX-512 version) */
        c1[v] = _mm256_srli_epi64(b, 32);
        c2[v] = _mm256_set1_epi64x((uint32_t)stream);
        c3[v] = _mm256_set1_epi64x((uint32_t)step);
    }
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
#pragma GCC unroll 10
    for (int round = 0; round < 10; round++) {
        const __m256i key0 = _mm256_set1_epi64x(k0), key1 = _mm256_set1_epi64x(k1);
#pragma GCC unroll 4
        for (int v = 0; v < V; v++) {
            const __m256i p0 = _mm256_mul_epu32(c0[v], m0), p1 = _mm256_mul_epu32(c2[v], m1);
            c0[v] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p1, 32), c1[v]), key0);
            c2[v] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p0, 32), c3[v]), key1);
            c1[v] = p1; /* lo1 in the low half */
            c3[v] = p0; /* lo0 */
        }
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) { /* lanes (w0 | w1 << 32, w2 | w3 << 32) of blocks 4v .. 4v + 3 */
        const __m256i w01 = _mm256_blend_epi32(c0[v], _mm256_slli_epi64(c1[v], 32), 0xAA);
        const __m256i w23 = _mm256_blend_epi32(c2[v], _mm256_slli_epi64(c3[v], 32), 0xAA);
        const __m256i even = _mm256_unpacklo_epi64(w01, w23); /* blocks 4v, 4v + 2 */
        const __m256i odd = _mm256_unpackhi_epi64(w01, w23);  /* blocks 4v + 1, 4v + 3 */
        _mm256_storeu_si256((__m256i *)(out + 16 * v), _mm256_permute2x128_si256(even, odd, 0x20));
        _mm256_storeu_si256((__m256i *)(out + 16 * v + 8), _mm256_permute2x128_si256(even, odd, 0x31));
    }
}

/* The same on AVX-512F, 8 blocks per vector, the rounds unrolled. No lane is masked to 32 bits:
 * a multiplication (vpmuludq) reads only the low half of its lanes, and each round's new words
 * take only the low half of the lanes they XOR in, so the high halves may hold anything until the
 * words leave, low halves blended with shifted ones. Per round and vector two products, two
 * shifts and two three-way XORs (vpternlog): 2.2x the rolled loop with masks on AMD Zen 4, 1.15x
 * the AVX2 version (BENCHMARKS.md). The words of blocks 8v .. 8v + 7 leave in two 16-word halves,
 * blocks 8v + 0..3 then 8v + 4..7, each in the AVX2 version's order. */
__attribute__((target("avx512f"))) static void philox_blocks_avx512(uint64_t seed, uint64_t step, uint64_t stream,
                                                                     uint64_t first_block,
                                                                     uint32_t out[4 * QKV_PHILOX_LANES]) {
    enum { V = QKV_PHILOX_LANES / 8 };
    const __m512i m0 = _mm512_set1_epi64(PHILOX_M0), m1 = _mm512_set1_epi64(PHILOX_M1);
    __m512i c0[V], c1[V], c2[V], c3[V];
#pragma GCC unroll 2
    for (int v = 0; v < V; v++) {
        const __m512i b = _mm512_add_epi64(_mm512_set1_epi64((long long)first_block),
                                           _mm512_set_epi64(8 * v + 7, 8 * v + 6, 8 * v + 5, 8 * v + 4, 8 * v + 3,
                                                            8 * v + 2, 8 * v + 1, 8 * v));
        c0[v] = b; /* only multiplied: its high half is never read */
        c1[v] = _mm512_srli_epi64(b, 32);
        c2[v] = _mm512_set1_epi64((uint32_t)stream);
        c3[v] = _mm512_set1_epi64((uint32_t)step);
    }
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
#pragma GCC unroll 10
    for (int round = 0; round < 10; round++) {
        const __m512i key0 = _mm512_set1_epi64(k0), key1 = _mm512_set1_epi64(k1);
#pragma GCC unroll 2
        for (int v = 0; v < V; v++) {
            const __m512i p0 = _mm512_mul_epu32(c0[v], m0), p1 = _mm512_mul_epu32(c2[v], m1);
            c0[v] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p1, 32), c1[v], key0, 0x96); /* a ^ b ^ c */
            c2[v] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p0, 32), c3[v], key1, 0x96);
            c1[v] = p1; /* lo1 in the low half */
            c3[v] = p0; /* lo0 */
        }
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    /* lanes (w0 | w1 << 32, w2 | w3 << 32) of blocks 8v .. 8v + 7; block b's four words go to
     * out[4 (8v + b) ..]: interleave the two lane sets, then order the 128-bit pieces */
    const __m512i order = _mm512_set_epi64(7, 6, 3, 2, 5, 4, 1, 0);
#pragma GCC unroll 2
    for (int v = 0; v < V; v++) {
        const __m512i w01 = _mm512_mask_blend_epi32(0xAAAA, c0[v], _mm512_slli_epi64(c1[v], 32));
        const __m512i w23 = _mm512_mask_blend_epi32(0xAAAA, c2[v], _mm512_slli_epi64(c3[v], 32));
        const __m512i even = _mm512_unpacklo_epi64(w01, w23); /* blocks 8v + 0, 2, 4, 6 */
        const __m512i odd = _mm512_unpackhi_epi64(w01, w23);  /* blocks 8v + 1, 3, 5, 7 */
        /* even = [b0 | b2 | b4 | b6], odd = [b1 | b3 | b5 | b7] (128-bit pieces) */
        const __m512i lo = _mm512_shuffle_i64x2(even, odd, _MM_SHUFFLE(1, 0, 1, 0)); /* b0 b2 b1 b3 */
        const __m512i hi = _mm512_shuffle_i64x2(even, odd, _MM_SHUFFLE(3, 2, 3, 2)); /* b4 b6 b5 b7 */
        _mm512_storeu_si512((void *)(out + 32 * v), _mm512_permutexvar_epi64(order, lo));
        _mm512_storeu_si512((void *)(out + 32 * v + 16), _mm512_permutexvar_epi64(order, hi));
    }
}
#endif

static _Atomic int widest = 512; /* relaxed: a test's switch, no ordering */

void qkv__philox_widest(int bits) { atomic_store_explicit(&widest, bits == 256 ? 256 : 512, memory_order_relaxed); }

void qkv__philox_blocks(uint64_t seed, uint64_t step, uint64_t stream, uint64_t first_block,
                        uint32_t out[4 * QKV_PHILOX_LANES]) {
#ifdef QKV_PHILOX_AVX2
    if (atomic_load_explicit(&widest, memory_order_relaxed) == 512 && __builtin_cpu_supports("avx512f")) {
        philox_blocks_avx512(seed, step, stream, first_block, out);
        return;
    }
    if (__builtin_cpu_supports("avx2")) {
        philox_blocks_avx2(seed, step, stream, first_block, out);
        return;
    }
#endif
    qkv__philox_blocks_c(seed, step, stream, first_block, out);
}

static void block(uint64_t seed, uint64_t step, uint64_t stream, uint64_t index, uint32_t out[4]) {
    uint64_t b = index >> 2;
    uint32_t ctr[4] = {(uint32_t)b, (uint32_t)(b >> 32), (uint32_t)stream, (uint32_t)step};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    qkv_philox4x32(ctr, key, out);
}

float qkv_rng_uniform(uint64_t seed, uint64_t step, uint64_t stream, uint64_t index) {
    uint32_t r[4];
    block(seed, step, stream, index, r);
    return (float)(r[index & 3] >> 8) * (1.0f / 16777216.0f);
}

double qkv_rng_normal(uint64_t seed, uint64_t step, uint64_t stream, uint64_t index) {
    /* Element index uses the pair (2 (index % 2), +1) of block index / 2: two normals a block. */
    uint32_t r[4];
    block(seed, step, stream, (index >> 1) << 2, r);
    int pair = (int)(index & 1) * 2;
    double u1 = ((double)(r[pair] >> 8) + 1.0) / 16777217.0; /* (0, 1): log is finite */
    double u2 = (double)(r[pair + 1] >> 8) / 16777216.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
