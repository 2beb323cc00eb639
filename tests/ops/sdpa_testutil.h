/*
 * sdpa_testutil.h: what the fused-attention tests share (test_sdpa.c, test_sdpa_checks.c): the
 * mask that allows everything, a finiteness check, a context on a given kernel set, and whether
 * the build runs under AddressSanitizer (which changes its memory figures).
 */
#ifndef QKV_TEST_SDPA_TESTUTIL_H
#define QKV_TEST_SDPA_TESTUTIL_H

#include "testutil.h"

#include "kernels/sdpa.h"

#include <math.h>

#if defined(__SANITIZE_ADDRESS__)
#define SDPA_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SDPA_SANITIZED 1
#endif
#endif

/* The mask that allows everything (qkv_mask_none() lives with the unfused ops). */
static inline qkv_mask mask_all(void) {
    qkv_mask m;
    memset(&m, 0, sizeof m);
    m.window_left = m.window_right = -1;
    return m;
}

static inline bool all_finite(const qkv_real *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite((double)x[i])) return false;
    return true;
}

static inline qkv_ctx *ctx_with(qkv_kernels kernels) {
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_kernels(ctx, kernels);
    return ctx;
}

#endif
