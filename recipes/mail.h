/*
 * mail.h: the e-mail reader of the spam data set (qkv_prepare_spam): an RFC 5322 message to its
 * text (mail_text.c: headers and folding, RFC 2047 encoded words, MIME multipart nesting,
 * quoted-printable and base64, HTML to text), and that text to tokens (mail_tokens.c: URLs,
 * addresses, numbers, words). docs/data.md, "Spam vs ham", has the rules.
 */
#ifndef QKV_RECIPES_MAIL_H
#define QKV_RECIPES_MAIL_H

#include "data/data_internal.h"

#include <stddef.h>
#include <stdint.h>

/* The Subject and the decoded body text of an RFC 5322 message, each followed by '\n', appended
 * to out. Out of memory sets out->oom. */
void qkv_mail_text(const char *msg, size_t len, qkv__buf *out);
/* Tokenize text[0, len): the first max_tokens tokens are appended to out, separated by single
 * spaces; returns the number of tokens in the whole text. */
int64_t qkv_mail_tokens(const char *text, size_t len, int64_t max_tokens, qkv__buf *out);

#endif
