/*
 * copy_task.h: the copy task of the trainer tests: a small encoder-decoder whose target is its
 * source, and batches of rows of different lengths (padding). Ids: 0 pad, 1 bos, 2 eos, 3.. the
 * symbols.
 */
#ifndef QKV_TEST_COPY_TASK_H
#define QKV_TEST_COPY_TASK_H

#include "testutil.h"

enum { COPY_V = 9, COPY_B = 4, COPY_S = 5, COPY_T = 6 }; /* vocabulary, rows, source and target widths */

/* An encoder-decoder of width `width` (2 heads, 1 + 1 layers, feed-forward 2 width) for the copy
 * task; NULL with a failed CHECK. */
qkv_model *copy_model(uint64_t seed, double dropout, int32_t width);

/* A batch of COPY_B rows of 2 .. 5 symbols drawn by Philox from seed; batch points into it. */
typedef struct {
    int32_t src[COPY_B * COPY_S], tgt_in[COPY_B * COPY_T], tgt_out[COPY_B * COPY_T];
    qkv_train_batch batch;
} copy_batch;

void make_copy_batch(copy_batch *cb, uint64_t seed);

#endif
