/*
 * loss.c: cross-entropy of logits (N, V) against integer targets (N), fused with log-softmax.
 *
 * Exactly torch.nn.functional.cross_entropy(logits, targets, ignore_index=ignore_index,
 * label_smoothing=eps, reduction='mean'): with log p = log_softmax(logits) per row and the
 * smoothed target distribution q = (1 - eps) onehot(target) + eps / V,
 *   loss_row = -sum_v q_v log p_v = (1 - eps)(-log p_target) + eps mean_v(-log p_v),
 *   loss     = sum over rows whose target != ignore_index of loss_row / n_valid.
 * When every row is ignored (n_valid = 0) the loss is 0 and all gradients are 0 (PyTorch returns
 * NaN there, 0/0); one batch of padding then does not poison a training run.
 * Non-finite logits behave as in PyTorch (a -inf target logit gives an infinite loss, a row of
 * -inf only gives NaN): unlike softmax, a counted row cannot be "fully masked".
 * Backward: dlogits_row = (softmax(logits_row) - q) dloss / n_valid; ignored rows get 0.
 * Saved for backward: targets (saved[0]) and the per-row log-sum-exp (saved[1], F64 (N)), from
 * which softmax is recomputed; the logits are the tape entry's input.
 */
#include "../kernels/loss.h"
#include "../kernels/backend.h"

static void cross_entropy_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    qkv_real *dx = qkv__grad(ctx, e->in[0]);
    const int64_t n_valid = e->i[1];
    if (!dx || n_valid == 0) return;
    const qkv_tensor *x = e->in[0];
    ctx->backend->loss->ce_bwd(x->shape[0], x->shape[1], qkv__data(x), qkv__idata(e->saved[0]), (int32_t)e->i[0],
                               e->f[0], (const double *)e->saved[1]->data, (const qkv_real *)e->out->grad, n_valid, dx);
}

static const qkv_op_desc cross_entropy_op = {"cross_entropy", cross_entropy_backward};

qkv_tensor *qkv_cross_entropy(qkv_ctx *ctx, qkv_tensor *logits, qkv_tensor *targets,
                              int32_t ignore_index, double label_smoothing) {
    const char *op = "cross_entropy";
    if (!QKV_OP_BEGIN(ctx, op, logits, targets)) return NULL;
    if (!qkv__check_real(ctx, op, logits, "logits") || !qkv__check_i32(ctx, op, targets, "targets"))
        return NULL;
    char bl[96], bt[96];
    if (logits->ndim != 2 || logits->shape[1] < 1 || targets->ndim != 1 ||
        targets->shape[0] != logits->shape[0])
        return QKV_FAIL(ctx, QKV_ERR_SHAPE,
                        "%s: logits %s and targets %s must be (N, V) with V >= 1 and (N)", op,
                        qkv_tensor_shape_str(logits, bl, sizeof bl),
                        qkv_tensor_shape_str(targets, bt, sizeof bt));
    if (targets->flags & QKV_REQUIRES_GRAD)
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG,
                        "%s: targets %s are marked as requiring a gradient; indices have none", op,
                        qkv_tensor_shape_str(targets, bt, sizeof bt));
    if (!(label_smoothing >= 0 && label_smoothing <= 1))
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "%s: label_smoothing = %g is not in [0, 1]", op,
                        label_smoothing);
    logits = qkv__contig(ctx, logits);
    targets = qkv__contig(ctx, targets);
    if (ctx->status) return NULL;
    const int64_t N = logits->shape[0], V = logits->shape[1];
    const int32_t *t = qkv__idata(targets);
    int64_t n_valid = 0;
    for (int64_t r = 0; r < N; r++) {
        if (t[r] == ignore_index) continue;
        if (t[r] < 0 || t[r] >= V)
            return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG,
                            "%s: target %d of row %lld is outside [0, %lld) and is not "
                            "ignore_index (%d)",
                            op, (int)t[r], (long long)r, (long long)V, (int)ignore_index);
        n_valid++;
    }
    qkv_tensor *loss = qkv__alloc(ctx, QKV_REAL, 0, NULL); /* () */
    qkv_tensor *lse = qkv__alloc(ctx, QKV_F64, 1, &N);     /* (N) */
    double *row_loss = qkv__scratch(ctx, sizeof(double) * (size_t)(N ? N : 1));
    if (!loss || !lse || !row_loss) return NULL;
    ctx->backend->loss->ce_fwd(N, V, qkv__data(logits), t, ignore_index, label_smoothing, (double *)lse->data, row_loss,
                               n_valid, qkv__data(loss));
    qkv_tape_entry *e = qkv__record(ctx, &cross_entropy_op, loss, 1, &logits);
    if (e) {
        e->saved[0] = targets;
        e->saved[1] = lse;
        e->f[0] = label_smoothing;
        e->i[0] = ignore_index;
        e->i[1] = n_valid;
    }
    return loss;
}
