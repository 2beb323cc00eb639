/*
 * fuzz_train_log.c: libFuzzer target for the reader of a run's training log that `qkv train
 * --resume` uses (tools/train_log.c): tlog_resume cuts out.dir/log.jsonl back to the checkpoint's
 * step, keeping the lines that are JSON objects with an integer "step" in 0 .. max_step and
 * rewriting the file atomically when that drops any, and passes each kept line to a visitor (the
 * report's history and the best dev metric so far).
 *
 * Input: one byte of max_step (0 .. 255), then the log's bytes.
 *
 * Invariants: no crash on any log (lines of any length, NUL bytes, numbers in any form, members
 * beyond TLOG_MAX_MEMBERS); every visited line has a step in 0 .. max_step and a type; kept +
 * dropped lines are the non-empty lines of the input; the file afterwards holds exactly the kept
 * lines, each ending with a newline, and filtering it again keeps all of them and drops none.
 */
#include "fuzz_util.h"

#include "train_log.h"

#include <math.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    return 0;
}

typedef struct {
    int64_t max_step, visits;
} visit_state;

static void visit(void *user, const tlog_line *l) {
    visit_state *v = user;
    FZ_REQUIRE(l->step >= 0 && l->step <= v->max_step);
    FZ_REQUIRE(l->type && l->type[0]);
    FZ_REQUIRE(l->n >= 0 && l->n <= TLOG_MAX_MEMBERS);
    for (int i = 0; i < l->n; i++) FZ_REQUIRE(l->m[i].key != NULL);
    v->visits++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_reader r = {data, size};
    visit_state v = {fz_byte(&r), 0};
    const char *path = fz_path("log.jsonl");
    fz_write_file(path, r.p, r.n);
    int64_t lines = 0;
    for (size_t i = 0, start = 0; i <= r.n; i++)
        if (i == r.n || r.p[i] == '\n') {
            lines += i > start;
            start = i + 1;
        }
    int64_t kept = 0, dropped = 0;
    if (tlog_resume(path, v.max_step, visit, &v, &kept, &dropped) == QKV_OK) {
        FZ_REQUIRE(kept == v.visits && kept + dropped == lines);
        size_t n = 0;
        char *text = fz_read_file(path, &n);
        FZ_REQUIRE(text != NULL);
        FZ_REQUIRE(n == 0 || text[n - 1] == '\n' || dropped == 0);
        char *again = NULL;
        size_t again_len = 0;
        int64_t kept2 = 0, dropped2 = 0;
        FZ_REQUIRE(tlog_filter(text, n, v.max_step, NULL, NULL, &again, &again_len, &kept2, &dropped2) == QKV_OK);
        FZ_REQUIRE(kept2 == kept && dropped2 == 0);
        free(again);
        free(text);
    }
    remove(path);
    return 0;
}
