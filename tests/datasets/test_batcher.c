/* test_batcher.c: token-budget batching (src/data/batcher.c). Invariants checked on every batch
 * against the dataset itself: every example exactly once per epoch, no batch over max_tokens or
 * max_rows, padding and the decoder arrays (BOS + target, target + EOS) exact, lengths and
 * example indices right; plus determinism for a seed, a different order for another epoch or
 * seed, resuming from a saved position (also across an epoch boundary and through the text
 * form), fingerprint checks, subsets, evaluation order, and argument errors. */
#include "data_testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_EX 300

/* N_EX pairs with source lengths 1..40 and target lengths 1..30, ids 10..99 (never a reserved
 * id), written as text and read back with integer symbols. */
static qkv_dataset *make_dataset(qkv_corpus **corpus, int change_one) {
    char *text = malloc((size_t)N_EX * 300);
    size_t k = 0;
    uint32_t r = 12345;
    for (int i = 0; i < N_EX; i++) {
        r = r * 1103515245u + 12345u;
        int ns = 1 + (int)((r >> 16) % 40);
        r = r * 1103515245u + 12345u;
        int nt = 1 + (int)((r >> 16) % 30);
        for (int j = 0; j < ns; j++)
            k += (size_t)sprintf(text + k, j ? " %d" : "%d", 10 + (i * 7 + j) % 90);
        text[k++] = '\t';
        for (int j = 0; j < nt; j++)
            k += (size_t)sprintf(text + k, j ? " %d" : "%d",
                                 10 + (i * 3 + j * 5 + (change_one && i == 17)) % 90);
        text[k++] = '\n';
    }
    qkv_read_opts o = {.src_tokens = true};
    qkv_corpus *c = NULL;
    qkv_dataset *d = NULL;
    CHECK_OK(qkv_corpus_parse(QKV_CORPUS_PAIRS, text, k, "in.tsv", &o, &c));
    if (c) CHECK_OK(qkv_dataset_encode(c, NULL, NULL, true, &d));
    free(text);
    *corpus = c;
    return d;
}

/* Check one batch against the dataset; append its examples to order[*n]. */
static void check_batch(const qkv_dataset *d, const qkv_batch_opts *o, const qkv_batch *b,
                        int64_t *order, int64_t *n) {
    CHECK(b->rows >= 1);
    CHECK_MSG(b->tokens <= o->max_tokens, "batch of %lld tokens", (long long)b->tokens);
    int64_t cols = b->src_cols > b->tgt_cols ? b->src_cols : b->tgt_cols;
    if (b->dec_cols > cols) cols = b->dec_cols;
    CHECK(b->rows * cols <= o->max_tokens);
    CHECK(b->tokens == b->rows * cols);
    if (o->max_rows) CHECK(b->rows <= o->max_rows);
    CHECK(o->decoder ? (b->dec_in && b->dec_out && b->dec_cols == b->tgt_cols + 1)
                     : (!b->dec_in && !b->dec_out && b->dec_cols == 0));
    int64_t max_s = 0, max_t = 0, bad = 0;
    for (int64_t r = 0; r < b->rows; r++) {
        qkv_example e;
        CHECK_OK(qkv_dataset_get(d, b->example[r], &e));
        order[(*n)++] = b->example[r];
        if (e.src_len > max_s) max_s = e.src_len;
        if (e.tgt_len > max_t) max_t = e.tgt_len;
        bad += b->src_len[r] != e.src_len || b->tgt_len[r] != e.tgt_len;
        const int32_t *s = b->src + r * b->src_cols, *t = b->tgt + r * b->tgt_cols;
        for (int64_t c = 0; c < b->src_cols; c++)
            bad += s[c] != (c < e.src_len ? e.src[c] : o->pad_id);
        for (int64_t c = 0; c < b->tgt_cols; c++)
            bad += t[c] != (c < e.tgt_len ? e.tgt[c] : o->pad_id);
        if (!o->decoder) continue;
        const int32_t *di = b->dec_in + r * b->dec_cols, *dout = b->dec_out + r * b->dec_cols;
        for (int64_t c = 0; c < b->dec_cols; c++) {
            int32_t want_in = c == 0 ? o->bos_id : c <= e.tgt_len ? e.tgt[c - 1] : o->pad_id;
            int32_t want_out = c < e.tgt_len ? e.tgt[c] : c == e.tgt_len ? o->eos_id : o->pad_id;
            bad += di[c] != want_in || dout[c] != want_out;
        }
    }
    CHECK_MSG(bad == 0, "batch %lld: %lld wrong cells", (long long)b->index, (long long)bad);
    CHECK(b->src_cols == max_s && b->tgt_cols == max_t);
}

/* Run one epoch; returns the examples in visiting order (n = all rows) and checks coverage. */
static int64_t *run_epoch(qkv_batcher *bt, const qkv_dataset *d, const qkv_batch_opts *o,
                          uint64_t epoch, int64_t n_expected) {
    int64_t *order = calloc(2 * N_EX + 1, sizeof *order); /* room for one batch too many */
    int64_t n = 0, nb = qkv_batcher_num_batches(bt);
    for (int64_t k = 0; k < nb; k++) {
        qkv_batch b;
        CHECK_OK(qkv_batcher_next(bt, &b));
        CHECK(b.epoch == epoch && b.index == k);
        check_batch(d, o, &b, order, &n);
        if (n > N_EX) break;
    }
    CHECK_MSG(n == n_expected, "epoch %llu: %lld rows", (unsigned long long)epoch, (long long)n);
    int *seen = calloc(N_EX, sizeof *seen);
    for (int64_t k = 0; k < n && k <= N_EX; k++)
        if (order[k] >= 0 && order[k] < N_EX) seen[order[k]]++;
    int twice = 0;
    for (int i = 0; i < N_EX; i++)
        twice += seen[i] > 1;
    CHECK(twice == 0);
    free(seen);
    return order;
}

TEST(data_batcher_invariants) {
    qkv_corpus *c;
    qkv_dataset *d = make_dataset(&c, 0);
    if (!d) return;
    int64_t budgets[] = {41, 97, 256, 1000};
    for (int dec = 0; dec < 2; dec++)
        for (int bi = 0; bi < 4; bi++)
            for (int bw = 1; bw <= 8; bw += 7) {
                qkv_batch_opts o = qkv_batch_default_opts(budgets[bi]);
                o.decoder = dec;
                o.bucket_width = bw;
                o.max_rows = bi == 3 ? 16 : 0;
                o.pad_id = bi == 1 ? 7 : 0; /* any pad id: the arrays use it */
                qkv_batcher *bt;
                CHECK_OK(qkv_batcher_new(d, &o, &bt));
                if (!bt) continue;
                for (uint64_t e = 0; e < 3; e++)
                    free(run_epoch(bt, d, &o, e, N_EX));
                qkv_batcher_free(bt);
            }
    qkv_dataset_free(d);
    qkv_corpus_free(c);
}

TEST(data_batcher_little_padding) {
    /* Sorting by width within buckets of one width keeps the padded tokens close to the real
     * ones: sum of rows * widest over sum of the examples' widths. */
    qkv_corpus *c;
    qkv_dataset *d = make_dataset(&c, 0);
    if (!d) return;
    qkv_batch_opts o = qkv_batch_default_opts(400);
    o.decoder = true;
    qkv_batcher *bt;
    CHECK_OK(qkv_batcher_new(d, &o, &bt));
    int64_t padded = 0, real = 0;
    for (int64_t k = 0; k < qkv_batcher_num_batches(bt); k++) {
        qkv_batch b;
        CHECK_OK(qkv_batcher_next(bt, &b));
        padded += b.tokens;
        for (int64_t r = 0; r < b.rows; r++)
            real += b.src_len[r] > b.tgt_len[r] + 1 ? b.src_len[r] : b.tgt_len[r] + 1;
    }
    CHECK_MSG(padded <= real * 1.1, "padded %lld, real %lld", (long long)padded, (long long)real);
    qkv_batcher_free(bt);
    qkv_dataset_free(d);
    qkv_corpus_free(c);
}

TEST(data_batcher_deterministic_and_epochs_differ) {
    qkv_corpus *c;
    qkv_dataset *d = make_dataset(&c, 0);
    if (!d) return;
    qkv_batch_opts o = qkv_batch_default_opts(300);
    o.decoder = true;
    o.seed = 42;
    qkv_batcher *b1, *b2, *b3;
    CHECK_OK(qkv_batcher_new(d, &o, &b1));
    CHECK_OK(qkv_batcher_new(d, &o, &b2));
    qkv_batch_opts o3 = o;
    o3.seed = 43;
    CHECK_OK(qkv_batcher_new(d, &o3, &b3));
    int64_t *e0 = run_epoch(b1, d, &o, 0, N_EX), *e1 = run_epoch(b1, d, &o, 1, N_EX);
    int64_t *f0 = run_epoch(b2, d, &o, 0, N_EX), *f1 = run_epoch(b2, d, &o, 1, N_EX);
    int64_t *g0 = run_epoch(b3, d, &o3, 0, N_EX);
    CHECK(!memcmp(e0, f0, N_EX * sizeof *e0)); /* same seed: the same batches */
    CHECK(!memcmp(e1, f1, N_EX * sizeof *e1));
    CHECK(memcmp(e0, e1, N_EX * sizeof *e0) != 0); /* another epoch: another order */
    CHECK(memcmp(e0, g0, N_EX * sizeof *e0) != 0); /* another seed: another order */
    free(e0), free(e1), free(f0), free(f1), free(g0);
    qkv_batcher_free(b1);
    qkv_batcher_free(b2);
    qkv_batcher_free(b3);
    qkv_dataset_free(d);
    qkv_corpus_free(c);
}

TEST(data_batcher_eval_order) {
    /* without shuffle: batches in order of width, the same in every epoch */
    qkv_corpus *c;
    qkv_dataset *d = make_dataset(&c, 0);
    if (!d) return;
    qkv_batch_opts o = qkv_batch_default_opts(200);
    o.shuffle = false;
    qkv_batcher *bt;
    CHECK_OK(qkv_batcher_new(d, &o, &bt));
    int64_t *a = run_epoch(bt, d, &o, 0, N_EX), *b = run_epoch(bt, d, &o, 1, N_EX);
    CHECK(!memcmp(a, b, N_EX * sizeof *a));
    int64_t prev_w = 0, prev_i = -1, unsorted = 0;
    for (int k = 0; k < N_EX; k++) {
        qkv_example e;
        qkv_dataset_get(d, a[k], &e);
        int64_t w = e.src_len > e.tgt_len ? e.src_len : e.tgt_len;
        unsorted += w < prev_w || (w == prev_w && a[k] < prev_i);
        prev_w = w;
        prev_i = a[k];
    }
    CHECK(unsorted == 0);
    free(a), free(b);
    qkv_batcher_free(bt);
    qkv_dataset_free(d);
    qkv_corpus_free(c);
}

/* The examples of the next `count` batches. */
static int64_t *take(qkv_batcher *bt, int64_t count, int64_t *n) {
    int64_t *out = malloc(sizeof *out * (size_t)(count * N_EX + 1));
    *n = 0;
    for (int64_t k = 0; k < count; k++) {
        qkv_batch b;
        CHECK_OK(qkv_batcher_next(bt, &b));
        out[(*n)++] = -1 - (int64_t)b.epoch; /* batch separator with its epoch */
        for (int64_t r = 0; r < b.rows; r++)
            out[(*n)++] = b.example[r];
    }
    return out;
}

TEST(data_batcher_resume) {
    qkv_corpus *c;
    qkv_dataset *d = make_dataset(&c, 0);
    if (!d) return;
    qkv_batch_opts o = qkv_batch_default_opts(150);
    o.decoder = true;
    o.seed = 7;
    o.bucket_width = 4;
    qkv_batcher *b1, *b2;
    CHECK_OK(qkv_batcher_new(d, &o, &b1));
    CHECK_OK(qkv_batcher_new(d, &o, &b2));
    int64_t nb = qkv_batcher_num_batches(b1);
    /* stop in the middle of epoch 1 */
    int64_t n;
    free(take(b1, nb + 3, &n));
    qkv_batch_pos pos = qkv_batcher_tell(b1);
    CHECK(pos.epoch == 1 && pos.batch == 3 && pos.fingerprint != 0);
    char text[128];
    qkv_batch_pos_format(pos, text, sizeof text);
    qkv_batch_pos back;
    CHECK_OK(qkv_batch_pos_parse(text, &back));
    CHECK(back.epoch == pos.epoch && back.batch == pos.batch &&
          back.fingerprint == pos.fingerprint);
    CHECK_OK(qkv_batcher_seek(b2, back));
    /* the rest of epoch 1 and all of epoch 2 agree */
    int64_t n1, n2;
    int64_t *r1 = take(b1, 2 * nb, &n1), *r2 = take(b2, 2 * nb, &n2);
    CHECK(n1 == n2 && !memcmp(r1, r2, (size_t)n1 * sizeof *r1));
    free(r1), free(r2);
    /* a position at the end of an epoch continues with the next epoch */
    qkv_batch_pos end = {0, nb, 0};
    CHECK_OK(qkv_batcher_seek(b1, end));
    qkv_batch b;
    CHECK_OK(qkv_batcher_next(b1, &b));
    CHECK(b.epoch == 1 && b.index == 0);
    /* going back to the start replays epoch 0 */
    qkv_batcher *b3;
    CHECK_OK(qkv_batcher_new(d, &o, &b3));
    CHECK_OK(qkv_batcher_seek(b1, (qkv_batch_pos){0, 0, pos.fingerprint}));
    r1 = take(b1, nb, &n1);
    r2 = take(b3, nb, &n2);
    CHECK(n1 == n2 && !memcmp(r1, r2, (size_t)n1 * sizeof *r1));
    free(r1), free(r2);
    /* a batch beyond the epoch: refused, position kept */
    qkv_batch_pos before = qkv_batcher_tell(b1);
    CHECK_ERR(qkv_batcher_seek(b1, (qkv_batch_pos){5, 1000000, 0}), QKV_ERR_INVALID_ARG,
              "batch 1000000 is not in epoch 5");
    qkv_batch_pos after = qkv_batcher_tell(b1);
    CHECK(after.epoch == before.epoch && after.batch == before.batch);
    qkv_batcher_free(b1);
    qkv_batcher_free(b2);
    qkv_batcher_free(b3);
    qkv_dataset_free(d);
    qkv_corpus_free(c);
}

TEST(data_batcher_fingerprint) {
    qkv_corpus *c, *c2;
    qkv_dataset *d = make_dataset(&c, 0), *d2 = make_dataset(&c2, 1);
    if (!d || !d2) return;
    qkv_batch_opts o = qkv_batch_default_opts(150);
    qkv_batcher *b1, *b2, *b3;
    CHECK_OK(qkv_batcher_new(d, &o, &b1));
    CHECK_OK(qkv_batcher_new(d2, &o, &b2)); /* one target id differs */
    qkv_batch_opts o3 = o;
    o3.max_tokens = 151;
    CHECK_OK(qkv_batcher_new(d, &o3, &b3));
    qkv_batch_pos p = qkv_batcher_tell(b1);
    CHECK(qkv_batcher_tell(b2).fingerprint != p.fingerprint);
    CHECK(qkv_batcher_tell(b3).fingerprint != p.fingerprint);
    CHECK_ERR(qkv_batcher_seek(b2, p), QKV_ERR_STATE, "saved for other data or batch options");
    CHECK_ERR(qkv_batcher_seek(b3, p), QKV_ERR_STATE, "fingerprint");
    p.fingerprint = 0; /* unchecked */
    CHECK_OK(qkv_batcher_seek(b3, p));
    qkv_batcher_free(b1);
    qkv_batcher_free(b2);
    qkv_batcher_free(b3);
    qkv_dataset_free(d);
    qkv_dataset_free(d2);
    qkv_corpus_free(c);
    qkv_corpus_free(c2);
}

TEST(data_batcher_subset_and_errors) {
    qkv_corpus *c;
    qkv_dataset *d = make_dataset(&c, 0);
    if (!d) return;
    int64_t subset[50];
    for (int i = 0; i < 50; i++)
        subset[i] = 5 * i + 1;
    qkv_batch_opts o = qkv_batch_default_opts(120);
    o.subset = subset;
    o.n_subset = 50;
    qkv_batcher *bt;
    CHECK_OK(qkv_batcher_new(d, &o, &bt));
    int64_t *order = run_epoch(bt, d, &o, 0, 50);
    int outside = 0;
    for (int k = 0; k < 50; k++)
        outside += order[k] % 5 != 1;
    CHECK(outside == 0);
    free(order);
    qkv_batcher_free(bt);
    subset[7] = subset[3];
    CHECK_ERR(qkv_batcher_new(d, &o, &bt), QKV_ERR_INVALID_ARG, "appears twice");
    subset[7] = N_EX;
    CHECK_ERR(qkv_batcher_new(d, &o, &bt), QKV_ERR_INVALID_ARG,
              "subset[7] = 300 is not an example");
    /* an example wider than the budget, named by file and line */
    o = qkv_batch_default_opts(30);
    CHECK_ERR(qkv_batcher_new(d, &o, &bt), QKV_ERR_INVALID_ARG, "more than max_tokens 30");
    CHECK_ERR(qkv_batcher_new(d, &o, &bt), QKV_ERR_INVALID_ARG, "in.tsv:");
    o = qkv_batch_default_opts(0);
    CHECK_ERR(qkv_batcher_new(d, &o, &bt), QKV_ERR_INVALID_ARG, "max_tokens (0) must be > 0");
    o = qkv_batch_default_opts(100);
    o.n_subset = 0;
    o.subset = subset;
    CHECK_ERR(qkv_batcher_new(d, &o, &bt), QKV_ERR_INVALID_ARG, "no examples");
    qkv_batch_pos p;
    CHECK_ERR(qkv_batch_pos_parse("epoch=1 batch=2", &p), QKV_ERR_FORMAT, "is not 'epoch=E");
    CHECK_ERR(qkv_batch_pos_parse("epoch=1 batch=-2 fingerprint=0000000000000000", &p),
              QKV_ERR_FORMAT, "is not");
    CHECK_ERR(qkv_batch_pos_parse("epoch=1 batch=2 fingerprint=00000000000000001", &p),
              QKV_ERR_FORMAT, "is not");
    CHECK_OK(qkv_batch_pos_parse("epoch=18446744073 batch=0 fingerprint=ffffffffffffffff", &p));
    CHECK(p.epoch == 18446744073ull && p.batch == 0 && p.fingerprint == UINT64_MAX);
    qkv_dataset_free(d);
    qkv_corpus_free(c);
}

TEST(data_batcher_tagging_layout) {
    /* tagging: no decoder arrays, width = sentence length, tgt aligned with src */
    const char *text = "a\tX\nb\tY\n\nc\tX\n\nd\tY\ne\tY\nf\tX\n";
    qkv_corpus *c;
    CHECK_OK(qkv_corpus_parse(QKV_CORPUS_TAGGED, text, strlen(text), "t.tsv", NULL, &c));
    qkv_vocab *vw, *vt;
    CHECK_OK(qkv_vocab_build(c, QKV_FIELD_SRC, 1, true, &vw));
    CHECK_OK(qkv_vocab_build(c, QKV_FIELD_TGT, 1, true, &vt));
    qkv_dataset *d;
    CHECK_OK(qkv_dataset_encode(c, vw, vt, true, &d));
    qkv_batch_opts o = qkv_batch_default_opts(6);
    o.shuffle = false;
    qkv_batcher *bt;
    CHECK_OK(qkv_batcher_new(d, &o, &bt));
    /* widths 1, 2, 3 sorted: {c (1), ab (2)} costs 2 * 2 = 4; adding def: 3 * 3 = 9 > 6 */
    CHECK(qkv_batcher_num_batches(bt) == 2);
    qkv_batch b;
    CHECK_OK(qkv_batcher_next(bt, &b));
    CHECK(b.rows == 2 && b.src_cols == 2 && b.tgt_cols == 2 && b.tokens == 4 && !b.dec_in);
    /* row 0: "c" (id of c = 6 in sorted a b c d e f -> 4..9), padded */
    CHECK(b.example[0] == 1 && b.src[0] == 6 && b.src[1] == QKV_VOCAB_PAD);
    CHECK(b.tgt[0] == 4 && b.tgt[1] == QKV_VOCAB_PAD); /* X = 4, Y = 5 */
    CHECK(b.example[1] == 0 && b.src[2] == 4 && b.src[3] == 5 && b.tgt[2] == 4 && b.tgt[3] == 5);
    CHECK_OK(qkv_batcher_next(bt, &b));
    CHECK(b.rows == 1 && b.src_cols == 3 && b.example[0] == 2 && b.tokens == 3);
    qkv_batcher_free(bt);
    qkv_dataset_free(d);
    qkv_vocab_free(vw);
    qkv_vocab_free(vt);
    qkv_corpus_free(c);
}
