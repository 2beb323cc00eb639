/*
 * test_token_choice.c: greedy search's token choice (src/infer/greedy.c). dec_argmax_logits makes
 * the log-probabilities (double)logits[v] - lse on the fly; it must pick exactly the token, and
 * report exactly the log-probability, that dec_argmax picks from the row dec_log_softmax writes:
 * ties to the lowest id, never the padding id (even when it holds the largest logit), pad_id 0
 * and not 0, a one-token vocabulary, rows with -inf and NaN logits.
 */
#include "infer/infer_internal.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>

static void check_row(const char *what, const qkv_real *logits, int32_t V, int32_t pad_id) {
    dec_job j;
    memset(&j, 0, sizeof j);
    j.V = V;
    j.pad_id = pad_id;
    double *logp = malloc(sizeof(double) * (size_t)V);
    dec_log_softmax(logits, V, pad_id, logp);
    const int32_t want = dec_argmax(&j, logp);
    double got_logp = 0;
    const int32_t got = dec_argmax_logits(&j, logits, &got_logp);
    const bool same_logp = got_logp == logp[want] || (isnan(got_logp) && isnan(logp[want]));
    CHECK_MSG(got == want && same_logp, "%s (V %d, pad %d): token %d (%.17g), dec_argmax %d (%.17g)", what, V, pad_id,
              got, got_logp, want, logp[want]);
    free(logp);
}

TEST(greedy_token_choice_equals_argmax_of_the_log_softmax_row) {
    const qkv_real inf = (qkv_real)INFINITY;
    check_row("distinct", (qkv_real[]){0.5f, 2.0f, -1.0f, 1.5f}, 4, 0);
    check_row("tie: the lowest id", (qkv_real[]){0.5f, 2.0f, 2.0f, 2.0f}, 4, 0);
    check_row("pad 0 holds the maximum", (qkv_real[]){9.0f, 1.0f, 3.0f, 3.0f}, 4, 0);
    check_row("pad 2 holds the maximum", (qkv_real[]){1.0f, 0.0f, 9.0f, 1.0f}, 4, 2);
    check_row("pad 3, tie at 0 and 1", (qkv_real[]){4.0f, 4.0f, 1.0f, 7.0f}, 4, 3);
    check_row("one-token vocabulary, pad 0", (qkv_real[]){1.0f}, 1, 0);
    check_row("one-token vocabulary, no pad in range", (qkv_real[]){1.0f}, 1, 5);
    check_row("-inf logits", (qkv_real[]){-inf, -inf, 0.0f, -inf}, 4, 0);
    check_row("all -inf but pad", (qkv_real[]){3.0f, -inf, -inf}, 3, 0);
    check_row("NaN logit", (qkv_real[]){1.0f, (qkv_real)NAN, 2.0f}, 3, 0);
    check_row("tiny logits, large lse", (qkv_real[]){1e-10f, 1.0000001e-10f, 1e-10f, 0.0f}, 4, 3);
    /* past the first 16 values (compared 16 at a time): ids 20 and 37 tie once lse is
     * subtracted, 37 holding the larger logit; with pad 20 the tie's first id is the padding */
    qkv_real wide[40] = {0};
    wide[20] = 1e-10f;
    wide[37] = 1.0000001e-10f;
    check_row("tie after subtracting lse, past 16", wide, 40, 3);
    check_row("tie after subtracting lse, the first at pad", wide, 40, 20);
    /* a large random row: every id once the maximum */
    enum { V = 5000 };
    qkv_real *row = malloc(sizeof(qkv_real) * V);
    uint32_t x = 12345;
    for (int32_t v = 0; v < V; v++) {
        x = x * 1664525u + 1013904223u;
        row[v] = (qkv_real)((double)(x >> 8) / 16777216.0 * 20.0 - 10.0);
    }
    for (int32_t pad = 0; pad < 3; pad++) check_row("random row", row, V, pad);
    row[1234] = 50;
    check_row("random row, a clear winner", row, V, 0);
    free(row);
}
