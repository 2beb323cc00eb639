/* test_posenc_sinusoidal.c: the fixed sinusoidal table against closed forms; it is a constant. */
#include "posenc_testutil.h"

static const double pe_tol = sizeof(qkv_real) == 4 ? 1e-6 : 1e-14;

TEST(sinusoidal_pe_closed_form_first_rows) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *pe = qkv_sinusoidal_pe(ctx, 2, 4, 0);
    CHECK(pe && pe->ndim == 2 && pe->shape[0] == 2 && pe->shape[1] == 4 && pe->dtype == QKV_REAL);
    const qkv_real *x = pe->data;
    /* position 0: sin 0 = 0, cos 0 = 1 in every pair, exactly */
    CHECK(x[0] == 0 && x[1] == 1 && x[2] == 0 && x[3] == 1);
    /* position 1, C = 4: w_0 = 1, w_1 = 10000^(-2/4) = 0.01 */
    CHECK_NEAR(x[4], sin(1.0), pe_tol);
    CHECK_NEAR(x[5], cos(1.0), pe_tol);
    CHECK_NEAR(x[6], sin(0.01), pe_tol);
    CHECK_NEAR(x[7], cos(0.01), pe_tol);
    qkv_ctx_free(ctx);
}

/* The paper's form p / 10000^(2i/C), independent of the exp(-ln(10000) 2i / C) the op uses. */
TEST(sinusoidal_pe_odd_width_and_offset_match_paper_formula) {
    qkv_ctx *ctx = tu_ctx();
    const int64_t T = 4, C = 5, offset = 7;
    qkv_tensor *pe = qkv_sinusoidal_pe(ctx, T, C, offset);
    CHECK(pe && pe->shape[0] == T && pe->shape[1] == C);
    const qkv_real *x = pe->data;
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < C; c++) {
            const double p = (double)(offset + t),
                         arg = p / pow(10000.0, (double)(c - c % 2) / (double)C);
            /* even columns (including the unpaired last one, c = 4) are sines */
            CHECK_NEAR(x[t * C + c], c % 2 ? cos(arg) : sin(arg), 4 * pe_tol);
        }
    qkv_ctx_free(ctx);
}

TEST(sinusoidal_pe_offset_is_a_row_shift) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *full = qkv_sinusoidal_pe(ctx, 8, 6, 0), *part = qkv_sinusoidal_pe(ctx, 3, 6, 5);
    CHECK(full && part);
    CHECK(memcmp((const qkv_real *)full->data + 5 * 6, part->data, sizeof(qkv_real) * 18) == 0);
    qkv_tensor *empty = qkv_sinusoidal_pe(ctx, 0, 6, 0);
    CHECK(empty && qkv_tensor_numel(empty) == 0);
    qkv_ctx_free(ctx);
}

TEST(sinusoidal_pe_is_a_constant) {
    qkv_ctx *ctx = tu_ctx();
    const int64_t before = qkv_tape_size(ctx);
    qkv_tensor *pe = qkv_sinusoidal_pe(ctx, 3, 4, 0);
    CHECK(pe && !(pe->flags & QKV_REQUIRES_GRAD));
    CHECK(qkv_tape_size(ctx) == before);
    qkv_ctx_free(ctx);
}

TEST(sinusoidal_pe_rejects_bad_sizes) {
    qkv_ctx *ctx = tu_ctx();
    PE_CHECK_FAILS(ctx, qkv_sinusoidal_pe(ctx, -1, 4, 0), QKV_ERR_INVALID_ARG, "sinusoidal_pe",
                   "T = -1");
    PE_CHECK_FAILS(ctx, qkv_sinusoidal_pe(ctx, 2, -4, 0), QKV_ERR_INVALID_ARG, "sinusoidal_pe",
                   "C = -4");
    PE_CHECK_FAILS(ctx, qkv_sinusoidal_pe(ctx, 2, 4, -3), QKV_ERR_INVALID_ARG, "sinusoidal_pe",
                   "offset = -3");
    PE_CHECK_FAILS(ctx, qkv_sinusoidal_pe(ctx, 2, 4, INT64_MAX), QKV_ERR_INVALID_ARG,
                   "sinusoidal_pe", "offset");
    /* the error is sticky: a valid call after it returns NULL too */
    CHECK(qkv_sinusoidal_pe(ctx, 2, 4, 0) == NULL);
    qkv_clear_error();
    CHECK(qkv_sinusoidal_pe(NULL, 2, 4, 0) == NULL && strstr(qkv_last_error(), "sinusoidal_pe"));
    qkv_ctx_free(ctx);
}
