/*
 * fuzz_mail.c: libFuzzer target for the e-mail readers of the spam converter: qkv_mail_text
 * (recipes/mail_text.c: headers and folding, RFC 2047 encoded words, MIME multipart nesting,
 * message/rfc822, quoted-printable, base64, HTML to text) and qkv_mail_tokens
 * (recipes/mail_tokens.c: URLs, addresses, numbers, words).
 *
 * Input: one byte of options (the number of tokens kept, 1 .. 256), then the message's bytes.
 *
 * Invariants: the text never grows past a linear bound of the message (each byte decodes to at
 * most one, plus a line end per text part); the tokens kept are at most max_tokens and at most the
 * count returned, separated by single spaces, each non-empty and made of [a-z0-9'] or one of
 * ! $ ? <url> <email> <num>; and a line "ham<TAB>tokens" is a valid labeled-corpus line, as the
 * converter promises.
 */
#include "fuzz_util.h"

#include "data/data_internal.h"
#include "mail.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    return 0;
}

static bool token_ok(const char *t, size_t n) {
    if (n == 0) return false;
    static const char *const special[] = {"!", "$", "?", "<url>", "<email>", "<num>"};
    for (size_t k = 0; k < sizeof special / sizeof *special; k++)
        if (strlen(special[k]) == n && !memcmp(special[k], t, n)) return true;
    for (size_t i = 0; i < n; i++)
        if (!((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= '0' && t[i] <= '9') || t[i] == '\'')) return false;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_reader r = {data, size};
    const int64_t max_tokens = 1 + fz_byte(&r);
    qkv__buf text = {0}, tokens = {0};
    qkv_mail_text((const char *)r.p, r.n, &text);
    FZ_REQUIRE(!text.oom);
    FZ_REQUIRE(text.n <= 2 * r.n + 2);
    const int64_t count = qkv_mail_tokens(text.p ? text.p : "", text.n, max_tokens, &tokens);
    FZ_REQUIRE(!tokens.oom && count >= 0);
    int64_t kept = 0;
    for (size_t i = 0; i < tokens.n;) {
        size_t j = i;
        while (j < tokens.n && tokens.p[j] != ' ')
            j++;
        FZ_REQUIRE(token_ok(tokens.p + i, j - i));
        kept++;
        i = j + (j < tokens.n);
        FZ_REQUIRE(j == tokens.n || i < tokens.n); /* no trailing space */
    }
    FZ_REQUIRE(kept <= max_tokens && kept <= count && (kept == max_tokens || kept == count));
    if (kept) {
        qkv__buf line = {0};
        qkv__buf_str(&line, "ham\t");
        qkv__buf_add(&line, tokens.p, tokens.n);
        qkv__buf_ch(&line, '\n');
        FZ_REQUIRE(!line.oom);
        qkv_corpus *c = NULL;
        FZ_REQUIRE(qkv_corpus_parse(QKV_CORPUS_LABELED, line.p, line.n, "spam.tsv", NULL, &c) == QKV_OK);
        FZ_REQUIRE(qkv_corpus_size(c) == 1 && qkv_corpus_length(c, 0, QKV_FIELD_SRC) == kept);
        qkv_corpus_free(c);
        qkv__buf_free(&line);
    }
    qkv__buf_free(&text);
    qkv__buf_free(&tokens);
    return 0;
}
