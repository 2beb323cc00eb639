/*
 * config.h: the configuration files of `qkv train` / `qkv eval`:
 *
 *   # comment
 *   model.d_model = 256
 *   data.train    = data/g2p/cmudict.nostress.train.tsv
 *
 * one `key = value` per line (spaces around both trimmed, values may contain spaces and '=');
 * command-line `--set key=value` overrides a file value or adds a key. Every key must be read by
 * the program: after parsing, config_check_unused() reports any key nobody asked for as
 * "FILE:LINE: unknown key 'x'" (or "--set: unknown key 'x'"), so a typo never passes silently.
 * Typed getters report a bad value with its file and line. Parsing takes time linear in the file
 * (a hash index of the keys); messages echo keys and values with control bytes escaped.
 */
#ifndef QKV_TOOLS_CONFIG_H
#define QKV_TOOLS_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "qkv/qkv_registry.h"

typedef struct config_entry {
    char *key, *value;
    const char *file; /* "--set" for command-line overrides */
    int line;
    bool used;
} config_entry;

/* The largest configuration file read (a configuration is a few dozen lines). */
#define CONFIG_MAX_BYTES (16 << 20)

typedef struct config {
    config_entry *entries;
    int n, cap;
    int *index;          /* open addressing: the entry of each key's last assignment, -1 empty */
    uint32_t index_mask; /* slots - 1 */
    char *path;
    char error[512]; /* the first error, "FILE:LINE: ..." */
} config;

/* Parse a file (path may be NULL for an empty configuration). Returns false with cfg->error. */
bool config_load(config *cfg, const char *path);
/* Apply "key=value". Returns false with cfg->error when it is not of that form. */
bool config_set(config *cfg, const char *assignment);
void config_free(config *cfg);

/* Getters: the value of key, or def when absent. On a malformed value they return false and set
 * cfg->error (the caller stops). */
bool config_str(config *cfg, const char *key, const char *def, const char **out);
bool config_int(config *cfg, const char *key, int64_t def, int64_t min, int64_t max, int64_t *out);
bool config_double(config *cfg, const char *key, double def, double min, double max, double *out);
bool config_bool(config *cfg, const char *key, bool def, bool *out);
/* One of names[0..n) -> its index. */
bool config_enum(config *cfg, const char *key, int def, const char *const *names, int n, int *out);
/* A name of the library's enumeration `id` (qkv_registry.h) -> its enum value; def is a value. */
bool config_registry(config *cfg, const char *key, qkv_registry_id id, int def, int *out);

/* The CLI's own switches, settings of the tools rather than enumerations of the library: one
 * table (config_switch_table in config.c) names the values of each, config_switch reads them,
 * and a test checks that docs/cli.md's row of each key names every value. */
typedef enum config_switch_id {
    SWITCH_ATTENTION_PATH, /* model.attention.path (and the cross-attention's): auto, fused, composed */
    SWITCH_NONFINITE,      /* train.nonfinite: stop, skip */
    SWITCH_UNIVERSAL,      /* eval.universal: none, brown */
    SWITCH_POOLING,        /* image.pooling: cls, mean */
    SWITCH_UNIT,           /* data.unit: char, word */
    SWITCH_LONG_LINES,     /* data.long_lines: error, split, skip */
    SWITCH_METRIC,         /* eval.metric (seq2seq): wer, bleu */
    SWITCH_COUNT
} config_switch_id;

typedef struct config_switch_info {
    const char *key; /* the key of its row in docs/cli.md */
    int count;
    const char *const *names; /* value i is names[i] */
} config_switch_info;

const config_switch_info *config_switch_table(config_switch_id id);
/* The value of switch `id` at key (its own key, or another that takes the same values) -> its
 * index; def is an index. */
bool config_switch(config *cfg, const char *key, config_switch_id id, int def, int *out);

/* Record a problem with the value of key (read before) in cfg->error as "FILE:LINE: message"
 * (or "--set: message"); returns false. */
bool config_fail(config *cfg, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* False (with cfg->error naming the first one) when some key was never read. */
bool config_check_unused(config *cfg);

#endif
