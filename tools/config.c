/* config.c: see config.h. */
#include "config.h"

#include "qkv/qkv_io.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool fail(config *cfg, const config_entry *e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fail(config *cfg, const config_entry *e, const char *fmt, ...) {
    char msg[400], full[sizeof cfg->error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!e) snprintf(full, sizeof full, "%s", msg);
    else if (e->line > 0) snprintf(full, sizeof full, "%s:%d: %s", e->file, e->line, msg);
    else snprintf(full, sizeof full, "%s: %s", e->file, msg);
    /* the library's message setter escapes control bytes of keys and values (qkv_set_error) */
    qkv_set_error(QKV_ERR_INVALID_ARG, "%s", full);
    snprintf(cfg->error, sizeof cfg->error, "%s", qkv_last_error());
    return false;
}

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n), d[n] = '\0';
    return d;
}

static char *dup_str(const char *s) {
    return dup_n(s, strlen(s));
}

/* ---- the key index: open addressing over entry indices, the last assignment of each key ---- */

static uint32_t hash_key(const char *s) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* The slot of key: where its entry index is, or the empty slot (-1) where it would go. */
static int *slot_of(const config *cfg, const char *key) {
    for (uint32_t i = hash_key(key) & cfg->index_mask;; i = (i + 1) & cfg->index_mask) {
        int *slot = &cfg->index[i];
        if (*slot < 0 || !strcmp(cfg->entries[*slot].key, key)) return slot;
    }
}

/* Rebuild the index for at least `need` keys at a load of at most 1/2. */
static bool index_grow(config *cfg, int need) {
    uint32_t size = 64;
    while (size < 2u * (uint32_t)need) size *= 2;
    if (cfg->index && size <= cfg->index_mask + 1) return true;
    int *index = malloc(sizeof *index * size);
    if (!index) return false;
    for (uint32_t i = 0; i < size; i++) index[i] = -1;
    free(cfg->index);
    cfg->index = index;
    cfg->index_mask = size - 1;
    for (int e = 0; e < cfg->n; e++) *slot_of(cfg, cfg->entries[e].key) = e; /* later entries win */
    return true;
}

static config_entry *find(config *cfg, const char *key) {
    if (!cfg->index) return NULL;
    const int at = *slot_of(cfg, key);
    return at < 0 ? NULL : &cfg->entries[at];
}

static bool add(config *cfg, const char *key, const char *value, const char *file, int line) {
    config_entry probe = {NULL, NULL, file, line, false};
    if (!*key) return fail(cfg, &probe, "empty key");
    for (const char *c = key; *c; c++)
        if (!(isalnum((unsigned char)*c) || *c == '.' || *c == '_'))
            return fail(cfg, &probe, "key '%s' may contain only letters, digits, '.' and '_'", key);
    if (!index_grow(cfg, cfg->n + 1)) return fail(cfg, NULL, "out of memory");
    int *slot = slot_of(cfg, key);
    const int old_at = *slot;
    const config_entry *old = old_at >= 0 ? &cfg->entries[old_at] : NULL;
    if (old && old->line > 0 && line > 0 && old->file == file)
        return fail(cfg, &probe, "key '%s' is set twice (first on line %d)", key, old->line);
    if (cfg->n == cfg->cap) {
        int cap = cfg->cap ? 2 * cfg->cap : 32;
        config_entry *grown = realloc(cfg->entries, (size_t)cap * sizeof *grown);
        if (!grown) return fail(cfg, NULL, "out of memory");
        cfg->entries = grown;
        cfg->cap = cap;
    }
    config_entry *e = &cfg->entries[cfg->n];
    e->key = dup_str(key);
    e->value = dup_str(value);
    e->file = file;
    e->line = line;
    e->used = false;
    if (!e->key || !e->value) {
        free(e->key), free(e->value);
        return fail(cfg, NULL, "out of memory");
    }
    *slot = cfg->n++;
    if (old_at >= 0) cfg->entries[old_at].used = true; /* overridden: not "unknown" on its own account */
    return true;
}

/* s[0, n) without leading and trailing white space, as [*b, *b + *n). */
static void trim_span(const char **b, size_t *n) {
    while (*n && isspace((unsigned char)**b)) (*b)++, (*n)--;
    while (*n && isspace((unsigned char)(*b)[*n - 1])) (*n)--;
}

bool config_load(config *cfg, const char *path) {
    memset(cfg, 0, sizeof *cfg);
    if (!path) return true;
    cfg->path = dup_str(path);
    if (!cfg->path) return fail(cfg, NULL, "out of memory");
    char *text = NULL;
    size_t len = 0;
    /* a regular file, checked before reading: a FIFO cannot block, /dev/zero is refused */
    if (qkv_file_read(path, CONFIG_MAX_BYTES, &text, &len)) return fail(cfg, NULL, "%s", qkv_last_error());
    bool ok = true;
    int line = 0;
    for (size_t at = 0; ok && at < len; line++) {
        const char *s = text + at, *nl = memchr(s, '\n', len - at);
        size_t n = nl ? (size_t)(nl - s) : len - at;
        at += n + (nl != NULL);
        config_entry here = {NULL, NULL, cfg->path, line + 1, false};
        const char *nul = memchr(s, '\0', n);
        if (nul) {
            ok = fail(cfg, &here, "a NUL byte at column %zu: not a text file", (size_t)(nul - s) + 1);
            break;
        }
        trim_span(&s, &n);
        if (!n || *s == '#') continue;
        const char *eq = memchr(s, '=', n);
        if (!eq) {
            ok = fail(cfg, &here, "expected 'key = value', got '%.*s'", n > 80 ? 80 : (int)n, s);
            break;
        }
        const char *k = s, *v = eq + 1;
        size_t kn = (size_t)(eq - s), vn = n - kn - 1;
        trim_span(&k, &kn);
        trim_span(&v, &vn);
        char *key = dup_n(k, kn), *value = dup_n(v, vn);
        ok = key && value ? add(cfg, key, value, cfg->path, line + 1) : fail(cfg, NULL, "out of memory");
        free(key);
        free(value);
    }
    free(text);
    return ok;
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1])) *--end = '\0';
    return s;
}

bool config_set(config *cfg, const char *assignment) {
    char *copy = dup_str(assignment);
    if (!copy) return fail(cfg, NULL, "out of memory");
    char *eq = strchr(copy, '=');
    bool ok;
    if (!eq) {
        ok = fail(cfg, NULL, "--set %s: expected key=value", assignment);
    } else {
        *eq = '\0';
        ok = add(cfg, trim(copy), trim(eq + 1), "--set", 0);
    }
    free(copy);
    return ok;
}

void config_free(config *cfg) {
    for (int i = 0; i < cfg->n; i++) {
        free(cfg->entries[i].key);
        free(cfg->entries[i].value);
    }
    free(cfg->entries);
    free(cfg->index);
    free(cfg->path);
    memset(cfg, 0, sizeof *cfg);
}

static config_entry *lookup(config *cfg, const char *key) {
    config_entry *e = find(cfg, key);
    if (e) e->used = true;
    return e;
}

bool config_str(config *cfg, const char *key, const char *def, const char **out) {
    config_entry *e = lookup(cfg, key);
    *out = e ? e->value : def;
    return true;
}

bool config_int(config *cfg, const char *key, int64_t def, int64_t min, int64_t max, int64_t *out) {
    config_entry *e = lookup(cfg, key);
    if (!e) {
        *out = def;
        return true;
    }
    char *end = NULL;
    errno = 0;
    long long v = strtoll(e->value, &end, 10);
    if (errno || !*e->value || *end) return fail(cfg, e, "%s = '%s' is not an integer", key, e->value);
    if (v < min || v > max) return fail(cfg, e, "%s = %lld is outside [%lld, %lld]", key, v, (long long)min, (long long)max);
    *out = v;
    return true;
}

bool config_double(config *cfg, const char *key, double def, double min, double max, double *out) {
    config_entry *e = lookup(cfg, key);
    if (!e) {
        *out = def;
        return true;
    }
    char *end = NULL;
    errno = 0;
    double v = strtod(e->value, &end);
    if (errno || !*e->value || *end || !isfinite(v)) return fail(cfg, e, "%s = '%s' is not a number", key, e->value);
    if (v < min || v > max) return fail(cfg, e, "%s = %g is outside [%g, %g]", key, v, min, max);
    *out = v;
    return true;
}

bool config_bool(config *cfg, const char *key, bool def, bool *out) {
    config_entry *e = lookup(cfg, key);
    if (!e) {
        *out = def;
        return true;
    }
    if (!strcmp(e->value, "true") || !strcmp(e->value, "1") || !strcmp(e->value, "yes")) *out = true;
    else if (!strcmp(e->value, "false") || !strcmp(e->value, "0") || !strcmp(e->value, "no")) *out = false;
    else return fail(cfg, e, "%s = '%s' is not true or false", key, e->value);
    return true;
}

bool config_enum(config *cfg, const char *key, int def, const char *const *names, int n, int *out) {
    config_entry *e = lookup(cfg, key);
    if (!e) {
        *out = def;
        return true;
    }
    for (int i = 0; i < n; i++)
        if (!strcmp(e->value, names[i])) {
            *out = i;
            return true;
        }
    char list[256] = "";
    for (int i = 0; i < n; i++) {
        strncat(list, names[i], sizeof list - strlen(list) - 1);
        if (i + 1 < n) strncat(list, ", ", sizeof list - strlen(list) - 1);
    }
    return fail(cfg, e, "%s = '%s' is not one of: %s", key, e->value, list);
}

static const char *const path_names[] = {"auto", "fused", "composed"};
static const char *const nonfinite_names[] = {"stop", "skip"};
static const char *const universal_names[] = {"none", "brown"};
static const char *const pooling_names[] = {"cls", "mean"};
static const char *const unit_names[] = {"char", "word"};
static const char *const long_lines_names[] = {"error", "split", "skip"};
static const char *const metric_names[] = {"wer", "bleu"};
#define SWITCH(k, names) {k, (int)(sizeof names / sizeof *names), names}
static const config_switch_info switches[SWITCH_COUNT] = {
    [SWITCH_ATTENTION_PATH] = SWITCH("model.attention.path", path_names),
    [SWITCH_NONFINITE] = SWITCH("train.nonfinite", nonfinite_names),
    [SWITCH_UNIVERSAL] = SWITCH("eval.universal", universal_names),
    [SWITCH_POOLING] = SWITCH("image.pooling", pooling_names),
    [SWITCH_UNIT] = SWITCH("data.unit", unit_names),
    [SWITCH_LONG_LINES] = SWITCH("data.long_lines", long_lines_names),
    [SWITCH_METRIC] = SWITCH("eval.metric", metric_names),
};
#undef SWITCH

const config_switch_info *config_switch_table(config_switch_id id) {
    return (unsigned)id < SWITCH_COUNT ? &switches[id] : NULL;
}

bool config_switch(config *cfg, const char *key, config_switch_id id, int def, int *out) {
    return config_enum(cfg, key, def, switches[id].names, switches[id].count, out);
}

bool config_registry(config *cfg, const char *key, qkv_registry_id id, int def, int *out) {
    const qkv_registry *r = qkv_registry_get(id);
    const char *names[64];
    int def_index = 0;
    for (int i = 0; i < r->count && i < 64; i++) {
        names[i] = r->entries[i].name;
        if (r->entries[i].value == def) def_index = i;
    }
    int index;
    if (!config_enum(cfg, key, def_index, names, r->count < 64 ? r->count : 64, &index)) return false;
    *out = r->entries[index].value;
    return true;
}

bool config_fail(config *cfg, const char *key, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return fail(cfg, find(cfg, key), "%s", msg);
}

bool config_check_unused(config *cfg) {
    for (int i = 0; i < cfg->n; i++)
        if (!cfg->entries[i].used) return fail(cfg, &cfg->entries[i], "unknown key '%s'", cfg->entries[i].key);
    return true;
}
