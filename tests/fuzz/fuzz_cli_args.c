/*
 * fuzz_cli_args.c: libFuzzer target for the CLI's numeric option values (tools/cli_args.c:
 * cli_int_option, cli_real_option, cli_u64_option), as every subcommand and bench program reads
 * `--beam 4`, `--top-p 0.9`, `--seed 42`.
 *
 * Input: one byte picking the option's range (a few of the real ones, e.g. 1..1024, (0, 1],
 * [0, 1e9]), then the argv words separated by NUL bytes; each word in turn is read as the value of
 * an option (the last one has none: the "needs a value" path).
 *
 * Invariants: a value is accepted or refused (with the message on stderr), never a crash; an
 * accepted integer lies in its range and its text is a whole decimal number (no trailing bytes, no
 * leading space); an accepted real is finite and in its range, open at lo when asked; an accepted
 * seed's text starts with a digit; an accepted value moves the index past it, a refused one leaves
 * it where it was.
 */
#include "fuzz_util.h"

#include "cli_args.h"

#include <ctype.h>
#include <math.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    return 0;
}

static const struct {
    long long lo, hi;
} int_ranges[4] = {{1, 1024}, {0, 1000000}, {-1, 64}, {-2147483647LL - 1, 2147483647}};

static const struct {
    double lo, hi;
    bool lo_open;
} real_ranges[4] = {{0, 1, true}, {0, 1e9, false}, {-1e300, 1e300, false}, {1e-30, 1e30, false}};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_reader r = {data, size};
    const uint8_t opts = fz_byte(&r);
    char *argv[17];
    int argc = 0;
    argv[argc++] = fz_strndup("--opt", 5);
    while (r.n && argc < 16) {
        size_t len;
        const char *w = fz_field(&r, 0, &len);
        argv[argc++] = fz_strndup(w, len);
    }
    argv[argc] = NULL;
    for (int at = 0; at < argc; at++) {
        char *const opt = argv[at];
        argv[at] = "--opt"; /* the word before a value is the option's name */
        const bool has_value = at + 1 < argc;
        const char *text = has_value ? argv[at + 1] : "";
        int i = at;
        const int which = (opts >> 2) & 3;
        switch (opts & 3) {
        case 0:
        case 1: {
            int v = 0;
            if (cli_int_option("fuzz", argc, argv, &i, int_ranges[which].lo, int_ranges[which].hi, &v)) {
                FZ_REQUIRE(has_value && i == at + 1);
                FZ_REQUIRE(v >= int_ranges[which].lo && v <= int_ranges[which].hi);
                FZ_REQUIRE(*text && !isspace((unsigned char)*text));
                char *end = NULL;
                FZ_REQUIRE(strtoll(text, &end, 10) == v && *end == '\0');
            } else {
                FZ_REQUIRE(i == at);
            }
            break;
        }
        case 2: {
            double v = NAN;
            const bool lo_open = real_ranges[which].lo_open;
            if (cli_real_option("fuzz", argc, argv, &i, real_ranges[which].lo, real_ranges[which].hi, lo_open, &v)) {
                FZ_REQUIRE(has_value && i == at + 1 && isfinite(v));
                FZ_REQUIRE(v >= real_ranges[which].lo && v <= real_ranges[which].hi);
                FZ_REQUIRE(!lo_open || v > real_ranges[which].lo);
                FZ_REQUIRE(*text && !isspace((unsigned char)*text));
            } else {
                FZ_REQUIRE(i == at);
            }
            break;
        }
        default: {
            uint64_t v = 0;
            if (cli_u64_option("fuzz", argc, argv, &i, &v)) {
                FZ_REQUIRE(has_value && i == at + 1 && isdigit((unsigned char)*text));
                char *end = NULL;
                FZ_REQUIRE(strtoull(text, &end, 10) == v && *end == '\0');
            } else {
                FZ_REQUIRE(i == at);
            }
            break;
        }
        }
        argv[at] = opt;
    }
    for (int k = 0; k < argc; k++)
        free(argv[k]);
    return 0;
}
