/*
 * test_backend.c: the backend seam (src/kernels/backend.h). Every backend fills every required
 * entry; the context's kernels choose its backend and report it back; and a backend whose
 * optional entries are NULL (batched products, the fused linear bias) runs the ops down their
 * general paths with the same bits, forward and backward, as the backend that has them: what
 * a new backend may leave out at first without a wrong answer. An op refuses a tensor that is
 * not on its backend's device.
 */
#include "core/internal.h"
#include "kernels/backend.h"
#include "testutil.h"

TEST(backend_tables_fill_every_required_entry) {
    const qkv_backend *all[] = {&qkv_backend_cpu, &qkv_backend_ref};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        const qkv_backend *b = all[i];
        CHECK(b->name && b->name[0] && b->elementwise && b->norm && b->softmax && b->attention && b->sdpa &&
              b->loss && b->embedding && b->posenc && b->optim && b->layout && b->gemm);
        CHECK(qkv__backend_of(b->kind) == b);
    }
    CHECK(strcmp(qkv_backend_cpu.name, qkv_backend_ref.name) != 0);
    qkv_ctx_params p = qkv_ctx_default_params();
    p.kernels = QKV_KERNELS_REF;
    qkv_ctx *ctx = NULL;
    CHECK_OK(qkv_ctx_new(&p, &ctx));
    if (!ctx) return;
    CHECK(ctx->backend == &qkv_backend_ref && qkv_ctx_kernels(ctx) == QKV_KERNELS_REF);
    qkv_ctx_set_kernels(ctx, QKV_KERNELS_FAST);
    CHECK(ctx->backend == &qkv_backend_cpu && qkv_ctx_kernels(ctx) == QKV_KERNELS_FAST);
    qkv_ctx_free(ctx);
}

TEST(ops_refuse_a_tensor_on_another_device) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *x = tu_rand(2, (int64_t[]){2, 3}, -1, 1, 5);
    x->device = (qkv_device)1; /* a device no backend of this build has */
    CHECK(qkv_relu(ctx, x) == NULL);
    CHECK_ERR(qkv_ctx_status(ctx), QKV_ERR_INVALID_ARG, "relu: input 0 is on device 1, the context's backend");
    x->device = QKV_DEVICE_HOST;
    qkv_ctx_reset(ctx); /* clears the sticky error: the same tensor on the host is taken */
    CHECK(qkv_relu(ctx, x) != NULL && qkv_ctx_status(ctx) == QKV_OK);
    tu_free(x);
    qkv_ctx_free(ctx);
}

/* Per-head products on head views (the batched paths) and a linear with bias (the fused bias),
 * forward and backward, on backend b: the output and the gradients, concatenated into out. */
static void run_products(const qkv_backend *b, qkv_real *out, int64_t *n_out) {
    qkv_ctx *ctx = tu_ctx();
    ctx->backend = b;
    enum { B = 2, T = 5, C = 12, H = 3, D = C / H };
    qkv_tensor *x = tu_rand(3, (int64_t[]){B, T, C}, -1, 1, 11);
    qkv_tensor *w = tu_rand(2, (int64_t[]){3 * C, C}, -0.5, 0.5, 12);
    qkv_tensor *bias = tu_rand(1, (int64_t[]){3 * C}, -0.5, 0.5, 13);
    x->flags |= QKV_REQUIRES_GRAD, w->flags |= QKV_REQUIRES_GRAD, bias->flags |= QKV_REQUIRES_GRAD;
    qkv_tensor *proj = qkv_linear(ctx, x, w, bias); /* (B, T, 3C) */
    qkv_tensor *heads[3];
    qkv_tensor *split = qkv_reshape(ctx, proj, 4, (int64_t[]){B, T, 3 * H, D});
    for (int i = 0; i < 3; i++) /* q, k, v as strided head views (B, H, T, D) of the projection */
        heads[i] = qkv_permute(ctx, qkv_narrow(ctx, split, 2, i * H, H), (int[]){0, 2, 1, 3});
    qkv_tensor *scores = qkv_matmul(ctx, heads[0], heads[1], false, true); /* (B, H, T, T) */
    qkv_tensor *o = qkv_matmul(ctx, scores, heads[2], false, false);      /* (B, H, T, D) */
    qkv_tensor *loss = qkv_sum(ctx, qkv_mul(ctx, o, o));
    CHECK_OK(qkv_ctx_status(ctx));
    if (loss) CHECK_OK(qkv_backward(ctx, loss));
    int64_t n = 0;
    const qkv_tensor *parts[] = {o, x, w, bias};
    for (int i = 0; i < 4 && loss; i++) {
        const qkv_tensor *t = parts[i];
        const qkv_real *v = i == 0 ? qkv__data(t) : (const qkv_real *)t->grad;
        CHECK(v != NULL);
        for (int64_t k = 0; v && k < qkv_tensor_numel(t); k++) out[n++] = v[k];
    }
    *n_out = n;
    tu_free(x);
    tu_free(w);
    tu_free(bias);
    qkv_ctx_free(ctx);
}

TEST(backend_without_its_optional_entries_gives_the_same_bits) {
    qkv_backend plain = qkv_backend_cpu;
    plain.name = "cpu without the optional entries";
    plain.gemm_batched = NULL;
    plain.gemm_batched2 = NULL;
    plain.linear_bias = NULL;
    plain.attend_cached = NULL;
    plain.weight_panels = false;
    static qkv_real full[8192], general[8192];
    int64_t n_full = 0, n_general = 0;
    run_products(&qkv_backend_cpu, full, &n_full);
    run_products(&plain, general, &n_general);
    CHECK(n_full == n_general && n_full == 120 + 120 + 432 + 36);
    CHECK_MSG(!memcmp(full, general, sizeof(qkv_real) * (size_t)n_full),
              "the general paths differ from the batched ones (max rel diff %g)",
              tu_max_rel_diff(full, general, n_full));
}
