/*
 * fuzz_train_log.c: libFuzzer target for the reader of a run's training log that `qkv train
 * --resume` uses (tools/task.c: task_best_logged reads out.dir/log.jsonl and returns the best
 * "dev_<metric>" value recorded, so that a resumed run keeps comparing with the model it saved).
 *
 * Input: one byte of options (bit 0: lower is better; bits 1-2: the metric, wer / accuracy /
 * loss / per), then the log's bytes.
 *
 * Invariants: no crash on any log (lines of any length, NUL bytes, numbers in any form); the
 * result is never NaN; it is the worst value (INFINITY or -INFINITY) when the log does not hold the
 * member, and otherwise at least as good as every value that a plain reading of the log's short
 * lines finds.
 */
#include "fuzz_util.h"

#include "task.h"

#include <math.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    return 0;
}

static bool contains(const uint8_t *data, size_t size, const char *needle, size_t n) {
    for (size_t i = 0; i + n <= size; i++)
        if (!memcmp(data + i, needle, n)) return true;
    return false;
}

static const char *const metrics[4] = {"wer", "accuracy", "loss", "per"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_reader r = {data, size};
    const uint8_t opts = fz_byte(&r);
    const bool lower = opts & 1;
    const char *key = metrics[(opts >> 1) & 3];
    fz_write_file(fz_path("log.jsonl"), r.p, r.n);
    const double best = task_best_logged(fz_dir(), key, lower);
    /* a plain reading: the lines of at most 4000 bytes without a NUL byte, each member found */
    char member[80];
    const int n = snprintf(member, sizeof member, "\"dev_%s\":", key);
    while (r.n) {
        size_t len;
        const char *line = fz_field(&r, '\n', &len);
        if (len > 4000 || memchr(line, 0, len)) continue;
        char *s = fz_strndup(line, len);
        const char *k = strstr(s, member);
        if (k) {
            char *end = NULL;
            const double v = strtod(k + n, &end);
            if (end != k + n && !isnan(v)) {
                FZ_REQUIRE(lower ? best <= v : best >= v);
            }
        }
        free(s);
    }
    if (!contains(data, size, member, (size_t)n)) FZ_REQUIRE(best == (lower ? INFINITY : -INFINITY));
    FZ_REQUIRE(!isnan(best));
    remove(fz_path("log.jsonl"));
    return 0;
}
