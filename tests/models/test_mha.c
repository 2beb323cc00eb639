/*
 * test_mha.c: multi-head attention as a module: finite-difference gradients of every score
 * function x normaliser, every relative position encoding and the masks (parameters and inputs);
 * fused against unfused paths; and the properties the lecture states:
 *   - without positional information self-attention is permutation-equivariant, with sinusoidal
 *     encodings added it is not;
 *   - with a causal mask a later token never changes an earlier output;
 *   - relative encodings are shift-invariant: inside a local window, the output at position i of
 *     a sequence equals the output at i + s of the same tokens shifted right by s.
 */
#include "testutil.h"

enum { MC = 4, MH = 2 }; /* d_model, heads: D = 2 */

typedef struct {
    qkv_params *p;
    qkv_mha m;
} mha_fixture;

static void mha_setup(mha_fixture *f, const qkv_mha_config *cfg, uint64_t seed) {
    CHECK_OK(qkv_params_new(&f->p));
    CHECK_OK(qkv_mha_init(&f->m, cfg, f->p, "attn."));
    CHECK_OK(qkv_params_finalize(f->p));
    qkv_mha_reset_parameters(&f->m, seed);
    /* non-zero biases so their gradients are exercised */
    if (f->m.in_proj_bias) qkv_init_uniform(f->m.in_proj_bias, -0.3, 0.3, seed, 50);
    if (f->m.out_proj_bias) qkv_init_uniform(f->m.out_proj_bias, -0.3, 0.3, seed, 51);
}

static void mha_teardown(mha_fixture *f) { qkv_params_free(f->p); }

typedef struct {
    const qkv_mha *m;
    bool self;      /* self-attention (in[0] thrice) or cross (in[0], in[1]) */
    bool causal;
    bool pad;       /* pad the last key of batch 1 */
    bool weights;   /* ask for the weights (forces the unfused path) */
} mha_call;

static qkv_tensor *mha_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    const mha_call *c = user;
    qkv_tensor *x = in[0], *kv = c->self ? in[0] : in[1];
    qkv_mask mask = qkv_mask_none();
    mask.causal = c->causal;
    if (c->pad) {
        const int64_t B = kv->shape[0], S = kv->shape[1];
        qkv_tensor *pad = qkv_tensor_zeros(ctx, QKV_I32, 2, (int64_t[]){B, S});
        ((int32_t *)pad->data)[(B - 1) * S + (S - 1)] = 1;
        mask.key_padding = pad;
    }
    qkv_tensor *w = NULL;
    qkv_tensor *y = qkv_mha_forward(ctx, c->m, x, kv, kv, &mask, c->weights ? &w : NULL);
    return y;
}

/* gradcheck over every parameter of the module and the inputs. ReLU normalisers have kinks (and
 * the row-normalised one a denominator that can approach its eps): the inputs are redrawn until
 * the point is smooth on the finite-difference scale (tu_smooth_at), then checked. */
static void check_module(const char *what, mha_fixture *f, mha_call *call, int64_t T, int64_t S) {
    qkv_tensor *in[32];
    int n = 2;
    for (int64_t i = 0; i < qkv_params_count(f->p) && n < 32; i++) in[n++] = qkv_params_get(f->p, i);
    bool smooth = false;
    for (uint64_t seed = 11; seed < 11 + 2 * 20 && !smooth; seed += 2) {
        in[0] = tu_rand(3, (int64_t[]){2, T, MC}, -1, 1, seed);
        in[1] = tu_rand(3, (int64_t[]){2, S, MC}, -1, 1, seed + 1);
        qkv_tensor_requires_grad(in[0]);
        if (!call->self) qkv_tensor_requires_grad(in[1]);
        smooth = tu_smooth_at(mha_fn, in, n, call, 1e-6, 1e-7);
        if (!smooth) {
            tu_free(in[0]);
            tu_free(in[1]);
        }
    }
    CHECK_MSG(smooth, "%s: no smooth point found in 20 draws", what);
    if (!smooth) return;
    tu_gradcheck(what, mha_fn, in, n, call, NULL);
    tu_free(in[0]);
    tu_free(in[1]);
}

TEST(mha_gradcheck_every_score_and_normaliser) {
    TU_NEED_DOUBLE();
    /* every entry of the registries: a new score function or normaliser is checked unasked */
    const qkv_registry *scores = qkv_registry_get(QKV_REGISTRY_SCORE), *norms = qkv_registry_get(QKV_REGISTRY_NORM);
    for (int s = 0; s < scores->count; s++) {
        for (int nm = 0; nm < norms->count; nm++) {
            qkv_mha_config cfg = qkv_mha_default_config(MC, MH);
            cfg.score = (qkv_score_kind)scores->entries[s].value;
            cfg.norm = (qkv_attn_norm)norms->entries[nm].value;
            cfg.cos_scale_init = 2;
            mha_fixture f;
            mha_setup(&f, &cfg, 3 + (uint64_t)s);
            char what[96];
            snprintf(what, sizeof what, "mha %s + %s, causal + padding", scores->entries[s].name, norms->entries[nm].name);
            mha_call self = {&f.m, true, true, true, true};
            check_module(what, &f, &self, 3, 3);
            snprintf(what, sizeof what, "mha %s + %s, cross, padding", scores->entries[s].name, norms->entries[nm].name);
            mha_call cross = {&f.m, false, false, true, true};
            check_module(what, &f, &cross, 3, 4);
            mha_teardown(&f);
        }
    }
}

TEST(mha_gradcheck_every_relative_encoding) {
    TU_NEED_DOUBLE();
    const qkv_registry *relpos = qkv_registry_get(QKV_REGISTRY_RELPOS);
    for (int r = 0; r < relpos->count; r++) {
        for (int fused = 0; fused < 2; fused++) {
            qkv_mha_config cfg = qkv_mha_default_config(MC, MH);
            cfg.relpos = (qkv_relpos_kind)relpos->entries[r].value;
            cfg.relpos_max_distance = cfg.relpos == QKV_RELPOS_SHAW ? 2 : 8;
            cfg.relpos_buckets = 8;
            mha_fixture f;
            mha_setup(&f, &cfg, 20 + (uint64_t)r);
            char what[96];
            snprintf(what, sizeof what, "mha relpos %s (%s)", relpos->entries[r].name, fused ? "fused" : "weights");
            mha_call call = {&f.m, true, true, true, !fused};
            check_module(what, &f, &call, 5, 5);
            mha_teardown(&f);
        }
    }
}

/* The fused path and the composed path give the same outputs and gradients. */
/* The fused path (qkv_sdpa / qkv_sdpa_dropout) against the composed ops (asking for the weights
 * forces them), without and with attention dropout in training. With dropout both draw the same
 * mask (the fused kernel regenerates qkv_dropout's decisions), so they agree to rounding; and the
 * next random op after attention draws the same bits either way (same random position). Tolerance:
 * the dropout-free bound (2e-5 in float: a few roundings of sums over S = 7 terms, with margin)
 * times 1 / (1 - p) = 1.43, the largest factor a kept weight gets. */
TEST(mha_fused_equals_unfused) {
    for (int drop = 0; drop < 2; drop++)
        for (int r = 0; r < 3; r++) {
            const qkv_relpos_kind kinds[] = {QKV_RELPOS_NONE, QKV_RELPOS_ROPE, QKV_RELPOS_ALIBI};
            qkv_mha_config cfg = qkv_mha_default_config(8, 2);
            cfg.relpos = kinds[r];
            cfg.dropout = drop ? 0.3 : 0;
            cfg.fused_always = true; /* whatever the size rule of training says */
            mha_fixture f;
            mha_setup(&f, &cfg, 31);
            qkv_tensor *x = tu_rand(3, (int64_t[]){2, 7, 8}, -1, 1, 5);
            qkv_real *out[2], *grad[2], next[2][64];
            for (int fused = 0; fused < 2; fused++) {
                qkv_ctx *ctx = tu_ctx();
                qkv_ctx_set_training(ctx, drop);
                qkv_params_zero_grad(f.p);
                qkv_tensor *xi = qkv_tensor_from(ctx, QKV_REAL, 3, x->shape, x->data);
                qkv_tensor_requires_grad(xi);
                mha_call call = {&f.m, true, true, true, !fused};
                qkv_tensor *y = mha_fn(ctx, (qkv_tensor *[]){xi}, &call);
                /* the next random op of the step */
                qkv_tensor *ones = qkv_tensor_new(ctx, QKV_REAL, 1, (int64_t[]){64});
                for (int i = 0; i < 64; i++) ((qkv_real *)ones->data)[i] = 1;
                qkv_tensor *nd = qkv_dropout(ctx, ones, 0.5);
                CHECK_OK(qkv_ctx_status(ctx));
                if (qkv_ctx_status(ctx)) {
                    qkv_ctx_free(ctx);
                    break;
                }
                memcpy(next[fused], nd->data, sizeof(qkv_real) * 64);
                CHECK_OK(qkv_backward(ctx, qkv_sum(ctx, qkv_mul(ctx, y, y))));
                out[fused] = malloc(sizeof(qkv_real) * 112);
                grad[fused] = malloc(sizeof(qkv_real) * (size_t)qkv_params_numel(f.p));
                memcpy(out[fused], y->data, sizeof(qkv_real) * 112);
                memcpy(grad[fused], qkv_params_block(f.p, QKV_BLOCK_GRAD),
                       sizeof(qkv_real) * (size_t)qkv_params_numel(f.p));
                qkv_ctx_free(ctx);
            }
            const double tol = (sizeof(qkv_real) == 4 ? 2e-5 : 1e-12) / (1 - cfg.dropout);
            CHECK_MSG(tu_max_rel_diff(out[1], out[0], 112) <= tol, "dropout %g relpos %d: fused output differs by %g",
                      cfg.dropout, r, tu_max_rel_diff(out[1], out[0], 112));
            CHECK_MSG(tu_max_rel_diff(grad[1], grad[0], qkv_params_numel(f.p)) <= tol,
                      "dropout %g relpos %d: fused gradients differ by %g", cfg.dropout, r,
                      tu_max_rel_diff(grad[1], grad[0], qkv_params_numel(f.p)));
            CHECK_MSG(memcmp(next[0], next[1], sizeof next[0]) == 0,
                      "dropout %g relpos %d: the next dropout draws other bits after the fused op", cfg.dropout, r);
            for (int i = 0; i < 2; i++) free(out[i]), free(grad[i]);
            tu_free(x);
            mha_teardown(&f);
        }
}

/* Four self-attentions in a row (the module applied to its own output) on x (2, T, C) in training
 * mode with attention dropout 0.3 and a causal mask, the module's path settings replaced by
 * (use_fused, fused_always): the output, then the gradients
 * of sum(y^2) with respect to x and to every parameter, in one malloc'd array of *n; *peak: the
 * step arena's high-water mark. */
static qkv_real *train_run(mha_fixture *f, const qkv_tensor *x, bool use_fused, bool fused_always, int64_t *n,
                           size_t *peak) {
    f->m.cfg.use_fused = use_fused;
    f->m.cfg.fused_always = fused_always;
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_training(ctx, true);
    qkv_params_zero_grad(f->p);
    qkv_tensor *xi = qkv_tensor_from(ctx, QKV_REAL, 3, x->shape, x->data);
    qkv_tensor_requires_grad(xi);
    qkv_mask mask = qkv_mask_none();
    mask.causal = true;
    qkv_tensor *y = xi;
    for (int layer = 0; layer < 4; layer++) y = qkv_mha_forward(ctx, &f->m, y, y, y, &mask, NULL);
    CHECK_OK(qkv_backward(ctx, qkv_sum(ctx, qkv_mul(ctx, y, y))));
    const int64_t nx = qkv_tensor_numel(xi), np = qkv_params_numel(f->p);
    *n = 2 * nx + np;
    *peak = qkv_ctx_arena_peak(ctx);
    qkv_real *out = calloc((size_t)*n, sizeof(qkv_real));
    if (y && xi->grad) {
        memcpy(out, y->data, sizeof(qkv_real) * (size_t)nx);
        memcpy(out + nx, xi->grad, sizeof(qkv_real) * (size_t)nx);
        memcpy(out + 2 * nx, qkv_params_block(f->p, QKV_BLOCK_GRAD), sizeof(qkv_real) * (size_t)np);
    }
    qkv_ctx_free(ctx);
    return out;
}

/* In training the module takes the composed arithmetic while H S <= C (qkv_sdpa_weights: the
 * composed ops' bits, keeping only the weights) and the fused kernel past it (qkv__mha_attend);
 * use_fused = false takes the composed ops themselves, fused_always the fused kernel. The fused
 * kernel rounds differently, so the bits tell which ran: with C = 16, H = 2, S = 8 (H S = C) the
 * default must give the composed ops' output and gradients bit for bit, with S = 9 the fused
 * kernel's; and the default must keep less than the composed ops (two (B, H, T, S) tensors per
 * module, less the few scratch buffers the modules share). */
TEST(mha_training_takes_the_composed_path_while_keys_are_few) {
    for (int64_t S = 8; S <= 9; S++) {
        qkv_mha_config cfg = qkv_mha_default_config(16, 2);
        cfg.dropout = 0.3;
        mha_fixture f;
        mha_setup(&f, &cfg, 41);
        qkv_tensor *x = tu_rand(3, (int64_t[]){2, S, 16}, -1, 1, 6);
        int64_t n = 0;
        size_t peak_def, peak_composed, peak_fused;
        qkv_real *def = train_run(&f, x, true, false, &n, &peak_def);
        qkv_real *composed = train_run(&f, x, false, false, &n, &peak_composed);
        qkv_real *fused = train_run(&f, x, true, true, &n, &peak_fused);
        if (S * 2 <= 16) /* 4 x 3 (2, 2, S, S) tensors kept against 4 and at most 3 of scratch */
            CHECK_MSG(peak_def + 4 * (2 * 2 * S * S) * sizeof(qkv_real) <= peak_composed,
                      "arena peak %zu with the weights op, %zu with the composed ops", peak_def, peak_composed);
        const size_t bytes = sizeof(qkv_real) * (size_t)n;
        CHECK_MSG(memcmp(composed, fused, bytes) != 0, "S = %lld: the two paths gave the same bits", (long long)S);
        const qkv_real *want = S * 2 <= 16 ? composed : fused;
        int64_t first = -1;
        for (int64_t i = 0; i < n && first < 0; i++)
            if (memcmp(&def[i], &want[i], sizeof(qkv_real))) first = i;
        CHECK_MSG(first < 0, "S = %lld: the default differs from the %s path at element %lld of %lld (%.9g, %.9g)",
                  (long long)S, S * 2 <= 16 ? "composed" : "fused", (long long)first, (long long)n,
                  first < 0 ? 0.0 : (double)def[first], first < 0 ? 0.0 : (double)want[first]);
        free(def), free(composed), free(fused);
        tu_free(x);
        mha_teardown(&f);
    }
}

/* Run self-attention on x (1, T, C) (optionally + sinusoidal PE) and copy the output. */
static void run_self(const qkv_mha *m, const qkv_real *x, int64_t T, bool add_pe, bool causal, qkv_real *out,
                     const qkv_mask *custom) {
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_grad_enabled(ctx, false);
    const int64_t C = m->cfg.d_model;
    qkv_tensor *xt = qkv_tensor_from(ctx, QKV_REAL, 3, (int64_t[]){1, T, C}, x);
    if (add_pe) xt = qkv_add(ctx, xt, qkv_sinusoidal_pe(ctx, T, C, 0));
    qkv_mask mask = custom ? *custom : qkv_mask_none();
    mask.causal = causal;
    qkv_tensor *y = qkv_mha_forward(ctx, m, xt, xt, xt, &mask, NULL);
    CHECK_OK(qkv_ctx_status(ctx));
    if (y) memcpy(out, y->data, sizeof(qkv_real) * (size_t)(T * C));
    qkv_ctx_free(ctx);
}

TEST(self_attention_is_permutation_equivariant_without_positions) {
    enum { T = 6, C = 8 };
    qkv_mha_config cfg = qkv_mha_default_config(C, 2);
    mha_fixture f;
    mha_setup(&f, &cfg, 41);
    qkv_real x[T * C], xp[T * C], y[T * C], yp[T * C];
    tu_fill_uniform(x, T * C, -1, 1, 3);
    const int perm[T] = {3, 0, 5, 1, 4, 2};
    for (int t = 0; t < T; t++) memcpy(xp + t * C, x + perm[t] * C, sizeof(qkv_real) * C);
    /* no positions: y(perm x) = perm y(x) */
    run_self(&f.m, x, T, false, false, y, NULL);
    run_self(&f.m, xp, T, false, false, yp, NULL);
    double worst = 0;
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) worst = fmax(worst, fabs((double)yp[t * C + c] - (double)y[perm[t] * C + c]));
    CHECK_MSG(worst < 1e-5, "permuting the tokens changed more than their order: %g", worst);
    /* with sinusoidal positions added it is not equivariant */
    run_self(&f.m, x, T, true, false, y, NULL);
    run_self(&f.m, xp, T, true, false, yp, NULL);
    worst = 0;
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) worst = fmax(worst, fabs((double)yp[t * C + c] - (double)y[perm[t] * C + c]));
    CHECK_MSG(worst > 1e-3, "with positional encodings the output should depend on the order (%g)", worst);
    mha_teardown(&f);
}

TEST(causal_attention_never_lets_a_later_token_change_an_earlier_output) {
    enum { T = 7, C = 8 };
    for (int r = 0; r <= QKV_RELPOS_ALIBI; r++) {
        qkv_mha_config cfg = qkv_mha_default_config(C, 2);
        cfg.relpos = (qkv_relpos_kind)r;
        cfg.relpos_bidirectional = false;
        mha_fixture f;
        mha_setup(&f, &cfg, 43);
        qkv_real x[T * C], y0[T * C], y1[T * C];
        tu_fill_uniform(x, T * C, -1, 1, 4);
        run_self(&f.m, x, T, true, true, y0, NULL);
        for (int t = 4; t < T; t++) /* change tokens 4.. */
            for (int c = 0; c < C; c++) x[t * C + c] += (qkv_real)0.7;
        run_self(&f.m, x, T, true, true, y1, NULL);
        CHECK_MSG(memcmp(y0, y1, sizeof(qkv_real) * 4 * C) == 0, "relpos %d: outputs 0..3 changed", r);
        CHECK(memcmp(y0 + 4 * C, y1 + 4 * C, sizeof(qkv_real) * C) != 0); /* and token 4's did change */
        mha_teardown(&f);
    }
}

TEST(relative_encodings_are_shift_invariant) {
    /* Window mask of +-2 and no absolute positions: the output at position i of x equals the output
     * at position i + s of x shifted right by s tokens (any filler before it). */
    enum { T = 9, C = 8, SHIFT = 3 };
    for (int r = QKV_RELPOS_SHAW; r <= QKV_RELPOS_ALIBI; r++) {
        qkv_mha_config cfg = qkv_mha_default_config(C, 2);
        cfg.relpos = (qkv_relpos_kind)r;
        cfg.relpos_max_distance = r == QKV_RELPOS_SHAW ? 2 : 16;
        cfg.relpos_buckets = 8;
        mha_fixture f;
        mha_setup(&f, &cfg, 47);
        qkv_real x[T * C], xs[(T + SHIFT) * C], y[T * C], ys[(T + SHIFT) * C];
        tu_fill_uniform(x, T * C, -1, 1, 6);
        tu_fill_uniform(xs, SHIFT * C, -1, 1, 7); /* filler */
        memcpy(xs + SHIFT * C, x, sizeof x);
        qkv_mask window = qkv_mask_none();
        window.window_left = window.window_right = 2;
        run_self(&f.m, x, T, false, false, y, &window);
        run_self(&f.m, xs, T + SHIFT, false, false, ys, &window);
        double worst = 0;
        for (int i = 2; i < T - 2; i++) /* positions whose window lies inside x */
            for (int c = 0; c < C; c++) worst = fmax(worst, fabs((double)ys[(i + SHIFT) * C + c] - (double)y[i * C + c]));
        CHECK_MSG(worst < 1e-5, "relpos %d: shifting the sequence changed the output by %g", r, worst);
        /* absolute sinusoidal positions are not shift-invariant */
        if (r == QKV_RELPOS_SHAW) {
            run_self(&f.m, x, T, true, false, y, &window);
            run_self(&f.m, xs, T + SHIFT, true, false, ys, &window);
            worst = 0;
            for (int i = 2; i < T - 2; i++)
                for (int c = 0; c < C; c++) worst = fmax(worst, fabs((double)ys[(i + SHIFT) * C + c] - (double)y[i * C + c]));
            CHECK_MSG(worst > 1e-3, "absolute positions should break shift invariance (%g)", worst);
        }
        mha_teardown(&f);
    }
}

TEST(mha_fully_masked_row_gives_bias_output_and_finite_gradients) {
    enum { T = 3, C = 4 };
    qkv_mha_config cfg = qkv_mha_default_config(C, 2);
    for (int fused = 0; fused < 2; fused++) {
        mha_fixture f;
        mha_setup(&f, &cfg, 53);
        qkv_ctx *ctx = tu_ctx();
        qkv_real xd[T * C];
        tu_fill_uniform(xd, T * C, -1, 1, 8);
        qkv_tensor *x = qkv_tensor_from(ctx, QKV_REAL, 3, (int64_t[]){1, T, C}, xd);
        qkv_tensor_requires_grad(x);
        qkv_mask mask = qkv_mask_none();
        int32_t allowed[T * T] = {1, 0, 0, /* row 1 sees nothing */ 0, 0, 0, 1, 1, 1};
        mask.allowed = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){T, T}, allowed);
        qkv_tensor *w = NULL;
        qkv_tensor *y = qkv_mha_forward(ctx, &f.m, x, x, x, &mask, fused ? NULL : &w);
        CHECK_OK(qkv_ctx_status(ctx));
        if (y) {
            for (int c = 0; c < C; c++) CHECK_NEAR(((qkv_real *)y->data)[1 * C + c], ((qkv_real *)f.m.out_proj_bias->data)[c], 1e-6);
            CHECK_OK(qkv_backward(ctx, qkv_sum(ctx, qkv_mul(ctx, y, y))));
            for (int i = 0; i < T * C; i++) CHECK(isfinite((double)((qkv_real *)x->grad)[i]));
            const qkv_real *g = qkv_params_block(f.p, QKV_BLOCK_GRAD);
            for (int64_t i = 0; i < qkv_params_numel(f.p); i++) CHECK(isfinite((double)g[i]));
        }
        qkv_ctx_free(ctx);
        mha_teardown(&f);
    }
}

TEST(mha_rejects_bad_configs_and_shapes) {
    qkv_params *p = NULL;
    CHECK_OK(qkv_params_new(&p));
    qkv_mha m;
    qkv_mha_config cfg = qkv_mha_default_config(6, 4);
    CHECK_ERR(qkv_mha_init(&m, &cfg, p, ""), QKV_ERR_INVALID_ARG, "multiple of n_heads");
    cfg = qkv_mha_default_config(6, 2);
    cfg.relpos = QKV_RELPOS_ROPE; /* D = 3 is odd */
    CHECK_ERR(qkv_mha_init(&m, &cfg, p, "x."), QKV_ERR_INVALID_ARG, "even");
    cfg = qkv_mha_default_config(4, 2);
    CHECK_OK(qkv_mha_init(&m, &cfg, p, "ok."));
    CHECK_OK(qkv_params_finalize(p));
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *x = qkv_tensor_zeros(ctx, QKV_REAL, 3, (int64_t[]){1, 2, 5});
    CHECK(qkv_mha_forward(ctx, &m, x, x, x, NULL, NULL) == NULL);
    CHECK(qkv_ctx_status(ctx) == QKV_ERR_SHAPE && strstr(qkv_last_error(), "mha"));
    qkv_ctx_free(ctx);
    qkv_params_free(p);
}
