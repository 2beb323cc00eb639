/*
 * test_cli_encoder.c: `qkv train / eval / decode / attn` for the encoder-only tasks as a user
 * runs them (the built binary, QKV_CLI_PATH), on synthetic data written into a temporary
 * directory:
 *   - tagging: the tag is a function of the word (Brown-style tags, so eval.universal = brown
 *     applies); a small model with spelling features learns it to >= 97 % dev accuracy in a few
 *     hundred steps; eval prints the accuracies, --show the tagged sentences, decode word/TAG
 *     lines (an empty line stays empty, an unknown word gets a tag), attn the maps;
 *   - classify: the label says whether the text holds a "good" or a "bad" word; accuracy,
 *     precision / recall / F1 of the first label, decode prints the label and its probability;
 *   - --resume of a tagging run with dropout and word dropout ends bit-identical to an
 *     uninterrupted run;
 *   - bad input: unknown task, tag column out of range, malformed lines, unknown features,
 *     seq2seq options on an encoder run, over-long inputs: a message naming the file and line
 *     (or the option) and a non-zero exit.
 */
#include "testutil.h"
#include "cli_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The words of the synthetic tagging task and their (Brown) tags. */
static const char *tag_words[][2] = {
    {"the", "AT"},   {"a", "AT"},      {"cat", "NN"},   {"dog", "NN"},     {"bird", "NN"},
    {"house", "NN"}, {"runs", "VBZ"},  {"sees", "VBZ"}, {"eats", "VBZ"},   {"likes", "VBZ"},
    {"red", "JJ"},   {"big", "JJ"},    {"old", "JJ"},   {"quickly", "RB"}, {"slowly", "RB"},
    {"Paris", "NP"}, {"London", "NP"}, {"1960", "CD"},  {"42", "CD"},      {".", "."}};

/* n sentences "DET (ADJ) NOUN VERB DET NOUN (ADV) ." from a linear congruential generator. */
static void write_tagged(const char *path, int n, unsigned seed) {
    FILE *f = fopen(path, "w");
    unsigned x = seed;
#define PICK(lo, k) (x = x * 1103515245u + 12345u, (lo) + (int)((x >> 16) % (k)))
    for (int i = 0; i < n; i++) {
        int words[12], len = 0;
        words[len++] = PICK(0, 2);
        if (PICK(0, 2)) words[len++] = PICK(10, 3);
        words[len++] = PICK(0, 3) == 0 ? PICK(15, 4) : PICK(2, 4);
        words[len++] = PICK(6, 4);
        words[len++] = PICK(0, 2);
        words[len++] = PICK(2, 4);
        if (PICK(0, 3) == 0) words[len++] = PICK(13, 2);
        words[len++] = 19;
        for (int k = 0; k < len; k++)
            fprintf(f, "%s\t%s\t-\n", tag_words[words[k]][0], tag_words[words[k]][1]);
        fprintf(f, "\n");
    }
#undef PICK
    fclose(f);
}

/* n texts: label "pos" when a "good" word is in it, "neg" for a "bad" word; the first line is pos.
 */
static void write_labeled(const char *path, int n, unsigned seed) {
    static const char *filler[] = {"the",    "movie", "was", "a",    "plot",  "and",
                                   "actors", "film",  "it",  "very", "story", "so"};
    static const char *good[] = {"good", "great", "fine"}, *bad[] = {"bad", "awful", "poor"};
    FILE *f = fopen(path, "w");
    unsigned x = seed;
    for (int i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        const bool pos = i == 0 || (x >> 16) % 2;
        const int len = 3 + (int)((x >> 8) % 6), at = (int)((x >> 4) % (unsigned)len);
        fprintf(f, "%s\t", pos ? "pos" : "neg");
        for (int k = 0; k < len; k++) {
            x = x * 1103515245u + 12345u;
            fprintf(f, "%s%s", k ? " " : "",
                    k == at ? (pos ? good : bad)[(x >> 16) % 3] : filler[(x >> 16) % 12]);
        }
        fprintf(f, "\n");
    }
    fclose(f);
}

/* A temporary tagging (tagged) or classify run with 300 training and 40 / 60 dev examples, a
 * small model and the keys of `keys`. */
static bool setup(cli_run *r, bool tagged, const char *keys) {
    if (!cli_run_new(r)) return false;
    if (tagged) {
        write_tagged(r->train, 300, 1);
        write_tagged(r->dev, 40, 2);
    } else {
        write_labeled(r->train, 300, 1);
        write_labeled(r->dev, 60, 2);
    }
    char text[2048];
    snprintf(text, sizeof text,
             "task = %s\ndata.train = %s\ndata.dev = %s\nout.dir = %s\nmodel.d_model = "
             "32\nmodel.heads = 2\n"
             "model.encoder_layers = 1\nmodel.ff = 64\nmodel.norm_first = true\ntrain.lr = "
             "3e-3\ntrain.warmup = 20\n"
             "train.max_tokens = 256\ntrain.threads = 1\n%s",
             tagged ? "tagging" : "classify", r->train, r->dev, r->run_dir, keys);
    cli_write_file(r->conf, text);
    return true;
}

TEST(cli_tagging_learns_evaluates_decodes_and_shows_attention) {
    char cmd[4096], out[16384], path[256];
    cli_run r;
    CHECK(
        setup(&r, true,
              "eval.universal = brown\nmodel.features = suffix2 shape\ntrain.word_dropout = 0.25\n"
              "train.steps = 150\ntrain.eval_every = 75\n"));
    snprintf(cmd, sizeof cmd, "%s train %s", QKV_CLI_PATH, r.conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "train: %s", out);
    CHECK_MSG(strstr(out, "| tagging | 300 training sentences") &&
                  strstr(out, "eval step 150: dev accuracy") && strstr(out, "universal") &&
                  strstr(out, "OOV"),
              "train output: %s", out);
    const char *files[] = {"task.conf",
                           "src.vocab",
                           "tgt.vocab",
                           "feat.suffix2.vocab",
                           "feat.shape.vocab",
                           "model.safetensors",
                           "checkpoint.safetensors",
                           "log.jsonl",
                           "report.html"};
    for (int i = 0; i < 9; i++) {
        snprintf(path, sizeof path, "%s/%s", r.run_dir, files[i]);
        CHECK_MSG(cli_exists(path), "missing %s", path);
    }
    snprintf(cmd, sizeof cmd,
             "grep -c '\"dev_accuracy\":.*\"dev_universal_accuracy\":.*\"dev_oov_accuracy\"' "
             "%s/log.jsonl",
             r.run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && atoi(out) == 2, "log.jsonl: %s", out);
    /* eval: accuracies of the dev file */
    snprintf(cmd, sizeof cmd, "%s eval %s %s --show 2", QKV_CLI_PATH, r.run_dir, r.dev);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "eval: %s", out);
    const double acc = cli_number_after(out, "tokens: accuracy "),
                 univ = cli_number_after(out, ", universal ");
    CHECK_MSG(acc >= 97 && univ >= acc && strstr(out, "40 sentences") && strstr(out, "OOV tokens"),
              "eval: %s", out);
    CHECK_MSG(strstr(out, "/AT ") && strstr(out, "./.\n"), "--show: %s", out);
    /* decode: word/TAG lines; an empty line stays empty; an unseen capitalised word */
    snprintf(cmd, sizeof cmd,
             "printf 'the cat runs .\\n\\na big dog sees the bird .\\n' | %s decode %s",
             QKV_CLI_PATH, r.run_dir);
    CHECK_MSG(
        cli_exec(cmd, out, sizeof out) == 0 &&
            !strcmp(
                out,
                "the/AT cat/NN runs/VBZ ./.\n\na/AT big/JJ dog/NN sees/VBZ the/AT bird/NN ./.\n"),
        "decode: '%s'", out);
    snprintf(cmd, sizeof cmd, "printf 'the Zzyzx runs .\\n' | %s decode %s --stream", QKV_CLI_PATH,
             r.run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && !strncmp(out, "the/AT Zzyzx/", 13) &&
                  strstr(out, " runs/VBZ ./.\n"),
              "decode of an unknown word: '%s'", out);
    /* attention maps of the encoder */
    snprintf(cmd, sizeof cmd, "%s attn %s 'the cat runs .' --terminal --out %s/maps", QKV_CLI_PATH,
             r.run_dir, r.dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && strstr(out, "the cat runs . -> AT NN VBZ .") &&
                  strstr(out, "2 attention maps (1 encoder layers x 2 heads)") &&
                  strstr(out, "encoder layer 0, head 1 (self)"),
              "attn: %s", out);
    snprintf(path, sizeof path, "%s/maps/index.html", r.dir);
    CHECK(access(path, F_OK) == 0);
    /* a layer or head the model does not have is refused, not an empty terminal view */
    snprintf(cmd, sizeof cmd, "%s attn %s 'the cat' --terminal --layer 1 --out %s/maps", QKV_CLI_PATH, r.run_dir, r.dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 2 &&
                  strstr(out, "--layer 1 is not in the model: its encoder has 1 layer and 2 heads"),
              "attn --layer 1: %s", out);
    snprintf(cmd, sizeof cmd, "%s attn %s 'the cat' --terminal --head 1 --out %s/maps", QKV_CLI_PATH, r.run_dir, r.dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && strstr(out, "encoder layer 0, head 1 (self)") &&
                  !strstr(out, "head 0 (self)"),
              "attn --head 1: %s", out);
    /* seq2seq options, over-long inputs */
    snprintf(cmd, sizeof cmd, "%s eval %s %s --beam 4", QKV_CLI_PATH, r.run_dir, r.dev);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 2 &&
                  strstr(out, "--beam applies to seq2seq runs") && strstr(out, "tagging run"),
              "--beam: %s", out);
    snprintf(cmd, sizeof cmd, "echo the cat | %s decode %s --nbest 2", QKV_CLI_PATH, r.run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 2 && strstr(out, "--nbest applies to seq2seq and lm runs"),
              "--nbest: %s", out);
    snprintf(path, sizeof path, "%s/long.txt", r.dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "the cat\n");
    for (int i = 0; i < 300; i++)
        fprintf(f, "cat ");
    fprintf(f, "\n");
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s decode %s %s", QKV_CLI_PATH, r.run_dir, path);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 &&
                  strstr(out, "long.txt:2: input longer than the model's limit of 256 tokens"),
              "long line: %s", out);
    /* a damaged task.conf */
    snprintf(path, sizeof path, "%s/task.conf", r.run_dir);
    cli_write_file(path, "task = tagging\nmodel.features = suffix2 shape\ndata.tag_colum = 1\n");
    snprintf(cmd, sizeof cmd, "echo the cat | %s decode %s", QKV_CLI_PATH, r.run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 &&
                  strstr(out, "task.conf:3: unknown key 'data.tag_colum'"),
              "task.conf: %s", out);
    cli_write_file(path, "task = ranking\n");
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 &&
                  strstr(out, "task.conf: unknown task 'ranking'"),
              "task.conf: %s", out);
    cli_write_file(path, "task = tagging\nmodel.features = suffix2\n");
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 &&
                  strstr(out, "not the encoder with a token head and 1 feature inputs"),
              "task.conf: %s", out);
    cli_run_remove(&r);
}

TEST(cli_classify_learns_evaluates_and_decodes) {
    char cmd[4096], out[16384];
    cli_run r;
    CHECK(setup(&r, false, "train.steps = 150\ntrain.eval_every = 150\n"));
    snprintf(cmd, sizeof cmd, "%s train %s", QKV_CLI_PATH, r.conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "train: %s", out);
    CHECK_MSG(strstr(out, "| classify | 300 training texts") &&
                  strstr(out, "2 labels (positive: pos)") &&
                  strstr(out, "eval step 150: dev accuracy") && strstr(out, "precision") &&
                  strstr(out, "F1"),
              "train output: %s", out);
    /* one label a text: the rate counts texts, not tokens */
    CHECK_MSG(strstr(out, "step 150/150 epoch") && strstr(out, " texts/s ") && !strstr(out, "tok/s"),
              "train output: %s", out);
    snprintf(cmd, sizeof cmd, "%s eval %s %s --show 1", QKV_CLI_PATH, r.run_dir, r.dev);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "eval: %s", out);
    CHECK_MSG(cli_number_after(out, "texts: accuracy ") >= 95 &&
                  cli_number_after(out, "; pos: precision ") >= 90 &&
                  cli_number_after(out, "recall ") >= 90 && !strncmp(out, "pos\t", 4) &&
                  strstr(out, "(gold pos)"),
              "eval: %s", out);
    snprintf(cmd, sizeof cmd, "printf 'the movie was great\\nit was so awful\\n' | %s decode %s",
             QKV_CLI_PATH, r.run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "decode: %s", out);
    const char *second = strchr(out, '\n');
    CHECK_MSG(!strncmp(out, "pos\t0.", 6) && second && !strncmp(second + 1, "neg\t0.", 6) &&
                  cli_number_after(out, "pos\t") > 0.5,
              "decode: '%s'", out);
    snprintf(cmd, sizeof cmd, "%s attn %s 'a good film' --out %s/maps", QKV_CLI_PATH, r.run_dir,
             r.dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && strstr(out, "a good film -> pos"), "attn: %s",
              out);
    cli_run_remove(&r);
}

/* 6 steps, a checkpoint, 6 more after --resume (into the second epoch) == 12 steps at once, bit for
 * bit. */
TEST(cli_tagging_resume_is_bit_identical) {
    char out[16384], straight[128];
    cli_run r;
    CHECK(setup(&r, true,
                "model.features = suffix1 lower\nmodel.dropout = 0.2\ntrain.word_dropout = 1\n"
                "train.steps = 12\ntrain.eval_every = 6\n"));
    CHECK_MSG(cli_train_straight_and_resumed(&r, 6, out, sizeof out) &&
                  strstr(out, "at step 6 (epoch 0"),
              "resume: %s", out);
    const char *names[] = {"last.safetensors", "checkpoint.safetensors"};
    snprintf(straight, sizeof straight, "%s/straight", r.dir);
    const char *differs = cli_first_different(straight, r.run_dir, names, 2);
    CHECK_MSG(!differs, "%s differs between %s and %s", differs, straight, r.run_dir);
    cli_run_remove(&r);
}

/* eval.positive picks the label of precision / recall / F1 (default: the first label of the
 * training file, "pos" here); the run keeps it for qkv eval; a name that is no label is refused. */
TEST(cli_classify_positive_label_is_configurable) {
    char cmd[4096], out[16384];
    cli_run r;
    CHECK(setup(&r, false, "train.steps = 20\ntrain.eval_every = 20\neval.positive = neg\n"));
    snprintf(cmd, sizeof cmd, "%s train %s", QKV_CLI_PATH, r.conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && strstr(out, "2 labels (positive: neg)"), "train: %s", out);
    snprintf(cmd, sizeof cmd, "%s eval %s %s", QKV_CLI_PATH, r.run_dir, r.dev);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && strstr(out, "; neg: precision "), "eval: %s", out);
    snprintf(cmd, sizeof cmd, "echo a good day | %s decode %s", QKV_CLI_PATH, r.run_dir); /* reads the key too */
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && strchr(out, '\t'), "decode: %s", out);
    snprintf(cmd, sizeof cmd, "%s train %s --set eval.positive=maybe --set out.dir=%s/other", QKV_CLI_PATH, r.conf,
             r.run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 &&
                  strstr(out, "eval.positive = 'maybe' is not a label of the training file"),
              "train: %s", out);
    cli_run_remove(&r);
}

/* model.attention.path reaches the saved model configuration (qkv_mha_config's use_fused and
 * fused_always, serialised in the model file's metadata as escaped JSON). */
TEST(cli_attention_path_key_reaches_the_model) {
    char cmd[4096], out[8192];
    const struct {
        const char *path, *want;
    } cases[] = {{"composed", "use_fused\\\\\":false"}, {"fused", "fused_always\\\\\":true"},
                 {"auto", "use_fused\\\\\":true,\\\\\"fused_always\\\\\":false"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cli_run r;
        CHECK(setup(&r, true, "train.steps = 1\n"));
        snprintf(cmd, sizeof cmd, "%s train %s --set model.attention.path=%s", QKV_CLI_PATH, r.conf, cases[i].path);
        CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "train: %s", out);
        snprintf(cmd, sizeof cmd, "grep -ac '%s' %s/model.safetensors", cases[i].want, r.run_dir);
        CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && atoi(out) == 1, "path %s: %s not in the model file",
                  cases[i].path, cases[i].want);
        cli_run_remove(&r);
    }
}

TEST(cli_encoder_tasks_reject_bad_input) {
    char cmd[4096], out[8192];
    cli_run r;
    CHECK(setup(&r, true, "train.steps = 1\n"));
    const struct {
        const char *set, *expect;
    } cases[] = {
        {"task=ranking", "task = 'ranking' is not one of: seq2seq, tagging, classify, image"},
        {"data.tag_column=3",
         "train.tsv:1: tag column 3 asked for, but the lines have 2 tag columns"},
        {"data.tag_column=0", "data.tag_column = 0 is outside [1, 64]"},
        {"model.features=suffix9", "model.features: unknown feature 'suffix9'"},
        {"eval.universal=ptb", "eval.universal = 'ptb' is not one of: none, brown"},
        {"model.attention.path=tiled", "model.attention.path = 'tiled' is not one of: auto, fused, composed"},
        {"model.decoder_layers=2", "--set: unknown key 'model.decoder_layers'"},
        {"data.max_src_len=4", "train.tsv:5: the sentence has 5 tokens, more than the maximum 4"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(cmd, sizeof cmd, "%s train %s --set %s", QKV_CLI_PATH, r.conf, cases[i].set);
        CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, cases[i].expect),
                  "--set %s: %s", cases[i].set, out);
    }
    /* malformed lines: tagged (no TAB), labeled (no TAB) */
    cli_write_file(r.dev, "the\tAT\t-\ncat NN -\n");
    snprintf(cmd, sizeof cmd, "%s train %s", QKV_CLI_PATH, r.conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "dev.tsv:2:"),
              "malformed tagged line: %s", out);
    cli_write_file(r.train, "pos\tgood film\nneg bad film\n");
    snprintf(cmd, sizeof cmd, "%s train %s --set task=classify", QKV_CLI_PATH, r.conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "train.tsv:2:"),
              "malformed labeled line: %s", out);
    cli_run_remove(&r);
}

/* A seq2seq run records its tokenizers in task.conf: decode cuts its inputs as training did
 * without --tokens, joins its outputs as the target tokenizer joins them, and refuses an input
 * the tokenizer refuses. A task.conf of the older form (data.src_tokens) still reads. */
TEST(cli_seq2seq_task_conf_carries_src_tokens) {
    char cmd[4096], out[8192], text[1024];
    cli_run r;
    CHECK(cli_run_new(&r));
    const char *dir = r.dir;
    snprintf(text, sizeof text, "%s/pairs.tsv", dir);
    cli_write_file(text, "ab cd\tXY\nef\tZ\n");
    char conf[128];
    snprintf(conf, sizeof conf, "%s/run.conf", dir);
    snprintf(cmd, sizeof cmd,
             "data.train = %s\ndata.dev = %s\ndata.src_tokens = true\ndata.tgt_tokenizer = chars\nout.dir = "
             "%s/run\nmodel.d_model = 8\nmodel.heads = 2\n"
             "model.encoder_layers = 1\nmodel.decoder_layers = 1\nmodel.ff = 8\ntrain.steps = "
             "1\neval.strategy = greedy\n",
             text, text, dir);
    cli_write_file(conf, cmd);
    snprintf(cmd, sizeof cmd, "%s train %s", QKV_CLI_PATH, conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "train: %s", out);
    snprintf(cmd, sizeof cmd, "grep -c 'data.src_tokenizer = tokens\\|data.tgt_tokenizer = chars' %s/run/task.conf", dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && atoi(out) == 2, "task.conf: %s", out);
    snprintf(cmd, sizeof cmd, "grep -c 'X' %s/run/tgt.vocab", dir); /* the targets are characters */
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && atoi(out) == 1, "tgt.vocab: %s", out);
    snprintf(cmd, sizeof cmd, "echo 'ef ab' | %s decode %s/run --greedy --max-len 3", QKV_CLI_PATH, dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && !strncmp(out, "ef ab\t", 6), "decode: %s", out);
    /* the output's symbols are characters, joined with nothing between them */
    const char *hyp = strchr(out, '\t');
    CHECK_MSG(hyp && !strchr(hyp + 1, ' '), "decode joins characters without spaces: %s", out);
    snprintf(cmd, sizeof cmd, "printf 'ef ab\\nef  ab\\n' | %s decode %s/run --greedy", QKV_CLI_PATH, dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "<stdin>:2: empty token in the input"), "decode: %s",
              out);
    /* the older spelling of the source tokenizer */
    snprintf(cmd, sizeof cmd, "printf 'task = seq2seq\\ndata.src_tokens = true\\n' > %s/run/task.conf", dir);
    CHECK(cli_exec(cmd, out, sizeof out) == 0);
    snprintf(cmd, sizeof cmd, "echo 'ef ab' | %s decode %s/run --greedy --max-len 3", QKV_CLI_PATH, dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && !strncmp(out, "ef ab\t", 6), "decode (old task.conf): %s", out);
    cli_run_remove(&r);
}
