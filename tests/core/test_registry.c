/*
 * test_registry.c: the enumeration tables (qkv_registry.h). Every table is well formed (unique
 * names of lower-case letters, digits, '_' and '-'; unique values; a help line), name and value
 * convert both ways, an unknown name is refused with the list of names, every value of the
 * model configuration's enumerations survives a model file's JSON, and docs/cli.md lists every
 * entry with its help line (section "Names") and every name in the row of the configuration key
 * that takes it, and the task families of the CLI likewise; and `qkv list` prints them.
 */
#include "testutil.h"
#include "config.h"
#include "tools/cli_util.h"
#include "task.h"

#include "qkv/qkv_registry.h"

#include <ctype.h>
#include <stdio.h>

static bool is_name(const char *s) {
    if (!*s) return false;
    for (; *s; s++)
        if (!islower((unsigned char)*s) && !isdigit((unsigned char)*s) && *s != '_' && *s != '-') return false;
    return true;
}

TEST(registry_tables_are_well_formed) {
    CHECK(qkv_registry_get(QKV_REGISTRY_COUNT) == NULL && qkv_registry_get((qkv_registry_id)-1) == NULL);
    CHECK(qkv_registry_by_name("nonesuch") == NULL && qkv_registry_by_name(NULL) == NULL);
    for (int id = 0; id < QKV_REGISTRY_COUNT; id++) {
        const qkv_registry *r = qkv_registry_get((qkv_registry_id)id);
        CHECK(r && r->count > 0 && is_name(r->name) && r->what[0] && !strncmp(r->c_type, "qkv_", 4));
        if (!r) continue;
        CHECK(qkv_registry_by_name(r->name) == r);
        for (int j = 0; j < id; j++) CHECK(strcmp(qkv_registry_get((qkv_registry_id)j)->name, r->name) != 0);
        int max_value = 0;
        for (int i = 0; i < r->count; i++) {
            const qkv_registry_entry *e = &r->entries[i];
            CHECK(is_name(e->name) && e->help && e->help[0]);
            for (int j = 0; j < i; j++) CHECK(strcmp(r->entries[j].name, e->name) && r->entries[j].value != e->value);
            /* the table is in enum order, and the values are the enum's 0 .. count - 1 */
            CHECK(e->value == i);
            CHECK(qkv_registry_entry_of((qkv_registry_id)id, e->value) == e);
            CHECK(qkv_registry_name((qkv_registry_id)id, e->value) == e->name);
            int v = -1;
            CHECK_OK(qkv_registry_parse((qkv_registry_id)id, e->name, &v));
            CHECK(v == e->value);
            if (e->value > max_value) max_value = e->value;
        }
        CHECK(qkv_registry_name((qkv_registry_id)id, -1) == NULL);
        CHECK(qkv_registry_name((qkv_registry_id)id, max_value + 1) == NULL);
    }
}

TEST(registry_parse_refuses_an_unknown_name_listing_the_names) {
    int v = 7;
    CHECK_ERR(qkv_registry_parse(QKV_REGISTRY_SCORE, "dotty", &v), QKV_ERR_INVALID_ARG,
              "unknown attention score function 'dotty' (one of: dot, scaled_dot, additive, general, cosine)");
    CHECK(v == 7);
    CHECK_ERR(qkv_registry_parse(QKV_REGISTRY_NORM, "Softmax", &v), QKV_ERR_INVALID_ARG, "normaliser 'Softmax'");
    CHECK_ERR(qkv_registry_parse(QKV_REGISTRY_COUNT, "softmax", &v), QKV_ERR_INVALID_ARG, "bad argument");
    CHECK_ERR(qkv_registry_parse(QKV_REGISTRY_NORM, NULL, &v), QKV_ERR_INVALID_ARG, "bad argument");
    /* the list: its whole length whatever the buffer, truncated and terminated in a short one */
    char full[256], shorter[12];
    const char *want = "softmax, relu, relu_rownorm, sigmoid, sparsemax";
    CHECK(qkv_registry_list(QKV_REGISTRY_NORM, full, sizeof full) == strlen(want) && !strcmp(full, want));
    CHECK(qkv_registry_list(QKV_REGISTRY_NORM, shorter, sizeof shorter) == strlen(want));
    CHECK(!strcmp(shorter, "softmax, re"));
    CHECK(qkv_registry_list(QKV_REGISTRY_NORM, NULL, 0) == strlen(want));
}

/* A decoder-only configuration with one enum member set to `value`; false when the combination
 * is not a valid model (sincos_2d positions belong to image models). */
static bool with_value(qkv_registry_id id, int value, qkv_model_config *c) {
    *c = qkv_model_default_config(QKV_ARCH_DECODER, 16, 2, 1);
    c->tgt_vocab = 11;
    switch (id) {
    case QKV_REGISTRY_POS: c->pos = (qkv_abs_pos)value; break;
    case QKV_REGISTRY_ACTIVATION: c->activation = (qkv_activation)value; break;
    case QKV_REGISTRY_SCORE: c->self_attn.score = (qkv_score_kind)value; break;
    case QKV_REGISTRY_NORM: c->self_attn.norm = (qkv_attn_norm)value; break;
    case QKV_REGISTRY_RELPOS: c->self_attn.relpos = (qkv_relpos_kind)value; break;
    case QKV_REGISTRY_ARCH:
        *c = qkv_model_default_config((qkv_arch)value, 16, 2, 1);
        c->src_vocab = 9, c->tgt_vocab = 11;
        break;
    default: return false;
    }
    return qkv_model_config_check(c) == QKV_OK;
}

TEST(registry_values_survive_a_model_file) {
    const qkv_registry_id ids[] = {QKV_REGISTRY_ARCH, QKV_REGISTRY_POS, QKV_REGISTRY_ACTIVATION, QKV_REGISTRY_SCORE,
                                   QKV_REGISTRY_NORM, QKV_REGISTRY_RELPOS};
    const char *const keys[] = {"arch", "pos", "activation", "score", "norm", "relpos"};
    int tried = 0;
    for (size_t k = 0; k < sizeof ids / sizeof *ids; k++) {
        const qkv_registry *r = qkv_registry_get(ids[k]);
        for (int i = 0; i < r->count; i++) {
            qkv_model_config c, back;
            if (!with_value(ids[k], r->entries[i].value, &c)) {
                CHECK(ids[k] == QKV_REGISTRY_POS && r->entries[i].value == QKV_POS_SINCOS_2D);
                continue;
            }
            char json[4096], pair[96];
            CHECK_OK(qkv_model_config_to_json(&c, json, sizeof json));
            snprintf(pair, sizeof pair, "\"%s\":\"%s\"", keys[k], r->entries[i].name);
            CHECK(strstr(json, pair) != NULL);
            CHECK_OK(qkv_model_config_from_json(json, &back));
            char again[4096];
            CHECK_OK(qkv_model_config_to_json(&back, again, sizeof again));
            CHECK(!strcmp(json, again));
            tried++;
        }
    }
    CHECK(tried == 3 + 3 + 3 + 5 + 5 + 5);
    /* a name no table holds is refused naming the key and listing the names */
    qkv_model_config c;
    CHECK_ERR(qkv_model_config_from_json("{\"arch\":\"decoder\",\"tgt_vocab\":5,\"self_attn\":{\"norm\":\"entmax\"}}", &c),
              QKV_ERR_INVALID_ARG, "\"norm\": unknown attention normaliser 'entmax' (one of: softmax, relu,");
    CHECK_ERR(qkv_model_config_from_json("{\"arch\":7}", &c), QKV_ERR_INVALID_ARG,
              "\"arch\" must be a string, one of: encoder-decoder, encoder, decoder (got integer)");
}

/* The text of docs/cli.md (NULL when the source tree is not at hand). */
static char *read_cli_doc(void) {
    FILE *f = fopen(QKV_SOURCE_DIR "/docs/cli.md", "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = '\0';
    fclose(f);
    return s;
}

/* The line of `text` that starts with `start` (a table row), as a new string, or NULL. */
static char *line_starting(const char *text, const char *start) {
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, start, strlen(start))) {
            const char *end = strchr(p, '\n');
            const size_t n = end ? (size_t)(end - p) : strlen(p);
            char *line = malloc(n + 1);
            memcpy(line, p, n);
            line[n] = '\0';
            return line;
        }
    return NULL;
}

TEST(docs_list_every_registry_entry) {
    char *doc = read_cli_doc();
    CHECK(doc != NULL);
    if (!doc) return;
    /* section "Names": a heading per table, a row per entry with its help line */
    for (int id = 0; id < QKV_REGISTRY_COUNT; id++) {
        const qkv_registry *r = qkv_registry_get((qkv_registry_id)id);
        char heading[256], row[512];
        snprintf(heading, sizeof heading, "### %s: %s (`%s`)\n", r->name, r->what, r->c_type);
        const char *section = strstr(doc, heading);
        if (!section) qkv_test_fail(__FILE__, __LINE__, "docs/cli.md lacks the heading '%s'", heading);
        if (!section) continue;
        const char *next = strstr(section + 1, "\n#");
        for (int i = 0; i < r->count; i++) {
            snprintf(row, sizeof row, "\n| `%s` | %s |\n", r->entries[i].name, r->entries[i].help);
            const char *at = strstr(section, row);
            if (!at || (next && at > next))
                qkv_test_fail(__FILE__, __LINE__, "docs/cli.md, '%s': no row '%s'", heading, row + 1);
        }
    }
    /* the task families: their heading, a row each, and every name in the row of the `task` key */
    const char *tasks = strstr(doc, "### task: task family of qkv train (`task_ops`, tools/task.h)\n");
    CHECK_MSG(tasks != NULL, "docs/cli.md lacks the heading of the task families");
    char *task_row = line_starting(doc, "| `task` |");
    CHECK(task_row != NULL);
    for (int i = 0; tasks && task_row && i < task_count(); i++) {
        char row[512], quoted[64];
        snprintf(row, sizeof row, "\n| `%s` | %s |\n", task_at(i)->name, task_at(i)->summary);
        CHECK_MSG(strstr(tasks, row) != NULL, "docs/cli.md: no row '%s'", row + 1);
        snprintf(quoted, sizeof quoted, "`%s`", task_at(i)->name);
        CHECK_MSG(strstr(task_row, quoted) != NULL, "docs/cli.md, row of `task`: %s is missing", quoted);
    }
    free(task_row);
    /* the configuration keys' rows name every value they accept */
    const struct {
        const char *row;
        qkv_registry_id id;
        const char *except;
    } keys[] = {
        {"| `model.pos` |", QKV_REGISTRY_POS, NULL},
        {"| `model.activation` |", QKV_REGISTRY_ACTIVATION, NULL},
        {"| `model.attention.score` |", QKV_REGISTRY_SCORE, NULL},
        {"| `model.attention.norm` |", QKV_REGISTRY_NORM, NULL},
        {"| `model.attention.relpos` |", QKV_REGISTRY_RELPOS, NULL},
        {"| `train.lr`, `train.schedule`", QKV_REGISTRY_LR_SCHEDULE, NULL},
        {"| `train.ss`,", QKV_REGISTRY_SCHEDULED_SAMPLING, NULL},
        {"| `eval.strategy`,", QKV_REGISTRY_DECODE_STRATEGY, "sample"},
        {"| `eval.length_penalty` |", QKV_REGISTRY_LENGTH_PENALTY, NULL},
    };
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        char *line = line_starting(doc, keys[k].row);
        if (!line) qkv_test_fail(__FILE__, __LINE__, "docs/cli.md has no row '%s'", keys[k].row);
        if (!line) continue;
        const qkv_registry *r = qkv_registry_get(keys[k].id);
        for (int i = 0; i < r->count; i++) {
            char quoted[96];
            snprintf(quoted, sizeof quoted, "`%s`", r->entries[i].name);
            const bool listed = strstr(line, quoted) != NULL;
            const bool excepted = keys[k].except && !strcmp(keys[k].except, r->entries[i].name);
            if (listed == excepted)
                qkv_test_fail(__FILE__, __LINE__, "docs/cli.md, row '%s': %s %s", keys[k].row, quoted,
                              excepted ? "is not accepted there" : "is missing");
        }
        free(line);
    }
    /* the CLI's own switches (tools/config.c): their rows name every value too */
    for (int id = 0; id < SWITCH_COUNT; id++) {
        const config_switch_info *sw = config_switch_table((config_switch_id)id);
        char start[96];
        snprintf(start, sizeof start, "| `%s` |", sw->key);
        char *line = line_starting(doc, start);
        CHECK_MSG(line != NULL, "docs/cli.md has no row '%s'", start);
        for (int i = 0; line && i < sw->count; i++) {
            char quoted[96];
            snprintf(quoted, sizeof quoted, "`%s`", sw->names[i]);
            CHECK_MSG(strstr(line, quoted) != NULL, "docs/cli.md, row '%s': %s is missing", start, quoted);
        }
        free(line);
    }
    free(doc);
}

TEST(cli_list_prints_the_tables) {
    char out[16384];
    /* one table: its heading and a line per entry, name then help */
    CHECK(cli_exec(QKV_CLI_PATH " list relpos", out, sizeof out) == 0);
    CHECK(strstr(out, "relpos: relative positional encoding (qkv_relpos_kind)\n") == out);
    const qkv_registry *r = qkv_registry_get(QKV_REGISTRY_RELPOS);
    for (int i = 0; i < r->count; i++) {
        char line[256];
        snprintf(line, sizeof line, "  %-5s  %s\n", r->entries[i].name, r->entries[i].help);
        CHECK(strstr(out, line) != NULL);
    }
    /* no name: every table */
    CHECK(cli_exec(QKV_CLI_PATH " list", out, sizeof out) == 0);
    for (int id = 0; id < QKV_REGISTRY_COUNT; id++) {
        char heading[128];
        snprintf(heading, sizeof heading, "%s: %s (", qkv_registry_get((qkv_registry_id)id)->name,
                 qkv_registry_get((qkv_registry_id)id)->what);
        CHECK(strstr(out, heading) != NULL);
    }
    CHECK(cli_exec(QKV_CLI_PATH " list task", out, sizeof out) == 0);
    for (int i = 0; i < task_count(); i++) {
        char line[256];
        snprintf(line, sizeof line, "  %-8s  %s\n", task_at(i)->name, task_at(i)->summary);
        CHECK_MSG(strstr(out, line) != NULL, "qkv list task: no line '%s'", line);
    }
    CHECK(cli_exec(QKV_CLI_PATH " list score bogus", out, sizeof out) == 2);
    CHECK(strstr(out, "qkv list: unknown enumeration 'bogus'") != NULL && !strstr(out, "scaled_dot"));
    CHECK(cli_exec(QKV_CLI_PATH " list --bogus", out, sizeof out) == 2 && strstr(out, "unknown option '--bogus'"));
    CHECK(cli_exec(QKV_CLI_PATH " list --help", out, sizeof out) == 0 && strstr(out, "usage: qkv list"));
}
