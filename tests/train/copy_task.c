/* copy_task.c: see copy_task.h. */
#include "copy_task.h"

qkv_model *copy_model(uint64_t seed, double dropout, int32_t width) {
    qkv_model_config c = qkv_model_default_config(QKV_ARCH_ENCODER_DECODER, width, 2, 1);
    c.src_vocab = c.tgt_vocab = COPY_V;
    c.bos_id = 1, c.eos_id = 2;
    c.dim_feedforward = 2 * width;
    c.dropout = dropout;
    qkv_model *m = NULL;
    CHECK_OK(qkv_model_new(&c, seed, &m));
    return m;
}

void make_copy_batch(copy_batch *cb, uint64_t seed) {
    enum { V = COPY_V, B = COPY_B, S = COPY_S, T = COPY_T };
    memset(cb, 0, sizeof *cb);
    for (int r = 0; r < B; r++) {
        const int len = 2 + (r + (int)seed) % 4; /* 2..5 */
        cb->tgt_in[r * T] = 1;
        for (int i = 0; i < len; i++) {
            const int32_t x = 3 + (int32_t)(qkv_rng_uniform(seed, 0, (uint64_t)r, (uint64_t)i) * (V - 3));
            cb->src[r * S + i] = cb->tgt_in[r * T + i + 1] = cb->tgt_out[r * T + i] = x;
        }
        cb->tgt_out[r * T + len] = 2;
    }
    cb->batch = (qkv_train_batch){.batch = B, .src_len = S, .tgt_len = T, .src = cb->src, .tgt_in = cb->tgt_in,
                                  .tgt_out = cb->tgt_out};
}
