/*
 * qkv_tokenizer.h: how a text becomes a sequence of symbols, and symbols become text again. The
 * corpus readers cut every text field with a tokenizer, and a run records the tokenizer of each
 * vocabulary beside it (task.conf: data.src_tokenizer, data.tgt_tokenizer) so that decoding cuts
 * its inputs as training did.
 *
 *   name     symbols                                                        joined with
 *   chars    every UTF-8 character, spaces and TABs included: "a b" -> a, " ", b    nothing
 *   tokens   the text is already tokenized: symbols between single spaces;         one space
 *            an empty token (two spaces in a row, a leading or trailing space)
 *            is an error
 *   words    maximal runs of bytes other than space and TAB; any run of blanks      one space
 *            separates, and blanks at either end are dropped
 *
 * The names are those of the registry "tokenizer" (qkv_registry.h). A tokenizer reports each
 * symbol with the span of text it came from; the three above only cut the text (the symbol is
 * that span), while a tokenizer that rewrites it (subwords: "low@@ er") hands out symbols of its
 * own spelling. src/data/tokenizer.c holds the table of tokenizers; docs/data.md has the rules.
 */
#ifndef QKV_TOKENIZER_H
#define QKV_TOKENIZER_H

#include "qkv_base.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* qkv_tokenizer_kind: qkv_enums.h lists its values. */

typedef struct qkv_tokenizer qkv_tokenizer;

/* Receives one symbol: text[off, off + len) became sym[0, sym_len) (sym points into the text when
 * the tokenizer only cuts it). A non-zero status stops the split, which returns it. */
typedef qkv_status (*qkv_symbol_fn)(void *ctx, size_t off, size_t len, const char *sym, size_t sym_len);

/* A tokenizer of that kind. model_path names the tokenizer's own file for those that learn one
 * (subwords); chars, tokens and words take none (NULL). QKV_ERR_INVALID_ARG for an unknown kind or
 * a model file given to one that takes none. */
QKV_API qkv_status qkv_tokenizer_new(qkv_tokenizer_kind kind, const char *model_path, qkv_tokenizer **out);
/* The same by registry name ("chars"); an unknown name lists the names. */
QKV_API qkv_status qkv_tokenizer_from_name(const char *name, const char *model_path, qkv_tokenizer **out);
QKV_API void qkv_tokenizer_free(qkv_tokenizer *t); /* accepts NULL */
/* The shared instance of a tokenizer that takes no model file (chars, tokens, words), never to be
 * freed; NULL for any other kind. */
QKV_API const qkv_tokenizer *qkv_tokenizer_shared(qkv_tokenizer_kind kind);
QKV_API qkv_tokenizer_kind qkv_tokenizer_kind_of(const qkv_tokenizer *t);
/* "chars", "tokens", "words" */
QKV_API const char *qkv_tokenizer_name(const qkv_tokenizer *t);
/* What its symbols are called in messages: "characters", "tokens", "words". */
QKV_API const char *qkv_tokenizer_unit(const qkv_tokenizer *t);

/* Cut text[0, len) into symbols, in order, handing each to emit. A text the tokenizer cannot cut
 * (invalid UTF-8, an empty token) is QKV_ERR_FORMAT with a message naming the problem and "the
 * <what>" (what: "source", "target", "text"; NULL: "text"). An empty text gives no symbol. */
QKV_API qkv_status qkv_tokenizer_split(const qkv_tokenizer *t, const char *text, size_t len, const char *what,
                                       qkv_symbol_fn emit, void *ctx);
/* The number of symbols of text[0, len) (-1 when it cannot be cut; qkv_last_error() says why). */
QKV_API int64_t qkv_tokenizer_count(const qkv_tokenizer *t, const char *text, size_t len);

/* The text of n symbols (syms[i] of lens[i] bytes), joined as the table above says, into out
 * (NUL-terminated, truncated to size). *out_len (may be NULL) gets the whole length, which may
 * exceed size - 1: call again with a larger buffer. */
QKV_API qkv_status qkv_tokenizer_join(const qkv_tokenizer *t, const char *const *syms, const size_t *lens, int64_t n,
                                      char *out, size_t size, size_t *out_len);

#ifdef __cplusplus
}
#endif

#endif
