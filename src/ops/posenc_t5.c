/*
 * posenc_t5.c: T5's bucketed relative position bias (Raffel et al. 2020, section 2.1).
 *
 * Each head has one learned scalar per bucket of the relative position rp = j - i (key minus
 * query). Buckets are exact for small distances and logarithmic up to max_distance, beyond
 * which everything shares the last bucket; the bidirectional variant (encoder) uses half the
 * buckets for each sign, the unidirectional one (decoder self-attention) only tells past
 * distances apart. qkv_t5_bucket is T5's _relative_position_bucket (Mesh TensorFlow
 * transformer/attention.py; Hugging Face T5Attention._relative_position_bucket), including its
 * float32 evaluation of the logarithmic part.
 *
 *   bias[h, i, j] = table[bucket(j - (query_offset + i)), h]      table (num_buckets, H)
 *
 * as T5Attention.compute_bias (HF's relative_attention_bias.weight is this table). The bias is
 * added to the scores unscaled (T5 does not scale q.k by 1/sqrt(D) either), and T5 computes it
 * in the first layer only and shares it with the others.
 *
 * Backward: dtable[b, h] += sum over (i, j) in bucket b of dbias[h, i, j]. The bucket of every
 * diagonal j - i is computed once in the forward (T + S - 1 values) and kept for the backward.
 */
#include "../kernels/posenc.h"
#include "../kernels/backend.h"

#include <limits.h>

int32_t qkv_t5_bucket(int64_t relative_position, bool bidirectional, int32_t num_buckets,
                      int32_t max_distance) {
    int32_t n = num_buckets, bucket = 0;
    uint64_t r; /* |rp| without overflow at INT64_MIN */
    const uint64_t neg = 0 - (uint64_t)relative_position;
    if (bidirectional) {
        n /= 2;
        if (relative_position > 0) bucket = n;
        r = relative_position < 0 ? neg : (uint64_t)relative_position;
    } else {
        r = relative_position < 0 ? neg : 0;
    }
    const int32_t max_exact = n / 2;
    if (max_exact < 1 || max_distance <= max_exact) {
        QKV_ERROR(QKV_ERR_INVALID_ARG,
                  "t5_bucket: num_buckets = %d%s leaves max_exact = %d; need max_exact >= 1 and "
                  "max_distance (%d) > max_exact",
                  num_buckets, bidirectional ? " (bidirectional)" : "", max_exact, max_distance);
        return -1;
    }
    if (r < (uint64_t)max_exact) return bucket + (int32_t)r;
    /* float32 throughout, as torch.log / tf.math.log on a float32 tensor divided by the float32
     * value of the Python double log(max_distance / max_exact), times the integer span */
    const float v = logf((float)r / (float)max_exact) /
                    (float)log((double)max_distance / (double)max_exact) * (float)(n - max_exact);
    /* v >= 0 here; clamp before the cast so huge distances cannot overflow the conversion */
    const int32_t large = v >= (float)(n - max_exact) ? n - 1 : max_exact + (int32_t)v;
    return bucket + (large < n - 1 ? large : n - 1);
}

static void t5_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    qkv_real *dtable = qkv__grad(ctx, e->in[0]);
    if (!dtable) return;
    const qkv_t5_geom *g = e->extra;
    if (g->T == 0 || g->S == 0) return;
    double *scratch =
        qkv__scratch(ctx, sizeof(double) * (size_t)(g->H * (g->T + g->S - 1 + g->num_buckets)));
    if (!scratch) return;
    ctx->backend->posenc->t5_bwd(g, (const qkv_real *)e->out->grad, dtable, scratch);
}

static const qkv_op_desc t5_bias_op = {"t5_bias", t5_backward};

qkv_tensor *qkv_t5_bias_at(qkv_ctx *ctx, qkv_tensor *table, int64_t T, int64_t S,
                           int64_t query_offset, bool bidirectional, int32_t max_distance) {
    if (!QKV_OP_BEGIN(ctx, "t5_bias", table)) return NULL;
    if (!qkv__check_real(ctx, "t5_bias", table, "table")) return NULL;
    char bt[96];
    if (table->ndim != 2 || table->shape[0] < 1 || table->shape[0] > INT32_MAX ||
        table->shape[1] < 1)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE,
                        "t5_bias: table %s must be (num_buckets, H) with both >= 1",
                        qkv_tensor_shape_str(table, bt, sizeof bt));
    if (T < 0 || S < 0 || query_offset < 0 || query_offset > INT64_MAX - T)
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG,
                        "t5_bias: T = %lld, S = %lld, query_offset = %lld must be >= 0",
                        (long long)T, (long long)S, (long long)query_offset);
    const int32_t nb = (int32_t)table->shape[0];
    const int32_t max_exact = (bidirectional ? nb / 2 : nb) / 2;
    if (max_exact < 1 || max_distance <= max_exact)
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG,
                        "t5_bias: table %s gives %d buckets%s, max_exact = %d: need max_exact >= 1 "
                        "and max_distance (%d) > max_exact",
                        qkv_tensor_shape_str(table, bt, sizeof bt), nb,
                        bidirectional ? " (bidirectional)" : "", max_exact, max_distance);
    table = qkv__contig(ctx, table);
    if (ctx->status) return NULL;
    const int64_t H = table->shape[1], ndiag = T && S ? T + S - 1 : 0;
    qkv_tensor *bias = qkv__alloc(ctx, QKV_REAL, 3, (int64_t[]){H, T, S}); /* (H, T, S) */
    qkv_t5_geom *g = qkv__scratch(ctx, sizeof *g);
    int32_t *bucket = qkv__scratch(ctx, sizeof(int32_t) * (size_t)(ndiag ? ndiag : 1));
    if (!bias || !g || !bucket) return NULL;
    for (int64_t d = 0; d < ndiag; d++) /* diagonal d = j - i + T - 1 */
        bucket[d] = qkv_t5_bucket(d - (T - 1) - query_offset, bidirectional, nb, max_distance);
    *g = (qkv_t5_geom){.H = H,
                       .T = T,
                       .S = S,
                       .offset = query_offset,
                       .num_buckets = nb,
                       .max_distance = max_distance,
                       .bidirectional = bidirectional,
                       .bucket = bucket};
    if (ndiag) ctx->backend->posenc->t5_fwd(g, qkv__data(table), qkv__data(bias));
    qkv_tape_entry *e = qkv__record(ctx, &t5_bias_op, bias, 1, &table);
    if (e) e->extra = g;
    return bias;
}

qkv_tensor *qkv_t5_bias(qkv_ctx *ctx, qkv_tensor *table, int64_t T, int64_t S, bool bidirectional,
                        int32_t max_distance) {
    return qkv_t5_bias_at(ctx, table, T, S, 0, bidirectional, max_distance);
}
