/* test_optim.c: SGD / Adam / AdamW steps (src/train/optim.c), learning-rate schedules
 * (schedule.c) and gradient clipping (clip.c).
 *
 * The expected parameters are computed here, in double, from the textbook formulas written out
 * step by step (Adam in the paper's m_hat / v_hat form, not torch's step-size form the library
 * uses), and checked again against numbers printed by PyTorch 1.13
 * (scripts/torch_optim_reference.py). */
#include "testutil.h"

#include <math.h>

static const double P0[3] = {1.0, -2.0, 0.5};
static const double G[2][3] = {{0.1, -0.2, 0.3}, {-0.4, 0.5, 0.0}};

/* float: rounding of ~10 operations in float; double: a few ulps */
#define TOL (sizeof(qkv_real) == 4 ? 2e-6 : 1e-13)

/* A finalized table with parameters "w" (3) and "b" (3, flagged QKV_NO_DECAY), both set to P0. */
static qkv_params *two_params(void) {
    qkv_params *p = NULL;
    qkv_tensor *w, *b;
    CHECK_OK(qkv_params_new(&p));
    CHECK_OK(qkv_params_add(p, "w", 1, (int64_t[]){3}, &w));
    CHECK_OK(qkv_params_add(p, "b", 1, (int64_t[]){3}, &b));
    CHECK_OK(qkv_params_finalize(p));
    b->flags |= QKV_NO_DECAY;
    for (int i = 0; i < 3; i++) {
        ((qkv_real *)w->data)[i] = (qkv_real)P0[i];
        ((qkv_real *)b->data)[i] = (qkv_real)P0[i];
    }
    return p;
}

static void set_grads(qkv_params *p, int step) {
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 3; i++)
            ((qkv_real *)qkv_params_get(p, k)->grad)[i] = (qkv_real)G[step][i];
}

static void check_param(qkv_params *p, int k, const double *want, double tol, const char *what) {
    const qkv_real *x = qkv_params_get(p, k)->data;
    for (int i = 0; i < 3; i++)
        CHECK_MSG(fabs(x[i] - want[i]) <= tol * fmax(1, fabs(want[i])),
                  "%s, %s[%d] = %.17g, expected %.17g", what, qkv_params_get(p, k)->name, i,
                  (double)x[i], want[i]);
}

/* Runs two steps with cfg; after each, "w" must equal with_wd[step] and "b" no_wd[step]. */
static void two_steps(const qkv_optim_config *cfg, double with_wd[2][3], double no_wd[2][3],
                      const char *what) {
    qkv_params *p = two_params();
    for (int s = 0; s < 2; s++) {
        set_grads(p, s);
        CHECK_OK(qkv_optim_step(p, cfg, s + 1, cfg->lr));
        char buf[96];
        snprintf(buf, sizeof buf, "%s step %d", what, s + 1);
        check_param(p, 0, with_wd[s], TOL, buf);
        check_param(p, 1, no_wd[s], TOL, buf);
    }
    qkv_params_free(p);
}

/* SGD, momentum 0.9, dampening 0, weight decay wd (0 for "b"): */
static void expect_sgd(double wd, bool nesterov, double out[2][3]) {
    const double lr = 0.1, mu = 0.9;
    for (int i = 0; i < 3; i++) {
        double p = P0[i];
        /* step 1: the buffer starts as the first (decayed) gradient */
        double d1 = G[0][i] + wd * p;
        double b1 = d1;
        p = p - lr * (nesterov ? d1 + mu * b1 : b1);
        out[0][i] = p;
        /* step 2 */
        double d2 = G[1][i] + wd * p;
        double b2 = mu * b1 + d2;
        p = p - lr * (nesterov ? d2 + mu * b2 : b2);
        out[1][i] = p;
    }
}

TEST(optim_sgd_momentum_two_steps) {
    qkv_optim_config c = qkv_optim_default(QKV_OPTIM_SGD);
    c.lr = 0.1;
    c.momentum = 0.9;
    c.weight_decay = 0.01;
    double with_wd[2][3], no_wd[2][3];
    expect_sgd(0.01, false, with_wd);
    expect_sgd(0.0, false, no_wd);
    two_steps(&c, with_wd, no_wd, "SGD momentum");
    /* PyTorch 1.13, torch.optim.SGD(lr=0.1, momentum=0.9, weight_decay=0.01) */
    double torch_w[2][3] = {{0.989, -1.978, 0.4695}, {1.018111, -2.006222, 0.4415805}};
    two_steps(&c, torch_w, no_wd, "SGD momentum vs torch");

    c.nesterov = true;
    expect_sgd(0.01, true, with_wd);
    expect_sgd(0.0, true, no_wd);
    two_steps(&c, with_wd, no_wd, "SGD Nesterov");
    double torch_n[2][3] = {{0.9791, -1.9582, 0.44205}, {1.04432971, -2.03165942, 0.416505105}};
    two_steps(&c, torch_n, no_wd, "SGD Nesterov vs torch");

    /* plain SGD: p - lr g, the momentum buffer untouched */
    c = qkv_optim_default(QKV_OPTIM_SGD);
    qkv_params *p = two_params();
    set_grads(p, 0);
    CHECK_OK(qkv_optim_step(p, &c, 1, 0.5));
    double want[3];
    for (int i = 0; i < 3; i++)
        want[i] = P0[i] - 0.5 * G[0][i];
    check_param(p, 0, want, TOL, "plain SGD");
    for (int i = 0; i < 6; i++)
        CHECK(qkv_params_block(p, QKV_BLOCK_M)[i] == 0);
    qkv_params_free(p);
}

/* Adam (Kingma & Ba, Algorithm 1) with L2 decay wd folded into the gradient (torch.optim.Adam),
 * or AdamW (Loshchilov & Hutter) with decoupled decay p *= 1 - lr wd before the Adam update. */
static void expect_adam(double lr, double b1, double b2, double eps, double wd, bool decoupled,
                        double out[2][3]) {
    for (int i = 0; i < 3; i++) {
        double p = P0[i], m = 0, v = 0;
        for (int t = 1; t <= 2; t++) {
            double g = G[t - 1][i];
            if (decoupled)
                p = p - lr * wd * p;
            else
                g = g + wd * p;
            m = b1 * m + (1 - b1) * g;
            v = b2 * v + (1 - b2) * g * g;
            double m_hat = m / (1 - pow(b1, t));
            double v_hat = v / (1 - pow(b2, t));
            p = p - lr * m_hat / (sqrt(v_hat) + eps);
            out[t - 1][i] = p;
        }
    }
}

TEST(optim_adam_two_steps) {
    /* eps = 1e-3 is large on purpose: it is added after the bias correction of sqrt(v), and
     * at this size a misplaced eps changes the result in the 3rd digit */
    qkv_optim_config c = qkv_optim_default(QKV_OPTIM_ADAM);
    c.lr = 0.01;
    c.eps = 1e-3;
    c.weight_decay = 0.1;
    double with_wd[2][3], no_wd[2][3];
    expect_adam(0.01, 0.9, 0.999, 1e-3, 0.1, false, with_wd);
    expect_adam(0.01, 0.9, 0.999, 1e-3, 0.0, false, no_wd);
    two_steps(&c, with_wd, no_wd, "Adam");
    /* PyTorch 1.13, torch.optim.Adam(lr=0.01, betas=(0.9, 0.999), eps=1e-3, weight_decay=0.1) */
    double torch_w[2][3] = {{0.9900497512437811, -1.9900249376558603, 0.49002849002849},
                            {0.9925318696715538, -1.9891500616703917, 0.48239096933680103}};
    two_steps(&c, torch_w, no_wd, "Adam vs torch");
}

TEST(optim_adamw_two_steps) {
    qkv_optim_config c = qkv_optim_default(QKV_OPTIM_ADAMW);
    CHECK(c.weight_decay == 1e-2 && c.beta1 == 0.9 && c.beta2 == 0.999 && c.eps == 1e-8);
    c.lr = 0.01;
    c.beta1 = 0.8; /* < 1 - 0.5: torch's lerp takes its other branch */
    c.beta2 = 0.99;
    c.eps = 1e-3;
    c.weight_decay = 0.5;
    double with_wd[2][3], no_wd[2][3];
    expect_adam(0.01, 0.8, 0.99, 1e-3, 0.5, true, with_wd);
    expect_adam(0.01, 0.8, 0.99, 1e-3, 0.0, true, no_wd);
    two_steps(&c, with_wd, no_wd, "AdamW");
    /* PyTorch 1.13, torch.optim.AdamW(lr=0.01, betas=(0.8, 0.99), eps=1e-3, weight_decay=0.5) */
    double torch_w[2][3] = {{0.9850990099009901, -1.9800497512437811, 0.4875332225913621},
                            {0.9862370169652541, -1.9750880213535045, 0.47882394985329024}};
    two_steps(&c, torch_w, no_wd, "AdamW vs torch");
}

/* A larger table whose parameters straddle the optimiser's chunks, some QKV_NO_DECAY: every
 * element must get its own parameter's rule (checked against a per-parameter loop written here),
 * and 1 and 2 threads must agree bit for bit. */
TEST(optim_chunks_flags_and_threads) {
    const int64_t sizes[] = {1, 4095, 4097, 3, 70000, 1, 12289};
    const int n = sizeof sizes / sizeof *sizes;
    qkv_real *result[2] = {NULL, NULL};
    int64_t numel = 0;
    int saved = qkv_get_num_threads();
    for (int kind = QKV_OPTIM_SGD; kind <= QKV_OPTIM_ADAMW; kind++) {
        for (int threads = 1; threads <= 2; threads++) {
            qkv_params *p = NULL;
            qkv_params_new(&p);
            for (int i = 0; i < n; i++) {
                char name[16];
                snprintf(name, sizeof name, "p%d", i);
                qkv_tensor *t;
                CHECK_OK(qkv_params_add(p, name, 1, &sizes[i], &t));
            }
            CHECK_OK(qkv_params_finalize(p));
            for (int i = 0; i < n; i += 2)
                qkv_params_get(p, i)->flags |= QKV_NO_DECAY;
            numel = qkv_params_numel(p);
            tu_fill_uniform(qkv_params_block(p, QKV_BLOCK_DATA), numel, -1, 1, 11);
            qkv_optim_config c = qkv_optim_default((qkv_optim_kind)kind);
            c.weight_decay = 0.3;
            c.momentum = 0.5;
            qkv_set_num_threads(threads);
            for (int s = 1; s <= 3; s++) {
                tu_fill_uniform(qkv_params_block(p, QKV_BLOCK_GRAD), numel, -1, 1,
                                20 + (uint64_t)s);
                CHECK_OK(qkv_optim_step(p, &c, s, 0.05));
            }
            qkv_set_num_threads(saved);
            result[threads - 1] = malloc((size_t)numel * sizeof(qkv_real));
            memcpy(result[threads - 1], qkv_params_block(p, QKV_BLOCK_DATA),
                   (size_t)numel * sizeof(qkv_real));
            qkv_params_free(p);
        }
        CHECK_MSG(memcmp(result[0], result[1], (size_t)numel * sizeof(qkv_real)) == 0,
                  "kind %d: 1 and 2 threads differ", kind);
        /* the same three steps element by element, in double */
        qkv_real *x0 = malloc((size_t)numel * sizeof(qkv_real));
        qkv_real *g[3];
        tu_fill_uniform(x0, numel, -1, 1, 11);
        for (int s = 0; s < 3; s++) {
            g[s] = malloc((size_t)numel * sizeof(qkv_real));
            tu_fill_uniform(g[s], numel, -1, 1, 21 + (uint64_t)s);
        }
        double worst = 0;
        int64_t off = 0;
        for (int i = 0; i < n; i++) {
            const double wd = (i % 2 == 0) ? 0 : 0.3, lr = 0.05;
            for (int64_t e = off; e < off + sizes[i]; e++) {
                double x = x0[e], m = 0, v = 0;
                for (int s = 1; s <= 3; s++) {
                    double gi = g[s - 1][e];
                    if (kind == QKV_OPTIM_SGD) {
                        gi += wd * x;
                        m = 0.5 * m + gi;
                        x -= lr * m;
                    } else {
                        if (kind == QKV_OPTIM_ADAMW)
                            x -= lr * wd * x;
                        else
                            gi += wd * x;
                        m = 0.9 * m + 0.1 * gi;
                        v = 0.999 * v + 0.001 * gi * gi;
                        x -= lr * (m / (1 - pow(0.9, s))) / (sqrt(v / (1 - pow(0.999, s))) + 1e-8);
                    }
                }
                double d = fabs(result[0][e] - x) / fmax(1, fabs(x));
                if (!(d <= worst)) worst = d;
            }
            off += sizes[i];
        }
        CHECK_MSG(worst <= (sizeof(qkv_real) == 4 ? 1e-5 : 1e-12), "kind %d: differs by %g", kind,
                  worst);
        free(x0);
        for (int s = 0; s < 3; s++)
            free(g[s]);
        free(result[0]);
        free(result[1]);
    }
}

TEST(optim_rejects_bad_arguments) {
    qkv_params *raw = NULL;
    qkv_params_new(&raw);
    qkv_optim_config c = qkv_optim_default(QKV_OPTIM_ADAM);
    CHECK_ERR(qkv_optim_step(raw, &c, 1, 1e-3), QKV_ERR_STATE, "not finalized");
    qkv_params_free(raw);
    qkv_params *p = two_params();
    CHECK_ERR(qkv_optim_step(p, &c, 0, 1e-3), QKV_ERR_INVALID_ARG, "step 0 must be >= 1");
    CHECK_ERR(qkv_optim_step(p, &c, 1, NAN), QKV_ERR_INVALID_ARG, "learning rate");
    CHECK_ERR(qkv_optim_step(p, &c, 1, -1), QKV_ERR_INVALID_ARG, "learning rate");
    c.beta2 = 1.0;
    CHECK_ERR(qkv_optim_step(p, &c, 1, 1e-3), QKV_ERR_INVALID_ARG, "betas");
    c = qkv_optim_default(QKV_OPTIM_SGD);
    c.nesterov = true;
    CHECK_ERR(qkv_optim_step(p, &c, 1, 1e-3), QKV_ERR_INVALID_ARG, "Nesterov");
    c.nesterov = false;
    c.weight_decay = -1;
    CHECK_ERR(qkv_optim_step(p, &c, 1, 1e-3), QKV_ERR_INVALID_ARG, "weight_decay");
    c.weight_decay = 0;
    c.kind = (qkv_optim_kind)7;
    CHECK_ERR(qkv_optim_step(p, &c, 1, 1e-3), QKV_ERR_INVALID_ARG, "unknown optimiser kind 7");
    CHECK_ERR(qkv_optim_step(NULL, &c, 1, 1e-3), QKV_ERR_INVALID_ARG, "NULL");
    /* nothing moved */
    check_param(p, 0, P0, 0, "after rejected steps");
    qkv_params_free(p);
}

/* AdamW with a warm-up + cosine schedule drives an ill-conditioned quadratic to its minimum:
 * L = 1/2 sum a_i x_i^2 (x decayed, minimum 0) + 1/2 sum a_i (y_i - c_i)^2 (y QKV_NO_DECAY,
 * minimum c), a_i from 1 to 100. */
TEST(optim_adamw_converges_on_a_quadratic) {
    const int n = 10, steps = 1500;
    qkv_params *p = NULL;
    qkv_tensor *x, *y;
    qkv_params_new(&p);
    CHECK_OK(qkv_params_add(p, "x", 1, (int64_t[]){n}, &x));
    CHECK_OK(qkv_params_add(p, "y", 1, (int64_t[]){n}, &y));
    CHECK_OK(qkv_params_finalize(p));
    y->flags |= QKV_NO_DECAY;
    qkv_real *xd = x->data, *yd = y->data, *xg = x->grad, *yg = y->grad;
    double a[10], c[10];
    for (int i = 0; i < n; i++) {
        a[i] = pow(100.0, i / (n - 1.0));
        c[i] = 1.5 - 0.3 * i;
        xd[i] = (qkv_real)(2.0 - 0.4 * i);
        yd[i] = 0;
    }
    qkv_optim_config cfg = qkv_optim_default(QKV_OPTIM_ADAMW);
    qkv_lr_schedule sched = {.kind = QKV_LR_WARMUP_COSINE,
                             .base_lr = 0.05,
                             .warmup_steps = 50,
                             .total_steps = steps,
                             .min_lr = 0};
    double loss = 0;
    for (int s = 1; s <= steps; s++) {
        for (int i = 0; i < n; i++) {
            xg[i] = (qkv_real)(a[i] * xd[i]);
            yg[i] = (qkv_real)(a[i] * (yd[i] - c[i]));
        }
        CHECK_OK(qkv_optim_step(p, &cfg, s, qkv_lr_at(&sched, s)));
    }
    for (int i = 0; i < n; i++)
        loss += 0.5 * a[i] * xd[i] * xd[i] + 0.5 * a[i] * (yd[i] - c[i]) * (yd[i] - c[i]);
    CHECK_MSG(loss < 1e-4, "loss after %d AdamW steps: %g", steps, loss);
    qkv_params_free(p);
}

/* ---- schedules ----------------------------------------------------------------------------------
 */

TEST(lr_schedules_at_chosen_steps) {
    const double base = 1e-3, mn = 1e-5;
    qkv_lr_schedule s = {.kind = QKV_LR_CONSTANT, .base_lr = base};
    CHECK(qkv_lr_at(&s, 1) == base && qkv_lr_at(&s, 1000000) == base);

    /* inverse square root, normalised: linear up to the peak base at step w, then base sqrt(w/t) */
    s = (qkv_lr_schedule){.kind = QKV_LR_INV_SQRT, .base_lr = base, .warmup_steps = 4000};
    CHECK_NEAR(qkv_lr_at(&s, 0), 0, 0);
    CHECK_NEAR(qkv_lr_at(&s, 1), base / 4000, 1e-18);
    CHECK_NEAR(qkv_lr_at(&s, 2000), base / 2, 1e-15);
    CHECK_NEAR(qkv_lr_at(&s, 4000), base, 1e-15);
    CHECK_NEAR(qkv_lr_at(&s, 16000), base / 2, 1e-15);
    CHECK_NEAR(qkv_lr_at(&s, 64000), base / 4, 1e-15);
    /* the paper's form: d_model^-0.5 min(t^-0.5, t w^-1.5); its peak is 1 / sqrt(d_model w) */
    s = (qkv_lr_schedule){
        .kind = QKV_LR_INV_SQRT, .base_lr = 1, .warmup_steps = 4000, .d_model = 512};
    CHECK_NEAR(qkv_lr_at(&s, 4000), 1 / sqrt(512.0 * 4000.0), 1e-15);
    CHECK_NEAR(qkv_lr_at(&s, 100), 100 / sqrt(512.0) / pow(4000, 1.5), 1e-15);
    CHECK_NEAR(qkv_lr_at(&s, 10000), 1 / sqrt(512.0 * 10000.0), 1e-15);
    /* no warm-up */
    s = (qkv_lr_schedule){.kind = QKV_LR_INV_SQRT, .base_lr = base};
    CHECK_NEAR(qkv_lr_at(&s, 1), base, 1e-18);
    CHECK_NEAR(qkv_lr_at(&s, 4), base / 2, 1e-18);

    /* warm-up from 0 over 100 steps, cosine to mn at step 1100 */
    s = (qkv_lr_schedule){.kind = QKV_LR_WARMUP_COSINE,
                          .base_lr = base,
                          .warmup_steps = 100,
                          .total_steps = 1100,
                          .min_lr = mn};
    CHECK(qkv_lr_at(&s, 0) == 0);
    CHECK_NEAR(qkv_lr_at(&s, 1), base / 100, 1e-18);
    CHECK_NEAR(qkv_lr_at(&s, 50), base / 2, 1e-18);
    CHECK_NEAR(qkv_lr_at(&s, 100), base, 1e-18);
    CHECK(qkv_lr_at(&s, 101) < base && qkv_lr_at(&s, 101) > 0.99 * base);
    CHECK_NEAR(qkv_lr_at(&s, 350), mn + (base - mn) * (1 + sqrt(0.5)) / 2, 1e-15); /* 1/4 */
    CHECK_NEAR(qkv_lr_at(&s, 600), (base + mn) / 2, 1e-15);                        /* midpoint */
    CHECK_NEAR(qkv_lr_at(&s, 850), mn + (base - mn) * (1 - sqrt(0.5)) / 2, 1e-15); /* 3/4 */
    CHECK_NEAR(qkv_lr_at(&s, 1100), mn, 1e-18);
    CHECK_NEAR(qkv_lr_at(&s, 99999), mn, 1e-18);
    for (int64_t t = 101; t < 1100; t++)
        CHECK(qkv_lr_at(&s, t + 1) <= qkv_lr_at(&s, t));
    /* no warm-up: the decay starts at step 0 */
    s.warmup_steps = 0;
    CHECK_NEAR(qkv_lr_at(&s, 0), base, 1e-18);
    CHECK_NEAR(qkv_lr_at(&s, 550), (base + mn) / 2, 1e-15);

    /* invalid schedules: NaN, and qkv_lr_check names the field */
    s.total_steps = 10;
    s.warmup_steps = 20;
    CHECK(isnan(qkv_lr_at(&s, 5)));
    CHECK_ERR(qkv_lr_check(&s), QKV_ERR_INVALID_ARG, "total_steps 10 < warmup_steps 20");
    s = (qkv_lr_schedule){.kind = QKV_LR_CONSTANT, .base_lr = -1};
    CHECK_ERR(qkv_lr_check(&s), QKV_ERR_INVALID_ARG, "base_lr");
    s = (qkv_lr_schedule){.kind = (qkv_lr_kind)9, .base_lr = 1};
    CHECK_ERR(qkv_lr_check(&s), QKV_ERR_INVALID_ARG, "unknown kind 9");
    CHECK(isnan(qkv_lr_at(NULL, 1)));
    /* a NaN rate is refused by the optimiser */
    qkv_params *p = two_params();
    qkv_optim_config c = qkv_optim_default(QKV_OPTIM_SGD);
    CHECK_ERR(qkv_optim_step(p, &c, 1, qkv_lr_at(&s, 1)), QKV_ERR_INVALID_ARG, "learning rate");
    qkv_params_free(p);
}

/* ---- clipping
 * ------------------------------------------------------------------------------------ */

TEST(clip_grad_norm_known_vector) {
    qkv_params *p = NULL;
    qkv_tensor *a, *b;
    qkv_params_new(&p);
    CHECK_OK(qkv_params_add(p, "a", 1, (int64_t[]){2}, &a));
    CHECK_OK(qkv_params_add(p, "b", 0, NULL, &b));
    CHECK_OK(qkv_params_finalize(p));
    qkv_real *g = qkv_params_block(p, QKV_BLOCK_GRAD);
    /* |(3, 4, 12)| = 13 */
    g[0] = 3, g[1] = 4, g[2] = 12;
    CHECK(qkv_clip_grad_norm(p, 0) == 13.0); /* compute only */
    CHECK(g[0] == 3 && g[1] == 4 && g[2] == 12);
    CHECK(qkv_clip_grad_norm(p, 20) == 13.0); /* below the threshold: untouched */
    CHECK(g[0] == 3 && g[1] == 4 && g[2] == 12);
    CHECK(qkv_clip_grad_norm(p, 6.5) == 13.0); /* scaled by 6.5 / (13 + 1e-6) */
    const double c = 6.5 / (13 + 1e-6);
    CHECK_NEAR(g[0], 3 * c, 1e-6);
    CHECK_NEAR(g[1], 4 * c, 1e-6);
    CHECK_NEAR(g[2], 12 * c, 1e-6);
    /* PyTorch 1.13 clip_grad_norm_(max_norm=6.5) on the same gradients */
    CHECK_NEAR(g[0], 1.4999998846153937, 1e-6);
    CHECK_NEAR(g[2], 5.999999538461575, 1e-6);
    CHECK_NEAR(qkv_clip_grad_norm(p, 0), 6.5 * 13 / (13 + 1e-6), 1e-5);
    /* at exactly max_norm torch still scales by max_norm / (norm + 1e-6) */
    g[0] = 3, g[1] = 4, g[2] = 12;
    qkv_clip_grad_norm(p, 13);
    CHECK(g[2] < 12 && g[2] == (qkv_real)12 * (qkv_real)(13 / (13 + 1e-6)));
    /* not finalized: NaN and a message */
    qkv_params *raw = NULL;
    qkv_params_new(&raw);
    CHECK(isnan(qkv_clip_grad_norm(raw, 1)) && strstr(qkv_last_error(), "not finalized"));
    CHECK(isnan(qkv_clip_grad_norm(NULL, 1)));
    qkv_params_free(raw);
    qkv_params_free(p);
}

TEST(clip_grad_norm_deterministic_and_accurate) {
    const int64_t sizes[] = {100003, 1, 200000, 777};
    qkv_params *p = NULL;
    qkv_params_new(&p);
    for (int i = 0; i < 4; i++) {
        char name[8];
        snprintf(name, sizeof name, "p%d", i);
        CHECK_OK(qkv_params_add(p, name, 1, &sizes[i], NULL));
    }
    CHECK_OK(qkv_params_finalize(p));
    const int64_t n = qkv_params_numel(p);
    qkv_real *g = qkv_params_block(p, QKV_BLOCK_GRAD);
    tu_fill_uniform(g, n, -2, 2, 5);
    long double ref = 0; /* independent: one long-double sum */
    for (int64_t i = 0; i < n; i++)
        ref += (long double)g[i] * g[i];
    int saved = qkv_get_num_threads();
    qkv_set_num_threads(1);
    double n1 = qkv_clip_grad_norm(p, 0);
    qkv_set_num_threads(2);
    double n2 = qkv_clip_grad_norm(p, 0);
    qkv_real *copy = malloc((size_t)n * sizeof *copy);
    memcpy(copy, g, (size_t)n * sizeof *copy);
    qkv_clip_grad_norm(p, 1.0);
    qkv_set_num_threads(saved);
    CHECK(n1 == n2);
    CHECK_NEAR(n1, sqrtl(ref), 1e-12 * n1);
    /* clipped to norm 1 (up to the 1e-6 in the denominator), every element scaled alike */
    CHECK_NEAR(qkv_clip_grad_norm(p, 0), 1.0, 1e-5);
    const qkv_real cr = (qkv_real)(1.0 / (n1 + 1e-6));
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad += g[i] != copy[i] * cr;
    CHECK(bad == 0);
    free(copy);
    qkv_params_free(p);
}
