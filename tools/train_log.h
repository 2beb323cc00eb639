/*
 * train_log.h: log.jsonl, the log of `qkv train`: one JSON object per line (docs/cli.md lists
 * the lines and their members). A line is built in memory and written with one fputs and a
 * fflush; a number that is NaN or infinite is written as null (JSON has no NaN), so every line
 * stays valid JSON. On --resume the log is cut back to the checkpoint's step, so a killed and
 * resumed run logs every step once, as if it had never stopped.
 */
#ifndef QKV_TOOLS_TRAIN_LOG_H
#define QKV_TOOLS_TRAIN_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "qkv/qkv.h"

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

/* ---- reading back (--resume) ---------------------------------------------------------------- */

#define TLOG_MAX_MEMBERS 32
#define TLOG_MAX_BYTES ((size_t)1 << 30) /* a longer log.jsonl is refused on --resume */

typedef struct tlog_member {
    const char *key;
    double value; /* NaN for null */
} tlog_member;

/* One line of the log as the reader sees it (pointers valid during the visit only). */
typedef struct tlog_line {
    const char *type; /* "train", "eval", "skip"; "eval" for a line without "type" */
    int64_t step;
    int n;
    tlog_member m[TLOG_MAX_MEMBERS]; /* the number and null members but "step", in order */
} tlog_line;

/* The member's value; NaN when it is absent or null. */
double tlog_get(const tlog_line *l, const char *key);

typedef void (*tlog_visit)(void *user, const tlog_line *line);

/* Of the lines of text[0, len), keep those that are JSON objects with an integer "step" in
 * 0 .. max_step, in order: their bytes go to *kept (malloc'd, every line ending with a newline;
 * the caller frees it) and each is passed to visit (may be NULL). Other lines (later steps, a
 * line cut short by a kill, anything that is not such an object) are dropped and counted.
 * QKV_ERR_OOM is the only error. */
qkv_status tlog_filter(const char *text, size_t len, int64_t max_step, tlog_visit visit, void *user,
                       char **kept, size_t *kept_len, int64_t *n_kept, int64_t *n_dropped);

/* --resume from a checkpoint of step max_step: the log at path filtered as above and, when that
 * changes it, replaced atomically by the kept lines (a missing file is an empty log). Errors:
 * not a regular file, over TLOG_MAX_BYTES, read or write failures (qkv_last_error()). */
qkv_status tlog_resume(const char *path, int64_t max_step, tlog_visit visit, void *user, int64_t *n_kept,
                       int64_t *n_dropped);

#endif
