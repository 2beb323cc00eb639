/* config.c: see config.h. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool fail(config *cfg, const config_entry *e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fail(config *cfg, const config_entry *e, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!e) snprintf(cfg->error, sizeof cfg->error, "%s", msg);
    else if (e->line > 0) snprintf(cfg->error, sizeof cfg->error, "%s:%d: %s", e->file, e->line, msg);
    else snprintf(cfg->error, sizeof cfg->error, "%s: %s", e->file, msg);
    return false;
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1])) *--end = '\0';
    return s;
}

static char *dup(const char *s) {
    char *d = malloc(strlen(s) + 1);
    if (d) strcpy(d, s);
    return d;
}

static config_entry *find(config *cfg, const char *key) {
    for (int i = cfg->n - 1; i >= 0; i--) /* the last assignment wins */
        if (!strcmp(cfg->entries[i].key, key)) return &cfg->entries[i];
    return NULL;
}

static bool add(config *cfg, const char *key, const char *value, const char *file, int line) {
    config_entry probe = {NULL, NULL, file, line, false};
    if (!*key) return fail(cfg, &probe, "empty key");
    for (const char *c = key; *c; c++)
        if (!(isalnum((unsigned char)*c) || *c == '.' || *c == '_'))
            return fail(cfg, &probe, "key '%s' may contain only letters, digits, '.' and '_'", key);
    const config_entry *old = find(cfg, key);
    if (old && old->line > 0 && line > 0 && old->file == file)
        return fail(cfg, &probe, "key '%s' is set twice (first on line %d)", key, old->line);
    const int old_at = old ? (int)(old - cfg->entries) : -1; /* the array may move below */
    if (cfg->n == cfg->cap) {
        int cap = cfg->cap ? 2 * cfg->cap : 32;
        config_entry *grown = realloc(cfg->entries, (size_t)cap * sizeof *grown);
        if (!grown) return fail(cfg, NULL, "out of memory");
        cfg->entries = grown;
        cfg->cap = cap;
    }
    config_entry *e = &cfg->entries[cfg->n];
    e->key = dup(key);
    e->value = dup(value);
    e->file = file;
    e->line = line;
    e->used = false;
    if (!e->key || !e->value) return fail(cfg, NULL, "out of memory");
    cfg->n++;
    if (old_at >= 0) cfg->entries[old_at].used = true; /* overridden: not "unknown" on its own account */
    return true;
}

bool config_load(config *cfg, const char *path) {
    memset(cfg, 0, sizeof *cfg);
    if (!path) return true;
    cfg->path = dup(path);
    FILE *f = fopen(path, "r");
    if (!f) return fail(cfg, NULL, "%s: %s", path, strerror(errno));
    char buf[4096];
    int line = 0;
    bool ok = true;
    while (ok && fgets(buf, sizeof buf, f)) {
        line++;
        config_entry here = {NULL, NULL, cfg->path, line, false};
        if (!strchr(buf, '\n') && !feof(f)) {
            ok = fail(cfg, &here, "line longer than %zu bytes", sizeof buf - 2);
            break;
        }
        char *s = trim(buf);
        if (!*s || *s == '#') continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            ok = fail(cfg, &here, "expected 'key = value', got '%s'", s);
            break;
        }
        *eq = '\0';
        ok = add(cfg, trim(s), trim(eq + 1), cfg->path, line);
    }
    if (ok && ferror(f)) ok = fail(cfg, NULL, "%s: read error", path);
    fclose(f);
    return ok;
}

bool config_set(config *cfg, const char *assignment) {
    char *copy = dup(assignment);
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
