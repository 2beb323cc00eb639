/* test_dense.c: GEMM implementations against each other; linear / matmul / shape-op gradients. */
#include "kernel_check.h"
#include "testutil.h"

static void gemm_case(bool ta, bool tb, int64_t m, int64_t n, int64_t k, qkv_real alpha, qkv_real beta) {
    int64_t lda = ta ? m : k, ldb = tb ? k : n;
    qkv_real *a = malloc(sizeof(qkv_real) * (size_t)(m * k + 1)), *b = malloc(sizeof(qkv_real) * (size_t)(k * n + 1));
    qkv_real *c0 = malloc(sizeof(qkv_real) * (size_t)(m * n + 1)), *c1 = malloc(sizeof(qkv_real) * (size_t)(m * n + 1)),
             *c2 = malloc(sizeof(qkv_real) * (size_t)(m * n + 1));
    tu_fill_uniform(a, m * k, -1, 1, 1);
    tu_fill_uniform(b, k * n, -1, 1, 2);
    tu_fill_uniform(c0, m * n, -1, 1, 3);
    memcpy(c1, c0, sizeof(qkv_real) * (size_t)(m * n));
    memcpy(c2, c0, sizeof(qkv_real) * (size_t)(m * n));
    qkv_gemm_ref(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c0, n);
    qkv_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c1, n);
    qkv_gemm_blocked(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c2, n);
    double tol = sizeof(qkv_real) == 4 ? 1e-5 * sqrt((double)k + 1) : 1e-12 * (double)(k + 1);
    CHECK_MSG(tu_max_rel_diff(c1, c0, m * n) <= tol, "gemm %c%c %lldx%lldx%lld: fast differs by %g",
              ta ? 'T' : 'N', tb ? 'T' : 'N', (long long)m, (long long)n, (long long)k, tu_max_rel_diff(c1, c0, m * n));
    CHECK_MSG(tu_max_rel_diff(c2, c0, m * n) <= tol, "gemm %c%c %lldx%lldx%lld: blocked differs by %g",
              ta ? 'T' : 'N', tb ? 'T' : 'N', (long long)m, (long long)n, (long long)k, tu_max_rel_diff(c2, c0, m * n));
    free(a), free(b), free(c0), free(c1), free(c2);
}

TEST(gemm_fast_and_blocked_match_reference) {
    const int64_t shapes[][3] = {{1, 1, 1},     {3, 5, 7},      {65, 33, 300},  {130, 1030, 17},
                                 {64, 64, 0},   {1, 257, 513},  {1, 300, 1},    {129, 1, 300},
                                 {7, 13, 300},  {129, 257, 65}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int t = 0; t < 4; t++)
            gemm_case(t & 1, t & 2, shapes[s][0], shapes[s][1], shapes[s][2], t == 3 ? (qkv_real)0.5 : 1,
                      t == 2 ? (qkv_real)-0.25 : (t == 1 ? 1 : 0));
}

TEST(gemm_blocked_is_identical_across_thread_counts) {
    const int64_t m = 200, n = 150, k = 333;
    qkv_real *a = malloc(sizeof(qkv_real) * m * k), *b = malloc(sizeof(qkv_real) * k * n);
    qkv_real *c1 = calloc((size_t)(m * n), sizeof(qkv_real)), *c2 = calloc((size_t)(m * n), sizeof(qkv_real));
    tu_fill_uniform(a, m * k, -1, 1, 5);
    tu_fill_uniform(b, k * n, -1, 1, 6);
    int saved = qkv_get_num_threads();
    qkv_set_num_threads(1);
    qkv_gemm_blocked(false, true, m, n, k, 1, a, k, b, k, 0, c1, n);
    qkv_set_num_threads(2);
    qkv_gemm_blocked(false, true, m, n, k, 1, a, k, b, k, 0, c2, n);
    qkv_set_num_threads(saved);
    CHECK(memcmp(c1, c2, sizeof(qkv_real) * m * n) == 0);
    free(a), free(b), free(c1), free(c2);
}

/* qkv_gemm_batched: each product has exactly the bits of qkv_gemm on the same operands, with 1
 * and 2 threads, for small products (spread over threads), large ones (tiled one by one), a
 * shared B (stride 0), transposes, beta != 0 and k = 0. */
TEST(gemm_batched_equals_gemm_per_item_any_thread_count) {
    const int64_t cases[][4] = {{12, 9, 7, 5}, {5, 32, 32, 64}, {3, 300, 129, 80}, {4, 6, 5, 0}};
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++)
        for (int t = 0; t < 8; t++) {
            const int64_t batch = cases[ci][0], m = cases[ci][1], n = cases[ci][2], k = cases[ci][3];
            const bool ta = t & 1, tb = t & 2, shared_b = t & 4;
            const int64_t lda = ta ? m : k, ldb = tb ? k : n, sa = m * k, sb = shared_b ? 0 : k * n, sc = m * n;
            const size_t na = (size_t)(batch * sa + 1), nb = (size_t)((shared_b ? 1 : batch) * k * n + 1),
                         nc = (size_t)(batch * sc);
            qkv_real *a = malloc(sizeof(qkv_real) * na), *b = malloc(sizeof(qkv_real) * nb);
            qkv_real *c0 = malloc(sizeof(qkv_real) * nc), *c1 = malloc(sizeof(qkv_real) * nc),
                     *c2 = malloc(sizeof(qkv_real) * nc);
            tu_fill_uniform(a, (int64_t)na, -1, 1, 11);
            tu_fill_uniform(b, (int64_t)nb, -1, 1, 12);
            tu_fill_uniform(c0, (int64_t)nc, -1, 1, 13);
            memcpy(c1, c0, sizeof(qkv_real) * nc);
            memcpy(c2, c0, sizeof(qkv_real) * nc);
            const qkv_real alpha = (qkv_real)0.75, beta = (qkv_real)(t == 5 ? 0 : 0.5);
            for (int64_t i = 0; i < batch; i++)
                qkv_gemm(ta, tb, m, n, k, alpha, a + i * sa, lda, b + i * sb, ldb, beta, c0 + i * sc, n);
            const int saved = qkv_get_num_threads();
            qkv_set_num_threads(1);
            qkv_gemm_batched(ta, tb, batch, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c1, n, sc);
            qkv_set_num_threads(2);
            qkv_gemm_batched(ta, tb, batch, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c2, n, sc);
            qkv_set_num_threads(saved);
            CHECK_MSG(memcmp(c0, c1, sizeof(qkv_real) * nc) == 0 && memcmp(c0, c2, sizeof(qkv_real) * nc) == 0,
                      "batched gemm %lldx(%lldx%lldx%lld) case %d differs from qkv_gemm", (long long)batch,
                      (long long)m, (long long)n, (long long)k, t);
            free(a), free(b), free(c0), free(c1), free(c2);
        }
}

static qkv_tensor *linear_relu_dropout_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    qkv_ctx_set_training(ctx, true);
    return qkv_linear_relu_dropout(ctx, in[0], in[1], in[2], *(double *)user);
}

/* The fused op against linear + relu_dropout (training, p = 0.3) and linear + relu (evaluation):
 * the same output and the same gradients of x, W and b, bit for bit. */
TEST(linear_relu_dropout_equals_the_unfused_ops) {
    const int64_t N = 37, I = 19, O = 129;
    qkv_tensor *x0 = tu_rand(2, (int64_t[]){N, I}, -1, 1, 91), *w0 = tu_rand(2, (int64_t[]){O, I}, -0.5, 0.5, 92);
    qkv_tensor *b0 = tu_rand(1, (int64_t[]){O}, -0.2, 0.2, 93), *dy = tu_rand(2, (int64_t[]){N, O}, -1, 1, 94);
    for (int training = 0; training < 2; training++) {
        qkv_real *ref[4] = {NULL, NULL, NULL, NULL};
        for (int fused = 0; fused < 2; fused++) {
            qkv_ctx *ctx = tu_ctx();
            qkv_ctx_set_training(ctx, training);
            qkv_ctx_set_rng(ctx, 7, 3);
            qkv_tensor *x = qkv_tensor_new(ctx, QKV_REAL, 2, x0->shape), *w = qkv_tensor_new(ctx, QKV_REAL, 2, w0->shape),
                       *b = qkv_tensor_new(ctx, QKV_REAL, 1, b0->shape);
            memcpy(x->data, x0->data, sizeof(qkv_real) * (size_t)(N * I));
            memcpy(w->data, w0->data, sizeof(qkv_real) * (size_t)(O * I));
            memcpy(b->data, b0->data, sizeof(qkv_real) * (size_t)O);
            qkv_tensor_requires_grad(x), qkv_tensor_requires_grad(w), qkv_tensor_requires_grad(b);
            qkv_tensor *y = fused ? qkv_linear_relu_dropout(ctx, x, w, b, 0.3)
                                  : qkv_relu_dropout(ctx, qkv_linear(ctx, x, w, b), 0.3);
            CHECK_OK(qkv_backward_from(ctx, y, dy));
            qkv_real *got[4] = {(qkv_real *)y->data, (qkv_real *)x->grad, (qkv_real *)w->grad, (qkv_real *)b->grad};
            const int64_t len[4] = {N * O, N * I, O * I, O};
            for (int i = 0; i < 4; i++) {
                const size_t bytes = sizeof(qkv_real) * (size_t)len[i];
                if (!fused) {
                    ref[i] = malloc(bytes);
                    memcpy(ref[i], got[i], bytes);
                } else {
                    CHECK_MSG(memcmp(ref[i], got[i], bytes) == 0, "training %d: tensor %d differs", training, i);
                    free(ref[i]);
                }
            }
            qkv_ctx_free(ctx);
        }
    }
    qkv_ctx *ctx = tu_ctx();
    CHECK(qkv_linear_relu_dropout(ctx, x0, w0, b0, -0.1) == NULL && strstr(qkv_last_error(), "linear_relu_dropout"));
    qkv_ctx_free(ctx);
    ctx = tu_ctx();
    CHECK(qkv_linear_relu_dropout(ctx, dy, w0, b0, 0.1) == NULL && strstr(qkv_last_error(), "linear_relu_dropout: x"));
    qkv_ctx_free(ctx);
    tu_free(x0), tu_free(w0), tu_free(b0), tu_free(dy);
}

TEST(linear_relu_dropout_gradcheck_and_kernels) {
    double p = 0.2;
    qkv_tensor *in[3] = {tu_rand(3, (int64_t[]){2, 9, 13}, -1, 1, 95), tu_rand(2, (int64_t[]){70, 13}, -0.5, 0.5, 96),
                         tu_rand(1, (int64_t[]){70}, -0.3, 0.3, 97)};
    for (int i = 0; i < 3; i++) qkv_tensor_requires_grad(in[i]);
    kc_check("linear_relu_dropout", linear_relu_dropout_fn, in, 3, &p);
#ifdef QKV_DOUBLE
    /* pre-activations stay away from ReLU's kink: small weights, a bias of magnitude >= 0.2 */
    qkv_tensor *g[3] = {tu_rand(2, (int64_t[]){3, 4}, -0.1, 0.1, 98), tu_rand(2, (int64_t[]){5, 4}, -0.1, 0.1, 99),
                        tu_rand(1, (int64_t[]){5}, 0.2, 1, 100)};
    ((qkv_real *)g[2]->data)[1] *= -1, ((qkv_real *)g[2]->data)[3] *= -1;
    for (int i = 0; i < 3; i++) qkv_tensor_requires_grad(g[i]);
    tu_gradcheck_opts o = tu_gradcheck_default();
    o.training = true;
    tu_gradcheck("linear_relu_dropout", linear_relu_dropout_fn, g, 3, &p, &o);
    for (int i = 0; i < 3; i++) tu_free(g[i]);
#endif
    for (int i = 0; i < 3; i++) tu_free(in[i]);
}

TEST(linear_forward_closed_form) {
    qkv_ctx *ctx = tu_ctx();
    /* x = [[1, 2]], W = [[1, 0], [0, 1], [1, 1]], b = [0.5, -1, 0] -> [1.5, 1, 3] */
    qkv_tensor *x = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){1, 2}, (qkv_real[]){1, 2});
    qkv_tensor *w = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){3, 2}, (qkv_real[]){1, 0, 0, 1, 1, 1});
    qkv_tensor *b = qkv_tensor_from(ctx, QKV_REAL, 1, (int64_t[]){3}, (qkv_real[]){0.5, -1, 0});
    qkv_tensor *y = qkv_linear(ctx, x, w, b);
    CHECK(y && y->shape[0] == 1 && y->shape[1] == 3);
    const qkv_real *yd = y->data;
    CHECK(yd[0] == (qkv_real)1.5 && yd[1] == 1 && yd[2] == 3);
    qkv_ctx_free(ctx);
}

static qkv_tensor *linear_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    (void)user;
    return qkv_linear(ctx, in[0], in[1], in[2]);
}

/* qkv_linear adds its bias inside the product where qkv_gemm would take the small-M kernel or
 * the packed GEMM (qkv__gemm_nt_bias); elsewhere it copies the bias into y's rows and multiplies
 * with beta = 1. Either way y must have the bits of those two steps: a decoding step's 16 rows and
 * an encoder-sized product (more than one k slice of the packed GEMM). */
TEST(linear_with_bias_has_the_bits_of_bias_rows_then_gemm) {
    if (qkv_test_kernels == QKV_KERNELS_REF)
        SKIP("the reference kernels' run: qkv_linear multiplies with qkv_gemm_ref");
    qkv_ctx *ctx = tu_ctx();
    const int64_t shapes[][3] = {{16, 520, 515}, {300, 600, 260}}; /* N, I, O */
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int64_t N = shapes[s][0], I = shapes[s][1], O = shapes[s][2];
        qkv_tensor *x = qkv_tensor_new(ctx, QKV_REAL, 2, (int64_t[]){N, I});
        qkv_tensor *w = qkv_tensor_new(ctx, QKV_REAL, 2, (int64_t[]){O, I});
        qkv_tensor *bias = qkv_tensor_new(ctx, QKV_REAL, 1, (int64_t[]){O});
        CHECK(x && w && bias);
        if (!x || !w || !bias) break;
        tu_fill_uniform((qkv_real *)x->data, N * I, -1, 1, 71 + s);
        tu_fill_uniform((qkv_real *)w->data, O * I, -1, 1, 72 + s);
        tu_fill_uniform((qkv_real *)bias->data, O, -1, 1, 73 + s);
        qkv_tensor *y = qkv_linear(ctx, x, w, bias);
        CHECK(y);
        if (!y) break;
        qkv_real *want = malloc(sizeof(qkv_real) * (size_t)(N * O));
        for (int64_t i = 0; i < N; i++)
            memcpy(want + i * O, (qkv_real *)bias->data, sizeof(qkv_real) * (size_t)O);
        qkv_gemm(false, true, N, O, I, 1, (qkv_real *)x->data, I, (qkv_real *)w->data, I, 1, want,
                 O);
        CHECK_MSG(memcmp(y->data, want, sizeof(qkv_real) * (size_t)(N * O)) == 0,
                  "linear %lldx%lld -> %lld with bias: not the bits of bias rows then qkv_gemm "
                  "with beta 1",
                  (long long)N, (long long)I, (long long)O);
        free(want);
    }
    qkv_ctx_free(ctx);
}

TEST(linear_gradcheck) {
    TU_NEED_DOUBLE();
    const int64_t shapes[][3] = {{1, 1, 1}, {2, 3, 5}, {7, 4, 3}}; /* rows, in, out */
    for (size_t s = 0; s < 3; s++) {
        qkv_tensor *in[3] = {tu_rand(3, (int64_t[]){1, shapes[s][0], shapes[s][1]}, -1, 1, 1),
                             tu_rand(2, (int64_t[]){shapes[s][2], shapes[s][1]}, -1, 1, 2),
                             tu_rand(1, (int64_t[]){shapes[s][2]}, -1, 1, 3)};
        for (int k = 0; k < 3; k++) qkv_tensor_requires_grad(in[k]);
        tu_gradcheck("linear", linear_fn, in, 3, NULL, NULL);
        for (int k = 0; k < 3; k++) tu_free(in[k]);
    }
}

typedef struct {
    bool ta, tb;
} mm_flags;

static qkv_tensor *matmul_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    mm_flags *f = user;
    return qkv_matmul(ctx, in[0], in[1], f->ta, f->tb);
}

TEST(matmul_gradcheck_all_transposes_batched_and_shared) {
    TU_NEED_DOUBLE();
    for (int t = 0; t < 4; t++) {
        mm_flags f = {t & 1, (t & 2) != 0};
        const int64_t M = 3, K = 4, N = 2;
        int64_t ash[4] = {2, 3, f.ta ? K : M, f.ta ? M : K};
        int64_t bsh[4] = {2, 3, f.tb ? N : K, f.tb ? K : N};
        qkv_tensor *in[2] = {tu_rand(4, ash, -1, 1, 10 + t), tu_rand(4, bsh, -1, 1, 20 + t)};
        qkv_tensor_requires_grad(in[0]);
        qkv_tensor_requires_grad(in[1]);
        tu_gradcheck("bmm", matmul_fn, in, 2, &f, NULL);
        tu_free(in[1]);
        in[1] = tu_rand(2, bsh + 2, -1, 1, 30 + t); /* b shared by every batch entry */
        qkv_tensor_requires_grad(in[1]);
        tu_gradcheck("matmul shared b", matmul_fn, in, 2, &f, NULL);
        tu_free(in[0]);
        tu_free(in[1]);
    }
}

TEST(matmul_rejects_mismatched_shapes) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *a = qkv_tensor_zeros(ctx, QKV_REAL, 3, (int64_t[]){2, 3, 4});
    qkv_tensor *b = qkv_tensor_zeros(ctx, QKV_REAL, 3, (int64_t[]){3, 4, 5});
    CHECK(qkv_matmul(ctx, a, b, false, false) == NULL);
    CHECK(qkv_ctx_status(ctx) == QKV_ERR_SHAPE && strstr(qkv_last_error(), "(2, 3, 4)"));
    qkv_ctx_free(ctx);
}

static qkv_tensor *heads_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    (void)user;
    qkv_tensor *h = qkv_split_heads(ctx, in[0], 3);                  /* (B, H, T, D) view */
    qkv_tensor *s = qkv_matmul(ctx, h, h, false, true);              /* (B, H, T, T) */
    qkv_tensor *o = qkv_matmul(ctx, s, h, false, false);             /* (B, H, T, D) */
    qkv_tensor *parts[2] = {qkv_merge_heads(ctx, o), in[0]};
    return qkv_concat(ctx, parts, 2, 2);                             /* (B, T, 2C) */
}

TEST(split_merge_concat_gradcheck) {
    TU_NEED_DOUBLE();
    qkv_tensor *in[1] = {tu_rand(3, (int64_t[]){2, 3, 6}, -1, 1, 9)};
    qkv_tensor_requires_grad(in[0]);
    tu_gradcheck("heads", heads_fn, in, 1, NULL, NULL);
    tu_free(in[0]);
}

TEST(matmul_per_head_broadcast_gradcheck) {
    TU_NEED_DOUBLE();
    mm_flags f = {false, true};
    /* a (B, H, M, K) = (2, 3, 4, 5), b (H, N, K) = (3, 2, 5): one b per head */
    qkv_tensor *in[2] = {tu_rand(4, (int64_t[]){2, 3, 4, 5}, -1, 1, 41), tu_rand(3, (int64_t[]){3, 2, 5}, -1, 1, 42)};
    qkv_tensor_requires_grad(in[0]);
    qkv_tensor_requires_grad(in[1]);
    tu_gradcheck("matmul per-head b", matmul_fn, in, 2, &f, NULL);
    tu_free(in[0]);
    tu_free(in[1]);
}

TEST(matmul_per_head_broadcast_forward) {
    qkv_ctx *ctx = tu_ctx();
    /* a (2, 2, 1, 1) = [[1],[2]] per batch; b (2, 1, 1) = [10, 100]: c[b, h] = a[b, h] * b[h] */
    qkv_tensor *a = qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){2, 2, 1, 1}, (qkv_real[]){1, 2, 3, 4});
    qkv_tensor *b = qkv_tensor_from(ctx, QKV_REAL, 3, (int64_t[]){2, 1, 1}, (qkv_real[]){10, 100});
    qkv_tensor *c = qkv_matmul(ctx, a, b, false, false);
    CHECK(c != NULL);
    if (c) {
        const qkv_real *cd = c->data;
        CHECK(cd[0] == 10 && cd[1] == 200 && cd[2] == 30 && cd[3] == 400);
    }
    qkv_tensor *bad = qkv_tensor_zeros(ctx, QKV_REAL, 3, (int64_t[]){3, 1, 1}); /* 3 heads under 2 */
    CHECK(qkv_matmul(ctx, a, bad, false, false) == NULL && qkv_ctx_status(ctx) == QKV_ERR_SHAPE);
    qkv_ctx_free(ctx);
}

TEST(narrow_of_parameter_aliases_its_gradient) {
    qkv_params *p = NULL;
    CHECK_OK(qkv_params_new(&p));
    qkv_tensor *w;
    CHECK_OK(qkv_params_add(p, "w", 2, (int64_t[]){6, 2}, &w));
    CHECK_OK(qkv_params_finalize(p));
    for (int i = 0; i < 12; i++) ((qkv_real *)w->data)[i] = (qkv_real)i;
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *rows = qkv_narrow(ctx, w, 0, 2, 3); /* rows 2..4 */
    CHECK(rows && rows->shape[0] == 3 && qkv_tensor_is_contiguous(rows) && ((qkv_real *)rows->data)[0] == 4);
    qkv_tensor *x = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){1, 2}, (qkv_real[]){1, 1});
    CHECK_OK(qkv_backward(ctx, qkv_sum(ctx, qkv_linear(ctx, x, rows, NULL))));
    const qkv_real *g = w->grad;
    for (int i = 0; i < 12; i++) CHECK(g[i] == ((i >= 4 && i < 10) ? 1 : 0));
    CHECK(qkv_narrow(ctx, w, 0, 5, 2) == NULL); /* past the end: rows 5..6 of 6 */
    qkv_ctx_free(ctx);
    qkv_params_free(p);
}

/* qkv_gemm gives the same bits for 1 and 2 threads at sizes where BLAS would thread itself. */
TEST(gemm_is_identical_across_thread_counts) {
    const int64_t shapes[][3] = {{96, 80, 64}, {300, 513, 129}, {2048, 64, 64}, {33, 2000, 300}, {700, 700, 700}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        for (int t = 0; t < 4; t++) {
            bool ta = t & 1, tb = (t & 2) != 0;
            qkv_real *a = malloc(sizeof(qkv_real) * (size_t)(m * k)), *b = malloc(sizeof(qkv_real) * (size_t)(k * n));
            qkv_real *c1 = malloc(sizeof(qkv_real) * (size_t)(m * n)), *c2 = malloc(sizeof(qkv_real) * (size_t)(m * n));
            tu_fill_uniform(a, m * k, -1, 1, 11);
            tu_fill_uniform(b, k * n, -1, 1, 12);
            tu_fill_uniform(c1, m * n, -1, 1, 13);
            memcpy(c2, c1, sizeof(qkv_real) * (size_t)(m * n));
            int saved = qkv_get_num_threads();
            qkv_set_num_threads(1);
            qkv_gemm(ta, tb, m, n, k, 1, a, ta ? m : k, b, tb ? k : n, (qkv_real)0.5, c1, n);
            qkv_set_num_threads(2);
            qkv_gemm(ta, tb, m, n, k, 1, a, ta ? m : k, b, tb ? k : n, (qkv_real)0.5, c2, n);
            qkv_set_num_threads(saved);
            CHECK_MSG(memcmp(c1, c2, sizeof(qkv_real) * (size_t)(m * n)) == 0, "gemm %c%c %lldx%lldx%lld differs between 1 and 2 threads",
                      ta ? 'T' : 'N', tb ? 'T' : 'N', (long long)m, (long long)n, (long long)k);
            free(a), free(b), free(c1), free(c2);
        }
    }
}
