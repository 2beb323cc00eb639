/* backend.c: the two backends' tables (backend.h) and the list that chooses among the backends. */
#include "backend.h"
#include "gemm/gemm.h"

const qkv_backend qkv_backend_cpu = {
    .name = "cpu",
    .kind = QKV_KERNELS_FAST,
    .device = QKV_DEVICE_HOST,
    .elementwise = &qkv_elementwise_cpu,
    .norm = &qkv_norm_cpu,
    .softmax = &qkv_softmax_cpu,
    .attention = &qkv_attention_cpu,
    .sdpa = &qkv_sdpa_cpu,
    .loss = &qkv_loss_cpu,
    .embedding = &qkv_embedding_cpu,
    .posenc = &qkv_posenc_cpu,
    .optim = &qkv_optim_cpu,
    .layout = &qkv_layout_cpu,
    .gemm = qkv_gemm,
    .gemm_batched = qkv_gemm_batched,
    .gemm_batched2 = qkv__gemm_batched2,
    .linear_bias = qkv__gemm_nt_bias,
    .attend_cached = qkv__attend_cached,
    .weight_panels = true,
};

const qkv_backend qkv_backend_ref = {
    .name = "ref",
    .kind = QKV_KERNELS_REF,
    .device = QKV_DEVICE_HOST,
    .elementwise = &qkv_elementwise_ref,
    .norm = &qkv_norm_ref,
    .softmax = &qkv_softmax_ref,
    .attention = &qkv_attention_ref,
    .sdpa = &qkv_sdpa_ref,
    .loss = &qkv_loss_ref,
    .embedding = &qkv_embedding_ref,
    .posenc = &qkv_posenc_ref,
    .optim = &qkv_optim_ref,
    .layout = &qkv_layout_ref,
    .gemm = qkv_gemm_ref,
};

/* Every backend, by the qkv_kernels constant that selects it: a new backend is one line here. */
static const qkv_backend *const backends[] = {
    [QKV_KERNELS_FAST] = &qkv_backend_cpu,
    [QKV_KERNELS_REF] = &qkv_backend_ref,
};

const qkv_backend *qkv__backend_of(qkv_kernels kind) {
    return (unsigned)kind < sizeof backends / sizeof *backends ? backends[kind] : NULL;
}

bool qkv__backend_linear_panels(const qkv_backend *be, int64_t m, int64_t n, int64_t k, const qkv_real *x,
                                const qkv_real *w, const qkv_real *bias, qkv_real *y) {
    return be->panels && be->weight_panels && qkv__panels_linear(be->panels, m, n, k, x, w, bias, y);
}
