/*
 * test_corpus_reserved.c: data that spells a reserved symbol (<pad> <unk> <bos> <eos>, ids 0-3 of
 * every vocabulary) as a token is refused by the corpus readers with file and line, since it would
 * be read as that id (a target "<eos>" ends every hypothesis there; a tag "<pad>" is padding).
 * <unk> is allowed where it means an unknown input word (sources, texts), not as an output.
 */
#include "testutil.h"
#include "qkv/qkv_data.h"

static void refused(qkv_corpus_kind kind, const char *text, const qkv_read_opts *o, const char *needle) {
    qkv_corpus *c = NULL;
    CHECK_ERR(qkv_corpus_parse(kind, text, strlen(text), "in.tsv", o, &c), QKV_ERR_FORMAT, needle);
    CHECK(c == NULL);
}

static void accepted(qkv_corpus_kind kind, const char *text, const qkv_read_opts *o) {
    qkv_corpus *c = NULL;
    CHECK_OK(qkv_corpus_parse(kind, text, strlen(text), "in.tsv", o, &c));
    qkv_corpus_free(c);
}

TEST(data_corpus_refuses_reserved_symbols_as_tokens) {
    const qkv_read_opts tokens = {.src_tokens = true}, words = {.text_words = true};
    refused(QKV_CORPUS_PAIRS, "ab\tA B\ncd\tC <eos>\n", NULL, "in.tsv:2: '<eos>' in the target is a reserved symbol");
    refused(QKV_CORPUS_PAIRS, "ab\t<pad>\n", NULL, "in.tsv:1: '<pad>' in the target");
    refused(QKV_CORPUS_PAIRS, "ab\t<unk> B\n", NULL, "not in an output");
    refused(QKV_CORPUS_PAIRS, "the <bos>\tA\n", &tokens, "'<bos>' in the source");
    refused(QKV_CORPUS_TAGGED, "The\tAT\njury\t<pad>\n", NULL, "in.tsv:2: '<pad>' in the tag");
    refused(QKV_CORPUS_TAGGED, "The\tAT\n<eos>\tNN\n", NULL, "in.tsv:2: '<eos>' in the word");
    refused(QKV_CORPUS_LABELED, "<unk>\tsome words\n", NULL, "'<unk>' in the label");
    refused(QKV_CORPUS_LABELED, "ham\tsome <pad> words\n", NULL, "'<pad>' in the tokens");
    refused(QKV_CORPUS_TEXT, "a b\nthe <eos> c\n", &words, "in.tsv:2: '<eos>' in the text");
    /* <unk> as an unknown input word; symbols that only look alike; characters of a word */
    accepted(QKV_CORPUS_PAIRS, "the <unk>\tA\n", &tokens);
    accepted(QKV_CORPUS_PAIRS, "<pad>\tP A D\n", NULL); /* the characters '<' 'p' 'a' 'd' '>' */
    accepted(QKV_CORPUS_PAIRS, "ab\t<PAD> <eos>x <eos\n", NULL);
    accepted(QKV_CORPUS_TAGGED, "<unk>\tNN\n", NULL);
    accepted(QKV_CORPUS_TEXT, "the <unk> sat\n", &words);
    accepted(QKV_CORPUS_TEXT, "<eos>\n", NULL); /* characters */
}
