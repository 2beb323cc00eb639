/*
 * test_cli_image.c: `qkv train / eval / decode / attn` for task = image as a user runs them (the
 * built binary, QKV_CLI_PATH), on synthetic 4 x 4 images written into a temporary directory:
 * class "h" holds a bright horizontal bar, class "v" a vertical one, at a random place, on a
 * noisy background (values 0 .. 8, data.pixel_scale 8).
 *   - a small ViT (2 x 2 patches, mean pooling, 2-D sin-cos positions) learns it; eval prints the
 *     accuracy and the confusion matrix, and both equal what qkv_model_classify_image, called
 *     here on the saved model and the generated pixels, predicts; decode prints the same classes
 *     and probabilities line by line (an empty line stays empty); attn writes maps whose axes are
 *     the patches r0c0 .. r1c1;
 *   - --resume ends bit-identical to an uninterrupted run, and 2 threads train the same model as 1;
 *   - bad input: wrong number of values, a value that is not an integer, a dev label outside the
 *     training classes, missing or inconsistent image keys, train.max_tokens: a message naming the
 *     file and line (or the key) and exit status 1.
 */
#include "testutil.h"
#include "cli_util.h"

#include "qkv/qkv_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { SIDE = 4, VALUES = SIDE * SIDE };

/* Image i of a set drawn with seed: its class ('h' or 'v') and its 16 values. */
static char make_image(unsigned seed, int i, int32_t *v) {
    unsigned x = seed * 7919u + (unsigned)i * 104729u + 1u;
#define NEXT (x = x * 1103515245u + 12345u, (x >> 16) & 0x7fff)
    const bool h = NEXT % 2;
    const int at = (int)(NEXT % SIDE);
    for (int k = 0; k < VALUES; k++)
        v[k] = (int32_t)(NEXT % 3); /* background noise 0 .. 2 */
    for (int k = 0; k < SIDE; k++)
        v[h ? at * SIDE + k : k * SIDE + at] = 6 + (int32_t)(NEXT % 3); /* the bar: 6 .. 8 */
#undef NEXT
    return h ? 'h' : 'v';
}

static void write_images(const char *path, unsigned seed, int n) {
    FILE *f = fopen(path, "w");
    if (!f) return;
    int32_t v[VALUES];
    for (int i = 0; i < n; i++) {
        fprintf(f, "%c\t", make_image(seed, i, v));
        for (int k = 0; k < VALUES; k++)
            fprintf(f, k ? " %d" : "%d", v[k]);
        fprintf(f, "\n");
    }
    fclose(f);
}

#define N_TRAIN 200
#define N_DEV 40

static bool setup(cli_run *r, const char *keys) {
    if (!cli_run_new(r)) return false;
    write_images(r->train, 1, N_TRAIN);
    write_images(r->dev, 2, N_DEV);
    char text[2048];
    snprintf(text, sizeof text,
             "task = image\ndata.train = %s\ndata.dev = %s\nout.dir = %s\n"
             "image.height = 4\nimage.width = 4\nimage.patch = 2\nimage.pooling = mean\n"
             "data.pixel_scale = 8\nmodel.pos = sincos_2d\nmodel.d_model = 16\nmodel.heads = 2\n"
             "model.encoder_layers = 1\nmodel.ff = 32\nmodel.norm_first = true\n"
             "model.activation = gelu\ntrain.lr = 3e-3\ntrain.warmup = 10\ntrain.batch = 16\n"
             "train.threads = 1\n%s",
             r->train, r->dev, r->run_dir, keys);
    cli_write_file(r->conf, text);
    return true;
}

TEST(cli_image_learns_and_agrees_with_the_library) {
    char cmd[4096], out[16384], path[256];
    cli_run r;
    CHECK(setup(&r, "train.steps = 300\ntrain.eval_every = 150\n"));
    snprintf(cmd, sizeof cmd, "%s train %s", QKV_CLI_PATH, r.conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "train: %s", out);
    CHECK_MSG(strstr(out, "| image | 200 training images (4 x 4 x 1), 40 dev images | 2 classes | "
                          "2 x 2 patches (4 tokens), mean pooling") &&
                  strstr(out, "eval step 300: dev accuracy"),
              "train output: %s", out);
    snprintf(cmd, sizeof cmd, "cat %s/task.conf", r.run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 &&
                  strstr(out, "task = image\ndata.pixel_scale = 8\n"),
              "task.conf: %s", out);

    /* the library on the saved model and the generated pixels: the reference predictions */
    qkv_model *m = NULL;
    qkv_vocab *classes = NULL;
    snprintf(path, sizeof path, "%s/model.safetensors", r.run_dir);
    CHECK(qkv_model_load(path, &m) == QKV_OK);
    snprintf(path, sizeof path, "%s/tgt.vocab", r.run_dir);
    CHECK(qkv_vocab_load(path, &classes) == QKV_OK);
    if (!m || !classes) return;
    CHECK(qkv_vocab_size(classes) == QKV_VOCAB_RESERVED + 2 &&
          !strcmp(qkv_vocab_symbol(classes, 4), "h") && !strcmp(qkv_vocab_symbol(classes, 5), "v"));
    qkv_real pixels[N_DEV * VALUES];
    char gold[N_DEV];
    int32_t v[VALUES];
    for (int i = 0; i < N_DEV; i++) {
        gold[i] = make_image(2, i, v);
        for (int k = 0; k < VALUES; k++)
            pixels[i * VALUES + k] = (qkv_real)v[k] / 8;
    }
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_ctx_set_training(ctx, false);
    qkv_tensor *x = qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){N_DEV, SIDE, SIDE, 1}, pixels);
    qkv_tensor *logits = qkv_model_classify_image(ctx, m, x, NULL); /* (N_DEV, 6) */
    CHECK(logits && logits->shape[1] == 6);
    if (!logits) return;
    char expect[N_DEV];
    double expect_p[N_DEV];
    int correct = 0, conf[2][2] = {{0}};
    for (int i = 0; i < N_DEV; i++) {
        const qkv_real *z = (const qkv_real *)logits->data + i * 6;
        const int best = z[5] > z[4]; /* ties: the first class, as the CLI */
        expect[i] = "hv"[best];
        expect_p[i] = 1 / (1 + exp((double)z[best ? 4 : 5] - (double)z[best ? 5 : 4]));
        correct += expect[i] == gold[i];
        conf[gold[i] == 'v'][best]++;
    }
    CHECK_MSG(correct >= 36, "the model learned too little: %d / %d", correct, N_DEV);

    /* eval: accuracy and confusion matrix */
    snprintf(cmd, sizeof cmd, "%s eval %s %s --show 2", QKV_CLI_PATH, r.run_dir, r.dev);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "eval: %s", out);
    char row[128];
    snprintf(row, sizeof row, "%4s%4d%4d\n%4s%4d%4d\n", "h", conf[0][0], conf[0][1], "v",
             conf[1][0], conf[1][1]);
    CHECK_MSG(
        strstr(out, "confusion matrix (rows: gold class, columns: predicted)\n       h   v\n") &&
            strstr(out, row),
        "eval matrix (want %s): %s", row, out);
    CHECK_NEAR(cli_number_after(out, "40 images: accuracy "), 100.0 * correct / N_DEV, 0.006);
    CHECK_MSG(out[0] == expect[0] &&
                  strstr(out, gold[0] == 'h' ? "(gold h, line 1)" : "(gold v, line 1)"),
              "eval --show: %s", out);

    /* decode: the dev file as it is (labels ignored), with an empty line in the middle */
    snprintf(cmd, sizeof cmd, "(head -n 3 %s; echo; tail -n +4 %s | cut -f 2) | %s decode %s",
             r.dev, r.dev, QKV_CLI_PATH, r.run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "decode: %s", out);
    const char *line = out;
    for (int i = 0; i <= N_DEV && line; i++) {
        const char *nl = strchr(line, '\n');
        if (i == 3) {
            CHECK_MSG(nl == line, "line 4 should be empty: %.20s", line);
        } else {
            const int k = i < 3 ? i : i - 1; /* the float CLI against this build's qkv_real */
            CHECK_MSG(nl && line[0] == expect[k] && line[1] == '\t' &&
                          fabs(strtod(line + 2, NULL) - expect_p[k]) < 1e-4,
                      "decode line %d: '%.20s', library %c %.6f", i + 1, line, expect[k],
                      expect_p[k]);
        }
        line = nl ? nl + 1 : NULL;
    }
    CHECK_MSG(line && !*line, "decode printed more lines: %s", line ? line : "");

    /* attn: one image; the axes are the patches */
    snprintf(cmd, sizeof cmd, "%s attn %s \"$(head -n 1 %s | cut -f 2)\" --out %s/maps --terminal",
             QKV_CLI_PATH, r.run_dir, r.dev, r.dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "attn: %s", out);
    char head[64];
    snprintf(head, sizeof head, "4 x 4 x 1 image -> %c (p = ", expect[0]);
    CHECK_MSG(!strncmp(out, head, strlen(head)) &&
                  strstr(out, "2 attention maps (1 encoder layers x 2 heads)"),
              "attn: %s", out);
    snprintf(cmd, sizeof cmd, "grep -c 'r1c0' %s/maps/index.html", r.dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && atoi(out) >= 1, "index.html lacks r1c0: %s",
              out);
    /* a task.conf that names a task of token models: the run is refused, naming both sides */
    snprintf(cmd, sizeof cmd, "printf 'task = classify\\n' > %s/task.conf && %s eval %s %s", r.run_dir, QKV_CLI_PATH,
             r.run_dir, r.dev);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 &&
                  strstr(out, "an image model, but task.conf says task = classify, whose models read tokens"),
              "image model under task = classify: %s", out);

    qkv_ctx_free(ctx);
    qkv_model_free(m);
    qkv_vocab_free(classes);
    cli_run_remove(&r);
}

/* 10 steps, a checkpoint, 10 more after --resume (into the second epoch of 13 batches) == 20
 * steps at once, bit for bit; and the same with 2 threads. */
TEST(cli_image_resume_and_threads_are_bit_identical) {
    char cmd[4096], out[16384], straight[128], two[128];
    cli_run r;
    CHECK(setup(&r, "model.dropout = 0.2\ntrain.steps = 20\ntrain.eval_every = 10\n"));
    CHECK_MSG(cli_train_straight_and_resumed(&r, 10, out, sizeof out) &&
                  strstr(out, "at step 10 (epoch 0"),
              "resume: %s", out);
    snprintf(cmd, sizeof cmd, "%s train %s --set out.dir=%s/two --set train.threads=2",
             QKV_CLI_PATH, r.conf, r.dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "train: %s", out);
    const char *files[] = {"last.safetensors", "checkpoint.safetensors"};
    snprintf(straight, sizeof straight, "%s/straight", r.dir);
    snprintf(two, sizeof two, "%s/two", r.dir);
    const char *differs = cli_first_different(straight, r.run_dir, files, 2);
    CHECK_MSG(!differs, "%s differs between %s and %s", differs, straight, r.run_dir);
    differs = cli_first_different(straight, two, files, 2);
    CHECK_MSG(!differs, "%s differs between %s and %s", differs, straight, two);
    cli_run_remove(&r);
}

TEST(cli_image_rejects_bad_input) {
    char cmd[4096], out[8192], path[128];
    cli_run r;
    CHECK(setup(&r, "train.steps = 1\n"));
    const struct {
        const char *set, *expect;
    } config_cases[] = {
        {"image.height=0", "task = image needs image.height and image.width"},
        {"image.patch=3", "image 4 x 4 is not divisible into 3 x 3 patches"},
        {"image.window=3", "image window 3 must be at least patch_size 2, exceed it by an even number"},
        {"image.window=-4", "image.window"},
        {"image.pooling=max", "image.pooling = 'max' is not one of: cls, mean"},
        {"train.max_tokens=256",
         "train.max_tokens counts tokens; an image batch is train.batch images"},
        {"data.pixel_scale=0", "data.pixel_scale"},
        {"model.features=shape", "--set: unknown key 'model.features'"},
    };
    for (size_t i = 0; i < sizeof config_cases / sizeof *config_cases; i++) {
        snprintf(cmd, sizeof cmd, "%s train %s --set %s", QKV_CLI_PATH, r.conf,
                 config_cases[i].set);
        CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, config_cases[i].expect),
                  "--set %s: %s", config_cases[i].set, out);
    }
    /* data files: one bad line after a good one */
    const struct {
        const char *line, *expect;
    } data_cases[] = {
        {"h\t1 2 3\n", "dev.tsv:2: 3 pixel values, but an image of 4 x 4 x 1 has 16"},
        {"h\t1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 x1\n",
         "dev.tsv:2: pixel value 16 'x1' is not a decimal integer in [0, 2^31 - 1]"},
        {"h\t1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 -1\n", "dev.tsv:2: pixel value 16 '-1'"},
        {"q\t1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n",
         "dev.tsv:2: label 'q' is not one of the classes of the training data"},
        {"h 1 2\n", "dev.tsv:2:"},
    };
    for (size_t i = 0; i < sizeof data_cases / sizeof *data_cases; i++) {
        snprintf(cmd, sizeof cmd, "head -n 1 %s > %s && printf '%%s' '%s' >> %s && %s train %s",
                 r.train, r.dev, data_cases[i].line, r.dev, QKV_CLI_PATH, r.conf);
        CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, data_cases[i].expect),
                  "%s: %s", data_cases[i].line, out);
    }
    /* a run, then bad inputs to eval, decode and attn */
    write_images(r.dev, 2, N_DEV);
    snprintf(cmd, sizeof cmd, "%s train %s", QKV_CLI_PATH, r.conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "train: %s", out);
    snprintf(path, sizeof path, "%s/test.tsv", r.dir);
    cli_write_file(path,
                   "h\t0 0 0 0 8 8 8 8 0 0 0 0 0 0 0 0\nd\t0 0 0 0 8 8 8 8 0 0 0 0 0 0 0 0\n");
    snprintf(cmd, sizeof cmd, "%s eval %s %s", QKV_CLI_PATH, r.run_dir, path);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 &&
                  strstr(out, "test.tsv:2: label 'd' is not one of the classes"),
              "eval: %s", out);
    snprintf(cmd, sizeof cmd, "printf '0 0 0 0 8 8 8 8 0 0 0 0 0 0 0 0\\n1 2\\n' | %s decode %s",
             QKV_CLI_PATH, r.run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 &&
                  strstr(out, "<stdin>:2: 2 pixel values, but an image of 4 x 4 x 1 has 16"),
              "decode: %s", out);
    snprintf(cmd, sizeof cmd, "%s attn %s '0 0 0 0 8 8 8 8 0 0 0 0 0 0 0 0.5'", QKV_CLI_PATH,
             r.run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 &&
                  strstr(out, "<input>:1: pixel value 16 '0.5' is not a decimal integer"),
              "attn: %s", out);
    cli_run_remove(&r);
}
