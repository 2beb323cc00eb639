/*
 * test_cli_lm.c: `qkv train / eval / decode / attn` for the language-model task (task = lm) as a
 * user runs them (the built binary, QKV_CLI_PATH), on synthetic text in a temporary directory:
 *   - a small character model trains; `qkv eval` prints the cross-entropy that qkv_model_lm and
 *     qkv_cross_entropy give line by line on the same model, bits per character = that / ln 2,
 *     and below the uniform distribution's ln V;
 *   - `qkv decode --greedy` prints exactly what qkv_generate's greedy search gives for each
 *     prompt (an empty prompt included); sampling with a seed repeats; beam search gives n-best;
 *   - `qkv attn` writes the causal maps;
 *   - --resume with dropout ends bit-identical to an uninterrupted run;
 *   - long lines (error, split, skip) and the word unit count what lm_text.h says;
 *   - bad input: malformed text, over-long lines and prompts, unknown keys and values, options
 *     of other tasks: a message naming the file and line (or the key, the option), exit 1 or 2.
 */
#include "cli_util.h"
#include "testutil.h"
#include "qkv/qkv_data.h"
#include "qkv/qkv_decode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* n lines "the cat sees a dog." ... from a linear congruential generator. */
static void write_text(const char *path, int n, unsigned seed) {
    static const char *det[] = {"the", "a"}, *noun[] = {"cat", "dog", "bird", "fox"},
                      *verb[] = {"sees", "eats", "likes"};
    FILE *f = fopen(path, "w");
    unsigned x = seed;
#define PICK(k) (x = x * 1103515245u + 12345u, (int)((x >> 16) % (k)))
    for (int i = 0; i < n; i++) {
        const int d1 = PICK(2), n1 = PICK(4), v = PICK(3), d2 = PICK(2), n2 = PICK(4);
        fprintf(f, "%s %s %s %s %s.\n", det[d1], noun[n1], verb[v], det[d2], noun[n2]);
    }
#undef PICK
    fclose(f);
}

static bool setup(cli_run *r, const char *keys) {
    if (!cli_run_new(r)) return false;
    snprintf(r->train, sizeof r->train, "%s/train.txt", r->dir);
    snprintf(r->dev, sizeof r->dev, "%s/dev.txt", r->dir);
    write_text(r->train, 300, 1);
    write_text(r->dev, 30, 2);
    char text[2048];
    snprintf(text, sizeof text,
             "task = lm\ndata.train = %s\ndata.dev = %s\nout.dir = %s\nmodel.d_model = "
             "32\nmodel.heads = 2\n"
             "model.layers = 1\nmodel.ff = 64\nmodel.max_len = 40\nmodel.norm_first = true\n"
             "train.lr = 3e-3\ntrain.warmup = 10\ntrain.max_tokens = 640\ntrain.threads = 1\n%s",
             r->train, r->dev, r->run_dir, keys);
    cli_write_file(r->conf, text);
    return true;
}

/* The ids of a line of characters under v after <bos>; *n of them. */
static void encode(const qkv_vocab *v, const char *line, int32_t *ids, int32_t *n) {
    ids[0] = QKV_VOCAB_BOS;
    *n = 1;
    for (const char *p = line; *p; p++) {
        const int32_t id = qkv_vocab_find(v, p, 1);
        ids[(*n)++] = id >= 0 ? id : QKV_VOCAB_UNK;
    }
}

/* The best model of a run and its vocabulary. */
static bool load_run(const char *run_dir, qkv_model **m, qkv_vocab **v) {
    char p[256];
    snprintf(p, sizeof p, "%s/model.safetensors", run_dir);
    CHECK_OK(qkv_model_load(p, m));
    snprintf(p, sizeof p, "%s/tgt.vocab", run_dir);
    CHECK_OK(qkv_vocab_load(p, v));
    if (*m && *v) return true;
    qkv_model_free(*m);
    qkv_vocab_free(*v);
    return false;
}

/* Cross-entropy per token of a text file under the run's model: every line scored alone with
 * qkv_model_lm and qkv_cross_entropy (mean over its tokens, times their number). */
static double direct_cross_entropy(const char *run_dir, const char *path, int64_t *events) {
    char line[256];
    qkv_model *m = NULL;
    qkv_vocab *v = NULL;
    if (!load_run(run_dir, &m, &v)) return NAN;
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_ctx_set_training(ctx, false);
    FILE *f = fopen(path, "r");
    double nats = 0;
    *events = 0;
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        int32_t in[64], n = 0;
        encode(v, line, in, &n);
        int32_t out[64];
        memcpy(out, in + 1, sizeof *out * (size_t)(n - 1));
        out[n - 1] = QKV_VOCAB_EOS;
        qkv_ctx_reset(ctx);
        qkv_tensor *x = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){1, n}, in);
        qkv_tensor *logits = qkv_model_lm(ctx, m, x, NULL);
        const int64_t V = m->cfg.tgt_vocab;
        qkv_tensor *ce = qkv_cross_entropy(ctx, qkv_reshape(ctx, logits, 2, (int64_t[]){n, V}),
                                           qkv_tensor_from(ctx, QKV_I32, 1, (int64_t[]){n}, out),
                                           QKV_VOCAB_PAD, 0);
        CHECK_OK(qkv_ctx_status(ctx));
        if (!ce) break;
        nats += (double)((const qkv_real *)ce->data)[0] * n;
        *events += n;
    }
    if (f) fclose(f);
    qkv_ctx_free(ctx);
    qkv_vocab_free(v);
    qkv_model_free(m);
    return nats / (double)*events;
}

/* What qkv_generate's greedy search continues a prompt with (at most max_len tokens). */
static void direct_greedy(const char *run_dir, const char *prompt, int32_t max_len, char *out,
                          size_t size) {
    qkv_model *m = NULL;
    qkv_vocab *v = NULL;
    out[0] = '\0';
    if (!load_run(run_dir, &m, &v)) return;
    int32_t ids[64], n = 0;
    encode(v, prompt, ids, &n);
    qkv_decode_params dp = qkv_decode_default_params();
    dp.strategy = QKV_DECODE_GREEDY;
    dp.bos_id = QKV_VOCAB_BOS;
    dp.eos_id = QKV_VOCAB_EOS;
    dp.max_len = m->cfg.max_len + 1 - n < max_len ? m->cfg.max_len + 1 - n : max_len;
    qkv_hypotheses h;
    memset(&h, 0, sizeof h);
    CHECK_OK(qkv_generate(m, ids, &n, 1, &dp, &h));
    size_t at = (size_t)snprintf(out, size, "%s\t", prompt);
    for (int32_t t = 0;
         h.count && t < h.hyp[0].length && h.hyp[0].tokens[t] != QKV_VOCAB_EOS && at < size - 8;
         t++)
        at += (size_t)snprintf(out + at, size - at, "%s", qkv_vocab_symbol(v, h.hyp[0].tokens[t]));
    snprintf(out + at, size - at, "\n");
    qkv_hypotheses_free(&h);
    qkv_vocab_free(v);
    qkv_model_free(m);
}

TEST(cli_lm_learns_evaluates_decodes_and_shows_attention) {
    char cmd[4096], out[16384], path[256];
    cli_run r;
    CHECK(setup(&r, "train.steps = 80\ntrain.eval_every = 40\n"));
    snprintf(cmd, sizeof cmd, "%s train %s", QKV_CLI_PATH, r.conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "train: %s", out);
    CHECK_MSG(strstr(out, "| lm | 300 lines") && strstr(out, "30 lines dev") &&
                  strstr(out, "eval step 80: dev cross-entropy") && strstr(out, "bits/char") &&
                  strstr(out, "best dev cross-entropy"),
              "train output: %s", out);
    const char *files[] = {"task.conf", "tgt.vocab",  "model.safetensors", "checkpoint.safetensors",
                           "log.jsonl", "report.html"};
    for (int i = 0; i < 6; i++) {
        snprintf(path, sizeof path, "%s/%s", r.run_dir, files[i]);
        CHECK_MSG(access(path, F_OK) == 0, "missing %s", path);
    }
    snprintf(cmd, sizeof cmd, "grep -c '\"dev_loss\":.*\"dev_ppl\":.*\"dev_bpc\"' %s/log.jsonl",
             r.run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && atoi(out) == 2, "log.jsonl: %s", out);
    snprintf(cmd, sizeof cmd,
             "grep -c '^data.unit = char$\\|^data.long_lines = error$' %s/task.conf", r.run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && atoi(out) == 2, "task.conf: %s", out);
    /* eval: the cross-entropy of a direct computation; bits per char = it / ln 2 */
    snprintf(cmd, sizeof cmd, "%s eval %s %s", QKV_CLI_PATH, r.run_dir, r.dev);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "eval: %s", out);
    int64_t events = 0;
    const double direct = direct_cross_entropy(r.run_dir, r.dev, &events);
    const double ce = cli_number_after(out, "cross-entropy "),
                 bpc = cli_number_after(out, "bits/char "),
                 ppl = cli_number_after(out, "perplexity ");
    char want[64];
    snprintf(want, sizeof want, "30 lines, %lld characters + 30 line ends",
             (long long)(events - 30));
    CHECK_MSG(strstr(out, want), "eval: %s (expected '%s')", out, want);
    CHECK_MSG(fabs(ce - direct) < 1.5e-4 && fabs(bpc - direct / log(2)) < 1.5e-4 &&
                  fabs(ppl - exp(direct)) < 1e-3,
              "eval: %s; direct cross-entropy %.6f", out, direct);
    CHECK_MSG(direct < 0.5 * log(19.0), "cross-entropy %.4f: the model learned little", direct);
    /* decode --greedy: qkv_generate's greedy continuation of each prompt, the empty one too */
    snprintf(path, sizeof path, "%s/prompts.txt", r.dir);
    cli_write_file(path, "the c\n\na fox eats\n");
    snprintf(cmd, sizeof cmd, "%s decode %s %s --greedy --max-len 30", QKV_CLI_PATH, r.run_dir,
             path);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "decode: %s", out);
    char expect[1024] = "", line[256];
    const char *prompts[] = {"the c", "", "a fox eats"};
    for (int i = 0; i < 3; i++) {
        direct_greedy(r.run_dir, prompts[i], 30, line, sizeof line);
        strcat(expect, line);
    }
    CHECK_MSG(!strcmp(out, expect), "decode --greedy:\n%s\nqkv_generate:\n%s", out, expect);
    CHECK_MSG(strstr(out, "a fox eats\t "), "decode: %s", out); /* it learned the next space */
    /* the default strategy of an lm run is greedy */
    snprintf(cmd, sizeof cmd, "%s decode %s %s --max-len 30", QKV_CLI_PATH, r.run_dir, path);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && !strcmp(out, expect), "decode: %s", out);
    /* sampling repeats with its seed; beam search lists n-best with scores */
    char first[4096];
    snprintf(cmd, sizeof cmd, "%s decode %s %s --sample --temperature 0.8 --top-p 0.9 --seed 5",
             QKV_CLI_PATH, r.run_dir, path);
    CHECK_MSG(cli_exec(cmd, first, sizeof first) == 0, "decode --sample: %s", first);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && !strcmp(out, first), "--sample twice: %s / %s",
              first, out);
    snprintf(cmd, sizeof cmd, "echo 'the dog' | %s decode %s --beam 3 --nbest 2", QKV_CLI_PATH,
             r.run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && !strncmp(out, "the dog\t", 8) &&
                  strchr(out, '\n') && !strncmp(strchr(out, '\n') + 1, "the dog\t", 8) &&
                  strstr(out, "\t-"),
              "decode --beam: %s", out);
    /* --nbest alone is beam search (K = 4, the default beam) */
    snprintf(cmd, sizeof cmd, "echo 'the dog' | %s decode %s --beam 4 --nbest 2", QKV_CLI_PATH,
             r.run_dir);
    CHECK_MSG(cli_exec(cmd, first, sizeof first) == 0, "decode --beam 4: %s", first);
    snprintf(cmd, sizeof cmd, "echo 'the dog' | %s decode %s --nbest 2", QKV_CLI_PATH, r.run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && !strcmp(out, first), "--nbest 2: %s / %s", out,
              first);
    /* attention maps */
    snprintf(cmd, sizeof cmd, "%s attn %s 'the cat' --terminal --out %s/maps", QKV_CLI_PATH,
             r.run_dir, r.dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 &&
                  strstr(out, "the cat -> next symbol predicted") &&
                  strstr(out, "2 attention maps (1 decoder layers x 2 heads)") &&
                  strstr(out, "decoder layer 0, head 1 (masked self)"),
              "attn: %s", out);
    snprintf(path, sizeof path, "%s/maps/index.html", r.dir);
    CHECK(access(path, F_OK) == 0);
    cli_run_remove(&r);
}

/* 8 steps, a checkpoint, 8 more after --resume (into the second epoch) == 16 steps at once, bit for
 * bit (with dropout). */
TEST(cli_lm_resume_is_bit_identical) {
    char out[16384], straight[128];
    cli_run r;
    CHECK(setup(&r, "model.dropout = 0.2\ntrain.steps = 16\ntrain.eval_every = 8\n"));
    CHECK_MSG(cli_train_straight_and_resumed(&r, 8, out, sizeof out) &&
                  strstr(out, "at step 8 (epoch 0") && strstr(out, "epoch 1"),
              "resume: %s", out);
    const char *names[] = {"last.safetensors", "checkpoint.safetensors", "model.safetensors"};
    snprintf(straight, sizeof straight, "%s/straight", r.dir);
    const char *differs = cli_first_different(straight, r.run_dir, names, 3);
    CHECK_MSG(!differs, "%s differs between %s and %s", differs, straight, r.run_dir);
    cli_run_remove(&r);
}

/* Long lines: pieces (only the last one ends the line) or skipped; the word unit. */
TEST(cli_lm_long_lines_and_words) {
    char cmd[4096], out[16384], text[512];
    cli_run r;
    CHECK(setup(&r, "train.steps = 2\ntrain.eval_every = 2\n"));
    /* 84 characters: with max_len 40, pieces of 39 + 39 + 6 */
    snprintf(text, sizeof text, "%s/long.txt", r.dir);
    cli_write_file(
        text,
        "the cat sees a dog.\nthe cat sees a dog. the cat sees a dog. the cat sees a dog. the cat "
        "sees a dog. cat.\n\n");
    snprintf(cmd, sizeof cmd, "%s train %s --set data.dev=%s", QKV_CLI_PATH, r.conf, text);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 &&
                  strstr(out, "long.txt:2: the text has 84 characters, more than "
                              "the maximum 39"),
              "long line: %s", out);
    snprintf(cmd, sizeof cmd, "%s train %s --set data.dev=%s --set data.long_lines=split",
             QKV_CLI_PATH, r.conf, text);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && strstr(out, "3 lines (5 pieces) dev"),
              "split: %s", out);
    snprintf(cmd, sizeof cmd, "%s eval %s %s", QKV_CLI_PATH, r.run_dir, text);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 &&
                  strstr(out, "3 lines, 103 characters + 3 line ends"),
              "eval split: %s", out);
    snprintf(cmd, sizeof cmd, "%s train %s --set data.dev=%s --set data.long_lines=skip",
             QKV_CLI_PATH, r.conf, text);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 &&
                  strstr(out, "2 lines (1 too long, skipped) dev"),
              "skip: %s", out);
    snprintf(cmd, sizeof cmd, "%s eval %s %s", QKV_CLI_PATH, r.run_dir, text);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 &&
                  strstr(out, "2 lines, 19 characters + 2 line ends") &&
                  strstr(out, "1 lines longer than 39 skipped"),
              "eval skip: %s", out);
    /* words: "the", "a" and the nouns and verbs, min_count keeps all; decode joins words by spaces
     */
    snprintf(cmd, sizeof cmd,
             "%s train %s --set data.unit=word --set data.min_count=2 --set train.steps=40",
             QKV_CLI_PATH, r.conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 &&
                  strstr(out, "300 lines, 1500 words for training") && strstr(out, "bits/word"),
              "word unit: %s", out);
    snprintf(cmd, sizeof cmd, "echo 'the  cat' | %s decode %s --max-len 3", QKV_CLI_PATH,
             r.run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && !strncmp(out, "the  cat\t", 9) &&
                  strchr(out + 9, ' '),
              "decode words: '%s'", out);
    cli_run_remove(&r);
}

TEST(cli_lm_rejects_bad_input) {
    char cmd[4096], out[8192], path[128];
    cli_run r;
    CHECK(setup(&r, "train.steps = 2\ntrain.eval_every = 2\n"));
    const struct {
        const char *set, *expect;
    } cases[] = {
        {"data.unit=byte", "data.unit = 'byte' is not one of: char, word"},
        {"data.long_lines=wrap", "data.long_lines = 'wrap' is not one of: error, split, skip"},
        {"model.encoder_layers=2", "--set: unknown key 'model.encoder_layers'"},
        {"model.max_len=1", "model.max_len = 1 is outside [2,"},
        {"model.max_len=20", "characters, more than the maximum 19 (model.max_len - 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(cmd, sizeof cmd, "%s train %s --set %s", QKV_CLI_PATH, r.conf, cases[i].set);
        CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, cases[i].expect),
                  "--set %s: %s", cases[i].set, out);
    }
    cli_write_file(r.dev, "the cat.\na dog.\nbad \xff byte\n");
    snprintf(cmd, sizeof cmd, "%s train %s", QKV_CLI_PATH, r.conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 &&
                  strstr(out, "dev.txt:3: invalid UTF-8 at column 5"),
              "malformed text: %s", out);
    write_text(r.dev, 5, 3);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "train: %s", out);
    /* options of other tasks; over-long prompts; a missing file */
    const char *opts[] = {"--mask-predict 2", "--tokens", "--length-beam 2"};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "echo the | %s decode %s %s", QKV_CLI_PATH, r.run_dir, opts[i]);
        CHECK_MSG(cli_exec(cmd, out, sizeof out) == 2 && strstr(out, "applies to seq2seq runs") &&
                      strstr(out, "is a lm run"),
                  "%s: %s", opts[i], out);
    }
    snprintf(path, sizeof path, "%s/prompts.txt", r.dir);
    cli_write_file(path, "the cat\nthe cat sees a dog. the cat sees a dog. the end\n");
    snprintf(cmd, sizeof cmd, "%s decode %s %s", QKV_CLI_PATH, r.run_dir, path);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 &&
                  strstr(out, "prompts.txt:2: longer than the model's limit of 39 characters"),
              "long prompt: %s", out);
    cli_write_file(path, "the cat\nbad \xff byte\n"); /* a prompt the tokenizer refuses: its file and line */
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "prompts.txt:2: invalid UTF-8 at byte 5 of the prompt"),
              "malformed prompt: %s", out);
    snprintf(cmd, sizeof cmd, "%s eval %s %s/missing.txt", QKV_CLI_PATH, r.run_dir, r.dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "missing.txt"), "missing file: %s",
              out);
    snprintf(path, sizeof path, "%s/task.conf", r.run_dir);
    cli_write_file(path, "task = lm\ndata.unit = char\ndata.long_line = split\n");
    snprintf(cmd, sizeof cmd, "echo the | %s decode %s", QKV_CLI_PATH, r.run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 &&
                  strstr(out, "task.conf:3: unknown key 'data.long_line'"),
              "task.conf: %s", out);
    cli_run_remove(&r);
}
