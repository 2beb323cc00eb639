/*
 * fuzz_task_data.c: libFuzzer target for the data readers of the CLI's tasks, as `qkv train`
 * runs them: task_create from a configuration, then the task's prepare on a fresh run (it reads
 * the training and dev files with the task's own readers, builds and saves the vocabularies and
 * task.conf), the trainer batches of the first batches, and prepare again as `--resume` does it
 * (reading the saved vocabularies and feature vocabularies back).
 *
 *   seq2seq   pairs (tools/seq2seq_task.c; characters or data.src_tokens; targets of tokens or words)
 *   tagging   tagged sentences with a tag column and spelling features (tagging_task.c,
 *             encoder_input.c)
 *   classify  label + tokens lines with features and eval.positive (classify_task.c)
 *   image     label + pixel values of a fixed shape (image_task.c: image_set_load)
 *   lm        text by characters or words, long lines refused, split or skipped (lm_text.c)
 *
 * Input: one byte picking the task (bits 0-2, modulo 5) and its options (bits 3-7: the source
 * unit, tag column, features, image shape, long lines), then the data file, used as both the
 * training and the dev file.
 *
 * Invariants: the configuration is accepted; prepare reads the data or refuses it with a message;
 * after a fresh prepare, the first batches become trainer batches, and a resumed prepare on the
 * files the first one saved succeeds with the same vocabulary sizes.
 */
#include "fuzz_util.h"

#include "task.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    qkv_set_num_threads(1);
    return 0;
}

static void set(config *cfg, const char *fmt, const char *value) {
    char line[1024];
    snprintf(line, sizeof line, fmt, value);
    if (!config_set(cfg, line)) {
        fprintf(stderr, "fuzz_task_data: %s\n", cfg->error);
        abort();
    }
}

/* A small run of the task opts picks, reading `data` and writing into out. */
static void make_config(config *cfg, uint8_t opts, const char *data, const char *out) {
    static const char *const tasks[5] = {"seq2seq", "tagging", "classify", "image", "lm"};
    const int task = (opts & 7) % 5, o = opts >> 3;
    FZ_REQUIRE(config_load(cfg, NULL));
    set(cfg, "task = %s", tasks[task]);
    set(cfg, "data.train = %s", data);
    set(cfg, "data.dev = %s", data);
    set(cfg, "out.dir = %s", out);
    set(cfg, "model.d_model = %s", "8");
    set(cfg, "model.heads = %s", "2");
    if (task != 3) set(cfg, "train.max_tokens = %s", "64"); /* image batches count images */
    switch (task) {
    case 0:
        set(cfg, "data.src_tokens = %s", o & 1 ? "true" : "false");
        set(cfg, "data.tgt_tokenizer = %s", o & 4 ? "words" : "tokens");
        set(cfg, "data.max_src_len = %s", o & 2 ? "6" : "40");
        break;
    case 1:
        set(cfg, "data.tag_column = %s", o & 1 ? "2" : "1");
        set(cfg, "model.features = %s", o & 2 ? "lower suffix3 shape prefix1" : "");
        set(cfg, "data.max_src_len = %s", o & 4 ? "5" : "40");
        break;
    case 2:
        set(cfg, "model.features = %s", o & 2 ? "suffix1 shape" : "");
        if (o & 1) set(cfg, "eval.positive = %s", "spam");
        set(cfg, "data.max_src_len = %s", o & 4 ? "5" : "40");
        break;
    case 3: {
        static const char *const hw[4][3] = {{"2", "2", "1"}, {"8", "8", "1"}, {"1", "3", "1"}, {"2", "1", "2"}};
        set(cfg, "image.height = %s", hw[o & 3][0]);
        set(cfg, "image.width = %s", hw[o & 3][1]);
        set(cfg, "image.channels = %s", hw[o & 3][2]);
        set(cfg, "data.pixel_scale = %s", o & 4 ? "16" : "1");
        set(cfg, "train.batch = %s", "4");
        break;
    }
    default: {
        static const char *const long_lines[4] = {"error", "split", "skip", "split"};
        set(cfg, "data.unit = %s", o & 1 ? "word" : "char");
        set(cfg, "data.long_lines = %s", long_lines[(o >> 1) & 3]);
        set(cfg, "model.max_len = %s", o & 8 ? "5" : "64");
        break;
    }
    }
}

/* prepare; after a fresh one, the first few batches through the task's batch function. Returns
 * the vocabulary sizes of the model (0 after a refusal). */
static int64_t prepare(uint8_t opts, bool resume, const char *data, const char *out) {
    config cfg;
    make_config(&cfg, opts, data, out);
    task *t = NULL;
    if (!task_create(&cfg, &t)) {
        fprintf(stderr, "fuzz_task_data: %s\n", cfg.error);
        abort();
    }
    FZ_REQUIRE(config_check_unused(&cfg));
    int64_t sizes = 0;
    qkv_status st = t->ops->prepare(t, resume);
    FZ_REQUIRE(st == QKV_OK || qkv_last_error()[0] != '\0');
    if (!st) {
        sizes = (int64_t)t->s.model.src_vocab << 32 | t->s.model.tgt_vocab;
        FZ_REQUIRE(t->train != NULL);
        qkv_batcher *b = NULL;
        if (!resume && qkv_dataset_size(t->train) > 0) {
            st = qkv_batcher_new(t->train, &t->batch_opts, &b);
            FZ_REQUIRE(st == QKV_OK || qkv_last_error()[0] != '\0');
        }
        for (int k = 0; b && k < 3; k++) {
            qkv_batch x;
            qkv_train_batch tb;
            FZ_REQUIRE(qkv_batcher_next(b, &x) == QKV_OK);
            st = t->ops->batch(t, &x, &tb);
            FZ_REQUIRE(st == QKV_OK || qkv_last_error()[0] != '\0');
            if (!st) FZ_REQUIRE(tb.batch == x.rows);
        }
        qkv_batcher_free(b);
    }
    task_free(t);
    config_free(&cfg);
    return sizes;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_reader r = {data, size};
    const uint8_t opts = fz_byte(&r);
    const char *path = fz_path("data.txt"), *out = fz_path("run");
    fz_write_file(path, r.p, r.n);
    mkdir(out, 0777);
    const int64_t fresh = prepare(opts, false, path, out);
    if (fresh) FZ_REQUIRE(prepare(opts, true, path, out) == fresh);
    fz_rmtree(out);
    remove(path);
    return 0;
}
