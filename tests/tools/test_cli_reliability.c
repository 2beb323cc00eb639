/*
 * test_cli_reliability.c: inputs that could pass for valid ones give a message naming the
 * problem and a non-zero exit, never an answer with exit status 0 (or, for empty input lines, the
 * output a script expects):
 *   - a model file whose configuration overflows float arithmetic (cos_scale_init = 1e308);
 *   - an empty evaluation set (eval on /dev/null, an empty data.dev);
 *   - a directory, /dev/zero or binary bytes as decoding input;
 *   - empty input lines (one output line per input line, the empty ones empty);
 *   - reserved symbols (<eos>, <pad>) as training targets, in `qkv train` and `qkv data check`.
 */
#include "testutil.h"
#include "cli_util.h"
#include "qkv/qkv_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONF_TINY                                                                                  \
    "model.d_model = 8\nmodel.heads = 2\nmodel.encoder_layers = 1\nmodel.decoder_layers = 1\n"     \
    "model.ff = 16\ntrain.steps = 2\ntrain.max_tokens = 64\ntrain.eval_every = 2\n"

/* src's tensors but those whose name contains `drop`, and its metadata with the first `from` in
 * qkv.config replaced by `to`, written to dst. */
static bool rewrite_model(const char *src, const char *dst, const char *drop, const char *from, const char *to) {
    qkv_st_file *f = NULL;
    if (qkv_st_open(src, &f)) return false;
    const int64_t n = qkv_st_count(f), n_meta = qkv_st_metadata_count(f);
    qkv_st_tensor *t = calloc((size_t)n, sizeof *t);
    qkv_st_entry *e = calloc((size_t)n, sizeof *e); /* t[k].shape points into e */
    const char *keys[8], *values[8];
    char config[8192] = "";
    int64_t kept = 0;
    bool ok = t && e && n_meta <= 8;
    for (int64_t i = 0; ok && i < n; i++) {
        ok = qkv_st_get(f, i, &e[i]) == QKV_OK;
        if (ok && !strstr(e[i].name, drop))
            t[kept++] = (qkv_st_tensor){e[i].name, e[i].dtype_name, e[i].ndim, e[i].shape, e[i].data};
    }
    for (int64_t i = 0; ok && i < n_meta; i++) {
        ok = qkv_st_metadata_at(f, i, &keys[i], &values[i]) == QKV_OK;
        const char *at = ok && !strcmp(keys[i], "qkv.config") ? strstr(values[i], from) : NULL;
        if (at) {
            snprintf(config, sizeof config, "%.*s%s%s", (int)(at - values[i]), values[i], to, at + strlen(from));
            values[i] = config;
        }
    }
    ok = ok && config[0] && qkv_st_save(dst, t, kept, keys, values, n_meta) == QKV_OK;
    free(t);
    free(e);
    qkv_st_close(f);
    return ok;
}

TEST(cli_refuses_a_model_whose_configuration_overflows) {
    char cmd[4096], out[8192], model[700], bad[700];
    cli_run r;
    CHECK(cli_run_seq2seq(&r, NULL, CONF_TINY "model.attention.score = cosine\n"));
    snprintf(cmd, sizeof cmd, "%s train %s", QKV_CLI_PATH, r.conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "train: %s", out);
    snprintf(model, sizeof model, "%s/model.safetensors", r.run_dir);
    snprintf(bad, sizeof bad, "%s/bad.safetensors", r.dir);
    CHECK(rewrite_model(model, bad, "self_attn.cos_scale", "\"cos_scale_learnable\":true,\"cos_scale_init\":10",
                        "\"cos_scale_learnable\":false,\"cos_scale_init\":1e308"));
    snprintf(cmd, sizeof cmd, "printf 'ab\\nba\\n' | %s decode %s", QKV_CLI_PATH, bad);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "self_attn: cos_scale_init 1e+308"), "decode: %s", out);
    snprintf(cmd, sizeof cmd, "%s eval %s %s --greedy", QKV_CLI_PATH, bad, r.train);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "cos_scale_init"), "eval: %s", out);
    cli_run_remove(&r);
}

TEST(cli_refuses_empty_evaluation_sets) {
    char cmd[4096], out[8192], empty[700];
    cli_run r;
    CHECK(cli_run_seq2seq(&r, "", CONF_TINY));
    snprintf(cmd, sizeof cmd, "%s train %s", QKV_CLI_PATH, r.conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "dev.tsv: no pairs to evaluate on"),
              "an empty data.dev: %s", out);
    CHECK_MSG(!strstr(out, "best so far"), "an empty dev set was scored: %s", out);
    snprintf(cmd, sizeof cmd, "%s train %s --set data.dev=%s", QKV_CLI_PATH, r.conf, r.train);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "train: %s", out);
    snprintf(cmd, sizeof cmd, "%s eval %s /dev/null", QKV_CLI_PATH, r.run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "/dev/null: is a character device") &&
                  !strstr(out, "WER"),
              "eval /dev/null: %s", out);
    snprintf(empty, sizeof empty, "%s/empty.tsv", r.dir);
    cli_write_file(empty, "");
    snprintf(cmd, sizeof cmd, "%s eval %s %s", QKV_CLI_PATH, r.run_dir, empty);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "no pairs"), "eval of an empty file: %s", out);
    cli_run_remove(&r);
}

TEST(cli_decode_keeps_one_line_per_input_and_refuses_what_is_not_text) {
    char cmd[4096], out[8192];
    cli_run r;
    CHECK(cli_run_seq2seq(&r, NULL, CONF_TINY));
    snprintf(cmd, sizeof cmd, "%s train %s", QKV_CLI_PATH, r.conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "train: %s", out);
    for (int stream = 0; stream < 2; stream++) {
        snprintf(cmd, sizeof cmd, "printf 'ab\\n\\nba\\n\\n' | %s decode %s --greedy%s", QKV_CLI_PATH, r.run_dir,
                 stream ? " --stream" : "");
        CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "decode: %s", out);
        /* "ab\t...\n" "\n" "ba\t...\n" "\n" */
        const char *l2 = strchr(out, '\n'), *l3 = l2 ? l2 + 1 : NULL, *l4 = l3 ? strchr(l3 + 1, '\n') : NULL;
        CHECK_MSG(!strncmp(out, "ab\t", 3) && l3 && *l3 == '\n' && !strncmp(l3 + 1, "ba\t", 3) && l4 && !strcmp(l4, "\n\n"),
                  "4 input lines, 2 of them empty (stream %d): '%s'", stream, out);
    }
    snprintf(cmd, sizeof cmd, "%s decode %s %s", QKV_CLI_PATH, r.run_dir, r.dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "is a directory"), "decode DIR: %s", out);
    snprintf(cmd, sizeof cmd, "%s decode %s /dev/zero", QKV_CLI_PATH, r.run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "/dev/zero:1: a NUL byte"), "decode /dev/zero: %s", out);
    snprintf(cmd, sizeof cmd, "head -c 1100000 /dev/zero | tr '\\0' a | %s decode %s", QKV_CLI_PATH, r.run_dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "<stdin>:1: line longer than 1048576 bytes"),
              "a line with no end: %s", out);
    cli_run_remove(&r);
}

TEST(cli_refuses_reserved_symbols_in_data) {
    char cmd[4096], out[8192], text[512];
    cli_run r;
    CHECK(cli_run_seq2seq(&r, NULL, CONF_TINY));
    snprintf(text, sizeof text, "ab\tA B\nbad\tB A <eos>\n");
    cli_write_file(r.train, text);
    snprintf(cmd, sizeof cmd, "%s train %s", QKV_CLI_PATH, r.conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "train.tsv:2: '<eos>' in the target is a reserved symbol"),
              "train: %s", out);
    snprintf(cmd, sizeof cmd, "%s data check pairs %s", QKV_CLI_PATH, r.train);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 1 && strstr(out, "train.tsv:2: '<eos>'"), "data check: %s", out);
    cli_run_remove(&r);
}
