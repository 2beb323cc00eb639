/*
 * fuzz_config.c: libFuzzer target for the CLI's configuration files and `--set` overrides
 * (tools/config.c: config_load, config_set and the typed getters) as `qkv train` reads them
 * (task_create: every key of the chosen task, then config_check_unused), and for a run's
 * task.conf as `qkv eval / decode / attn` read it (run_dir.c and the tasks: the task name,
 * data.src_tokenizer (or data.src_tokens) and data.tgt_tokenizer, model.features through
 * enc_input_read_settings, data.unit and data.long_lines through lm_read_text_opts, data.tag_column, eval.universal, eval.positive, data.pixel_scale).
 *
 * Input: one byte of options (bit 0: read it as task.conf instead of a training configuration),
 * then the file's text up to the first NUL byte (written to a file: config_load takes a path),
 * then `--set` assignments separated by NUL bytes.
 *
 * Invariants: every step succeeds or fails with a message in cfg.error (never a crash); every
 * key kept is non-empty and made of letters, digits, '.' and '_'; every value is trimmed; and
 * after the overrides, each assignment's key reads back the value of its last assignment.
 */
#include "fuzz_util.h"

#include "config.h"
#include "encoder_input.h"
#include "lm_text.h"
#include "seq2seq_task.h"
#include "task.h"

#include <ctype.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    qkv_set_num_threads(1);
    return 0;
}

static bool has_message(const config *cfg) {
    return cfg->error[0] != '\0';
}

/* The keys and values kept are what config.h promises. */
static void check_entries(const config *cfg) {
    for (int i = 0; i < cfg->n; i++) {
        const config_entry *e = &cfg->entries[i];
        FZ_REQUIRE(e->key[0] != '\0');
        for (const char *c = e->key; *c; c++)
            FZ_REQUIRE(isalnum((unsigned char)*c) || *c == '.' || *c == '_');
        const size_t n = strlen(e->value);
        FZ_REQUIRE(n == 0 || (!isspace((unsigned char)e->value[0]) && !isspace((unsigned char)e->value[n - 1])));
    }
}

/* `qkv train`: the task's keys, then no key left unread. */
static void read_training(config *cfg) {
    task *t = NULL;
    if (task_create(cfg, &t)) {
        FZ_REQUIRE(t != NULL);
        if (!config_check_unused(cfg)) FZ_REQUIRE(has_message(cfg));
    } else {
        FZ_REQUIRE(has_message(cfg));
    }
    task_free(t);
}

/* task.conf of a run: the keys each task reads back when it runs inference. */
static void read_task_conf(config *cfg) {
    const char *name = NULL;
    FZ_REQUIRE(config_str(cfg, "task", NULL, &name));
    const task_ops *ops = name ? task_find(name) : NULL;
    bool ok = true;
    if (ops == &seq2seq_task_ops) {
        seq2seq_settings s;
        ok = seq2seq_read_tokenizers(cfg, &s);
        if (ok) FZ_REQUIRE(qkv_registry_name(QKV_REGISTRY_TOKENIZER, (int)s.src_tokenizer) &&
                           qkv_registry_name(QKV_REGISTRY_TOKENIZER, (int)s.tgt_tokenizer));
    } else if (ops == &tagging_task_ops || ops == &classify_task_ops) {
        enc_input_settings s;
        ok = enc_input_read_settings(cfg, false, &s);
        if (ok) FZ_REQUIRE(s.n_features >= 0 && s.n_features <= QKV_FEAT_COUNT);
        int64_t column;
        int e;
        static const char *const universal[] = {"none", "brown"};
        const char *positive;
        if (ok && ops == &tagging_task_ops)
            ok = config_int(cfg, "data.tag_column", 1, 1, 64, &column) &&
                 config_enum(cfg, "eval.universal", 0, universal, 2, &e);
        if (ok && ops == &classify_task_ops) ok = config_str(cfg, "eval.positive", NULL, &positive);
    } else if (ops == &lm_task_ops) {
        lm_text_opts o;
        ok = lm_read_text_opts(cfg, 64, &o);
        if (ok) FZ_REQUIRE(o.max_symbols == 63);
    } else if (ops == &image_task_ops) {
        double scale;
        ok = config_double(cfg, "data.pixel_scale", 1, 1e-30, 1e30, &scale);
    }
    if (!ok) FZ_REQUIRE(has_message(cfg));
    else if (!config_check_unused(cfg)) FZ_REQUIRE(has_message(cfg));
}

/* "key = value" as config_set takes it: the key and value trimmed, or false without '='. */
static bool split_assignment(const char *s, char **key, char **value) {
    const char *eq = strchr(s, '=');
    if (!eq) return false;
    const char *k0 = s, *k1 = eq, *v0 = eq + 1, *v1 = s + strlen(s);
    while (k0 < k1 && isspace((unsigned char)*k0)) k0++;
    while (k1 > k0 && isspace((unsigned char)k1[-1])) k1--;
    while (v0 < v1 && isspace((unsigned char)*v0)) v0++;
    while (v1 > v0 && isspace((unsigned char)v1[-1])) v1--;
    *key = fz_strndup(k0, (size_t)(k1 - k0));
    *value = fz_strndup(v0, (size_t)(v1 - v0));
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_reader r = {data, size};
    const uint8_t opts = fz_byte(&r);
    size_t len;
    const char *text = fz_field(&r, 0, &len);
    const char *path = fz_path(opts & 1 ? "task.conf" : "train.conf");
    fz_write_file(path, text, len);
    config cfg;
    bool ok = config_load(&cfg, path);
    FZ_REQUIRE(ok || has_message(&cfg));
    char *sets[8];
    int n_sets = 0;
    while (ok && r.n && n_sets < 8) {
        const char *s = fz_field(&r, 0, &len);
        sets[n_sets] = fz_strndup(s, len);
        ok = config_set(&cfg, sets[n_sets++]);
        FZ_REQUIRE(ok || has_message(&cfg));
    }
    if (ok) {
        check_entries(&cfg);
        if (opts & 1) read_task_conf(&cfg);
        else read_training(&cfg);
        /* the last assignment of a key wins */
        for (int i = n_sets - 1; i >= 0; i--) {
            char *key, *value;
            FZ_REQUIRE(split_assignment(sets[i], &key, &value));
            bool later = false;
            for (int j = i + 1; j < n_sets && !later; j++) {
                char *k2, *v2;
                FZ_REQUIRE(split_assignment(sets[j], &k2, &v2));
                later = !strcmp(k2, key);
                free(k2);
                free(v2);
            }
            const char *got = NULL;
            FZ_REQUIRE(config_str(&cfg, key, NULL, &got));
            FZ_REQUIRE(later || (got && !strcmp(got, value)));
            free(key);
            free(value);
        }
    }
    for (int i = 0; i < n_sets; i++)
        free(sets[i]);
    config_free(&cfg);
    remove(path);
    return 0;
}
