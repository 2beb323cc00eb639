/*
 * train_log.h: log.jsonl, the log of `qkv train`: one JSON object per line (docs/cli.md lists
 * the lines and their members). A line is built in memory and written with one fputs and a
 * fflush; a number that is NaN or infinite is written as null (JSON has no NaN), so every line
 * stays valid JSON.
 */
#ifndef QKV_TOOLS_TRAIN_LOG_H
#define QKV_TOOLS_TRAIN_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct tlog_out {
    char text[4096];
    size_t n;
    bool overflow; /* the line did not fit: it is not written */
} tlog_out;

/* Start a line: {"type":"<type>","step":<step> */
void tlog_start(tlog_out *o, const char *type, int64_t step);
void tlog_int(tlog_out *o, const char *key, int64_t v);
/* v with `digits` significant digits ("%.*g"); null when v is not finite. */
void tlog_num(tlog_out *o, const char *key, double v, int digits);
/* v with `decimals` digits after the point ("%.*f", or "%.17g" beyond 1e15); null when v is not
 * finite. */
void tlog_fixed(tlog_out *o, const char *key, double v, int decimals);
/* A string member, escaped as JSON needs. */
void tlog_str(tlog_out *o, const char *key, const char *s);
/* End the line and write it to f (fputs, fflush): false with errno set when that fails. */
bool tlog_write(tlog_out *o, FILE *f);

#endif
