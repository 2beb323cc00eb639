/*
 * cli_args.h: strict numeric values of command-line options. `--beam 0`, `--beam abc`,
 * `--beam 4x`, `--top-p 1.5` or a missing value are refused with one message that names the
 * command, the option, the accepted range and the text given, e.g.
 *   qkv decode: --beam needs an integer in 1..1024 (got 'abc')
 * instead of atoi's silent 0. Every numeric option of the subcommands and of the bench programs is
 * read through these. cli_print_error prints a library error for a command-line user.
 */
#ifndef QKV_TOOLS_CLI_ARGS_H
#define QKV_TOOLS_CLI_ARGS_H

#include <stdbool.h>
#include <stdint.h>

/* The value of option argv[*i], argv[*i + 1], as a decimal integer in lo..hi; *i moves past it.
 * false (the message on stderr, "CMD: ...", CMD being the program and subcommand, e.g.
 * "qkv decode" or "bench_decode") when it is missing, malformed or out of range. */
bool cli_int_option(const char *cmd, int argc, char **argv, int *i, long long lo, long long hi, int *out);

/* As cli_int_option for a real number in [lo, hi], or (lo, hi] when lo_open; finite. */
bool cli_real_option(const char *cmd, int argc, char **argv, int *i, double lo, double hi, bool lo_open,
                     double *out);

/* As cli_int_option for an unsigned 64-bit integer (a seed): digits only, no sign. */
bool cli_u64_option(const char *cmd, int argc, char **argv, int *i, uint64_t *out);

/* qkv_last_error() on stderr after prefix ("qkv inspect: "), without the " [file.c:line]" suffix
 * that locates the message in the library's source (noise for a command-line user). */
void cli_print_error(const char *prefix);

#endif
