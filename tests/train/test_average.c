/*
 * test_average.c: checkpoint averaging (qkv_model_average, src/train/average.c).
 *   - every parameter of the average of three models (different seeds) is the mean of theirs,
 *     computed here element by element in double;
 *   - the average of a model with itself is that model, bit for bit; the output may be one of
 *     the inputs; the order of the models changes a value by at most one rounding;
 *   - models of another configuration, no model and NULL are refused.
 */
#include "testutil.h"

#include <math.h>

static qkv_model *model(int32_t d_model, uint64_t seed) {
    qkv_model_config c = qkv_model_default_config(QKV_ARCH_ENCODER_DECODER, d_model, 2, 1);
    c.src_vocab = 7, c.tgt_vocab = 9;
    qkv_model *m = NULL;
    CHECK_OK(qkv_model_new(&c, seed, &m));
    return m;
}

static const qkv_real *values(const qkv_model *m) {
    return qkv_params_block(m->params, QKV_BLOCK_DATA);
}

TEST(train_average_is_the_mean) {
    qkv_model *a = model(8, 1), *b = model(8, 2), *c = model(8, 3), *out = model(8, 4), *again = model(8, 5);
    if (!a || !b || !c || !out || !again) goto done;
    const int64_t n = qkv_params_numel(a->params);
    const qkv_model *abc[] = {a, b, c}, *cab[] = {c, a, b}, *aa[] = {a, a};
    CHECK_OK(qkv_model_average(abc, 3, out));
    int bad = 0, differs = 0;
    for (int64_t i = 0; i < n; i++) {
        const double want = ((double)values(a)[i] + (double)values(b)[i] + (double)values(c)[i]) / 3;
        if (fabs((double)values(out)[i] - want) > 1e-6 * fmax(1, fabs(want))) bad++;
        differs += values(a)[i] != values(b)[i];
    }
    CHECK_MSG(bad == 0, "%d of %lld values are not the mean", bad, (long long)n);
    CHECK(differs > n / 2); /* the seeds gave different models: the mean is no copy */
    CHECK_OK(qkv_model_average(cab, 3, again));
    for (int64_t i = 0; i < n; i++)
        bad += fabs((double)values(out)[i] - (double)values(again)[i]) > 2 * 1.2e-7 * fmax(1, fabs(values(out)[i]));
    CHECK(bad == 0);
    CHECK_OK(qkv_model_average(aa, 2, again));
    CHECK(!memcmp(values(again), values(a), sizeof(qkv_real) * (size_t)n));
    /* into one of its inputs */
    CHECK_OK(qkv_model_average(abc, 3, a));
    CHECK(!memcmp(values(a), values(out), sizeof(qkv_real) * (size_t)n));
done:
    qkv_model_free(a), qkv_model_free(b), qkv_model_free(c), qkv_model_free(out), qkv_model_free(again);
}

TEST(train_average_refuses) {
    qkv_model *a = model(8, 1), *wide = model(16, 1);
    if (!a || !wide) goto done;
    const qkv_model *two[] = {a, wide};
    CHECK_ERR(qkv_model_average(two, 2, a), QKV_ERR_SHAPE, "model 1 has another configuration");
    CHECK_ERR(qkv_model_average(two, 0, a), QKV_ERR_INVALID_ARG, "no model");
    CHECK_ERR(qkv_model_average(NULL, 1, a), QKV_ERR_INVALID_ARG, "no model");
    const qkv_model *none[] = {NULL};
    CHECK_ERR(qkv_model_average(none, 1, a), QKV_ERR_INVALID_ARG, "model 0 is NULL");
done:
    qkv_model_free(a), qkv_model_free(wide);
}
