/*
 * lm_text.h: the text files of the language-model task (task = lm): reading them into examples,
 * the rows a decoder-only model is trained and scored on, and the scoring.
 *
 * A file holds one text per line (UTF-8, '\n' line ends; a blank line is an empty text). Its
 * symbols (data.unit) are its UTF-8 characters, every one of them, spaces included (char), or its
 * words, the maximal runs of bytes other than space and TAB (word). A line of m symbols is the
 * model row
 *
 *   input   <bos> s_1 .. s_m          (m + 1 positions)
 *   target  s_1 .. s_m <eos>
 *
 * so a line costs m + 1 positions of the model's max_len. Lines longer than max_len - 1 symbols
 * (data.long_lines): error (default; FILE:LINE), split (cut into pieces of max_len - 1 symbols;
 * every piece starts again from <bos>, and only the last piece of a line predicts <eos>), or
 * skip (left out of training and scoring; the count is reported).
 *
 * Scoring: the natural-log cross-entropy of every target position, summed in double:
 *   nats = sum over lines, over their symbols and one line end each, of -ln p(target | input)
 *   events = symbols + lines (the line ends), cross-entropy = nats / events (nats per token),
 *   perplexity = exp(cross-entropy), bits per symbol = cross-entropy / ln 2.
 * With the char unit every event is one character or one line end, so bits per symbol is the
 * bits per character of the text with its line ends counted as characters.
 */
#ifndef QKV_TOOLS_LM_TEXT_H
#define QKV_TOOLS_LM_TEXT_H

#include "config.h"
#include "qkv/qkv.h"
#include "qkv/qkv_data.h"

typedef enum lm_unit { LM_UNIT_CHAR = 0, LM_UNIT_WORD = 1 } lm_unit;
typedef enum lm_long_lines { LM_LONG_ERROR = 0, LM_LONG_SPLIT = 1, LM_LONG_SKIP = 2 } lm_long_lines;

typedef struct lm_text_opts {
    lm_unit unit;
    lm_long_lines long_lines;
    int64_t max_symbols; /* symbols per row: the model's max_len - 1 */
} lm_text_opts;

/* data.unit and data.long_lines (the keys task.conf keeps) into o; max_symbols from max_len.
 * False with cfg->error. */
bool lm_read_text_opts(config *cfg, int64_t max_len, lm_text_opts *o);
/* "char" / "word" and "error" / "split" / "skip". */
const char *lm_unit_name(lm_unit u);
/* The tokenizer of a unit: chars for char, words for word (qkv_tokenizer.h). */
const qkv_tokenizer *lm_unit_tokenizer(lm_unit u);
const char *lm_long_lines_name(lm_long_lines l);

typedef struct lm_text {
    qkv_corpus *corpus;
    qkv_dataset *data; /* after lm_text_encode */
    bool *continues;   /* (examples) the example is a piece of a line that goes on in the next */
    int64_t *subset;   /* skip: the examples kept (NULL: all) */
    int64_t n_subset;
    int64_t lines;   /* lines kept */
    int64_t skipped; /* lines skipped (longer than max_symbols) */
    int64_t symbols; /* symbols of the lines kept */
} lm_text;

/* Read and validate a text file (lines over the limit: as o->long_lines says). */
qkv_status lm_text_read(const char *path, const lm_text_opts *o, lm_text *out);
/* Encode the symbols with v (unknown symbols: <unk>, counted by qkv_dataset_unknowns). */
qkv_status lm_text_encode(lm_text *t, const qkv_vocab *v);
void lm_text_free(lm_text *t);

/* Batching options for t: rows <bos> s_1 .. s_m / s_1 .. s_m <eos> (the batcher's decoder
 * arrays), the kept examples only. */
qkv_batch_opts lm_batch_opts(const lm_text *t, int64_t max_tokens);

/* The targets of a batch of t: b->dec_out with the <eos> of every piece that a later piece
 * continues set to <pad> (ignored). *buf (grown as needed, *cap elements) holds them. */
const int32_t *lm_batch_targets(const lm_text *t, const qkv_batch *b, int32_t **buf, size_t *cap);

typedef struct lm_score {
    double nats;    /* summed cross-entropy */
    int64_t events; /* target tokens scored: symbols + line ends */
} lm_score;

/* Score the kept examples of t with a decoder-only model, in batches of at most max_tokens
 * positions (no dropout). */
qkv_status lm_text_score(const qkv_model *m, const lm_text *t, int64_t max_tokens, lm_score *out);

#endif
