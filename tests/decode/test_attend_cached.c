/*
 * test_attend_cached.c: the single-query attention over a KV cache read in place
 * (kernels/attend_cached.c), against the closed form computed here in double:
 *   o[n, h] = sum_j softmax_j(q.k_j / sqrt(D)) v_j   over keys j < S that are not padded,
 * o = 0 for a row with no allowed key. The operands sit where decoding keeps them (q inside a
 * (N, 1, 3 C) projection, k and v in (N, H, L, D) buffers of which only S < L positions count)
 * and every element the kernel must not read (positions >= S, padded keys) is NaN, so reading one
 * shows. The result is bit-identical for 1 and 2 threads, and reading keys through a table of
 * rows (key_rows) gives the bits of reading per-row copies of them.
 */
#include "decode_testutil.h"

#include "core/internal.h"
#include "kernels/attend_cached.h"

#include <math.h>

/* The closed form for o[n][h][:] into out (D). */
static void expected(const qkv_attend_cached_problem *p, int64_t n, int64_t h, double *out) {
    const int64_t S = p->S, D = p->D;
    const qkv_real *q = p->q + n * p->q_sn + h * p->q_sh;
    double mx = -INFINITY, l = 0, s[64];
    for (int64_t j = 0; j < S; j++) {
        s[j] = -INFINITY;
        if (p->key_padding && p->key_padding[n * S + j]) continue;
        double dot = 0;
        for (int64_t d = 0; d < D; d++)
            dot += (double)q[d] * (double)p->k[n * p->kv_sn + h * p->kv_sh + j * p->kv_sj + d];
        s[j] = dot / sqrt((double)D);
        if (s[j] > mx) mx = s[j];
    }
    for (int64_t d = 0; d < D; d++)
        out[d] = 0;
    if (mx == -INFINITY) return;
    for (int64_t j = 0; j < S; j++) {
        if (s[j] == -INFINITY) continue;
        const double e = exp(s[j] - mx);
        l += e;
        for (int64_t d = 0; d < D; d++)
            out[d] += e * (double)p->v[n * p->kv_sn + h * p->kv_sh + j * p->kv_sj + d];
    }
    for (int64_t d = 0; d < D; d++)
        out[d] /= l;
}

typedef struct {
    qkv_real *proj, *k, *v, *o;
    int32_t *pad;
    qkv_attend_cached_problem p;
} case_data;

/* Operands of N rows, H heads, head size D, S of L cache positions; padding per row r: none
 * (r % 3 == 0), keys 1 and S - 2 (r % 3 == 1), every key (r % 3 == 2) when pad_all. */
static case_data make_case(int64_t N, int64_t H, int64_t D, int64_t L, int64_t S, bool pad_all,
                           uint64_t seed) {
    case_data c;
    const int64_t C = H * D, cache = N * H * L * D;
    c.proj = malloc(sizeof(qkv_real) * (size_t)(N * 3 * C));
    c.k = malloc(sizeof(qkv_real) * (size_t)cache);
    c.v = malloc(sizeof(qkv_real) * (size_t)cache);
    c.o = malloc(sizeof(qkv_real) * (size_t)(N * C));
    c.pad = calloc((size_t)(N * S), sizeof(int32_t));
    tu_fill_uniform(c.proj, N * 3 * C, -2, 2, seed);
    tu_fill_uniform(c.k, cache, -2, 2, seed + 1);
    tu_fill_uniform(c.v, cache, -1, 1, seed + 2);
    for (int64_t n = 0; n < N; n++)
        for (int64_t j = 0; j < S; j++) {
            const int64_t r = n % 3;
            c.pad[n * S + j] = (r == 1 && (j == 1 || j == S - 2)) || (r == 2 && pad_all);
        }
    for (int64_t n = 0; n < N; n++) /* what must never be read: NaN */
        for (int64_t h = 0; h < H; h++)
            for (int64_t j = 0; j < L; j++)
                if (j >= S || c.pad[n * S + j])
                    for (int64_t d = 0; d < D; d++) {
                        c.k[((n * H + h) * L + j) * D + d] = (qkv_real)NAN;
                        c.v[((n * H + h) * L + j) * D + d] = (qkv_real)NAN;
                    }
    c.p = (qkv_attend_cached_problem){.N = N,
                                      .H = H,
                                      .S = S,
                                      .D = D,
                                      .scale = 1 / sqrt((double)D),
                                      .q = c.proj + C, /* the k part of (q, k, v) as the query */
                                      .q_sn = 3 * C,
                                      .q_sh = D,
                                      .k = c.k,
                                      .v = c.v,
                                      .kv_sn = H * L * D,
                                      .kv_sh = L * D,
                                      .kv_sj = D,
                                      .key_padding = c.pad,
                                      .o = c.o,
                                      .o_sn = C};
    return c;
}

static void free_case(case_data *c) {
    free(c->proj);
    free(c->k);
    free(c->v);
    free(c->o);
    free(c->pad);
}

TEST(attend_cached_equals_closed_form_and_skips_unread_keys) {
    const int64_t N = 6, H = 3, D = 13, L = 9, S = 7; /* D: one 8-lane block and a tail */
    case_data c = make_case(N, H, D, L, S, true, 11);
    qkv_ctx *ctx = tu_ctx();
    CHECK(qkv__attend_cached(ctx, &c.p));
    const double tol = sizeof(qkv_real) == sizeof(float) ? 2e-6 : 1e-13;
    double want[16];
    for (int64_t n = 0; n < N; n++)
        for (int64_t h = 0; h < H; h++) {
            expected(&c.p, n, h, want);
            for (int64_t d = 0; d < D; d++) {
                const qkv_real got = c.o[n * H * D + h * D + d];
                CHECK_NEAR(got, want[d], tol);
                if (n % 3 == 2) CHECK(got == 0); /* every key padded */
            }
        }
    qkv_ctx_free(ctx);
    free_case(&c);
}

TEST(attend_cached_same_bits_on_one_and_two_threads) {
    const int64_t N = 19, H = 8, D = 64, L = 40, S = 33; /* above the parallel grain; 2 blocks of 8 rows and 3 */
    case_data c = make_case(N, H, D, L, S, false, 5);
    const int saved = qkv_get_num_threads();
    qkv_real *one = malloc(sizeof(qkv_real) * (size_t)(N * H * D));
    qkv_ctx *ctx = tu_ctx();
    qkv_set_num_threads(1);
    CHECK(qkv__attend_cached(ctx, &c.p));
    memcpy(one, c.o, sizeof(qkv_real) * (size_t)(N * H * D));
    memset(c.o, 0, sizeof(qkv_real) * (size_t)(N * H * D));
    qkv_set_num_threads(2);
    CHECK(qkv__attend_cached(ctx, &c.p));
    qkv_set_num_threads(saved);
    CHECK(memcmp(one, c.o, sizeof(qkv_real) * (size_t)(N * H * D)) == 0);
    double want[64];
    for (int64_t n = 0; n < N; n++) /* every row, the last block's 3 included */
        for (int64_t h = 0; h < H; h++) {
            expected(&c.p, n, h, want);
            for (int64_t d = 0; d < D; d++)
                CHECK_NEAR(c.o[n * H * D + h * D + d], want[d], sizeof(qkv_real) == sizeof(float) ? 2e-6 : 1e-13);
        }
    qkv_ctx_free(ctx);
    free(one);
    free_case(&c);
}

/* key_rows: each row reads key position j from the row its table names (the session's table
 * after beam search reorders hypotheses). The result equals the kernel's over per-row copies of
 * those keys, bit for bit, on 1 and on 2 threads (above the parallel grain: each thread computes
 * the offsets of its rows), with padded keys and the positions >= S NaN (never read). */
TEST(attend_cached_key_rows_equal_per_row_copies) {
    enum { N = 16, H = 8, D = 64, L = 40, S = 33 };
    const int64_t row = H * L * D, C = H * D;
    qkv_real *q = malloc(sizeof(qkv_real) * N * C), *k = malloc(sizeof(qkv_real) * N * row),
             *v = malloc(sizeof(qkv_real) * N * row), *kc = malloc(sizeof(qkv_real) * N * row),
             *vc = malloc(sizeof(qkv_real) * N * row), *o1 = malloc(sizeof(qkv_real) * N * C),
             *o2 = malloc(sizeof(qkv_real) * N * C);
    int32_t *table = malloc(sizeof(int32_t) * N * L), *pad = calloc(N * S, sizeof(int32_t));
    CHECK(q && k && v && kc && vc && o1 && o2 && table && pad);
    if (!(q && k && v && kc && vc && o1 && o2 && table && pad)) goto done;
    tu_fill_uniform(q, N * C, -2, 2, 61);
    tu_fill_uniform(k, N * row, -2, 2, 62);
    tu_fill_uniform(v, N * row, -1, 1, 63);
    for (int64_t n = 0; n < N; n++)
        for (int64_t j = 0; j < L; j++) {
            table[n * L + j] = (int32_t)((n * 7 + j * 3 + (j * j) % 5) % N);
            for (int64_t h = 0; h < H; h++)
                for (int64_t d = 0; d < D; d++) {
                    const int64_t at = n * row + (h * L + j) * D + d;
                    if (j >= S) k[at] = v[at] = (qkv_real)NAN;
                }
        }
    for (int64_t n = 0; n < N; n++) { /* the copies the table stands for */
        pad[n * S + 4] = n % 2;        /* and a padded key in every other row */
        for (int64_t h = 0; h < H; h++)
            for (int64_t j = 0; j < L; j++)
                for (int64_t d = 0; d < D; d++) {
                    const int64_t at = (h * L + j) * D + d;
                    kc[n * row + at] = k[table[n * L + j] * row + at];
                    vc[n * row + at] = v[table[n * L + j] * row + at];
                }
    }
    const int saved = qkv_get_num_threads();
    qkv_ctx *ctx = tu_ctx();
    for (int threads = 1; threads <= 2; threads++) {
        qkv_set_num_threads(threads);
        qkv_attend_cached_problem p = {.N = N, .H = H, .S = S, .D = D, .scale = 0.125, .q = q,
                                       .q_sn = C, .q_sh = D, .k = k, .v = v, .kv_sn = row,
                                       .kv_sh = L * D, .kv_sj = D, .key_rows = table,
                                       .key_rows_ld = L, .key_padding = pad, .o = o1, .o_sn = C};
        CHECK(qkv__attend_cached(ctx, &p));
        p.k = kc, p.v = vc, p.key_rows = NULL, p.o = o2;
        CHECK(qkv__attend_cached(ctx, &p));
        CHECK_MSG(memcmp(o1, o2, sizeof(qkv_real) * N * C) == 0,
                  "%d thread(s): reading through key_rows differs from reading per-row copies", threads);
        size_t nan = 0;
        for (int64_t i = 0; i < N * C; i++) nan += o1[i] != o1[i];
        CHECK_MSG(nan == 0, "%d thread(s): %zu outputs are NaN (a key past S was read)", threads, nan);
    }
    qkv_set_num_threads(saved);
    qkv_ctx_free(ctx);
done:
    free(q), free(k), free(v), free(kc), free(vc), free(o1), free(o2), free(table), free(pad);
}

/* The AVX2 path (D a multiple of 8, on CPUs that have it) keeps the portable loops' bits: lane i
 * of a register is their partial sum acc[i], products rounded before they are added, and eight
 * keys' sums are reduced together by the portable tree. Head sizes with whole 64-dimension
 * passes, leftover 8-dimension blocks and both (8, 24, 64, 72); key counts around the groups of
 * eight and four (1, 3, 4, 5, 7, 8, 9, 12, 16, 17, 33); rows with a padded key inside a group and
 * rows with every key padded. Both paths also match the closed form. On a CPU without AVX2 the two
 * runs take the same loops and the check holds trivially. */
TEST(attend_cached_vector_path_keeps_the_portable_bits) {
    static const int64_t Ds[] = {8, 24, 64, 72}, Ss[] = {1, 3, 4, 5, 7, 8, 9, 12, 16, 17, 33};
    qkv_ctx *ctx = tu_ctx();
    for (size_t a = 0; a < sizeof Ds / sizeof *Ds; a++)
        for (size_t b = 0; b < sizeof Ss / sizeof *Ss; b++) {
            const int64_t N = 6, H = 2, D = Ds[a], S = Ss[b], L = S + 3, C = H * D;
            case_data c = make_case(N, H, D, L, S, true, 100 + 10 * a + b);
            qkv_real *portable = malloc(sizeof(qkv_real) * (size_t)(N * C));
            qkv__attend_cached_vector(false);
            CHECK(qkv__attend_cached(ctx, &c.p));
            memcpy(portable, c.o, sizeof(qkv_real) * (size_t)(N * C));
            qkv__attend_cached_vector(true);
            memset(c.o, 0xff, sizeof(qkv_real) * (size_t)(N * C)); /* NaN until written */
            CHECK(qkv__attend_cached(ctx, &c.p));
            CHECK_MSG(memcmp(portable, c.o, sizeof(qkv_real) * (size_t)(N * C)) == 0,
                      "D = %lld, S = %lld: the vector path's bits differ from the portable loops'",
                      (long long)D, (long long)S);
            double want[72];
            for (int64_t n = 0; n < N; n++)
                for (int64_t h = 0; h < H; h++) {
                    expected(&c.p, n, h, want);
                    for (int64_t d = 0; d < D; d++)
                        CHECK_NEAR(c.o[n * C + h * D + d], want[d], sizeof(qkv_real) == sizeof(float) ? 3e-6 : 1e-13);
                }
            free(portable);
            free_case(&c);
        }
    qkv_ctx_free(ctx);
}

/* kv_rows shared by consecutive rows (a beam's siblings reading their sentence's one copy of the
 * projected source; the kernel skips prefetching what the previous row just read): the bits of
 * reading per-row copies, on the vector and the portable path, on 1 and 2 threads. */
TEST(attend_cached_shared_rows_equal_per_row_copies) {
    enum { N = 23, H = 4, D = 64, L = 20, S = 17, K = 5 }; /* blocks of 8 rows cut sentences of 5 */
    const int64_t row = H * L * D, C = H * D, sources = (N + K - 1) / K;
    qkv_real *q = malloc(sizeof(qkv_real) * N * C), *k = malloc(sizeof(qkv_real) * (size_t)(sources * row)),
             *v = malloc(sizeof(qkv_real) * (size_t)(sources * row)), *kc = malloc(sizeof(qkv_real) * N * row),
             *vc = malloc(sizeof(qkv_real) * N * row), *o1 = malloc(sizeof(qkv_real) * N * C),
             *o2 = malloc(sizeof(qkv_real) * N * C);
    int32_t rows[N];
    CHECK(q && k && v && kc && vc && o1 && o2);
    if (!(q && k && v && kc && vc && o1 && o2)) goto done;
    tu_fill_uniform(q, N * C, -2, 2, 71);
    tu_fill_uniform(k, sources * row, -2, 2, 72);
    tu_fill_uniform(v, sources * row, -1, 1, 73);
    for (int64_t n = 0; n < N; n++) {
        rows[n] = (int32_t)(n / K);
        memcpy(kc + n * row, k + rows[n] * row, sizeof(qkv_real) * row);
        memcpy(vc + n * row, v + rows[n] * row, sizeof(qkv_real) * row);
    }
    const int saved = qkv_get_num_threads();
    qkv_ctx *ctx = tu_ctx();
    for (int vector = 0; vector <= 1; vector++)
        for (int threads = 1; threads <= 2; threads++) {
            qkv__attend_cached_vector(vector);
            qkv_set_num_threads(threads);
            qkv_attend_cached_problem p = {.N = N, .H = H, .S = S, .D = D, .scale = 0.125, .q = q, .q_sn = C,
                                           .q_sh = D, .k = k, .v = v, .kv_sn = row, .kv_sh = L * D, .kv_sj = D,
                                           .kv_rows = rows, .o = o1, .o_sn = C};
            CHECK(qkv__attend_cached(ctx, &p));
            p.k = kc, p.v = vc, p.kv_rows = NULL, p.o = o2;
            CHECK(qkv__attend_cached(ctx, &p));
            CHECK_MSG(memcmp(o1, o2, sizeof(qkv_real) * N * C) == 0,
                      "vector %d, %d thread(s): shared rows differ from per-row copies", vector, threads);
            double want[D];
            expected(&p, N - 1, H - 1, want); /* and the copies match the closed form */
            for (int64_t d = 0; d < D; d++)
                CHECK_NEAR(o2[(N - 1) * C + (H - 1) * D + d], want[d], sizeof(qkv_real) == sizeof(float) ? 2e-6 : 1e-13);
        }
    qkv__attend_cached_vector(true);
    qkv_set_num_threads(saved);
    qkv_ctx_free(ctx);
done:
    free(q), free(k), free(v), free(kc), free(vc), free(o1), free(o2);
}

/* A NaN in a query makes every score of that (row, head) NaN, which the running maximum skips:
 * the output must be NaN there, not the zeros of a row with no allowed key, and every other
 * (row, head) keeps its bits. Vector and portable paths. */
TEST(attend_cached_nan_query_gives_nan_output) {
    const int64_t N = 4, H = 2, D = 16, L = 12, S = 9, C = H * D, bad_n = 1, bad_h = 1;
    qkv_ctx *ctx = tu_ctx();
    for (int vec = 0; vec < 2; vec++) {
        case_data c = make_case(N, H, D, L, S, false, 71);
        qkv_real *clean = malloc(sizeof(qkv_real) * (size_t)(N * C));
        qkv__attend_cached_vector(vec);
        CHECK(qkv__attend_cached(ctx, &c.p));
        memcpy(clean, c.o, sizeof(qkv_real) * (size_t)(N * C));
        c.proj[bad_n * 3 * C + C + bad_h * D + 3] = (qkv_real)NAN; /* the query c.p.q points at */
        CHECK(qkv__attend_cached(ctx, &c.p));
        for (int64_t n = 0; n < N; n++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t d = 0; d < D; d++) {
                    const int64_t at = n * C + h * D + d;
                    if (n == bad_n && h == bad_h)
                        CHECK_MSG(c.o[at] != c.o[at], "vec %d: dimension %lld = %g, not NaN", vec,
                                  (long long)d, (double)c.o[at]);
                    else
                        CHECK(memcmp(&c.o[at], &clean[at], sizeof(qkv_real)) == 0);
                }
        free(clean);
        free_case(&c);
    }
    qkv__attend_cached_vector(true);
    qkv_ctx_free(ctx);
}
