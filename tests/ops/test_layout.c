/*
 * test_layout.c: the layout kernels (src/kernels/layout.h) on their own: copies between strided
 * views (permuted, narrowed, with a stride on the last dim) give the same bytes in the fast and
 * reference kernels and the values the view's index formula says, for 4- and 8-byte elements;
 * the scatter-add gives the same bits in both, also into a destination view that maps several
 * indices to one element (added in element order), and on a copy large enough for the threads;
 * the KV cache's gather through a row table reads the rows the table names; swap swaps.
 */
#include "core/internal.h"
#include "kernels/backend.h"
#include "testutil.h"

static int64_t at(const qkv_view4 *v, const int64_t i[4]) {
    return i[0] * v->stride[0] + i[1] * v->stride[1] + i[2] * v->stride[2] + i[3] * v->stride[3];
}

TEST(layout_copy_and_add_fast_equals_reference) {
    /* a (3, 5, 7, 6) base; the view: dims permuted to (7, 3, 6, 5)-like strides, narrowed */
    enum { BASE = 3 * 5 * 7 * 6 };
    static qkv_real base[BASE], dense[2][BASE], back[2][BASE];
    static double base64[BASE], dense64[2][BASE];
    tu_fill_uniform(base, BASE, -1, 1, 31);
    for (int i = 0; i < BASE; i++) base64[i] = (double)base[i] * 1.5;
    const qkv_view4 view = {{7, 3, 4, 5}, {6, 210, 1, 42}}; /* (i0 i1 i2 i3) -> 6 i0 + 210 i1 + i2 + 42 i3 */
    const qkv_view4 rows = {{7, 3, 4, 5}, {60, 20, 5, 1}}; /* the same shape, dense */
    const qkv_layout_kernels *k[2] = {&qkv_layout_ref, &qkv_layout_cpu};
    for (int j = 0; j < 2; j++) {
        k[j]->copy(sizeof(qkv_real), base, &view, dense[j], &rows);
        k[j]->copy(sizeof(double), base64, &view, dense64[j], &rows);
    }
    CHECK(!memcmp(dense[0], dense[1], sizeof(qkv_real) * 420) && !memcmp(dense64[0], dense64[1], sizeof(double) * 420));
    const int64_t idx[4] = {6, 2, 3, 4};
    CHECK(dense[1][at(&rows, idx)] == base[at(&view, idx)] && dense64[0][at(&rows, idx)] == base64[at(&view, idx)]);
    /* scatter-add back through the view, twice: 2 x the values where the view reaches, 0 elsewhere */
    for (int j = 0; j < 2; j++) {
        memset(back[j], 0, sizeof back[j]);
        k[j]->add(dense[j], &rows, back[j], &view);
        k[j]->add(dense[j], &rows, back[j], &view);
    }
    CHECK(!memcmp(back[0], back[1], sizeof back[0]));
    CHECK(back[1][at(&view, idx)] == 2 * base[at(&view, idx)] && back[1][5] == 0);
    /* a destination that maps several indices to one element (stride 0 on dim 2): each element
     * gets its additions in element order, the same bits in both kernels */
    const qkv_view4 overlap = {{7, 3, 4, 5}, {6, 210, 0, 42}};
    for (int j = 0; j < 2; j++) {
        memset(back[j], 0, sizeof back[j]);
        k[j]->add(dense[j], &rows, back[j], &overlap);
    }
    CHECK(!memcmp(back[0], back[1], sizeof back[0]));
    qkv_real want = 0;
    for (int64_t i2 = 0; i2 < 4; i2++) want += dense[0][at(&rows, (int64_t[]){6, 2, i2, 4})];
    CHECK(back[0][at(&overlap, (int64_t[]){6, 2, 0, 4})] == want);
}

TEST(layout_large_copy_runs_on_the_threads_with_the_same_bits) {
    enum { R = 300, L = 257 }; /* 77,100 elements: more than the fast kernels' parallel threshold */
    qkv_real *src = malloc(sizeof(qkv_real) * R * (L + 3)), *y[2], *g[2];
    for (int j = 0; j < 2; j++) y[j] = calloc((size_t)R * L, sizeof(qkv_real)), g[j] = calloc((size_t)R * (L + 3), sizeof(qkv_real));
    if (!src || !y[0] || !y[1] || !g[0] || !g[1]) goto done;
    tu_fill_uniform(src, R * (L + 3), -2, 2, 41);
    const qkv_view4 padded = {{1, 1, R, L}, {0, 0, L + 3, 1}}, dense = {{1, 1, R, L}, {0, 0, L, 1}};
    qkv_layout_ref.copy(sizeof(qkv_real), src, &padded, y[0], &dense);
    qkv_layout_cpu.copy(sizeof(qkv_real), src, &padded, y[1], &dense);
    CHECK(!memcmp(y[0], y[1], sizeof(qkv_real) * R * L) && y[1][L + 1] == src[L + 3 + 1]);
    qkv_layout_ref.add(y[0], &dense, g[0], &padded);
    qkv_layout_cpu.add(y[1], &dense, g[1], &padded);
    CHECK(!memcmp(g[0], g[1], sizeof(qkv_real) * R * (L + 3)) && g[1][L] == 0);
done:
    free(src);
    for (int j = 0; j < 2; j++) free(y[j]), free(g[j]);
}

TEST(layout_gather_and_swap) {
    /* a cache (R = 3, H = 2, L = 4, D = 3), strides (24, 12, 3); row table of N = 2 rows x S = 3
     * positions: dst[n, h, j, :] = cache[rows[n * 3 + j], h, j, :] */
    static qkv_real cache[72], dst[2][2 * 2 * 3 * 3];
    tu_fill_uniform(cache, 72, -1, 1, 51);
    const int32_t rows[6] = {2, 0, 1, 1, 1, 2};
    const int64_t cs[3] = {24, 12, 3};
    qkv_layout_ref.gather(cache, cs, 2, 3, rows, 3, 1, 2, 3, dst[0]);
    qkv_layout_cpu.gather(cache, cs, 2, 3, rows, 3, 1, 2, 3, dst[1]);
    CHECK(!memcmp(dst[0], dst[1], sizeof dst[0]));
    for (int n = 0; n < 2; n++)
        for (int h = 0; h < 2; h++)
            for (int j = 0; j < 3; j++)
                for (int d = 0; d < 3; d++)
                    CHECK(dst[0][((n * 2 + h) * 3 + j) * 3 + d] == cache[rows[n * 3 + j] * 24 + h * 12 + j * 3 + d]);
    qkv_real a[5] = {1, 2, 3, 4, 5}, b[5] = {-1, -2, -3, -4, -5};
    qkv_layout_cpu.swap(5, a, b);
    CHECK(a[0] == -1 && a[4] == -5 && b[0] == 1 && b[4] == 5);
}
