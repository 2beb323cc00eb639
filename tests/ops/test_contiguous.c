/* test_contiguous.c: qkv_contiguous of permuted and narrowed views, forward and backward, against
 * the index arithmetic done by hand: y[i0, i1, i2, i3] = x[the view's element], and the gradient
 * of sum(y * w) lands on exactly the viewed elements of the base (w at each, 0 elsewhere). Sizes
 * below and above the size where the copy runs over the threads (2^16 elements), a unit and a
 * non-unit last stride, real and I32 tensors; 1 and 2 threads give the same bits. */
#include "testutil.h"

/* The base (A, B, C, E) holds x[a, b, c, e] = code(a, b, c, e); the view is
 * permute(narrow(base, 1, b0, nb), perm). */
static double code(int64_t a, int64_t b, int64_t c, int64_t e) {
    return (double)(((a * 131 + b) * 137 + c) * 139 + e) * 0.25;
}

typedef struct {
    int64_t shape[4]; /* base (A, B, C, E) */
    int64_t b0, nb;   /* narrow along dim 1 */
    int perm[4];
} view_case;

static void check_case(const view_case *vc, int threads) {
    qkv_set_num_threads(threads);
    qkv_ctx *ctx = tu_ctx();
    const int64_t *sh = vc->shape, n = sh[0] * sh[1] * sh[2] * sh[3];
    qkv_tensor *base = qkv_tensor_new(ctx, QKV_REAL, 4, sh);
    qkv_tensor *ibase = qkv_tensor_new(ctx, QKV_I32, 4, sh);
    CHECK(base && ibase);
    if (!base || !ibase) {
        qkv_ctx_free(ctx);
        return;
    }
    qkv_real *bx = base->data;
    int32_t *ix = ibase->data;
    for (int64_t a = 0, i = 0; a < sh[0]; a++)
        for (int64_t b = 0; b < sh[1]; b++)
            for (int64_t c = 0; c < sh[2]; c++)
                for (int64_t e = 0; e < sh[3]; e++, i++) {
                    bx[i] = (qkv_real)code(a, b, c, e);
                    ix[i] = (int32_t)i;
                }
    qkv_tensor_requires_grad(base);
    qkv_tensor *v = qkv_permute(ctx, qkv_narrow(ctx, base, 1, vc->b0, vc->nb), vc->perm);
    qkv_tensor *iv = qkv_permute(ctx, qkv_narrow(ctx, ibase, 1, vc->b0, vc->nb), vc->perm);
    qkv_tensor *y = qkv_contiguous(ctx, v), *iy = qkv_contiguous(ctx, iv);
    CHECK(y && iy && qkv_tensor_is_contiguous(y) && y != v);
    if (!y || !iy) {
        qkv_ctx_free(ctx);
        return;
    }
    /* y's element at (j0, j1, j2, j3) is the base's element whose index along dim perm[d] is j_d
     * (dim 1 shifted by b0) */
    const int64_t *ys = y->shape;
    int64_t bad = 0, m = 0;
    for (int64_t j0 = 0; j0 < ys[0]; j0++)
        for (int64_t j1 = 0; j1 < ys[1]; j1++)
            for (int64_t j2 = 0; j2 < ys[2]; j2++)
                for (int64_t j3 = 0; j3 < ys[3]; j3++, m++) {
                    int64_t idx[4];
                    const int64_t j[4] = {j0, j1, j2, j3};
                    for (int d = 0; d < 4; d++)
                        idx[vc->perm[d]] = j[d];
                    idx[1] += vc->b0;
                    const int64_t flat = ((idx[0] * sh[1] + idx[1]) * sh[2] + idx[2]) * sh[3] + idx[3];
                    bad += ((qkv_real *)y->data)[m] != (qkv_real)code(idx[0], idx[1], idx[2], idx[3]);
                    bad += ((int32_t *)iy->data)[m] != (int32_t)flat;
                }
    CHECK_MSG(bad == 0, "%lld of %lld copied elements differ from the view's", (long long)bad,
              (long long)m);
    /* backward of sum(y * w), w[m] = m + 1: the base's gradient is w at the element y[m] came
     * from (the I32 copy says which) and 0 at the elements the narrow left out */
    qkv_tensor *w = qkv_tensor_new(ctx, QKV_REAL, 4, ys);
    for (int64_t i = 0; i < m; i++)
        ((qkv_real *)w->data)[i] = (qkv_real)(i + 1);
    CHECK_OK(qkv_backward(ctx, qkv_sum(ctx, qkv_mul(ctx, y, w))));
    const qkv_real *g = base->grad;
    CHECK(g != NULL);
    if (g) {
        qkv_real *want = calloc((size_t)n, sizeof *want);
        for (int64_t i = 0; want && i < m; i++)
            want[((int32_t *)iy->data)[i]] = (qkv_real)(i + 1);
        bad = 0;
        for (int64_t i = 0; want && i < n; i++)
            bad += g[i] != want[i];
        CHECK_MSG(want && bad == 0, "%lld of %lld gradient elements are wrong (%d threads)",
                  (long long)bad, (long long)n, threads);
        free(want);
    }
    qkv_ctx_free(ctx);
}

TEST(contiguous_copies_views_and_scatters_their_gradient) {
    const int saved = qkv_get_num_threads();
    static const view_case cases[] = {
        {{2, 3, 4, 5}, 1, 2, {0, 2, 1, 3}},     /* small: serial; unit last stride */
        {{2, 3, 4, 5}, 0, 3, {3, 1, 0, 2}},     /* small, last stride 5 */
        {{4, 64, 8, 64}, 0, 64, {0, 2, 1, 3}},  /* merge-heads shape, 131,072 elements: threads */
        {{4, 70, 8, 64}, 3, 64, {0, 2, 1, 3}},  /* a narrowed projection's heads, over threads */
        {{8, 48, 12, 40}, 5, 40, {0, 3, 2, 1}}, /* 153,600 elements, last stride 12 * 40 */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int threads = 1; threads <= 2; threads++)
            check_case(&cases[k], threads);
    qkv_set_num_threads(saved);
}

/* A caller-built header that maps several elements to one (shape (300, 300), strides (1, 1):
 * element (i, j) at offset i + j): above the parallel size, the backward must still add in
 * element order on one thread, so the gradient at offset k is the sum over i + j = k of w, in
 * row-major order, bit for bit. */
TEST(contiguous_backward_of_an_overlapping_header_adds_in_order) {
    enum { R = 300 };
    const int saved = qkv_get_num_threads();
    qkv_set_num_threads(2);
    qkv_ctx *ctx = tu_ctx();
    qkv_real *data = calloc(2 * R - 1, sizeof *data);
    qkv_tensor x;
    memset(&x, 0, sizeof x);
    x.dtype = QKV_REAL;
    x.ndim = 2;
    x.shape[0] = x.shape[1] = R;
    x.stride[0] = x.stride[1] = 1;
    x.data = data;
    for (int i = 0; data && i < 2 * R - 1; i++)
        data[i] = (qkv_real)i;
    qkv_tensor_requires_grad(&x);
    qkv_tensor *y = data ? qkv_contiguous(ctx, &x) : NULL;
    qkv_tensor *w = qkv_tensor_new(ctx, QKV_REAL, 2, (int64_t[]){R, R});
    CHECK(y && w);
    if (y && w) {
        qkv_real *wd = w->data;
        for (int64_t i = 0; i < R * R; i++)
            wd[i] = (qkv_real)(1.0 + 1e-3 * (double)((i * 7919) % 1000)); /* rounding-sensitive */
        CHECK(((qkv_real *)y->data)[R + 2] == (qkv_real)3); /* (1, 2) reads offset 3 */
        CHECK_OK(qkv_backward(ctx, qkv_sum(ctx, qkv_mul(ctx, y, w))));
        qkv_real want[2 * R - 1];
        memset(want, 0, sizeof want);
        for (int i = 0; i < R; i++)
            for (int j = 0; j < R; j++)
                want[i + j] += wd[i * R + j];
        CHECK(x.grad && memcmp(x.grad, want, sizeof want) == 0);
    }
    qkv_ctx_free(ctx);
    free(data);
    qkv_set_num_threads(saved);
}
