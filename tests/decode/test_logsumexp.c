/*
 * test_logsumexp.c: the log-sum-exp behind every decoding score (dec_logsumexp, src/infer/decode.c:
 * the max, then eight partial sums of e^(x - max) by a vectorised exponential), against long
 * double references:
 *   - two logits (0, x), x from 0 down to -745 (the exponential over its whole range, k =
 *     round(x / ln 2) from 0 to -1075): log(1 + e^x) within 2.3e-16, 2 ulp of log 2 (a term
 *     next to the largest one, 1, counts to that absolute precision, whatever its own size);
 *   - rows of 1 .. 8000 logits (the vector body and the scalar tail): within 4e-16 relative;
 *   - -inf logits add nothing; an all -inf or a NaN row gives NaN, as log(sum exp) would.
 */
#include "decode_testutil.h"

#include "infer/infer_internal.h"

#include <math.h>

static long double reference(const qkv_real *x, int32_t V) {
    long double mx = -INFINITY, sum = 0;
    for (int32_t v = 0; v < V; v++)
        if (x[v] > mx) mx = x[v];
    for (int32_t v = 0; v < V; v++)
        sum += expl((long double)x[v] - mx);
    return mx + logl(sum);
}

TEST(logsumexp_of_two_logits_over_the_exponentials_range) {
    int bad = 0;
    double worst = 0;
    for (double x = 0; x >= -745; x -= 0.0137) {
        const qkv_real inf = (qkv_real)INFINITY, row[8] = {0, (qkv_real)x, -inf, -inf, -inf, -inf, -inf, -inf};
        const long double want = log1pl(expl((long double)row[1]));
        for (int32_t V = 2; V <= 8; V += 6) { /* the scalar tail, then the vector body */
            const double err = fabs((double)(dec_logsumexp(row, V) - want));
            bad += err > 2.3e-16;
            worst = err > worst ? err : worst;
        }
    }
    CHECK_MSG(bad == 0, "%d of the two-logit rows off by more than 2.3e-16 (worst %.3g)", bad, worst);
}

TEST(logsumexp_rows_match_long_double) {
    static const int32_t lengths[] = {1, 3, 7, 8, 9, 15, 16, 17, 64, 1000, 8000};
    qkv_real *x = malloc(sizeof(qkv_real) * 8000);
    CHECK(x != NULL);
    for (size_t i = 0; x && i < sizeof lengths / sizeof *lengths; i++) {
        const int32_t V = lengths[i];
        tu_fill_uniform(x, V, -30, 30, 500 + i);
        if (V > 4) x[V / 2] = (qkv_real)-INFINITY, x[V / 3] = -800; /* adds nothing; below e^-708 */
        const double got = dec_logsumexp(x, V);
        const long double want = reference(x, V);
        CHECK_MSG(fabs((double)((got - want) / want)) < 4e-16, "V = %d: %.17g against %.17Lg", V, got, want);
    }
    free(x);
}

TEST(logsumexp_special_rows) {
    const qkv_real inf = (qkv_real)INFINITY;
    const qkv_real all_masked[9] = {-inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf};
    CHECK(isnan(dec_logsumexp(all_masked, 9)));
    qkv_real with_nan[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    with_nan[10] = (qkv_real)NAN;
    CHECK(isnan(dec_logsumexp(with_nan, 12)));
    with_nan[10] = 11;
    with_nan[3] = (qkv_real)NAN; /* in the vector body */
    CHECK(isnan(dec_logsumexp(with_nan, 12)));
    const qkv_real one_large[10] = {-inf, 0, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf};
    CHECK(dec_logsumexp(one_large, 10) == 0); /* log(e^0) exactly */
    const qkv_real with_inf[3] = {0, inf, 1};
    CHECK(isnan(dec_logsumexp(with_inf, 3)));
}
