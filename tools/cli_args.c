/*
 * cli_args.c: strict numeric option values (cli_args.h). strtoll / strtod / strtoull must consume
 * the whole text, which must not be empty, and the value must lie in the option's range.
 */
#include "cli_args.h"
#include "qkv/qkv.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The one refusal message of every option: false, for the callers to return. */
static bool refuse(const char *cmd, const char *opt, const char *what, const char *text) {
    fprintf(stderr, "%s: %s needs %s (got '%s')\n", cmd, opt, what, text);
    return false;
}

/* The option's value text, or NULL (with the message) when the command line ends at the option. */
static const char *value_of(const char *cmd, int argc, char **argv, const int *i, const char *what) {
    if (*i + 1 < argc) return argv[*i + 1];
    fprintf(stderr, "%s: %s needs %s\n", cmd, argv[*i], what);
    return NULL;
}

bool cli_int_option(const char *cmd, int argc, char **argv, int *i, long long lo, long long hi, int *out) {
    char what[96];
    snprintf(what, sizeof what, "an integer in %lld..%lld", lo, hi);
    const char *text = value_of(cmd, argc, argv, i, what);
    if (!text) return false;
    char *end = NULL;
    errno = 0;
    const long long v = strtoll(text, &end, 10);
    if (!*text || isspace((unsigned char)*text) || *end || errno || v < lo || v > hi)
        return refuse(cmd, argv[*i], what, text);
    *out = (int)v;
    *i += 1;
    return true;
}

/* A bound as a user would write it: whole numbers in full ("1000000", not %g's "1e+06"). */
static void bound_text(char *buf, size_t size, double v) {
    if (v == floor(v) && fabs(v) < 1e15) snprintf(buf, size, "%.0f", v);
    else snprintf(buf, size, "%g", v);
}

bool cli_real_option(const char *cmd, int argc, char **argv, int *i, double lo, double hi, bool lo_open,
                     double *out) {
    char what[96], lo_text[32], hi_text[32];
    bound_text(lo_text, sizeof lo_text, lo);
    bound_text(hi_text, sizeof hi_text, hi);
    snprintf(what, sizeof what, "a number in %c%s, %s]", lo_open ? '(' : '[', lo_text, hi_text);
    const char *text = value_of(cmd, argc, argv, i, what);
    if (!text) return false;
    char *end = NULL;
    errno = 0;
    const double v = strtod(text, &end); /* ERANGE: 1e-400 would be 0, 1e400 inf */
    if (!*text || isspace((unsigned char)*text) || *end || errno == ERANGE || !isfinite(v) || v < lo ||
        (lo_open && v == lo) || v > hi)
        return refuse(cmd, argv[*i], what, text);
    *out = v;
    *i += 1;
    return true;
}

bool cli_u64_option(const char *cmd, int argc, char **argv, int *i, uint64_t *out) {
    const char *what = "an integer in 0..18446744073709551615";
    const char *text = value_of(cmd, argc, argv, i, what);
    if (!text) return false;
    char *end = NULL;
    errno = 0;
    const unsigned long long v = strtoull(text, &end, 10);
    if (!isdigit((unsigned char)*text) || *end || errno) /* strtoull would take "-1" as 2^64 - 1 */
        return refuse(cmd, argv[*i], what, text);
    *out = (uint64_t)v;
    *i += 1;
    return true;
}

void cli_print_error(const char *prefix) {
    const char *msg = qkv_last_error();
    size_t n = strlen(msg);
    const char *at = strstr(msg, " [");
    for (const char *q = at; q; q = strstr(q + 2, " ["))
        at = q;
    if (at && n && msg[n - 1] == ']') n = (size_t)(at - msg);
    fprintf(stderr, "%s%.*s\n", prefix, (int)n, msg);
}
