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
 *   bpe      byte-pair-encoding subwords (Sennrich et al. 2016) of a model learned  spaces from
 *            by qkv_bpe_learn: "the lower" -> ▁the ▁low er; characters the model    the markers
 *            never saw become byte symbols <0xE2> (byte fallback)
 *
 * The names are those of the registry "tokenizer" (qkv_registry.h). A tokenizer reports each
 * symbol with the span of text it came from; chars, tokens and words only cut the text (the symbol
 * is that span), while bpe rewrites it ("▁low" for " low") and hands out symbols of its own
 * spelling. For bpe, and chars, join(split(x)) = x for every valid UTF-8 text x without a
 * newline. src/data/tokenizer.c holds the table of tokenizers; docs/data.md has the rules.
 */
#ifndef QKV_TOKENIZER_H
#define QKV_TOKENIZER_H

#include "qkv_base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* qkv_tokenizer_kind: qkv_enums.h lists its values. */

typedef struct qkv_tokenizer qkv_tokenizer;
typedef struct qkv_vocab qkv_vocab; /* qkv_data.h */

/* Receives one symbol: text[off, off + len) became sym[0, sym_len) (sym points into the text when
 * the tokenizer only cuts it). A non-zero status stops the split, which returns it. */
typedef qkv_status (*qkv_symbol_fn)(void *ctx, size_t off, size_t len, const char *sym, size_t sym_len);

/* A tokenizer of that kind. model_path names the tokenizer's own file for those that learn one
 * (bpe, which needs it); chars, tokens and words take none (NULL). QKV_ERR_INVALID_ARG for an
 * unknown kind, a model file given to one that takes none or missing for one that needs it;
 * QKV_ERR_FORMAT / QKV_ERR_IO for a model file that cannot be read (the message names the line). */
QKV_API qkv_status qkv_tokenizer_new(qkv_tokenizer_kind kind, const char *model_path, qkv_tokenizer **out);
/* The same by registry name ("chars"); an unknown name lists the names. */
QKV_API qkv_status qkv_tokenizer_from_name(const char *name, const char *model_path, qkv_tokenizer **out);
QKV_API void qkv_tokenizer_free(qkv_tokenizer *t); /* accepts NULL */
/* The shared instance of a tokenizer that takes no model file (chars, tokens, words), never to be
 * freed; NULL for any other kind. */
QKV_API const qkv_tokenizer *qkv_tokenizer_shared(qkv_tokenizer_kind kind);
/* Whether tokenizers of that kind need a model file (bpe). */
QKV_API bool qkv_tokenizer_takes_model(qkv_tokenizer_kind kind);
QKV_API qkv_tokenizer_kind qkv_tokenizer_kind_of(const qkv_tokenizer *t);
/* "chars", "tokens", "words", "bpe" */
QKV_API const char *qkv_tokenizer_name(const qkv_tokenizer *t);
/* What its symbols are called in messages: "characters", "tokens", "words", "subwords". */
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
 * exceed size - 1: call again with a larger buffer. bpe turns markers into spaces and byte symbols
 * into bytes; a byte sequence that is not valid UTF-8 comes out as U+FFFD, one per byte. */
QKV_API qkv_status qkv_tokenizer_join(const qkv_tokenizer *t, const char *const *syms, const size_t *lens, int64_t n,
                                      char *out, size_t size, size_t *out_len);

/* Add to v every symbol t can hand out that a training corpus may lack, so that every text t cuts
 * maps to symbols of v: for bpe all the symbols of its model (the 256 byte symbols "<0x00>" ..
 * "<0xFF>", the alphabet, what the merges make: a word never seen may stop at a symbol that the
 * corpus' words always merged further); nothing for the others, whose symbols are the text's. The
 * symbols already in v keep their ids. */
QKV_API qkv_status qkv_tokenizer_add_fallback(const qkv_tokenizer *t, qkv_vocab *v);

/* ---- learning a BPE model (src/data/bpe_learn.c) ---- */

typedef struct qkv_bpe_opts {
    int32_t merges;         /* at most this many merges (subword-nmt's --symbols); default 10000 */
    int64_t min_frequency;  /* stop when the most frequent pair occurs fewer times; default 2 */
    int64_t min_char_count; /* characters seen fewer times stay out of the alphabet; default 1 */
    bool byte_fallback;     /* characters outside the alphabet as byte symbols; default true */
} qkv_bpe_opts;

QKV_API qkv_bpe_opts qkv_bpe_default_opts(void);

typedef struct qkv_bpe_learner qkv_bpe_learner;

/* QKV_ERR_INVALID_ARG for merges < 0, min_frequency < 1 or min_char_count < 1. */
QKV_API qkv_status qkv_bpe_learner_new(const qkv_bpe_opts *opts, qkv_bpe_learner **out);
QKV_API void qkv_bpe_learner_free(qkv_bpe_learner *l); /* accepts NULL */
/* Count the words of one line of text (no newline; QKV_ERR_FORMAT for invalid UTF-8, "the
 * <what>"). A joint model of source and target is one learner given the lines of both. */
QKV_API qkv_status qkv_bpe_learner_add(qkv_bpe_learner *l, const char *text, size_t len, const char *what);
/* Learn the merges from the words counted so far and write the model file (atomically); the
 * number of merges learned (fewer than opts.merges when pairs ran out or fell below
 * min_frequency) and of alphabet characters into *merges / *chars (each may be NULL). The result
 * depends only on the words and their counts, not on the order of the lines. */
QKV_API qkv_status qkv_bpe_learner_save(qkv_bpe_learner *l, const char *path, int32_t *merges, int32_t *chars);

#ifdef __cplusplus
}
#endif

#endif
