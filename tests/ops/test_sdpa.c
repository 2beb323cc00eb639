/*
 * test_sdpa.c: fused scaled-dot-product attention (qkv_sdpa), its values.
 *
 * Closed forms (identical keys average the allowed values, one key returns its value, ALiBi and
 * hand-computed weights), the fast tiled kernel against the reference kernel forward and backward
 * over odd shapes x every mask kind x ALiBi, bit-identity across thread counts, fully masked rows,
 * and attention dropout (qkv_sdpa_dropout) fast against reference and across thread counts.
 * test_sdpa_checks.c has the gradient checks, strided inputs, bad arguments and O(T) memory.
 */
#include "sdpa_testutil.h"

/* The mask rule restated independently of the library, for the closed forms. */
static bool allows(const qkv_mask *m, int64_t b, int64_t i, int64_t j) {
    if (!m) return true;
    if (m->causal && j > i) return false;
    if (m->window_left >= 0 && j < i - m->window_left) return false;
    if (m->window_right >= 0 && j > i + m->window_right) return false;
    if (m->key_padding) {
        const int64_t S = m->key_padding->shape[1];
        if (((const int32_t *)m->key_padding->data)[b * S + j]) return false;
    }
    if (m->allowed) {
        const qkv_tensor *a = m->allowed;
        const int64_t T = a->shape[a->ndim - 2], S = a->shape[a->ndim - 1];
        if (!((const int32_t *)a->data)[(a->ndim == 3 ? b * T * S : 0) + i * S + j]) return false;
    }
    return true;
}

/* ---- one forward + backward run ------------------------------------------------------------ */

typedef struct {
    int64_t B, H, T, S, D, Dv;
    double scale;
    const qkv_mask *mask;
    const qkv_real *alibi;
    uint64_t seed;
    double dropout; /* > 0: qkv_sdpa_dropout in training mode */
} sdpa_case;

typedef struct {
    qkv_real *o, *dq, *dk, *dv; /* malloc'd copies */
    int64_t no, nq, nk, nv;
} sdpa_result;

static void result_free(sdpa_result *r) {
    free(r->o), free(r->dq), free(r->dk), free(r->dv);
    memset(r, 0, sizeof *r);
}

static qkv_real *copy_out(const void *src, int64_t n) {
    qkv_real *x = malloc(sizeof(qkv_real) * (size_t)(n ? n : 1));
    if (src)
        memcpy(x, src, sizeof(qkv_real) * (size_t)n);
    else
        memset(x, 0, sizeof(qkv_real) * (size_t)(n ? n : 1));
    return x;
}

/* o = sdpa(q, k, v) and the gradients of sum(o * dy) with random q, k, v, dy from c->seed, on the
 * given kernel set and thread count (0: keep the current one). False when the op failed. */
static bool run_case(const sdpa_case *c, qkv_kernels kernels, int threads, sdpa_result *r) {
    const int saved = qkv_get_num_threads();
    if (threads > 0) qkv_set_num_threads(threads);
    qkv_ctx *ctx = ctx_with(kernels);
    const int64_t qs[4] = {c->B, c->H, c->T, c->D}, ks[4] = {c->B, c->H, c->S, c->D};
    const int64_t vs[4] = {c->B, c->H, c->S, c->Dv}, os[4] = {c->B, c->H, c->T, c->Dv};
    qkv_tensor *q = qkv_tensor_new(ctx, QKV_REAL, 4, qs), *k = qkv_tensor_new(ctx, QKV_REAL, 4, ks);
    qkv_tensor *v = qkv_tensor_new(ctx, QKV_REAL, 4, vs),
               *dy = qkv_tensor_new(ctx, QKV_REAL, 4, os);
    tu_fill_uniform(q->data, qkv_tensor_numel(q), -2, 2, c->seed);
    tu_fill_uniform(k->data, qkv_tensor_numel(k), -2, 2, c->seed + 1);
    tu_fill_uniform(v->data, qkv_tensor_numel(v), -1, 1, c->seed + 2);
    tu_fill_uniform(dy->data, qkv_tensor_numel(dy), -1, 1, c->seed + 3);
    qkv_tensor_requires_grad(q);
    qkv_tensor_requires_grad(k);
    qkv_tensor_requires_grad(v);
    qkv_ctx_set_training(ctx, c->dropout > 0);
    qkv_tensor *o = qkv_sdpa_dropout(ctx, q, k, v, c->scale, c->mask, c->alibi, c->dropout);
    bool ok = o && qkv_backward_from(ctx, o, dy) == QKV_OK;
    if (ok) {
        r->no = qkv_tensor_numel(o), r->nq = qkv_tensor_numel(q);
        r->nk = qkv_tensor_numel(k), r->nv = qkv_tensor_numel(v);
        r->o = copy_out(o->data, r->no), r->dq = copy_out(q->grad, r->nq);
        r->dk = copy_out(k->grad, r->nk), r->dv = copy_out(v->grad, r->nv);
    } else {
        qkv_test_fail(__FILE__, __LINE__, "sdpa run failed: %s", qkv_last_error());
    }
    qkv_ctx_free(ctx);
    qkv_set_num_threads(saved);
    return ok;
}

/* ---- closed forms --------------------------------------------------------------------------- */

TEST(sdpa_hand_computed_weights_and_alibi_sign) {
    /* q = 1, k = (0, ln 3), scale 1: weights (1/4, 3/4), v = (4, 8) -> o = 7. With an ALiBi slope
     * of ln 3 the second score drops by ln 3 |0 - 1|: weights (1/2, 1/2) -> o = 6. */
    for (int kern = 0; kern < 2; kern++) {
        qkv_ctx *ctx = ctx_with((qkv_kernels)kern);
        qkv_tensor *q = qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){1, 1, 1, 1}, (qkv_real[]){1});
        qkv_tensor *k = qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){1, 1, 2, 1},
                                        (qkv_real[]){0, (qkv_real)log(3.0)});
        qkv_tensor *v =
            qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){1, 1, 2, 1}, (qkv_real[]){4, 8});
        qkv_tensor *o = qkv_sdpa(ctx, q, k, v, 1.0, NULL, NULL);
        CHECK(o && o->ndim == 4 && o->shape[2] == 1 && o->shape[3] == 1);
        if (o) CHECK_NEAR(((qkv_real *)o->data)[0], 7.0, 1e-5);
        const qkv_real slope[1] = {(qkv_real)log(3.0)};
        o = qkv_sdpa(ctx, q, k, v, 1.0, NULL, slope);
        if (o) CHECK_NEAR(((qkv_real *)o->data)[0], 6.0, 1e-5);
        CHECK(qkv_ctx_status(ctx) == QKV_OK);
        qkv_ctx_free(ctx);
    }
}

/* Identical keys give every allowed key the same score, so o_i is the mean of the allowed v_j;
 * with ALiBi the weights are exp(-m_h |i - j|) normalised over the allowed j. */
static void identical_keys_case(int64_t B, int64_t H, int64_t T, int64_t S, const qkv_mask *mask,
                                const qkv_real *alibi, qkv_kernels kern) {
    const int64_t D = 3, Dv = 2;
    qkv_ctx *ctx = ctx_with(kern);
    qkv_tensor *q = qkv_tensor_new(ctx, QKV_REAL, 4, (int64_t[]){B, H, T, D});
    qkv_tensor *k = qkv_tensor_new(ctx, QKV_REAL, 4, (int64_t[]){B, H, S, D});
    qkv_tensor *v = qkv_tensor_new(ctx, QKV_REAL, 4, (int64_t[]){B, H, S, Dv});
    tu_fill_uniform(q->data, qkv_tensor_numel(q), -1, 1, 11);
    tu_fill_uniform(v->data, qkv_tensor_numel(v), -1, 1, 12);
    qkv_real *kd = k->data;
    for (int64_t x = 0; x < B * H * S; x++)
        for (int64_t d = 0; d < D; d++)
            kd[x * D + d] = (qkv_real)(0.3 * (double)d - 0.4);
    qkv_tensor *o = qkv_sdpa(ctx, q, k, v, 0.7, mask, alibi);
    CHECK(o != NULL);
    if (!o) {
        qkv_ctx_free(ctx);
        return;
    }
    const qkv_real *od = o->data, *vd = v->data;
    double worst = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < T; i++)
                for (int64_t d = 0; d < Dv; d++) {
                    double num = 0, den = 0;
                    for (int64_t j = 0; j < S; j++) {
                        if (!allows(mask, b, i, j)) continue;
                        const double w = alibi ? exp(-(double)alibi[h] * fabs((double)(i - j))) : 1;
                        num += w * (double)vd[((b * H + h) * S + j) * Dv + d];
                        den += w;
                    }
                    const double want = den > 0 ? num / den : 0;
                    worst = fmax(worst, fabs((double)od[((b * H + h) * T + i) * Dv + d] - want));
                }
    CHECK_MSG(worst <= (sizeof(qkv_real) == 4 ? 2e-6 : 1e-13),
              "identical keys (%s kernels, T %lld, S %lld): off by %g", kern ? "ref" : "fast",
              (long long)T, (long long)S, worst);
    qkv_ctx_free(ctx);
}

TEST(sdpa_identical_keys_average_allowed_values) {
    qkv_tensor *pad = tu_tensor(QKV_I32, 2, (int64_t[]){2, 150});
    qkv_tensor *pad6 = tu_tensor(QKV_I32, 2, (int64_t[]){2, 6});
    for (int64_t x = 0; x < 300; x++)
        ((int32_t *)pad->data)[x] = x % 7 == 3; /* every 7th key */
    for (int64_t x = 0; x < 12; x++)
        ((int32_t *)pad6->data)[x] = x == 2 || x == 7;
    const qkv_real slopes[2] = {(qkv_real)0.5, (qkv_real)0.125};
    for (int kern = 0; kern < 2; kern++) {
        const qkv_kernels kk = (qkv_kernels)kern;
        qkv_mask m = mask_all();
        identical_keys_case(2, 2, 5, 6, NULL, NULL, kk);
        identical_keys_case(2, 2, 130, 150, NULL, NULL, kk); /* several tiles */
        m.causal = true;
        identical_keys_case(2, 2, 5, 6, &m, NULL, kk);
        identical_keys_case(2, 2, 130, 150, &m, NULL, kk);
        m.key_padding = pad6;
        identical_keys_case(2, 2, 5, 6, &m, NULL, kk);
        m.key_padding = pad;
        identical_keys_case(2, 2, 130, 150, &m, slopes, kk);
        m = mask_all();
        m.window_left = 1;
        m.window_right = 2;
        identical_keys_case(1, 2, 9, 7, &m, NULL, kk);
        identical_keys_case(1, 2, 140, 133, &m, slopes, kk);
        identical_keys_case(1, 2, 70, 70, NULL, slopes, kk);
    }
    tu_free(pad), tu_free(pad6);
}

TEST(sdpa_single_key_and_causal_first_row_return_that_value) {
    for (int kern = 0; kern < 2; kern++) {
        /* S = 1: the softmax over one key is exactly 1, so every row returns v_0 exactly. */
        sdpa_case c = {.B = 2, .H = 3, .T = 70, .S = 1, .D = 5, .Dv = 3, .scale = 0.9, .seed = 3};
        sdpa_result r = {0};
        if (run_case(&c, (qkv_kernels)kern, 0, &r)) {
            qkv_real *v = malloc(sizeof(qkv_real) * 2 * 3 * 3); /* v as run_case drew it */
            tu_fill_uniform(v, 18, -1, 1, c.seed + 2);
            bool same = true;
            for (int64_t bh = 0; bh < 6; bh++)
                for (int64_t i = 0; i < 70; i++)
                    for (int64_t d = 0; d < 3; d++)
                        same = same && r.o[(bh * 70 + i) * 3 + d] == v[bh * 3 + d];
            CHECK_MSG(same, "S = 1 (%s kernels): o != v_0", kern ? "ref" : "fast");
            /* the weight is constant 1: no gradient reaches q or k */
            bool zero = true;
            for (int64_t x = 0; x < r.nq; x++)
                zero = zero && r.dq[x] == 0;
            for (int64_t x = 0; x < r.nk; x++)
                zero = zero && r.dk[x] == 0;
            CHECK(zero);
            free(v);
        }
        result_free(&r);
        /* causal: row 0 sees only key 0 */
        qkv_mask m = mask_all();
        m.causal = true;
        c = (sdpa_case){
            .B = 1, .H = 2, .T = 67, .S = 80, .D = 4, .Dv = 6, .scale = 0.5, .mask = &m, .seed = 8};
        if (run_case(&c, (qkv_kernels)kern, 0, &r)) {
            qkv_real *v = malloc(sizeof(qkv_real) * 2 * 80 * 6);
            tu_fill_uniform(v, 2 * 80 * 6, -1, 1, c.seed + 2);
            for (int64_t h = 0; h < 2; h++)
                for (int64_t d = 0; d < 6; d++)
                    CHECK(r.o[(h * 67) * 6 + d] == v[h * 80 * 6 + d]);
            free(v);
        }
        result_free(&r);
    }
}

/* ---- fast vs reference ---------------------------------------------------------------------- */

enum { N_MASKS = 10 };

/* Mask kind `kind` for geometry (B, T, S); tensors it needs are written to pad / allowed. */
static const char *make_mask(int kind, int64_t B, int64_t T, int64_t S, qkv_mask *m,
                             qkv_tensor **pad, qkv_tensor **allowed) {
    *m = mask_all();
    *pad = *allowed = NULL;
    switch (kind) {
    case 0:
        return "none";
    case 1:
        m->causal = true;
        return "causal";
    case 2:
        m->window_left = 5;
        return "window left 5";
    case 3: /* the band's edges fall on tile edges: row 64 still sees key 63, row 63 key 64 */
        m->window_left = 1, m->window_right = 1;
        return "window 1/1";
    case 4: /* row 128 still sees key 63 */
        m->window_left = 65, m->window_right = 0;
        return "window 65/0";
    case 5:
        m->window_right = 3;
        return "window right 3";
    case 6: /* key padding: batch 0 pads a few keys, batch 1 (if any) pads every key */
        *pad = tu_tensor(QKV_I32, 2, (int64_t[]){B, S});
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < S; j++)
                ((int32_t *)(*pad)->data)[b * S + j] = b == 1 || j % 5 == 2;
        m->key_padding = *pad;
        return "key padding";
    case 7: /* a (T, S) graph with one empty row */
        *allowed = tu_ids(2, (int64_t[]){T, S}, 0, 2, 77);
        for (int64_t j = 0; j < S; j++)
            ((int32_t *)(*allowed)->data)[(T / 2) * S + j] = 0;
        m->allowed = *allowed;
        return "allowed (T, S)";
    case 8: /* a (B, T, S) graph, sparse */
        *allowed = tu_ids(3, (int64_t[]){B, T, S}, -2, 2, 78);
        for (int64_t x = 0; x < B * T * S; x++)
            ((int32_t *)(*allowed)->data)[x] = ((int32_t *)(*allowed)->data)[x] > 0;
        m->allowed = *allowed;
        return "allowed (B, T, S)";
    default: /* everything at once */
        m->causal = true;
        m->window_left = 40;
        *pad = tu_tensor(QKV_I32, 2, (int64_t[]){B, S});
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < S; j++)
                ((int32_t *)(*pad)->data)[b * S + j] = j % 9 == 4;
        m->key_padding = *pad;
        *allowed = tu_ids(2, (int64_t[]){T, S}, 0, 5, 79); /* 80 % allowed */
        m->allowed = *allowed;
        return "causal + window + padding + allowed";
    }
}

static const int64_t shapes[][6] = {
    /* B, H, T, S, D, Dv */
    {1, 1, 1, 1, 1, 1},     {1, 2, 1, 7, 3, 3},     {2, 1, 5, 1, 4, 2},       {2, 2, 70, 70, 3, 5},
    {2, 2, 65, 130, 16, 8}, {1, 1, 130, 67, 1, 17}, {1, 3, 129, 200, 20, 16},
};

/* Case c on the fast kernels at 1 and 2 threads against the reference: o, dq, dk, dv finite,
 * within tol of the reference, and bit-identical across thread counts. label names the case in
 * messages; the 1-thread result is left in *fast (freed by the caller) when fast is not NULL. */
static void check_fast_vs_ref(const sdpa_case *c, double tol, const char *label,
                              sdpa_result *fast) {
    sdpa_result ref = {0}, f1 = {0}, f2 = {0};
    if (run_case(c, QKV_KERNELS_REF, 1, &ref) && run_case(c, QKV_KERNELS_FAST, 1, &f1) &&
        run_case(c, QKV_KERNELS_FAST, 2, &f2)) {
        const qkv_real *fa[4] = {f1.o, f1.dq, f1.dk, f1.dv}, *fb[4] = {f2.o, f2.dq, f2.dk, f2.dv};
        const qkv_real *ra[4] = {ref.o, ref.dq, ref.dk, ref.dv};
        const int64_t n[4] = {ref.no, ref.nq, ref.nk, ref.nv};
        const char *what[4] = {"o", "dq", "dk", "dv"};
        for (int t = 0; t < 4; t++) {
            const double d = tu_max_rel_diff(fa[t], ra[t], n[t]);
            CHECK_MSG(all_finite(fa[t], n[t]) && all_finite(ra[t], n[t]), "%s: %s not finite",
                      label, what[t]);
            CHECK_MSG(d <= tol, "%s: fast %s differs from ref by %g", label, what[t], d);
            CHECK_MSG(memcmp(fa[t], fb[t], sizeof(qkv_real) * (size_t)n[t]) == 0,
                      "%s: %s differs between 1 and 2 threads", label, what[t]);
        }
    }
    result_free(&ref), result_free(&f2);
    if (fast)
        *fast = f1;
    else
        result_free(&f1);
}

TEST(sdpa_fast_matches_reference_and_is_thread_count_independent) {
    const double tol = sizeof(qkv_real) == 4 ? 1e-5 : 1e-12;
    const qkv_real slopes[3] = {(qkv_real)0.25, (qkv_real)0.0625, (qkv_real)1.0};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int kind = 0; kind < N_MASKS; kind++)
            for (int alibi = 0; alibi < 2; alibi++) {
                const int64_t *g = shapes[s];
                qkv_mask m;
                qkv_tensor *pad, *allowed;
                const char *name = make_mask(kind, g[0], g[2], g[3], &m, &pad, &allowed);
                sdpa_case c = {g[0],
                               g[1],
                               g[2],
                               g[3],
                               g[4],
                               g[5],
                               1 / sqrt((double)g[4]),
                               kind ? &m : NULL,
                               alibi ? slopes : NULL,
                               100 + s,
                               0};
                char label[96];
                snprintf(label, sizeof label, "shape %zu, mask %s, alibi %d", s, name, alibi);
                check_fast_vs_ref(&c, tol, label, NULL);
                tu_free(pad), tu_free(allowed);
            }
}

/* Dropout inside the kernel: the tiled kernel against the reference (which draws each decision
 * with the scalar qkv_rng_uniform, as the reference dropout kernel does) forward and backward,
 * bit-identical at 1 and 2 threads, on shapes whose rows start at unaligned Philox words
 * (S odd) and span several tiles; and the dropout does change the output. */
TEST(sdpa_dropout_fast_matches_reference_and_is_thread_count_independent) {
    const double tol = sizeof(qkv_real) == 4 ? 1e-5 / (1 - 0.4) : 1e-12;
    const int masks[] = {0, 1, 4, 7, 9};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (size_t mk = 0; mk < sizeof masks / sizeof *masks; mk++) {
            const int64_t *g = shapes[s];
            const int kind = masks[mk];
            qkv_mask m;
            qkv_tensor *pad, *allowed;
            const char *name = make_mask(kind, g[0], g[2], g[3], &m, &pad, &allowed);
            sdpa_case c = {
                g[0], g[1],    g[2], g[3], g[4], g[5], 1 / sqrt((double)g[4]), kind ? &m : NULL,
                NULL, 200 + s, 0.4};
            char label[96];
            snprintf(label, sizeof label, "dropout, shape %zu, mask %s", s, name);
            sdpa_result f1 = {0}, nodrop = {0};
            check_fast_vs_ref(&c, tol, label, &f1);
            sdpa_case c0 = c;
            c0.dropout = 0;
            if (f1.o && run_case(&c0, QKV_KERNELS_FAST, 1, &nodrop)) {
                /* with 2 or more allowed keys in some row (some output is nonzero; S > 1),
                 * dropping 40 % changes some output */
                bool any = false;
                for (int64_t x = 0; x < nodrop.no; x++)
                    any = any || nodrop.o[x] != 0;
                if (g[3] > 1 && kind != 9 && any)
                    CHECK_MSG(tu_max_rel_diff(f1.o, nodrop.o, f1.no) > 0.01,
                              "%s: output unchanged by dropout", label);
            }
            result_free(&f1), result_free(&nodrop);
            tu_free(pad), tu_free(allowed);
        }
}

/* The tile product of the tiled kernel, in whichever version this CPU selects (the AVX-512
 * 6 x 32 tiles, or the AVX2 or baseline clone of the 2 x 32 ones), gives the bits of the plain
 * triple loop below (compiled for the x86-64 baseline, one multiply and one add per term in x
 * order, as every version does): they cannot disagree with the baseline. Ragged shapes cover the
 * register tiles, their 1-5 row tails and the 4- and 1-column (AVX-512: masked) tails; the
 * leading dimensions exceed the widths. */
TEST(sdpa_tile_product_has_the_bits_of_the_plain_loop) {
    const int64_t ms[] = {1, 2, 3, 6, 7, 64, 65}, ns[] = {1, 3, 4, 31, 32, 33, 64, 70},
                  ks[] = {1, 7, 64};
    const int64_t lda = 71, ldb = 75, ldc = 77;
    qkv_real *a = malloc(sizeof(qkv_real) * 65 * lda), *b = malloc(sizeof(qkv_real) * 64 * ldb);
    qkv_real *c = malloc(sizeof(qkv_real) * 65 * ldc), *want = malloc(sizeof(qkv_real) * 65 * ldc);
    tu_fill_uniform(a, 65 * lda, -1, 1, 41);
    tu_fill_uniform(b, 64 * ldb, -1, 1, 42);
    for (size_t im = 0; im < sizeof ms / sizeof *ms; im++)
        for (size_t in = 0; in < sizeof ns / sizeof *ns; in++)
            for (size_t ik = 0; ik < sizeof ks / sizeof *ks; ik++) {
                const int64_t m = ms[im], n = ns[in], kk = ks[ik];
                tu_fill_uniform(c, 65 * ldc, -1, 1, 43 + (uint64_t)(m * n * kk));
                memcpy(want, c, sizeof(qkv_real) * 65 * ldc);
                for (int64_t r = 0; r < m; r++)
                    for (int64_t j = 0; j < n; j++) {
                        qkv_real t = want[r * ldc + j];
                        for (int64_t x = 0; x < kk; x++) {
                            const qkv_real prod = a[r * lda + x] * b[x * ldb + j];
                            t = t + prod;
                        }
                        want[r * ldc + j] = t;
                    }
                qkv__sdpa_mm_acc(m, n, kk, a, lda, b, ldb, c, ldc);
                CHECK_MSG(memcmp(c, want, sizeof(qkv_real) * 65 * ldc) == 0,
                          "m %lld n %lld k %lld: tile product differs from the plain loop",
                          (long long)m, (long long)n, (long long)kk);
            }
    free(a), free(b), free(c), free(want);
}

/* The backward's two schedules (kernels/sdpa_cpu.c): with 4 heads or more per thread one task per
 * head does everything in one pass; with fewer, two passes. Each head of a 4 x 2 problem on 2
 * threads, run alone (one head: two passes), must give the bits the whole problem gave it (one
 * pass), forward and
 * backward, with no mask, causal + ALiBi, and a window + key padding, on tiles cut off at both
 * ends (T = 70, S = 130). The kernels are called directly; no dropout (its Philox words depend on
 * the head's index). */
TEST(sdpa_one_pass_backward_has_the_bits_of_the_two_pass_one) {
    enum { B = 4, H = 2, T = 70, S = 130, D = 5, Dv = 3, BH = B * H };
    _Static_assert(BH >= 2 * QKV_SDPA_ONE_PASS_HEADS_PER_THREAD,
                   "on 2 threads the whole problem must take the one pass (a single head the two)");
    const int saved_threads = qkv_get_num_threads();
    qkv_set_num_threads(2);
    qkv_ctx *ctx = ctx_with(QKV_KERNELS_FAST);
    const qkv_real slopes[H] = {(qkv_real)0.25, (qkv_real)0.0625};
    int32_t pad[B * S];
    for (int64_t x = 0; x < B * S; x++)
        pad[x] = x % S > S - 1 - 9 * (x / S); /* batch b pads its last 9 b keys */
    const int64_t nq = BH * T * D, nk = BH * S * D, nv = BH * S * Dv, no = BH * T * Dv;
    qkv_real *in = malloc(sizeof(qkv_real) * (size_t)(nq + nk + nv + no));
    qkv_real *all = calloc((size_t)(no + BH * T + nq + nk + nv), sizeof(qkv_real));
    qkv_real *one = calloc((size_t)(no + BH * T + nq + nk + nv), sizeof(qkv_real));
    qkv_real *q = in, *k = q + nq, *v = k + nk, *dy = v + nv;
    tu_fill_uniform(in, nq + nk + nv + no, -2, 2, 77);
    for (int variant = 0; variant < 3; variant++) {
        qkv_sdpa_problem p;
        memset(&p, 0, sizeof p);
        p.B = B, p.H = H, p.T = T, p.S = S, p.D = D, p.Dv = Dv, p.scale = 0.45;
        p.lq = (qkv__mat_layout){D, H * T * D, T * D};
        p.lk = (qkv__mat_layout){D, H * S * D, S * D};
        p.lv = (qkv__mat_layout){Dv, H * S * Dv, S * Dv};
        p.window_left = p.window_right = -1;
        if (variant == 1) p.causal = true, p.alibi = slopes;
        if (variant == 2) p.window_left = 20, p.window_right = 3, p.key_padding = pad;
        memset(all, 0, sizeof(qkv_real) * (size_t)(no + BH * T + nq + nk + nv));
        qkv_real *o = all, *lse = o + no, *dq = lse + BH * T, *dk = dq + nq, *dv = dk + nk;
        CHECK(qkv_sdpa_cpu.fwd(ctx, &p, q, k, v, o, lse));
        CHECK(qkv_sdpa_cpu.bwd(ctx, &p, q, k, v, o, lse, dy, dq, dk, dv));
        for (int64_t bh = 0; bh < BH; bh++) {
            qkv_sdpa_problem p1 = p;
            p1.B = p1.H = 1;
            p1.alibi = p.alibi ? p.alibi + bh % H : NULL;
            p1.key_padding = p.key_padding ? p.key_padding + bh / H * S : NULL;
            memset(one, 0, sizeof(qkv_real) * (size_t)(no + BH * T + nq + nk + nv));
            qkv_real *o1 = one, *lse1 = o1 + T * Dv, *dq1 = lse1 + T, *dk1 = dq1 + T * D;
            qkv_real *dv1 = dk1 + S * D;
            CHECK(qkv_sdpa_cpu.fwd(ctx, &p1, q + bh * T * D, k + bh * S * D, v + bh * S * Dv, o1,
                                   lse1));
            CHECK(qkv_sdpa_cpu.bwd(ctx, &p1, q + bh * T * D, k + bh * S * D, v + bh * S * Dv, o1,
                                   lse1, dy + bh * T * Dv, dq1, dk1, dv1));
            const qkv_real *whole[5] = {o + bh * T * Dv, lse + bh * T, dq + bh * T * D,
                                        dk + bh * S * D, dv + bh * S * Dv};
            const qkv_real *alone[5] = {o1, lse1, dq1, dk1, dv1};
            const int64_t n[5] = {T * Dv, T, T * D, S * D, S * Dv};
            const char *what[5] = {"o", "lse", "dq", "dk", "dv"};
            for (int t = 0; t < 5; t++)
                CHECK_MSG(memcmp(whole[t], alone[t], sizeof(qkv_real) * (size_t)n[t]) == 0,
                          "variant %d, head %lld: %s differs between one pass and two", variant,
                          (long long)bh, what[t]);
        }
    }
    /* the one-pass schedule against the reference and across thread counts, with dropout */
    qkv_mask causal = mask_all();
    causal.causal = true;
    const sdpa_case c = {B, H, T, S, D, Dv, 0.45, &causal, slopes, 300, 0.3};
    check_fast_vs_ref(&c, sizeof(qkv_real) == 4 ? 1e-5 / (1 - 0.3) : 1e-12, "one pass, dropout",
                      NULL);
    free(in), free(all), free(one);
    qkv_ctx_free(ctx);
    qkv_set_num_threads(saved_threads);
}

TEST(sdpa_fully_masked_rows_give_zero_output_and_gradient) {
    /* Batch entry 1 pads every key; row 3 of the (T, S) graph is empty: those rows give o = 0,
     * no gradient to q, and nothing to the keys of batch 1; nothing is NaN. */
    const int64_t B = 2, H = 2, T = 70, S = 75, D = 5, Dv = 4;
    qkv_tensor *pad = tu_tensor(QKV_I32, 2, (int64_t[]){B, S});
    qkv_tensor *allowed = tu_tensor(QKV_I32, 2, (int64_t[]){T, S});
    for (int64_t j = 0; j < S; j++)
        ((int32_t *)pad->data)[S + j] = 1;
    for (int64_t x = 0; x < T * S; x++)
        ((int32_t *)allowed->data)[x] = x / S != 3;
    qkv_mask m = mask_all();
    m.key_padding = pad;
    m.allowed = allowed;
    const qkv_real slopes[2] = {(qkv_real)0.5, (qkv_real)0.25};
    for (int kern = 0; kern < 2; kern++) {
        sdpa_case c = {B, H, T, S, D, Dv, 0.4, &m, slopes, 21, 0};
        sdpa_result r = {0};
        if (run_case(&c, (qkv_kernels)kern, 0, &r)) {
            CHECK(all_finite(r.o, r.no) && all_finite(r.dq, r.nq) && all_finite(r.dk, r.nk) &&
                  all_finite(r.dv, r.nv));
            bool zero = true, nonzero_elsewhere = false;
            for (int64_t b = 0; b < B; b++)
                for (int64_t h = 0; h < H; h++)
                    for (int64_t i = 0; i < T; i++) {
                        const int64_t row = (b * H + h) * T + i;
                        const bool masked = b == 1 || i == 3;
                        for (int64_t d = 0; d < Dv; d++) {
                            if (masked)
                                zero = zero && r.o[row * Dv + d] == 0;
                            else
                                nonzero_elsewhere = nonzero_elsewhere || r.o[row * Dv + d] != 0;
                        }
                        for (int64_t d = 0; d < D && masked; d++)
                            zero = zero && r.dq[row * D + d] == 0;
                    }
            for (int64_t h = 0; h < H; h++) {
                for (int64_t x = 0; x < S * D; x++)
                    zero = zero && r.dk[(1 * H + h) * S * D + x] == 0;
                for (int64_t x = 0; x < S * Dv; x++)
                    zero = zero && r.dv[(1 * H + h) * S * Dv + x] == 0;
            }
            CHECK_MSG(zero, "%s kernels: masked rows are not exactly zero", kern ? "ref" : "fast");
            CHECK(nonzero_elsewhere);
        }
        result_free(&r);
    }
    tu_free(pad), tu_free(allowed);
}

TEST(sdpa_gradient_of_one_input_matches_the_full_backward) {
    /* Only one of q, k, v requiring a gradient skips the other backward pass (or half of it);
     * the gradient that is computed must equal the one from the full backward, bit for bit. */
    const int64_t B = 1, H = 2, T = 70, S = 90, D = 5, Dv = 3;
    const int64_t shp[3][4] = {{B, H, T, D}, {B, H, S, D}, {B, H, S, Dv}};
    qkv_mask m = mask_all();
    m.causal = true;
    for (int kern = 0; kern < 2; kern++) {
        qkv_real *full[3] = {NULL, NULL, NULL};
        for (int only = -1; only < 3; only++) { /* -1: all three */
            qkv_ctx *ctx = ctx_with((qkv_kernels)kern);
            qkv_tensor *in[3];
            for (int x = 0; x < 3; x++) {
                in[x] = qkv_tensor_new(ctx, QKV_REAL, 4, shp[x]);
                tu_fill_uniform(in[x]->data, qkv_tensor_numel(in[x]), -1, 1, 40 + x);
                if (only < 0 || only == x) qkv_tensor_requires_grad(in[x]);
            }
            qkv_tensor *o = qkv_sdpa(ctx, in[0], in[1], in[2], 0.5, &m, NULL);
            qkv_tensor *dy = qkv_tensor_new(ctx, QKV_REAL, 4, (int64_t[]){B, H, T, Dv});
            tu_fill_uniform(dy->data, B * H * T * Dv, -1, 1, 44);
            CHECK_OK(qkv_backward_from(ctx, o, dy));
            for (int x = 0; x < 3 && qkv_ctx_status(ctx) == QKV_OK; x++) {
                const int64_t n = qkv_tensor_numel(in[x]);
                if (only < 0) {
                    full[x] = copy_out(in[x]->grad, n);
                } else if (only == x) {
                    CHECK_MSG(in[x]->grad && full[x] &&
                                  memcmp(in[x]->grad, full[x], sizeof(qkv_real) * (size_t)n) == 0,
                              "%s kernels: gradient of input %d alone differs",
                              kern ? "ref" : "fast", x);
                } else {
                    CHECK(in[x]->grad == NULL);
                }
            }
            qkv_ctx_free(ctx);
        }
        for (int x = 0; x < 3; x++)
            free(full[x]);
    }
}

TEST(sdpa_zero_length_key_sequence_gives_zeros) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *q = qkv_tensor_zeros(ctx, QKV_REAL, 4, (int64_t[]){1, 2, 3, 4});
    qkv_tensor *k = qkv_tensor_zeros(ctx, QKV_REAL, 4, (int64_t[]){1, 2, 0, 4});
    qkv_tensor *v = qkv_tensor_zeros(ctx, QKV_REAL, 4, (int64_t[]){1, 2, 0, 5});
    qkv_tensor *o = qkv_sdpa(ctx, q, k, v, 0.5, NULL, NULL);
    CHECK(o && o->shape[2] == 3 && o->shape[3] == 5);
    bool zero = o != NULL;
    for (int64_t x = 0; o && x < 30; x++)
        zero = zero && ((qkv_real *)o->data)[x] == 0;
    CHECK(zero);
    qkv_ctx_free(ctx);
}

/* q (1, 1, T, D), k and v (1, 1, S, D), uniform in [-1, 1) from seeds seed, seed + 1, seed + 2. */
static void one_head(qkv_ctx *ctx, int64_t T, int64_t S, int64_t D, uint64_t seed, qkv_tensor **q,
                     qkv_tensor **k, qkv_tensor **v) {
    *q = qkv_tensor_new(ctx, QKV_REAL, 4, (int64_t[]){1, 1, T, D});
    *k = qkv_tensor_new(ctx, QKV_REAL, 4, (int64_t[]){1, 1, S, D});
    *v = qkv_tensor_new(ctx, QKV_REAL, 4, (int64_t[]){1, 1, S, D});
    tu_fill_uniform((*q)->data, T * D, -1, 1, seed);
    tu_fill_uniform((*k)->data, S * D, -1, 1, seed + 1);
    tu_fill_uniform((*v)->data, S * D, -1, 1, seed + 2);
}

TEST(sdpa_fast_never_reads_key_blocks_outside_the_band) {
    /* T = 64 < S = 256 with a causal mask: keys 64.. are allowed for no query. Filling them with
     * NaN must leave the fast kernel's output and gradients finite and equal to a clean run:
     * those blocks are skipped, not multiplied by zero weights. */
    const int64_t T = 64, S = 256, D = 8;
    qkv_mask m = mask_all();
    m.causal = true;
    qkv_real *out[2][4] = {{0}};
    for (int dirty = 0; dirty < 2; dirty++) {
        qkv_ctx *ctx = ctx_with(QKV_KERNELS_FAST);
        qkv_tensor *q, *k, *v, *dy;
        one_head(ctx, T, S, D, 1, &q, &k, &v);
        dy = qkv_tensor_new(ctx, QKV_REAL, 4, (int64_t[]){1, 1, T, D});
        tu_fill_uniform(dy->data, T * D, -1, 1, 4);
        for (int64_t x = T * D; dirty && x < S * D; x++)
            ((qkv_real *)k->data)[x] = ((qkv_real *)v->data)[x] = NAN;
        qkv_tensor_requires_grad(q), qkv_tensor_requires_grad(k), qkv_tensor_requires_grad(v);
        qkv_tensor *o = qkv_sdpa(ctx, q, k, v, 0.3, &m, NULL);
        CHECK_OK(qkv_backward_from(ctx, o, dy));
        if (qkv_ctx_status(ctx) == QKV_OK) {
            out[dirty][0] = copy_out(o->data, T * D), out[dirty][1] = copy_out(q->grad, T * D);
            out[dirty][2] = copy_out(k->grad, T * D), out[dirty][3] = copy_out(v->grad, T * D);
        }
        qkv_ctx_free(ctx);
    }
    for (int t = 0; t < 4; t++) {
        if (out[0][t] && out[1][t])
            CHECK(all_finite(out[1][t], T * D) &&
                  memcmp(out[0][t], out[1][t], sizeof(qkv_real) * T * D) == 0);
        free(out[0][t]), free(out[1][t]);
    }
}

TEST(sdpa_nan_in_a_query_makes_that_row_nan_and_leaves_the_others) {
    /* One NaN in query row 5 makes every score of that row NaN, across both key blocks (S = 96:
     * the online softmax's second tile meets a NaN running max): that row's output is NaN, the
     * other rows have the bits of a clean run. Both kernel sets. */
    const int64_t T = 70, S = 96, D = 8, bad = 5;
    for (int kern = 0; kern < 2; kern++) {
        qkv_real *out[2] = {0};
        for (int dirty = 0; dirty < 2; dirty++) {
            qkv_ctx *ctx = ctx_with(kern ? QKV_KERNELS_REF : QKV_KERNELS_FAST);
            qkv_tensor *q, *k, *v;
            one_head(ctx, T, S, D, 5, &q, &k, &v);
            if (dirty) ((qkv_real *)q->data)[bad * D] = NAN;
            qkv_tensor *o = qkv_sdpa(ctx, q, k, v, 0.3, NULL, NULL);
            CHECK(o != NULL);
            if (o) out[dirty] = copy_out(o->data, T * D);
            qkv_ctx_free(ctx);
        }
        if (out[0] && out[1]) {
            bool row_nan = true;
            for (int64_t d = 0; d < D; d++)
                row_nan = row_nan && out[1][bad * D + d] != out[1][bad * D + d];
            CHECK_MSG(row_nan, "kernels %d: the NaN query's output is not NaN", kern);
            for (int64_t d = 0; d < D; d++) /* compare the other rows */
                out[0][bad * D + d] = out[1][bad * D + d] = 0;
            CHECK(all_finite(out[1], T * D) &&
                  memcmp(out[0], out[1], sizeof(qkv_real) * T * D) == 0);
        }
        free(out[0]), free(out[1]);
    }
}
