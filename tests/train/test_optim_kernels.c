/*
 * test_optim_kernels.c: the optimiser family (src/kernels/optim.h): the fast kernels give the
 * reference loops' bits for every rule (SGD with and without momentum, Nesterov and weight decay;
 * Adam with an L2 term; AdamW; beta1 on either side of torch's lerp switch), on lengths that
 * leave a scalar rest after the vector body; sum_squares gives the same double; scale and the
 * EMA average agree; and one SGD element against its closed form.
 */
#include "core/internal.h"
#include "kernels/backend.h"
#include "testutil.h"

enum { N = 1000 + 13 }; /* a vector body and a rest */

static void fill(qkv_real *x, int64_t n, double lo, double hi, uint64_t seed) { tu_fill_uniform(x, n, lo, hi, seed); }

/* One update of rule r on both kernel sets from the same state: same bits in p, m and v. */
static void same_update(const char *what, const qkv_optim_rule *r, bool decay) {
    static qkv_real p[2][N], g[N], m[2][N], v[2][N];
    fill(p[0], N, -1, 1, 1), fill(g, N, -1, 1, 2), fill(m[0], N, -0.1, 0.1, 3), fill(v[0], N, 0, 0.01, 4);
    memcpy(p[1], p[0], sizeof p[0]), memcpy(m[1], m[0], sizeof m[0]), memcpy(v[1], v[0], sizeof v[0]);
    qkv_optim_ref.update(r, decay, p[0], g, m[0], v[0], N);
    qkv_optim_cpu.update(r, decay, p[1], g, m[1], v[1], N);
    CHECK_MSG(!memcmp(p[0], p[1], sizeof p[0]) && !memcmp(m[0], m[1], sizeof m[0]) && !memcmp(v[0], v[1], sizeof v[0]),
              "%s (decay %d): the fast update differs from the reference", what, (int)decay);
    CHECK_MSG(memcmp(p[0], g, sizeof g) != 0, "%s: nothing was updated", what);
}

TEST(optim_kernels_fast_equals_reference) {
    const qkv_optim_rule sgd = {.kind = QKV_OPTIM_SGD, .lr = (qkv_real)0.1};
    const qkv_optim_rule momentum = {.kind = QKV_OPTIM_SGD, .lr = (qkv_real)0.05, .momentum = (qkv_real)0.9,
                                     .wd = (qkv_real)0.01};
    qkv_optim_rule nesterov = momentum;
    nesterov.nesterov = true;
    const qkv_optim_rule adam = {.kind = QKV_OPTIM_ADAM, .lr = (qkv_real)1e-3, .wd = (qkv_real)0.01,
                                 .w1 = (qkv_real)0.1, .beta2 = (qkv_real)0.999, .one_minus_beta2 = (qkv_real)0.001,
                                 .step_size = (qkv_real)0.01, .bc2_sqrt = (qkv_real)0.05, .eps = (qkv_real)1e-8,
                                 .decay_factor = (qkv_real)0.99999};
    qkv_optim_rule adamw = adam, adam_high = adam;
    adamw.kind = QKV_OPTIM_ADAMW;
    adam_high.w1 = (qkv_real)0.7; /* beta1 0.3: torch's lerp takes its other branch */
    const struct {
        const char *what;
        const qkv_optim_rule *r;
    } rules[] = {{"sgd", &sgd}, {"momentum", &momentum}, {"nesterov", &nesterov},
                 {"adam", &adam}, {"adamw", &adamw},       {"adam beta1 0.3", &adam_high}};
    for (size_t i = 0; i < sizeof rules / sizeof *rules; i++)
        for (int decay = 0; decay < 2; decay++) same_update(rules[i].what, rules[i].r, decay);
}

TEST(optim_kernels_sgd_closed_form) {
    /* p = 1, g = 0.5, wd 0.1, momentum 0.9 with b = 0.2: d = 0.5 + 0.1 = 0.6, b = 0.18 + 0.6 = 0.78,
     * p = 1 - 0.1 * 0.78 = 0.922 */
    const qkv_optim_rule r = {.kind = QKV_OPTIM_SGD, .lr = (qkv_real)0.1, .momentum = (qkv_real)0.9,
                              .wd = (qkv_real)0.1};
    const qkv_optim_kernels *k[2] = {&qkv_optim_ref, &qkv_optim_cpu};
    for (int i = 0; i < 2; i++) {
        qkv_real p = 1, g = (qkv_real)0.5, b = (qkv_real)0.2, v = 0;
        k[i]->update(&r, true, &p, &g, &b, &v, 1);
        CHECK_NEAR(b, 0.78, 1e-6);
        CHECK_NEAR(p, 0.922, 1e-6);
    }
}

TEST(optim_kernels_reductions_and_averages_agree) {
    static qkv_real x[N], y[2][N], avg[2][N];
    fill(x, N, -3, 3, 7);
    double want = 0;
    for (int64_t i = 0; i < N; i++) want += (double)x[i] * (double)x[i];
    const double a = qkv_optim_ref.sum_squares(x, N), b = qkv_optim_cpu.sum_squares(x, N);
    CHECK_MSG(a == b, "sum_squares: reference %.17g, fast %.17g", a, b);
    CHECK_NEAR(a, want, 1e-9 * want);
    memcpy(y[0], x, sizeof x), memcpy(y[1], x, sizeof x);
    qkv_optim_ref.scale(y[0], (qkv_real)0.3, N), qkv_optim_cpu.scale(y[1], (qkv_real)0.3, N);
    CHECK(!memcmp(y[0], y[1], sizeof x) && y[0][5] == x[5] * (qkv_real)0.3);
    fill(avg[0], N, -1, 1, 8);
    memcpy(avg[1], avg[0], sizeof avg[0]);
    qkv_optim_ref.average(avg[0], x, 0.99, N), qkv_optim_cpu.average(avg[1], x, 0.99, N);
    CHECK(!memcmp(avg[0], avg[1], sizeof avg[0]));
    CHECK(qkv_backend_cpu.optim == &qkv_optim_cpu && qkv_backend_ref.optim == &qkv_optim_ref);
}
