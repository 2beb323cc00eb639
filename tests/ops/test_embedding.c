/* test_embedding.c: embedding lookup and scatter-add gradient, arange; kernels; errors. */
#include "kernel_check.h"

/* table[v][c] = 10 v + c, so every value names its row and column. */
static qkv_tensor *named_table(qkv_ctx *ctx, int64_t V, int64_t C) {
    qkv_tensor *t = qkv_tensor_new(ctx, QKV_REAL, 2, (int64_t[]){V, C});
    for (int64_t v = 0; v < V; v++)
        for (int64_t c = 0; c < C; c++)
            ((qkv_real *)t->data)[v * C + c] = (qkv_real)(10 * v + c);
    return t;
}

TEST(embedding_gathers_rows) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *table = named_table(ctx, 5, 3);
    const int32_t id[6] = {4, 0, 2, 2, 1, 4};
    qkv_tensor *ids = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){2, 3}, id);
    qkv_tensor *y = qkv_embedding(ctx, table, ids);
    CHECK_OK(qkv_ctx_status(ctx));
    CHECK(y->ndim == 3 && y->shape[0] == 2 && y->shape[1] == 3 && y->shape[2] == 3);
    CHECK(y->dtype == QKV_REAL);
    for (int n = 0; n < 6; n++)
        for (int c = 0; c < 3; c++)
            CHECK(((qkv_real *)y->data)[n * 3 + c] == 10 * id[n] + c);
    /* 3-D ids give a 4-D output; a 0-D id gives one row (C) */
    qkv_tensor *ids3 = qkv_tensor_from(ctx, QKV_I32, 3, (int64_t[]){1, 2, 3}, id);
    y = qkv_embedding(ctx, table, ids3);
    CHECK(y && y->ndim == 4 && y->shape[3] == 3 && ((qkv_real *)y->data)[5 * 3 + 2] == 42);
    qkv_tensor *id0 = qkv_tensor_from(ctx, QKV_I32, 0, NULL, (int32_t[]){3});
    y = qkv_embedding(ctx, table, id0);
    CHECK(y && y->ndim == 1 && y->shape[0] == 3 && ((qkv_real *)y->data)[1] == 31);
    /* no ids at all: an empty (0, C) output */
    qkv_tensor *none = qkv_tensor_new(ctx, QKV_I32, 1, (int64_t[]){0});
    y = qkv_embedding(ctx, table, none);
    CHECK(y && y->ndim == 2 && y->shape[0] == 0 && y->shape[1] == 3);
    CHECK_OK(qkv_ctx_status(ctx));
    qkv_ctx_free(ctx);
}

TEST(embedding_gradient_scatter_adds_repeated_ids) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *table = named_table(ctx, 4, 2);
    qkv_tensor_requires_grad(table);
    qkv_tensor *ids = qkv_tensor_from(ctx, QKV_I32, 1, (int64_t[]){4}, (int32_t[]){1, 3, 1, 1});
    qkv_tensor *y = qkv_embedding(ctx, table, ids);
    /* dy rows [1, 2], [3, 4], [5, 6], [7, 8]: row 1 gets 1 + 5 + 7, 2 + 6 + 8; row 3 gets 3, 4 */
    qkv_tensor *dy =
        qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){4, 2}, (qkv_real[]){1, 2, 3, 4, 5, 6, 7, 8});
    CHECK_OK(qkv_backward_from(ctx, y, dy));
    const qkv_real want[8] = {0, 0, 13, 16, 0, 0, 3, 4};
    for (int i = 0; i < 8; i++)
        CHECK(((qkv_real *)table->grad)[i] == want[i]);
    qkv_ctx_free(ctx);
}

static qkv_tensor *embedding_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    return qkv_embedding(ctx, in[0], (qkv_tensor *)user);
}

TEST(embedding_gradcheck) {
    TU_NEED_DOUBLE();
    /* V = 1 (every id 0), C = 1, and ids with repeats in 1, 2 and 3 dims */
    const int64_t tables[][2] = {{1, 3}, {5, 1}, {7, 13}, {3, 4}};
    const int64_t id_shapes[][3] = {{4, 0, 0}, {2, 3, 0}, {2, 3, 5}, {1, 1, 1}};
    const int id_dims[] = {1, 2, 3, 3};
    for (int s = 0; s < 4; s++) {
        qkv_tensor *in[1] = {tu_rand(2, tables[s], -1, 1, 70 + s)};
        qkv_tensor_requires_grad(in[0]);
        qkv_tensor *ids = tu_ids(id_dims[s], id_shapes[s], 0, (int32_t)tables[s][0], 80 + s);
        tu_gradcheck("embedding", embedding_fn, in, 1, ids, NULL);
        tu_free(ids);
        tu_free(in[0]);
    }
}

TEST(embedding_fast_matches_reference_and_threads) {
    /* many repeats (V = 50 for 268 tokens), C = 300 not a multiple of the 64-column blocks */
    qkv_tensor *in[1] = {tu_rand(2, (int64_t[]){50, 300}, -1, 1, 90)};
    qkv_tensor_requires_grad(in[0]);
    qkv_tensor *ids = tu_ids(2, (int64_t[]){4, 67}, 0, 50, 91);
    kc_check("embedding", embedding_fn, in, 1, ids);
    /* stronger: every table row sums its tokens in token order in both kernel sets, so the
     * gradients are bit-identical to the reference */
    kc_result ref = kc_run(embedding_fn, in, 1, ids, QKV_KERNELS_REF, 1);
    kc_result fast = kc_run(embedding_fn, in, 1, ids, QKV_KERNELS_FAST, 2);
    CHECK(ref.g[0] && fast.g[0] && memcmp(ref.g[0], fast.g[0], sizeof(qkv_real) * 50 * 300) == 0);
    kc_free(&ref);
    kc_free(&fast);
    tu_free(ids);
    tu_free(in[0]);
}

TEST(arange_values) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *a = qkv_arange(ctx, -2, 5);
    CHECK_OK(qkv_ctx_status(ctx));
    CHECK(a->dtype == QKV_I32 && a->ndim == 1 && a->shape[0] == 5);
    CHECK(!(a->flags & QKV_REQUIRES_GRAD));
    for (int i = 0; i < 5; i++)
        CHECK(((int32_t *)a->data)[i] == i - 2);
    a = qkv_arange(ctx, 0, 0);
    CHECK(a && a->shape[0] == 0);
    a = qkv_arange(ctx, INT32_MAX - 1, 2); /* the last representable values */
    CHECK(a && ((int32_t *)a->data)[1] == INT32_MAX);
    /* positions feed an embedding: the learned absolute positional encoding */
    qkv_tensor *pos = named_table(ctx, 8, 2);
    qkv_tensor *y = qkv_embedding(ctx, pos, qkv_arange(ctx, 0, 3));
    CHECK(y && ((qkv_real *)y->data)[5] == 21);
    CHECK_OK(qkv_ctx_status(ctx));
    qkv_ctx_free(ctx);
}

TEST(embedding_and_arange_reject_bad_inputs) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *table = tu_tensor(QKV_REAL, 2, (int64_t[]){5, 3});
    qkv_tensor *table1 = tu_tensor(QKV_REAL, 1, (int64_t[]){5});
    qkv_tensor *ids = tu_tensor(QKV_I32, 2, (int64_t[]){2, 3});
    qkv_tensor *fids = tu_tensor(QKV_REAL, 1, (int64_t[]){3});
    qkv_tensor *ids4 = tu_tensor(QKV_I32, 4, (int64_t[]){1, 1, 1, 2});
    int32_t *id = ids->data;
    id[4] = 5; /* == V */
    TU_EXPECT_FAIL(ctx, qkv_embedding(ctx, table, ids), QKV_ERR_INVALID_ARG,
                "embedding: id 5 at flat position 4", "[0, 5)");
    id[4] = 0;
    id[1] = -1;
    TU_EXPECT_FAIL(ctx, qkv_embedding(ctx, table, ids), QKV_ERR_INVALID_ARG,
                "embedding: id -1 at flat position 1", "(2, 3) I32");
    id[1] = 0;
    TU_EXPECT_FAIL(ctx, qkv_embedding(ctx, table, fids), QKV_ERR_SHAPE, "embedding: ids must be I32",
                "(3)");
    TU_EXPECT_FAIL(ctx, qkv_embedding(ctx, table1, ids), QKV_ERR_SHAPE, "embedding: table (5)", "(V, C)");
    TU_EXPECT_FAIL(ctx, qkv_embedding(ctx, ids, ids), QKV_ERR_SHAPE, "embedding: table must be", "I32");
    TU_EXPECT_FAIL(ctx, qkv_embedding(ctx, table, ids4), QKV_ERR_SHAPE, "embedding: ids (1, 1, 1, 2)",
                "3 dims");
    ids->flags |= QKV_REQUIRES_GRAD; /* qkv_tensor_requires_grad refuses I32; force it */
    TU_EXPECT_FAIL(ctx, qkv_embedding(ctx, table, ids), QKV_ERR_INVALID_ARG, "embedding: ids (2, 3)",
                "gradient");
    ids->flags = 0;
    TU_EXPECT_FAIL(ctx, qkv_embedding(ctx, table, NULL), QKV_ERR_INVALID_ARG, "embedding", "NULL");
    TU_EXPECT_FAIL(ctx, qkv_arange(ctx, 0, -1), QKV_ERR_INVALID_ARG, "arange: start 0, n -1", "n >= 0");
    TU_EXPECT_FAIL(ctx, qkv_arange(ctx, INT32_MAX, 2), QKV_ERR_INVALID_ARG, "arange", "I32 range");
    TU_EXPECT_FAIL(ctx, qkv_arange(ctx, (int64_t)INT32_MIN - 1, 1), QKV_ERR_INVALID_ARG, "arange",
                "I32 range");
    TU_EXPECT_FAIL(ctx, qkv_arange(ctx, 1, INT64_MAX), QKV_ERR_INVALID_ARG, "arange", "I32 range");
    CHECK(qkv_arange(NULL, 0, 3) == NULL && strstr(qkv_last_error(), "arange: context is NULL"));
    tu_free(table), tu_free(table1), tu_free(ids), tu_free(fids), tu_free(ids4);
    qkv_ctx_free(ctx);
}
