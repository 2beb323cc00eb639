/*
 * registry.c: the tables of qkv_registry.h, one per enumeration, made from the enumeration's list
 * of values in qkv_enums.h (X(constant, name, help)). The names are those of model
 * files: changing one breaks every file that uses it, so a name is added, never renamed.
 */
#include "qkv/qkv.h"
#include "qkv/qkv_registry.h"
#include "qkv/qkv_tokenizer.h"

#include <stdio.h>
#include <string.h>

/* One registry from an enumeration's list of values (qkv_enums.h). */
#define REGISTRY_ENTRY(constant, name, help) {name, constant, help},
#define TABLE(id, reg_name, what, c_type, values)                                                                \
    static const qkv_registry_entry id##_entries[] = {values(REGISTRY_ENTRY)};                                 \
    static const qkv_registry id = {reg_name, what, c_type, (int)(sizeof id##_entries / sizeof *id##_entries), \
                                    id##_entries};

TABLE(arch, "arch", "architecture", "qkv_arch", QKV_ARCH_VALUES)

TABLE(pos, "pos", "absolute positional encoding", "qkv_abs_pos", QKV_ABS_POS_VALUES)

TABLE(activation, "activation", "feed-forward activation", "qkv_activation", QKV_ACTIVATION_VALUES)

TABLE(head, "head", "encoder-only output head", "qkv_head_kind", QKV_HEAD_KIND_VALUES)

TABLE(score, "score", "attention score function", "qkv_score_kind", QKV_SCORE_KIND_VALUES)

TABLE(norm, "norm", "attention normaliser", "qkv_attn_norm", QKV_ATTN_NORM_VALUES)

TABLE(relpos, "relpos", "relative positional encoding", "qkv_relpos_kind", QKV_RELPOS_KIND_VALUES)

TABLE(lr_schedule, "lr_schedule", "learning-rate schedule", "qkv_lr_kind", QKV_LR_KIND_VALUES)

TABLE(scheduled_sampling, "scheduled_sampling", "scheduled sampling decay", "qkv_ss_kind", QKV_SS_KIND_VALUES)

TABLE(decode_strategy, "decode_strategy", "decoding strategy", "qkv_decode_strategy", QKV_DECODE_STRATEGY_VALUES)

TABLE(length_penalty, "length_penalty", "beam search length penalty", "qkv_length_penalty", QKV_LENGTH_PENALTY_VALUES)

TABLE(tokenizer, "tokenizer", "tokenizer", "qkv_tokenizer_kind", QKV_TOKENIZER_KIND_VALUES)

TABLE(bleu_tokenizer, "bleu_tokenizer", "BLEU's tokenizer", "qkv_bleu_tokenizer", QKV_BLEU_TOKENIZER_VALUES)

TABLE(bleu_smooth, "bleu_smooth", "BLEU's smoothing", "qkv_bleu_smooth", QKV_BLEU_SMOOTH_VALUES)

static const qkv_registry *const registries[QKV_REGISTRY_COUNT] = {
    [QKV_REGISTRY_ARCH] = &arch,
    [QKV_REGISTRY_POS] = &pos,
    [QKV_REGISTRY_ACTIVATION] = &activation,
    [QKV_REGISTRY_HEAD] = &head,
    [QKV_REGISTRY_SCORE] = &score,
    [QKV_REGISTRY_NORM] = &norm,
    [QKV_REGISTRY_RELPOS] = &relpos,
    [QKV_REGISTRY_LR_SCHEDULE] = &lr_schedule,
    [QKV_REGISTRY_SCHEDULED_SAMPLING] = &scheduled_sampling,
    [QKV_REGISTRY_DECODE_STRATEGY] = &decode_strategy,
    [QKV_REGISTRY_LENGTH_PENALTY] = &length_penalty,
    [QKV_REGISTRY_TOKENIZER] = &tokenizer,
    [QKV_REGISTRY_BLEU_TOKENIZER] = &bleu_tokenizer,
    [QKV_REGISTRY_BLEU_SMOOTH] = &bleu_smooth,
};

const qkv_registry *qkv_registry_get(qkv_registry_id id) {
    return (unsigned)id < QKV_REGISTRY_COUNT ? registries[id] : NULL;
}

const qkv_registry *qkv_registry_by_name(const char *name) {
    for (int i = 0; name && i < QKV_REGISTRY_COUNT; i++)
        if (!strcmp(registries[i]->name, name)) return registries[i];
    return NULL;
}

const qkv_registry_entry *qkv_registry_entry_of(qkv_registry_id id, int value) {
    const qkv_registry *r = qkv_registry_get(id);
    for (int i = 0; r && i < r->count; i++)
        if (r->entries[i].value == value) return &r->entries[i];
    return NULL;
}

const char *qkv_registry_name(qkv_registry_id id, int value) {
    const qkv_registry_entry *e = qkv_registry_entry_of(id, value);
    return e ? e->name : NULL;
}

size_t qkv_registry_list(qkv_registry_id id, char *buf, size_t size) {
    const qkv_registry *r = qkv_registry_get(id);
    size_t len = 0;
    if (buf && size) buf[0] = '\0';
    for (int i = 0; r && i < r->count; i++) {
        const int n = snprintf(buf && len < size ? buf + len : NULL, buf && len < size ? size - len : 0, "%s%s",
                               i ? ", " : "", r->entries[i].name);
        len += (size_t)n;
    }
    return len;
}

qkv_status qkv_registry_parse(qkv_registry_id id, const char *name, int *value) {
    const qkv_registry *r = qkv_registry_get(id);
    if (!r || !name || !value) return qkv_set_error(QKV_ERR_INVALID_ARG, "qkv_registry_parse: bad argument");
    for (int i = 0; i < r->count; i++)
        if (!strcmp(r->entries[i].name, name)) {
            *value = r->entries[i].value;
            return QKV_OK;
        }
    char names[512];
    qkv_registry_list(id, names, sizeof names);
    return qkv_set_error(QKV_ERR_INVALID_ARG, "unknown %s '%.100s' (one of: %s)", r->what, name, names);
}
