/*
 * average.c: checkpoint averaging (Vaswani et al. 2017, section 6.1: the base models average the
 * last 5 checkpoints, the big ones the last 20; Junczys-Dowmunt et al. 2016): the parameters of n
 * models of one configuration, element by element,
 *
 *   theta = (1 / n) sum_k theta_k,
 *
 * summed in double in the order given, so the result is the same bits for the same files.
 */
#include "../core/internal.h"

#include "qkv/qkv_model.h"

#include <stdlib.h>
#include <string.h>

qkv_status qkv_model_average(const qkv_model *const *models, int32_t n, qkv_model *out) {
    if (!models || n < 1 || !out) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_model_average: no model to average");
    char want[8192], got[8192];
    qkv_status st = qkv_model_config_to_json(&out->cfg, want, sizeof want);
    const int64_t count = qkv_params_count(out->params), numel = qkv_params_numel(out->params);
    for (int32_t k = 0; !st && k < n; k++) {
        const qkv_model *m = models[k];
        if (!m) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_model_average: model %d is NULL", k);
        if ((st = qkv_model_config_to_json(&m->cfg, got, sizeof got))) break;
        if (strcmp(want, got) || qkv_params_count(m->params) != count || qkv_params_numel(m->params) != numel)
            return QKV_ERROR(QKV_ERR_SHAPE, "qkv_model_average: model %d has another configuration than the first", k);
        for (int64_t i = 0; i < count; i++) {
            const qkv_tensor *a = qkv_params_get(out->params, i), *b = qkv_params_get(m->params, i);
            if (qkv_tensor_numel(a) != qkv_tensor_numel(b))
                return QKV_ERROR(QKV_ERR_SHAPE, "qkv_model_average: model %d, parameter %lld: another shape", k,
                                 (long long)i);
        }
    }
    if (st) return st;
    qkv_real *dst = qkv_params_block(out->params, QKV_BLOCK_DATA);
    const double scale = 1.0 / n;
    for (int64_t i = 0; i < numel; i++) { /* out may be one of the models: each element read before written */
        double sum = 0;
        for (int32_t k = 0; k < n; k++)
            sum += (double)qkv_params_block(models[k]->params, QKV_BLOCK_DATA)[i];
        dst[i] = (qkv_real)(sum * scale);
    }
    return QKV_OK;
}
