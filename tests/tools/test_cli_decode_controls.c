/*
 * test_cli_decode_controls.c: `qkv decode`'s length penalty and controls of the next token as a
 * user runs them, on a tiny G2P-style run (targets: space-separated phones): every output obeys
 * --allow (only the symbols of the file) and --no-repeat-ngram 1 (no symbol twice); --prefix makes
 * every output start with its prefix; the library refuses what it refuses (exit 1 or 2, the file
 * and line named); the options of the tasks that transduce are refused for the others.
 */
#include "cli_util.h"
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether every output field (after the input's TAB, up to the end of line or the score's TAB)
 * of out holds only symbols of allowed (" A B ", NULL: any), each at most once when unique. */
static bool outputs_obey(const char *out, const char *allowed, bool unique) {
    for (const char *line = out; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : line + strlen(line)) {
        const char *tab = strchr(line, '\t'), *end = strchr(line, '\n');
        if (!tab || (end && tab > end)) return false;
        char field[512];
        snprintf(field, sizeof field, "%.*s", (int)(end ? end - tab - 1 : (long)strlen(tab + 1)), tab + 1);
        char *score = strchr(field, '\t');
        if (score) *score = '\0';
        char seen[512] = " ";
        for (char *save = NULL, *sym = strtok_r(field, " ", &save); sym; sym = strtok_r(NULL, " ", &save)) {
            char padded[64];
            snprintf(padded, sizeof padded, " %s ", sym);
            if (allowed && !strstr(allowed, padded)) return false;
            if (unique && strstr(seen, padded)) return false;
            strncat(seen, padded + 1, sizeof seen - strlen(seen) - 1);
        }
    }
    return true;
}

TEST(cli_decode_controls) {
    cli_run r;
    char out[16384], path[160];
    CHECK(cli_run_seq2seq(&r, NULL, "model.d_model = 16\nmodel.heads = 2\nmodel.encoder_layers = 1\n"
                                    "model.decoder_layers = 1\nmodel.ff = 32\ntrain.steps = 6\ntrain.max_tokens = 64\n"
                                    "train.warmup = 2\n"));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " train %s", r.conf) == 0);
    snprintf(path, sizeof path, "%s/allow.txt", r.dir);
    cli_write_file(path, "A B\nC\n");
    CHECK(cli_execf(out, sizeof out, "printf 'bead\\nface\\ncab\\n' | " QKV_CLI_PATH " decode %s --beam 3 --nbest 2 --allow %s",
                    r.run_dir, path) == 0);
    CHECK_MSG(outputs_obey(out, " A B C <unk> ", false), "--allow: '%s'", out);
    CHECK(cli_execf(out, sizeof out,
                    "printf 'bead\\nface\\ncab\\n' | " QKV_CLI_PATH " decode %s --sample --seed 3 --nbest 3 --max-len 12 "
                    "--no-repeat-ngram 1 --repetition-penalty 1.5",
                    r.run_dir) == 0);
    CHECK_MSG(outputs_obey(out, NULL, true), "--no-repeat-ngram 1: '%s'", out);
    /* without the controls the same decoding repeats symbols and leaves {A, B, C}: the checks can fail */
    CHECK(cli_execf(out, sizeof out, "printf 'bead\\nface\\ncab\\n' | " QKV_CLI_PATH " decode %s --sample --seed 3 --nbest 3 "
                                     "--max-len 12", r.run_dir) == 0);
    CHECK_MSG(!outputs_obey(out, NULL, true) && !outputs_obey(out, " A B C <unk> ", false), "'%s'", out);
    CHECK(cli_execf(out, sizeof out, "printf 'bead\\tB E\\nface\\t\\n' | " QKV_CLI_PATH " decode %s --prefix --greedy "
                                     "--length-penalty gnmt --alpha 1",
                    r.run_dir) == 0);
    CHECK_MSG(!strncmp(out, "bead\tB E\tB E", 12) || !strncmp(out, "bead\tB E\tB E ", 13), "--prefix: '%s'", out);
    CHECK(strstr(out, "\nface\t\t"));
    /* refusals */
    cli_write_file(path, "A\nA Z\n");
    CHECK(cli_execf(out, sizeof out, "echo bead | " QKV_CLI_PATH " decode %s --allow %s", r.run_dir, path) == 1);
    CHECK_MSG(strstr(out, "--allow: ") && strstr(out, "allow.txt:2") && strstr(out, "'Z'"), "'%s'", out);
    CHECK(cli_execf(out, sizeof out, "printf 'bead\\tZ\\n' | " QKV_CLI_PATH " decode %s --prefix", r.run_dir) == 1);
    CHECK(strstr(out, "<stdin>:1") && strstr(out, "'Z'"));
    CHECK(cli_execf(out, sizeof out, "echo bead | " QKV_CLI_PATH " decode %s --repetition-penalty 0", r.run_dir) == 2);
    CHECK(strstr(out, "--repetition-penalty needs a number in (0, 1000] (got '0')"));
    CHECK(cli_execf(out, sizeof out, "echo bead | " QKV_CLI_PATH " decode %s --length-penalty long", r.run_dir) == 2);
    CHECK(strstr(out, "unknown beam search length penalty 'long' (one of: none, average, gnmt)"));
    CHECK(cli_execf(out, sizeof out, "echo bead | " QKV_CLI_PATH " decode %s --allow %s/none.txt", r.run_dir, r.dir) == 1);
    CHECK(strstr(out, "none.txt: cannot open"));
    cli_run_remove(&r);
}

/* train.keep_checkpoints and qkv average: the last N step models kept, their mean written; the
 * mean of one model is that model's file, byte for byte. */
TEST(cli_average_checkpoints) {
    cli_run r;
    char out[8192], path[160], avg[160];
    CHECK(cli_run_seq2seq(&r, NULL, "model.d_model = 16\nmodel.heads = 2\nmodel.encoder_layers = 1\n"
                                    "model.decoder_layers = 1\nmodel.ff = 32\ntrain.steps = 8\ntrain.max_tokens = 64\n"
                                    "train.warmup = 2\ntrain.eval_every = 2\ntrain.keep_checkpoints = 3\n"));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " train %s --set train.steps=4", r.conf) == 0);
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " train %s --resume", r.conf) == 0);
    CHECK(cli_execf(out, sizeof out, "ls %s | grep '^step-'", r.run_dir) == 0);
    CHECK_MSG(!strcmp(out, "step-4.safetensors\nstep-6.safetensors\nstep-8.safetensors\n"), "kept: '%s'", out);
    snprintf(avg, sizeof avg, "%s/avg.safetensors", r.run_dir);
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " average -o %s --last 3 %s", avg, r.run_dir) == 0);
    CHECK(strstr(out, "the mean of 3 models: step-4.safetensors step-6.safetensors step-8.safetensors"));
    CHECK(cli_execf(out, sizeof out, "echo bead | " QKV_CLI_PATH " decode %s --greedy", avg) == 0);
    snprintf(path, sizeof path, "%s/step-8.safetensors", r.run_dir);
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " average -o %s %s %s", avg, path, path) == 0);
    CHECK(cli_same_file(avg, path));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " average -o %s --last 4 %s", avg, r.run_dir) == 1);
    CHECK(strstr(out, "holds 3 step-<S>.safetensors files, --last asks for 4"));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " average %s", path) == 2);
    CHECK(strstr(out, "-o OUT is required"));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " average -o %s %s %s/src.vocab", avg, path, r.run_dir) == 1);
    CHECK(strstr(out, "src.vocab"));
    cli_run_remove(&r);
}

