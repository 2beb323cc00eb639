/*
 * qkv_data.h: the data layer. Independent of tensors and models: it turns text files into
 * padded int32 batches and scores predictions.
 *
 *   split rule     FNV-1a 32-bit hash of a key, bucket = hash % 100 (docs/data.md)
 *   qkv_vocab      symbol <-> id; ids 0..3 are <pad> <unk> <bos> <eos>
 *   qkv_corpus     a parsed text file: examples of symbols (strings), with their line numbers
 *                  (G2P pairs, token-per-line tagged sentences, label + tokens lines)
 *   qkv_dataset    a corpus encoded with vocabularies: examples of int32 ids
 *   qkv_batcher    length-bucketed batches under a token budget, shuffled with Philox by
 *                  (seed, epoch), resumable from a saved position
 *   metrics        multi-reference WER / PER (G2P), token and classification accuracy
 *   features       spelling features of words for taggers
 *
 * The converters of the shipped data sets (`qkv data prepare`) and the baselines (naive Bayes,
 * the n-gram LM) are recipes built on this layer: recipes/recipes.h.
 *
 * Errors: every call that can fail returns a qkv_status and leaves a message in qkv_last_error().
 * Problems in a file read "FILE:LINE: problem" (QKV_ERR_FORMAT); a file that cannot be opened is
 * QKV_ERR_IO. Nothing here aborts or exits on bad input. Objects are not thread-safe; distinct
 * objects may be used from distinct threads.
 */
#ifndef QKV_DATA_H
#define QKV_DATA_H

#include "qkv.h"
#include "qkv_tokenizer.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Split rule. A key (the word for CMUdict, "<fileid>.<k>" for Brown, the row index for digits)
 * goes to train when fnv1a32(key) % 100 < train_end, to dev when < dev_end, else to test.
 * FNV-1a 32: h = 0x811C9DC5; for each byte: h ^= byte, h *= 0x01000193 (mod 2^32).
 * ------------------------------------------------------------------------------------------- */

typedef enum qkv_split { QKV_SPLIT_TRAIN = 0, QKV_SPLIT_DEV = 1, QKV_SPLIT_TEST = 2 } qkv_split;

QKV_API uint32_t qkv_fnv1a32(const void *data, size_t len);
/* The split of key[0, len) for the bucket boundaries 0 <= train_end <= dev_end <= 100
 * (CMUdict 88, 90; Brown 80, 90; digits 70, 80). */
QKV_API qkv_split qkv_split_of(const char *key, size_t len, int train_end, int dev_end);
/* "train", "dev", "test" */
QKV_API const char *qkv_split_name(qkv_split s);

/* ---------------------------------------------------------------------------------------------
 * Vocabulary: symbols (non-empty byte strings without '\n', '\r' or NUL) <-> ids 0 .. size-1.
 * Ids 0..3 are always <pad>, <unk>, <bos>, <eos>; data symbols follow in the order they were
 * added (first seen), or in byte order after qkv_vocab_sort.
 *
 * File format (qkv_vocab_save / load): one symbol per line, line k holding id k - 1, the four
 * reserved symbols first, '\n' line ends. Lines are taken verbatim (a symbol may contain spaces
 * or a TAB). Saving writes "<path>.tmp.<pid>", fsyncs and renames it over path.
 * ------------------------------------------------------------------------------------------- */

#define QKV_VOCAB_PAD 0
#define QKV_VOCAB_UNK 1
#define QKV_VOCAB_BOS 2
#define QKV_VOCAB_EOS 3
#define QKV_VOCAB_RESERVED 4

/* The largest data, vocabulary or converter input file read (16 GiB): files are read whole. */
#define QKV_DATA_FILE_MAX ((uint64_t)1 << 34)

typedef struct qkv_vocab qkv_vocab;

/* A vocabulary holding only the four reserved symbols. */
QKV_API qkv_status qkv_vocab_new(qkv_vocab **out);
QKV_API void qkv_vocab_free(qkv_vocab *v); /* accepts NULL */
QKV_API int32_t qkv_vocab_size(const qkv_vocab *v);
/* Add sym[0, len) unless present; *id (may be NULL) gets its id either way. */
QKV_API qkv_status qkv_vocab_add(qkv_vocab *v, const char *sym, size_t len, int32_t *id);
/* The id of sym[0, len), or -1 when absent. */
QKV_API int32_t qkv_vocab_find(const qkv_vocab *v, const char *sym, size_t len);
/* The symbol of id (NUL-terminated), NULL when id is out of range. */
QKV_API const char *qkv_vocab_symbol(const qkv_vocab *v, int32_t id);
/* The id of sym[0, len). An absent symbol gives QKV_VOCAB_UNK, or when strict, QKV_ERR_FORMAT
 * "FILE:LINE: unknown symbol 'x' (not among the N symbols of the vocabulary)" with the given
 * file and line (file NULL: "<input>"). */
QKV_API qkv_status qkv_vocab_lookup(const qkv_vocab *v, const char *sym, size_t len, bool strict,
                                    const char *file, int64_t line, int32_t *id);
/* Reorder the data symbols (ids >= 4) by byte order (memcmp, shorter first on a tie). Ids
 * handed out before change: sort before encoding anything with the vocabulary. */
QKV_API qkv_status qkv_vocab_sort(qkv_vocab *v);
QKV_API qkv_status qkv_vocab_save(const qkv_vocab *v, const char *path);
/* Read a saved vocabulary. QKV_ERR_FORMAT "FILE:LINE: ..." for a missing or misplaced reserved
 * symbol, an empty line, a duplicate, a '\r' or NUL byte; QKV_ERR_IO when it cannot be read. */
QKV_API qkv_status qkv_vocab_load(const char *path, qkv_vocab **out);

/* ---------------------------------------------------------------------------------------------
 * Corpus: a text file parsed into examples of symbols. Four kinds:
 *
 *   QKV_CORPUS_PAIRS    "source<TAB>t1 t2 ...": G2P lines "word<TAB>PH1 PH2 ...". The source
 *                       symbols are the UTF-8 characters of the word (or its space-separated
 *                       tokens with src_tokens), the target the space-separated tokens.
 *   QKV_CORPUS_TAGGED   one token per line, "word<TAB>tag1[<TAB>tag2 ...]", a blank line after
 *                       each sentence (Brown: word, full tag, universal tag). An example is a
 *                       sentence: source = its words, target = its tags of column tag_column.
 *   QKV_CORPUS_LABELED  "label<TAB>t1 t2 ...": digits "7<TAB>0 3 16 ...". Source = the tokens,
 *                       target = the label (one symbol).
 *   QKV_CORPUS_TEXT     plain text, one text per line (language models): the target is the
 *                       line's UTF-8 characters (every character, spaces and TABs included), or
 *                       with text_words its words (maximal runs of bytes other than ' ' and
 *                       TAB); the source is empty. A blank line is an empty text (no symbols).
 *                       With text_chunk > 0, a line of more than text_chunk symbols becomes
 *                       consecutive examples of text_chunk symbols (the last one shorter), all
 *                       with the line's number (qkv_corpus_line tells the pieces of one line);
 *                       qkv_corpus_key is the piece's text.
 *
 * The text fields (a pairs source and target, a labeled line's tokens, a plain text) are cut by
 * tokenizers (qkv_tokenizer.h); the defaults are those named above, and qkv_read_opts can set
 * others (a pairs target of words, a text of tokens).
 *
 * Every file is ASCII-compatible UTF-8 with '\n' line ends. The reader rejects (QKV_ERR_FORMAT,
 * "FILE:LINE: problem") a missing or extra TAB, an empty field or token (two spaces in a row, a
 * leading or trailing space), a field whose tokenizer finds no symbol in it, a '\r', a NUL byte, invalid UTF-8, a line with a different number
 * of columns than the first (tagged), a blank line in a pairs or labeled file, two blank lines in
 * a row (an empty sentence), and a source or target longer than max_src_len / max_tgt_len (a
 * text: when it is not cut into chunks). The last line may lack its '\n'; a tagged file may lack
 * the blank line after its last sentence.
 * ------------------------------------------------------------------------------------------- */

typedef enum qkv_corpus_kind {
    QKV_CORPUS_PAIRS = 0,
    QKV_CORPUS_TAGGED = 1,
    QKV_CORPUS_LABELED = 2,
    QKV_CORPUS_TEXT = 3
} qkv_corpus_kind;

#define QKV_FIELD_SRC 0
#define QKV_FIELD_TGT 1

typedef struct qkv_read_opts {
    int64_t max_src_len; /* most source symbols per example; 0: no limit */
    int64_t max_tgt_len; /* most target symbols per example; 0: no limit */
    int tag_column;      /* tagged: the tag column, 1 = the first after the word; 0 means 1 */
    bool src_tokens;     /* pairs: source = space-separated tokens, not characters */
    bool text_words;     /* text: the symbols are the words, not the characters */
    int64_t text_chunk;  /* text: cut lines of more symbols into pieces of this many; 0: none */
    /* The tokenizers of the text fields (qkv_tokenizer.h), overriding the defaults above when set:
     * src_tokenizer cuts a pairs source (default chars, or tokens with src_tokens) and a labeled
     * line's tokens (default tokens); tgt_tokenizer cuts a pairs target (default tokens) and a
     * plain text (default chars, or words with text_words). Tagged files do not use them. */
    const qkv_tokenizer *src_tokenizer;
    const qkv_tokenizer *tgt_tokenizer;
} qkv_read_opts;

typedef struct qkv_corpus qkv_corpus;

/* Read and validate a whole file. opts may be NULL (no limits, first tag column). */
QKV_API qkv_status qkv_corpus_read(qkv_corpus_kind kind, const char *path,
                                   const qkv_read_opts *opts, qkv_corpus **out);
/* The same on text[0, len) (copied); messages name the file `name` (NULL: "<memory>"). */
QKV_API qkv_status qkv_corpus_parse(qkv_corpus_kind kind, const char *text, size_t len,
                                    const char *name, const qkv_read_opts *opts, qkv_corpus **out);
QKV_API void qkv_corpus_free(qkv_corpus *c); /* accepts NULL */
QKV_API qkv_corpus_kind qkv_corpus_kind_of(const qkv_corpus *c);
QKV_API const char *qkv_corpus_name(const qkv_corpus *c);
QKV_API int64_t qkv_corpus_size(const qkv_corpus *c);
/* The (1-based) line where example i starts; 0 when i is out of range. */
QKV_API int64_t qkv_corpus_line(const qkv_corpus *c, int64_t i);
/* The number of symbols of field QKV_FIELD_SRC / QKV_FIELD_TGT of example i (-1: bad args). */
QKV_API int64_t qkv_corpus_length(const qkv_corpus *c, int64_t i, int field);
/* Symbol k of a field of example i: a pointer into the corpus (not NUL-terminated) and *len;
 * NULL when out of range. */
QKV_API const char *qkv_corpus_symbol(const qkv_corpus *c, int64_t i, int field, int64_t k,
                                      size_t *len);
/* The source field of example i as written (pairs: the word; labeled: the token text; text: the
 * line, or its piece), NULL for a tagged corpus or i out of range. Not NUL-terminated. */
QKV_API const char *qkv_corpus_key(const qkv_corpus *c, int64_t i, size_t *len);

/* Build a vocabulary from one field of a corpus: the reserved symbols, then every symbol seen
 * at least min_count times (min_count <= 1: all), in first-seen order, or in byte order when
 * sorted. Rarer symbols are left out and map to <unk>. */
QKV_API qkv_status qkv_vocab_build(const qkv_corpus *c, int field, int64_t min_count, bool sorted,
                                   qkv_vocab **out);

/* ---------------------------------------------------------------------------------------------
 * Groups for G2P evaluation: consecutive examples of a pairs corpus with the same word form one
 * item whose targets are its references (the split files are sorted by word, so all variants of
 * a word are consecutive). Group g holds examples start[g] .. start[g + 1] - 1. A word that
 * comes back after another word is QKV_ERR_FORMAT "FILE:LINE: word 'x' already seen at line N":
 * grouping would count it twice.
 * ------------------------------------------------------------------------------------------- */

typedef struct qkv_groups {
    int64_t n;      /* number of groups */
    int64_t *start; /* n + 1 example indices; start[n] = corpus size */
} qkv_groups;

QKV_API qkv_status qkv_corpus_groups(const qkv_corpus *c, qkv_groups *out);
QKV_API void qkv_groups_free(qkv_groups *g); /* frees start, zeroes *g; accepts NULL */

/* ---------------------------------------------------------------------------------------------
 * Dataset: a corpus encoded into int32 ids, examples in corpus order. A NULL vocabulary means
 * the field holds decimal integers used as ids directly (digits: pixels 0..16, labels 0..9);
 * anything else there is QKV_ERR_FORMAT "FILE:LINE: ...". With a vocabulary, an unknown symbol
 * becomes <unk> (counted by qkv_dataset_unknowns) or, when strict, an error naming file and line
 * (for a tagged corpus the line of the token itself).
 * ------------------------------------------------------------------------------------------- */

typedef struct qkv_dataset qkv_dataset;

typedef struct qkv_example {
    const int32_t *src; /* src_len ids */
    int64_t src_len;
    const int32_t *tgt; /* tgt_len ids (labeled: 1, the label) */
    int64_t tgt_len;
    int64_t line; /* where the example starts in its file */
} qkv_example;

QKV_API qkv_status qkv_dataset_encode(const qkv_corpus *c, const qkv_vocab *src_vocab,
                                      const qkv_vocab *tgt_vocab, bool strict, qkv_dataset **out);
QKV_API void qkv_dataset_free(qkv_dataset *d); /* accepts NULL */
QKV_API int64_t qkv_dataset_size(const qkv_dataset *d);
QKV_API const char *qkv_dataset_name(const qkv_dataset *d);
/* Example i (views into the dataset, valid until it is freed). */
QKV_API qkv_status qkv_dataset_get(const qkv_dataset *d, int64_t i, qkv_example *out);
/* Symbols of field QKV_FIELD_SRC / QKV_FIELD_TGT that were mapped to <unk>. */
QKV_API int64_t qkv_dataset_unknowns(const qkv_dataset *d, int field);

/* ---------------------------------------------------------------------------------------------
 * Batching. An example's width is max(src_len, tgt_len + 1) with decoder arrays (seq2seq) and
 * max(src_len, tgt_len) without (tagging, classification). A batch of B rows whose widest example
 * is W costs B * W tokens (padding included, like fairseq's max_tokens), and every batch stays
 * within max_tokens (and max_rows when set); an example wider than max_tokens is an error at
 * qkv_batcher_new.
 *
 * Epoch e: examples are ordered by length bucket ((width - 1) / bucket_width), inside a bucket
 * by a 48-bit Philox key (qkv_rng_uniform(seed, e, stream 0, .)), ties by index; batches are cut
 * greedily along that order and then put in Philox order (Fisher-Yates, stream 1). So batches
 * hold similar lengths, every example appears exactly once per epoch, and the plan is a pure
 * function of (dataset, options, seed, epoch): the same on every run, different from one epoch
 * to the next. Without shuffle, examples are ordered by (width, index) and the batches follow
 * that order in every epoch (evaluation).
 *
 * A batch's arrays are row-major (B, cols), padded with pad_id after each row's length:
 *   src      (B, S)      S = max src_len
 *   tgt      (B, T)      T = max tgt_len (tagging: aligned with src; labeled: T = 1, the labels)
 *   dec_in   (B, T + 1)  bos, y1 .. yn        (decoder only, else NULL)
 *   dec_out  (B, T + 1)  y1 .. yn, eos        (decoder only, else NULL)
 * They belong to the batcher and stay valid until the next qkv_batcher_next / seek / free.
 * ------------------------------------------------------------------------------------------- */

typedef struct qkv_batch_opts {
    int64_t max_tokens;    /* token budget per batch, padding included (> 0) */
    int64_t max_rows;      /* most rows per batch; 0: no limit */
    int64_t bucket_width;  /* widths per length bucket; <= 1: one bucket per width */
    bool shuffle;          /* false: fixed order by width (evaluation) */
    bool decoder;          /* build dec_in / dec_out (teacher forcing for seq2seq) */
    uint64_t seed;         /* Philox key of the shuffle */
    int32_t pad_id;        /* fill of padded positions (QKV_VOCAB_PAD) */
    int32_t bos_id;        /* first decoder input (QKV_VOCAB_BOS) */
    int32_t eos_id;        /* last decoder output (QKV_VOCAB_EOS) */
    const int64_t *subset; /* batch only these example indices (NULL: all); copied */
    int64_t n_subset;
} qkv_batch_opts;

/* max_tokens as given, shuffle on, decoder off, seed 1, bucket_width 1, the reserved ids. */
QKV_API qkv_batch_opts qkv_batch_default_opts(int64_t max_tokens);

typedef struct qkv_batch {
    uint64_t epoch; /* this batch is batch `index` of epoch `epoch` */
    int64_t index;
    int64_t rows;           /* B */
    int64_t src_cols;       /* S */
    int64_t tgt_cols;       /* T */
    int64_t dec_cols;       /* T + 1 with decoder arrays, else 0 */
    int64_t tokens;         /* B * widest example: what the budget bounds */
    const int32_t *src;     /* (B, S) */
    const int32_t *tgt;     /* (B, T) */
    const int32_t *dec_in;  /* (B, T + 1) or NULL */
    const int32_t *dec_out; /* (B, T + 1) or NULL */
    const int32_t *src_len; /* (B) */
    const int32_t *tgt_len; /* (B); the decoder rows hold tgt_len + 1 ids */
    const int64_t *example; /* (B) dataset index of each row */
} qkv_batch;

/* Where the iterator stands: the next batch is batch `batch` of epoch `epoch`. fingerprint is a
 * 64-bit FNV-1a hash of the dataset's ids and the options; qkv_batcher_seek refuses a position
 * whose nonzero fingerprint differs (the data or the options changed since it was saved). */
typedef struct qkv_batch_pos {
    uint64_t epoch;
    int64_t batch;
    uint64_t fingerprint;
} qkv_batch_pos;

typedef struct qkv_batcher qkv_batcher;

/* The dataset must outlive the batcher. Starts at epoch 0, batch 0. */
QKV_API qkv_status qkv_batcher_new(const qkv_dataset *d, const qkv_batch_opts *opts,
                                   qkv_batcher **out);
QKV_API void qkv_batcher_free(qkv_batcher *b); /* accepts NULL */
/* The next batch. After the last batch of epoch e the batcher stands at (e + 1, 0): tell,
 * num_batches and the next call all refer to the epoch of the next batch. */
QKV_API qkv_status qkv_batcher_next(qkv_batcher *b, qkv_batch *out);
/* Batches in the epoch of the next batch (may differ between epochs when bucket_width > 1). */
QKV_API int64_t qkv_batcher_num_batches(const qkv_batcher *b);
QKV_API qkv_batch_pos qkv_batcher_tell(const qkv_batcher *b);
/* Continue from a saved position (0 <= batch <= the epoch's number of batches; the end of epoch
 * e is the same position as the start of epoch e + 1). */
QKV_API qkv_status qkv_batcher_seek(qkv_batcher *b, qkv_batch_pos pos);
/* "epoch=3 batch=17 fingerprint=0123456789abcdef" (for checkpoint metadata) and back. */
QKV_API void qkv_batch_pos_format(qkv_batch_pos pos, char *buf, size_t size);
QKV_API qkv_status qkv_batch_pos_parse(const char *s, qkv_batch_pos *out);

/* ---------------------------------------------------------------------------------------------
 * Metrics.
 *
 * G2P with several references (Phonetisaurus' rule, DATA.md section 4): for each word, the
 * closest reference is the one with the smallest Levenshtein distance to the hypothesis (ties:
 * the shorter reference, then the first);
 *   WER = words whose distance is > 0 / words,
 *   PER = sum of the distances / sum of the closest references' lengths.
 * ------------------------------------------------------------------------------------------- */

/* Levenshtein distance (unit insert, delete, substitute); -1 on a NULL array with a positive
 * length, a negative length, or out of memory. */
QKV_API int64_t qkv_edit_distance(const int32_t *a, int64_t na, const int32_t *b, int64_t nb);
/* The length of seq up to (not including) the first stop id (len when there is none): cuts a
 * decoded row at its <eos>. */
QKV_API int64_t qkv_seq_length(const int32_t *seq, int64_t len, int32_t stop);

typedef struct qkv_wer_counts {
    int64_t items;       /* words scored */
    int64_t item_errors; /* words whose hypothesis matches no reference */
    int64_t edits;       /* sum of the distances to the closest references */
    int64_t ref_len;     /* sum of the closest references' lengths */
} qkv_wer_counts;

/* Score one hypothesis against n_refs >= 1 references; *closest (may be NULL) gets the index of
 * the closest reference. */
QKV_API qkv_status qkv_wer_add(qkv_wer_counts *c, const int32_t *hyp, int64_t hyp_len,
                               const int32_t *const *refs, const int64_t *ref_lens, int64_t n_refs,
                               int64_t *closest);
/* The same with the targets of group g (of a pairs corpus encoded as d) as the references. */
QKV_API qkv_status qkv_wer_add_group(qkv_wer_counts *c, const qkv_dataset *d,
                                     const qkv_groups *groups, int64_t g, const int32_t *hyp,
                                     int64_t hyp_len, int64_t *closest);
QKV_API double qkv_wer(const qkv_wer_counts *c); /* 0 when nothing was scored */
QKV_API double qkv_per(const qkv_wer_counts *c); /* 0 when the references are empty */

/* Token accuracy (tagging) and classification accuracy: positions whose gold id is ignore_id
 * (e.g. the pad id; negative: none) are not counted. */
typedef struct qkv_accuracy {
    int64_t correct;
    int64_t total;
} qkv_accuracy;

QKV_API void qkv_accuracy_add(qkv_accuracy *a, const int32_t *pred, const int32_t *gold, int64_t n,
                              int32_t ignore_id);
QKV_API double qkv_accuracy_rate(const qkv_accuracy *a); /* correct / total; 0 when empty */

/* Detection of one positive class (spam): true positives, false positives, false negatives. */
typedef struct qkv_prf {
    int64_t tp, fp, fn;
} qkv_prf;

QKV_API void qkv_prf_add(qkv_prf *m, const int32_t *pred, const int32_t *gold, int64_t n,
                         int32_t positive);
QKV_API double qkv_precision(const qkv_prf *m); /* tp / (tp + fp); 0 when nothing predicted */
QKV_API double qkv_recall(const qkv_prf *m);    /* tp / (tp + fn); 0 when no positive */
QKV_API double qkv_f1(const qkv_prf *m);        /* 2 tp / (2 tp + fp + fn); 0 when tp = 0 */

/* ---------------------------------------------------------------------------------------------
 * Word features: spelling attributes of a word for taggers (spaCy's NORM, PREFIX, SUFFIX, SHAPE;
 * Huang, Xu & Yu 2015), the inputs that let a model guess the tag of a word it never saw.
 * Characters are UTF-8 code points; only ASCII letters change case or have a shape class.
 *
 *   lower      the word with A-Z lower-cased
 *   prefixN    the first N characters of lower (N = 1..3; the whole of lower when shorter)
 *   suffixN    the last N characters of lower (N = 1..4; the whole of lower when shorter)
 *   shape      spaCy's word_shape: A-Z -> X, a-z -> x, 0-9 -> d, other characters kept, a run of
 *              one class cut after 4: "Atlanta's" -> "Xxxxx'x", "1,000" -> "d,ddd", "U.S." ->
 *              "X.X."; "LONG" for 100 characters or more
 * ------------------------------------------------------------------------------------------- */

typedef enum qkv_word_feature {
    QKV_FEAT_LOWER = 0,
    QKV_FEAT_PREFIX1 = 1,
    QKV_FEAT_PREFIX2 = 2,
    QKV_FEAT_PREFIX3 = 3,
    QKV_FEAT_SUFFIX1 = 4,
    QKV_FEAT_SUFFIX2 = 5,
    QKV_FEAT_SUFFIX3 = 6,
    QKV_FEAT_SUFFIX4 = 7,
    QKV_FEAT_SHAPE = 8,
    QKV_FEAT_COUNT = 9
} qkv_word_feature;

/* "lower", "prefix1" .. "prefix3", "suffix1" .. "suffix4", "shape"; NULL out of range. */
QKV_API const char *qkv_word_feature_name(qkv_word_feature f);
/* The feature of that name, -1 when there is none. */
QKV_API int qkv_word_feature_from_name(const char *name);
/* Feature f of word[0, len) (len > 0) into out, NUL-terminated, its length in *out_len. out
 * needs max(len, 4) + 1 bytes (a feature is never longer than the word, "LONG" aside). */
QKV_API qkv_status qkv_word_feature_of(qkv_word_feature f, const char *word, size_t len, char *out,
                                       size_t size, size_t *out_len);

#ifdef __cplusplus
}
#endif

#endif
