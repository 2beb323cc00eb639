/*
 * cli_testutil.h: helpers for the tests that run the built `qkv` binary (QKV_CLI_PATH) as a user
 * does: run a shell command capturing its output, write a small file, compare two files, read a
 * number out of the output.
 */
#ifndef QKV_CLI_TESTUTIL_H
#define QKV_CLI_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>

#ifndef QKV_CLI_PATH
#define QKV_CLI_PATH "build/release/qkv"
#endif

/* Run cmd with stderr joined to stdout; out (size bytes) receives the output, its end when it is
 * longer (the output is read to the end, so the command never dies of SIGPIPE). Returns the exit
 * status, -1 when the command could not run or did not exit normally. */
int cli_run(const char *cmd, char *out, size_t size);
/* Write text to path (truncating it). */
void cli_write_file(const char *path, const char *text);
/* The two files exist and hold the same bytes. */
bool cli_same_file(const char *a, const char *b);
/* The number right after the first occurrence of what in text (NAN when absent). */
double cli_number_after(const char *text, const char *what);

#endif
