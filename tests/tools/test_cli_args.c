/*
 * test_cli_args.c: the strict numeric option values of the qkv CLI (tools/cli_args.c), first
 * through the functions (what they accept, what they refuse, that a refused value leaves the
 * position and the output alone), then as a user meets them: `qkv decode` and `qkv eval` refuse
 * `--beam 0`, `--beam abc`, `--top-p 1.5`, `--seed -1` with exit 2 and a message naming the
 * option, before any model is read (the run directory does not exist).
 */
#include "cli_args.h"
#include "cli_util.h"
#include "testutil.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The functions print their refusals on stderr; the unit tests below silence them. */
static int saved_stderr = -1;
static void stderr_off(void) {
    fflush(stderr);
    saved_stderr = dup(2);
    FILE *null = fopen("/dev/null", "w");
    if (null) dup2(fileno(null), 2), fclose(null);
}
static void stderr_on(void) {
    fflush(stderr);
    if (saved_stderr >= 0) dup2(saved_stderr, 2), close(saved_stderr);
    saved_stderr = -1;
}

/* Parse "--opt text" as an integer in lo..hi; returns whether it was accepted. */
static bool int_value(const char *text, long long lo, long long hi, int *out, int *next) {
    char *argv[] = {"decode", "--opt", (char *)text, NULL};
    int i = 1;
    *out = -12345;
    stderr_off();
    const bool ok = cli_int_option("test", 3, argv, &i, lo, hi, out);
    stderr_on();
    *next = i;
    return ok;
}

TEST(cli_int_option_takes_whole_decimal_integers_in_range) {
    int v, i;
    CHECK(int_value("4", 1, 1024, &v, &i) && v == 4 && i == 2);
    CHECK(int_value("1024", 1, 1024, &v, &i) && v == 1024);
    CHECK(int_value("-3", -5, 5, &v, &i) && v == -3);
    CHECK(int_value("2147483647", 0, INT32_MAX, &v, &i) && v == INT32_MAX);
    static const char *const bad[] = {"0", "1025", "abc", "4x", "", " 4", "4 ", "0x10", "1e3", "4.0",
                                      "99999999999999999999", "-99999999999999999999"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        CHECK_MSG(!int_value(bad[k], 1, 1024, &v, &i), "'%s' accepted as %d", bad[k], v);
        CHECK_MSG(v == -12345 && i == 1, "'%s' refused but changed the output (%d) or the position (%d)", bad[k], v, i);
    }
    char *argv[] = {"decode", "--beam"};
    i = 1;
    stderr_off();
    const bool missing_ok = cli_int_option("test", 2, argv, &i, 1, 8, &v);
    stderr_on();
    CHECK(!missing_ok && i == 1); /* the value is missing */
}

TEST(cli_real_option_honours_open_and_closed_bounds) {
    static const struct {
        const char *text;
        bool lo_open, ok;
        double want;
    } cases[] = {{"0.5", true, true, 0.5},  {"1", true, true, 1},      {"1e-3", true, true, 1e-3},
                 {"0", true, false, 0},     {"0", false, true, 0},     {"1.5", true, false, 0},
                 {"-0.1", false, false, 0}, {"nan", false, false, 0}, {"inf", false, false, 0},
                 {"", false, false, 0},     {"0.5x", false, false, 0}, {".5", true, true, 0.5},
                 {"1e-400", false, false, 0}, /* underflows to 0: refused, not taken as 0 */
                 {"1e400", false, false, 0}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char *argv[] = {"decode", "--top-p", (char *)cases[k].text};
        int i = 1;
        double v = -7;
        stderr_off();
        const bool ok = cli_real_option("test", 3, argv, &i, 0, 1, cases[k].lo_open, &v);
        stderr_on();
        CHECK_MSG(ok == cases[k].ok, "'%s' (%s 0): %s", cases[k].text, cases[k].lo_open ? "open" : "closed",
                  ok ? "accepted" : "refused");
        CHECK_MSG(ok ? v == cases[k].want && i == 2 : v == -7 && i == 1, "'%s': value %g, position %d", cases[k].text,
                  v, i);
    }
}

TEST(cli_u64_option_takes_the_full_range_and_no_sign) {
    static const struct {
        const char *text;
        bool ok;
        uint64_t want;
    } cases[] = {{"0", true, 0},           {"18446744073709551615", true, UINT64_MAX},
                 {"-1", false, 0},         {"18446744073709551616", false, 0},
                 {"+4", false, 0},         {"4a", false, 0},
                 {"", false, 0},           {"12345678901234", true, 12345678901234u}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char *argv[] = {"decode", "--seed", (char *)cases[k].text};
        int i = 1;
        uint64_t v = 99;
        stderr_off();
        const bool ok = cli_u64_option("test", 3, argv, &i, &v);
        stderr_on();
        CHECK_MSG(ok == cases[k].ok && (ok ? v == cases[k].want && i == 2 : v == 99 && i == 1), "'%s': %s, %llu",
                  cases[k].text, ok ? "accepted" : "refused", (unsigned long long)v);
    }
}

TEST(cli_decode_and_eval_refuse_malformed_numbers_before_reading_the_run) {
    static const struct {
        const char *args, *message;
    } cases[] = {
        {"decode /nonexistent/run --beam 0", "qkv decode: --beam needs an integer in 1..1024 (got '0')"},
        {"decode /nonexistent/run --beam abc", "qkv decode: --beam needs an integer in 1..1024 (got 'abc')"},
        {"decode /nonexistent/run --nbest 3x", "qkv decode: --nbest needs an integer in 1..1024 (got '3x')"},
        {"decode /nonexistent/run --sample --top-p 1.5", "--top-p needs a number in (0, 1] (got '1.5')"},
        {"decode /nonexistent/run --sample --top-p 0", "--top-p needs a number in (0, 1] (got '0')"},
        {"decode /nonexistent/run --sample --temperature -1", "--temperature needs a number in [0, 1000000] (got '-1')"},
        {"decode /nonexistent/run --sample --top-k -2", "--top-k needs an integer in 0..2147483647 (got '-2')"},
        {"decode /nonexistent/run --sample --seed -1", "--seed needs an integer in 0..18446744073709551615 (got '-1')"},
        {"decode /nonexistent/run --max-len 0", "--max-len needs an integer in 1..1000000 (got '0')"},
        {"decode /nonexistent/run --beam", "qkv decode: --beam needs an integer in 1..1024\n"},
        {"decode /nonexistent/run --threads -1", "qkv decode: --threads needs an integer in 0..4096 (got '-1')"},
        {"eval /nonexistent/run data.tsv --beam 0", "qkv eval: --beam needs an integer in 1..1024 (got '0')"},
        {"eval /nonexistent/run data.tsv --threads many", "qkv eval: --threads needs an integer in 0..4096 (got 'many')"},
        {"eval /nonexistent/run data.tsv --show -1", "qkv eval: --show needs an integer in 0..2147483647 (got '-1')"},
        {"eval /nonexistent/run data.tsv --length-beam 2000", "--length-beam needs an integer in 1..1024 (got '2000')"},
    };
    char cmd[512], out[4096];
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        snprintf(cmd, sizeof cmd, "%s %s", QKV_CLI_PATH, cases[k].args);
        const int rc = cli_exec(cmd, out, sizeof out);
        CHECK_MSG(rc == 2 && strstr(out, cases[k].message), "qkv %s: exit %d, output '%s'", cases[k].args, rc, out);
    }
}
