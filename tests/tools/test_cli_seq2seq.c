/*
 * test_cli_seq2seq.c: `qkv train`, `qkv eval` and `qkv decode` as a user runs them (the built
 * binary, QKV_CLI_PATH), on a tiny synthetic G2P-style data set: a run writes its files, resumes
 * from its checkpoint, evaluates and decodes; bad configurations, malformed data and unknown
 * symbols give a message with the file and line and a non-zero exit.
 */
#include "testutil.h"
#include "cli_util.h"

#include <stdio.h>
#include <unistd.h>

TEST(cli_train_resume_eval_decode) {
    char cmd[4096], out[16384], path[700];
    cli_run r;
    /* the dev set sorted by word, as the split files */
    CHECK(cli_run_seq2seq(&r, "ab\tA B\nbad\tB A D\ncab\tC A B\n", "model.d_model = 16\nmodel.heads = 2\nmodel.encoder_layers = 1\nmodel.decoder_layers = 1\n"
                                 "model.ff = 32\ntrain.steps = 6\ntrain.max_tokens = 64\ntrain.eval_every = 3\ntrain.warmup = 2\n"));
    const char *dir = r.dir, *conf = r.conf, *run_dir = r.run_dir;
    snprintf(cmd, sizeof cmd, "%s train %s --set train.steps=3", QKV_CLI_PATH, conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "train failed: %s", out);
    CHECK(strstr(out, "eval step 3: dev WER"));
    const char *files[] = {"src.vocab", "tgt.vocab", "model.safetensors", "last.safetensors", "checkpoint.safetensors",
                           "log.jsonl", "report.html"};
    for (int i = 0; i < 7; i++) {
        snprintf(path, sizeof path, "%s/%s", run_dir, files[i]);
        CHECK_MSG(cli_exists(path), "missing %s", path);
    }
    snprintf(cmd, sizeof cmd, "%s train %s --resume", QKV_CLI_PATH, conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "resume failed: %s", out);
    CHECK_MSG(strstr(out, "resuming") && strstr(out, "at step 3") && strstr(out, "eval step 6"), "resume output: %s", out);
    snprintf(cmd, sizeof cmd, "%s eval %s %s --greedy --show 2", QKV_CLI_PATH, run_dir, r.dev);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && strstr(out, "3 words, WER") && strstr(out, "ab\t") &&
                  strstr(out, "(reference: A B)"),
              "eval: %s", out);
    snprintf(cmd, sizeof cmd, "printf 'bead\\nface\\n' | %s decode %s --beam 3 --nbest 2", QKV_CLI_PATH, run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "decode: %s", out);
    int lines = 0;
    for (const char *c = out; *c; c++) lines += *c == '\n';
    CHECK_MSG(lines == 4 && strstr(out, "bead\t") && strstr(out, "face\t"), "decode output: %s", out);
    /* --threads: the same hypotheses and scores on 1 and 2 threads */
    char one[1024];
    snprintf(cmd, sizeof cmd, "printf 'bead\\nface\\n' | %s decode %s --beam 3 --nbest 2 --threads 1", QKV_CLI_PATH, run_dir);
    CHECK_MSG(cli_exec(cmd, one, sizeof one) == 0, "decode --threads 1: %s", one);
    snprintf(cmd, sizeof cmd, "printf 'bead\\nface\\n' | %s decode %s --beam 3 --nbest 2 --threads 2", QKV_CLI_PATH, run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && !strcmp(out, one), "decode --threads 2: '%s', 1 thread: '%s'", out, one);
    /* an unknown character: file and line */
    snprintf(path, sizeof path, "%s/words.txt", dir);
    cli_write_file(path, "bad\nb@d\n");
    snprintf(cmd, sizeof cmd, "%s decode %s %s", QKV_CLI_PATH, run_dir, path);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "words.txt:2") && strstr(out, "'@'"), "unknown symbol: %s", out);
    /* an input over the model's limit */
    snprintf(cmd, sizeof cmd, "printf 'abababababababababababababababababababababababababababababababababababab\\n' | %s decode %s",
             QKV_CLI_PATH, run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "<stdin>:1") && strstr(out, "longer"), "too long: %s", out);
    cli_run_remove(&r);
}

TEST(cli_train_rejects_bad_configurations_and_data) {
    cli_run r;
    CHECK(cli_run_new(&r));
    char conf[600], cmd[4096], out[8192], text[2048];
    const char *dir = r.dir, *data = r.train;
    snprintf(conf, sizeof conf, "%s/bad.conf", dir);
    cli_write_file(data, "ab\tA B\nabc A B C\n"); /* line 2 lacks its TAB */
    snprintf(text, sizeof text, "data.train = %s\ndata.dev = %s\nout.dir = %s/run\nmodel.d_modle = 16\n", data, data, dir);
    cli_write_file(conf, text);
    snprintf(cmd, sizeof cmd, "%s train %s", QKV_CLI_PATH, conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "bad.conf:4: unknown key 'model.d_modle'"), "typo: %s", out);
    snprintf(cmd, sizeof cmd, "%s train %s --set model.d_modle.x=1", QKV_CLI_PATH, conf);
    CHECK(cli_exec(cmd, out, sizeof out) == 1);
    snprintf(text, sizeof text, "data.train = %s\ndata.dev = %s\nout.dir = %s/run\nmodel.heads = 0\n", data, data, dir);
    cli_write_file(conf, text);
    snprintf(cmd, sizeof cmd, "%s train %s", QKV_CLI_PATH, conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "bad.conf:4: model.heads = 0 is outside"), "range: %s", out);
    snprintf(text, sizeof text, "data.train = %s\ndata.dev = %s\nout.dir = %s/run\n", data, data, dir);
    cli_write_file(conf, text);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "train.tsv:2"), "malformed data: %s", out);
    snprintf(cmd, sizeof cmd, "%s train", QKV_CLI_PATH);
    CHECK(cli_exec(cmd, out, sizeof out) == 2);
    snprintf(cmd, sizeof cmd, "%s train --help", QKV_CLI_PATH);
    CHECK(cli_exec(cmd, out, sizeof out) == 0 && strstr(out, "example"));
    cli_run_remove(&r);
}

TEST(cli_attn_writes_every_map_and_the_terminal_view) {
    char cmd[4096], out[16384], path[700];
    cli_run r;
    CHECK(cli_run_seq2seq(&r, NULL, "model.d_model = 8\nmodel.heads = 2\nmodel.encoder_layers = 2\nmodel.decoder_layers = 1\n"
                                  "model.ff = 16\ntrain.steps = 2\ntrain.max_tokens = 64\ntrain.eval_every = 2\n"));
    const char *dir = r.dir, *conf = r.conf, *run_dir = r.run_dir;
    snprintf(cmd, sizeof cmd, "%s train %s", QKV_CLI_PATH, conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "train: %s", out);
    snprintf(cmd, sizeof cmd, "%s attn %s bead --terminal --out %s/maps", QKV_CLI_PATH, run_dir, dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "attn: %s", out);
    /* (2 encoder + 2 x 1 decoder layers) x 2 heads = 8 maps */
    CHECK_MSG(strstr(out, "8 attention maps") && strstr(out, "decoder layer 0, head 1 (cross)"), "attn output: %s", out);
    snprintf(path, sizeof path, "%s/maps/index.html", dir);
    CHECK_MSG(cli_exists(path), "missing %s", path);
    snprintf(path, sizeof path, "%s/maps/007-decoder-layer0-head1-cross.png", dir);
    CHECK_MSG(cli_exists(path), "missing %s", path);
    snprintf(cmd, sizeof cmd, "%s attn %s bead --terminal --kind cross --out %s/maps", QKV_CLI_PATH, run_dir, dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && strstr(out, "(cross)") && !strstr(out, "(self)"), "--kind cross: %s", out);
    snprintf(cmd, sizeof cmd, "%s attn %s bead --terminal --layer 1 --head 0 --out %s/maps", QKV_CLI_PATH, run_dir, dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && strstr(out, "encoder layer 1, head 0 (self)") &&
                  !strstr(out, "layer 0,") && !strstr(out, "head 1 ("),
              "--layer 1 --head 0: %s", out);
    snprintf(cmd, sizeof cmd, "%s attn %s bead --head 2", QKV_CLI_PATH, run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 2 &&
                  strstr(out, "--head 2 is not in the model: it has 2 encoder and 1 decoder layers and 2 heads"),
              "--head 2: %s", out);
    snprintf(cmd, sizeof cmd, "%s attn %s bead --terminal --kind cross --layer 1", QKV_CLI_PATH, run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 2 && strstr(out, "--layer 1 is not in the model: its decoder has 1 layer and 2 heads"),
              "--kind cross --layer 1: %s", out);
    snprintf(cmd, sizeof cmd, "%s attn %s bead --terminal --kind self --layer 1 --out %s/maps", QKV_CLI_PATH, run_dir, dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && strstr(out, "encoder layer 1, head 1 (self)"), "--kind self --layer 1: %s", out);
    snprintf(cmd, sizeof cmd, "%s attn %s bead --layer -1", QKV_CLI_PATH, run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 2 && strstr(out, "--layer needs an integer in 0..1000000 (got '-1')"),
              "--layer -1: %s", out);
    snprintf(cmd, sizeof cmd, "%s attn %s bead --kind diagonal", QKV_CLI_PATH, run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 2 && strstr(out, "--kind must be"), "bad --kind: %s", out);
    snprintf(cmd, sizeof cmd, "%s attn %s 'b#d'", QKV_CLI_PATH, run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "'#'"), "unknown symbol: %s", out);
    cli_run_remove(&r);
}

/* Ctrl-C (SIGINT) during training with gradient accumulation: exit 130 after an optimiser step,
 * with a checkpoint that --resume accepts. */
TEST(cli_train_interrupt_saves_a_checkpoint) {
    char cmd[4096], out[16384], path[700];
    cli_run r;
    CHECK(cli_run_seq2seq(&r, NULL, "model.d_model = 8\nmodel.heads = 2\nmodel.encoder_layers = 1\nmodel.decoder_layers = 1\n"
                                  "model.ff = 16\ntrain.steps = 100000000\ntrain.accum = 3\ntrain.max_tokens = 16\n"
                                  "train.eval_every = 100000000\n"));
    const char *conf = r.conf, *run_dir = r.run_dir;
    /* --foreground: the signal reaches qkv as a Ctrl-C at a terminal does */
    snprintf(cmd, sizeof cmd, "timeout --foreground --preserve-status -s INT 4 %s train %s", QKV_CLI_PATH, conf);
    const int rc = cli_exec(cmd, out, sizeof out);
    CHECK_MSG(rc == 130 && strstr(out, "interrupted at step") && strstr(out, "checkpoint saved"), "exit %d: %s", rc, out);
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", run_dir);
    CHECK_MSG(cli_exists(path), "missing %s", path);
    snprintf(cmd, sizeof cmd, "%s train %s --resume --set train.steps=1", QKV_CLI_PATH, conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && strstr(out, "resuming"), "resume: %s", out);
    cli_run_remove(&r);
}

/* A non-autoregressive run (model.nat): <mask> ends tgt.vocab, training resumes, eval and decode
 * default to mask-predict and take --mask-predict / --length-beam, attn shows the unmasked decoder
 * self-attention; strategies that do not fit the model are errors naming the key or the model. */
TEST(cli_nat_train_resume_eval_decode) {
    char cmd[4096], out[16384], path[700];
    cli_run r;
    CHECK(cli_run_seq2seq(&r, NULL, "model.nat = true\nmodel.d_model = 16\nmodel.heads = 2\nmodel.encoder_layers = 1\n"
                                  "model.decoder_layers = 1\nmodel.ff = 32\ntrain.steps = 4\ntrain.max_tokens = 64\n"
                                  "train.eval_every = 2\ntrain.warmup = 2\ntrain.length_weight = 0.5\neval.iterations = 2\n"
                                  "eval.length_beam = 2\n"));
    const char *conf = r.conf, *run_dir = r.run_dir;
    /* the configuration says eval.strategy = greedy (line 4): not for a nat model */
    snprintf(cmd, sizeof cmd, "%s train %s", QKV_CLI_PATH, conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "run.conf:4: eval.strategy = greedy cannot decode a model.nat"),
              "greedy for nat: %s", out);
    snprintf(cmd, sizeof cmd, "%s train %s --set model.nat=false --set eval.strategy=mask_predict", QKV_CLI_PATH, conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "--set: eval.strategy = mask_predict needs model.nat = true"),
              "mask_predict without nat: %s", out);
    snprintf(cmd, sizeof cmd, "%s train %s --set eval.strategy=mask_predict --set train.steps=2", QKV_CLI_PATH, conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && strstr(out, "eval step 2: dev WER"), "train: %s", out);
    snprintf(path, sizeof path, "%s/tgt.vocab", run_dir);
    FILE *f = fopen(path, "r");
    char line[256], last[256] = "";
    while (f && fgets(line, sizeof line, f)) snprintf(last, sizeof last, "%s", line);
    if (f) fclose(f);
    CHECK_MSG(!strcmp(last, "<mask>\n"), "last symbol of tgt.vocab: '%s'", last);
    snprintf(cmd, sizeof cmd, "%s train %s --set eval.strategy=mask_predict --resume", QKV_CLI_PATH, conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && strstr(out, "at step 2") && strstr(out, "eval step 4"), "resume: %s", out);
    snprintf(cmd, sizeof cmd, "%s eval %s %s", QKV_CLI_PATH, run_dir, r.train);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && strstr(out, "12 words, WER") && strstr(out, "mask-predict, 10 iterations, 5 lengths") &&
                  strstr(out, "words/s"),
              "eval: %s", out);
    snprintf(cmd, sizeof cmd, "%s eval %s %s --mask-predict 3 --length-beam 2", QKV_CLI_PATH, run_dir, r.train);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && strstr(out, "mask-predict, 3 iterations, 2 lengths"), "eval: %s", out);
    snprintf(cmd, sizeof cmd, "%s eval %s %s --mask-predict 0", QKV_CLI_PATH, run_dir, r.train);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 2 && strstr(out, "--mask-predict needs an integer in 1..1000 (got '0')"), "eval 0: %s", out);
    snprintf(cmd, sizeof cmd, "%s eval %s %s --beam 2", QKV_CLI_PATH, run_dir, r.train);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "decode it with mask-predict"), "eval --beam: %s", out);
    snprintf(cmd, sizeof cmd, "printf 'bead\\nface\\n' | %s decode %s --mask-predict 2 --nbest 3", QKV_CLI_PATH, run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "decode: %s", out);
    int lines = 0;
    for (const char *c = out; *c; c++) lines += *c == '\n';
    CHECK_MSG(lines == 6 && strstr(out, "bead\t") && strstr(out, "face\t"), "decode --nbest 3 (3 lengths): %s", out);
    snprintf(cmd, sizeof cmd, "printf 'bead\\n' | %s decode %s", QKV_CLI_PATH, run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && strstr(out, "bead\t") && !strstr(out, "<mask>"), "decode: %s", out);
    snprintf(cmd, sizeof cmd, "printf 'bead\\n' | %s decode %s --greedy", QKV_CLI_PATH, run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "decode it with mask-predict"), "decode --greedy: %s", out);
    snprintf(cmd, sizeof cmd, "%s decode %s --mask-predict 0", QKV_CLI_PATH, run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 2 && strstr(out, "--mask-predict needs an integer in 1..1000 (got '0')"), "decode 0: %s", out);
    snprintf(cmd, sizeof cmd, "%s attn %s bead --terminal --kind self --layer 0 --out %s/maps", QKV_CLI_PATH, run_dir, r.dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0 && strstr(out, "6 attention maps") && strstr(out, "decoder layer 0, head 0 (self)"),
              "attn: %s", out);
    cli_run_remove(&r);
}
