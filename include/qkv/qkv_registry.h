/*
 * qkv_registry.h: one table per enumeration of the API. An entry is the name that model files,
 * configuration files and the CLI use, the enum value, and one line of help. Everything that
 * names, parses, range-checks or lists an enum value reads its table: the model file writer and
 * reader (qkv_model_config_to_json / _from_json), the configuration checks, the CLI's
 * configuration reader and `qkv list`, and a test that docs/cli.md lists every entry. Each table
 * is made (src/core/registry.c) from the enumeration's list of values in qkv_enums.h, the same
 * list that defines the enum constants (X(constant, name, help)): a new value of an enumeration
 * is one line there.
 *
 *   registry            enum (its list)                                  where the values act
 *   arch                qkv_arch (QKV_ARCH_VALUES)                       model.c
 *   pos                 qkv_abs_pos (QKV_ABS_POS_VALUES)                 model.c (absolute positions)
 *   activation          qkv_activation (QKV_ACTIVATION_VALUES)           layer.c (feed-forward)
 *   head                qkv_head_kind (QKV_HEAD_KIND_VALUES)             model.c (encoder-only output)
 *   score               qkv_score_kind (QKV_SCORE_KIND_VALUES)           mha.c, ops/attn_scores.c
 *   norm                qkv_attn_norm (QKV_ATTN_NORM_VALUES)             ops/attn_normalize.c
 *   relpos              qkv_relpos_kind (QKV_RELPOS_KIND_VALUES)         mha.c, ops/posenc_*.c
 *   lr_schedule         qkv_lr_kind (QKV_LR_KIND_VALUES)                 train/schedule.c
 *   scheduled_sampling  qkv_ss_kind (QKV_SS_KIND_VALUES)                 train/trainer.c
 *   decode_strategy     qkv_decode_strategy (QKV_DECODE_STRATEGY_VALUES) infer/decode.c
 *   length_penalty      qkv_length_penalty (QKV_LENGTH_PENALTY_VALUES)   infer/beam.c
 *   tokenizer           qkv_tokenizer_kind (QKV_TOKENIZER_KIND_VALUES)   data/tokenizer.c
 *   bleu_tokenizer      qkv_bleu_tokenizer (QKV_BLEU_TOKENIZER_VALUES)   data/bleu.c
 *   bleu_smooth         qkv_bleu_smooth (QKV_BLEU_SMOOTH_VALUES)         data/bleu.c
 */
#ifndef QKV_REGISTRY_H
#define QKV_REGISTRY_H

#include "qkv_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qkv_registry_entry {
    const char *name; /* as written in files and configuration: lower case, no spaces */
    int value;        /* the enum constant */
    const char *help; /* one line: what it is, and its reference */
} qkv_registry_entry;

typedef struct qkv_registry {
    const char *name;   /* "score" */
    const char *what;   /* "attention score function" */
    const char *c_type; /* "qkv_score_kind" */
    int count;
    const qkv_registry_entry *entries; /* in enum order */
} qkv_registry;

typedef enum qkv_registry_id {
    QKV_REGISTRY_ARCH = 0,
    QKV_REGISTRY_POS,
    QKV_REGISTRY_ACTIVATION,
    QKV_REGISTRY_HEAD,
    QKV_REGISTRY_SCORE,
    QKV_REGISTRY_NORM,
    QKV_REGISTRY_RELPOS,
    QKV_REGISTRY_LR_SCHEDULE,
    QKV_REGISTRY_SCHEDULED_SAMPLING,
    QKV_REGISTRY_DECODE_STRATEGY,
    QKV_REGISTRY_LENGTH_PENALTY,
    QKV_REGISTRY_TOKENIZER,
    QKV_REGISTRY_BLEU_TOKENIZER,
    QKV_REGISTRY_BLEU_SMOOTH,
    QKV_REGISTRY_COUNT
} qkv_registry_id;

/* The table of one enumeration; NULL for an id out of range. */
QKV_API const qkv_registry *qkv_registry_get(qkv_registry_id id);
/* The table called `name` ("score"); NULL when there is none. */
QKV_API const qkv_registry *qkv_registry_by_name(const char *name);
/* The entry of `value`; NULL when the value is not one of the enumeration's. */
QKV_API const qkv_registry_entry *qkv_registry_entry_of(qkv_registry_id id, int value);
/* The name of `value`, or NULL when it is not one of the enumeration's. */
QKV_API const char *qkv_registry_name(qkv_registry_id id, int value);
/* `name` -> its value. An unknown name is QKV_ERR_INVALID_ARG with a message that lists the
 * names: "unknown attention score function 'x' (one of: dot, scaled_dot, ...)". */
QKV_API qkv_status qkv_registry_parse(qkv_registry_id id, const char *name, int *value);
/* The names of the enumeration, ", "-separated, into buf (truncated to size; always
 * NUL-terminated when size > 0). Returns the length of the whole list. */
QKV_API size_t qkv_registry_list(qkv_registry_id id, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif
