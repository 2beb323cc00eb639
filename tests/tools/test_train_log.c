/*
 * test_train_log.c: log.jsonl's writer and reader (tools/train_log.c) on their own. Non-finite
 * numbers are written as null and strings escaped, so every line parses; the reader keeps the
 * JSON objects with an integer step up to the checkpoint's, byte for byte, reads a line without
 * "type" as an evaluation (logs of older versions) and drops later steps, cut lines and
 * anything else.
 */
#include "testutil.h"
#include "train_log.h"
#include "io/json.h"

#include <stdio.h>

TEST(train_log_writes_null_for_nonfinite_numbers) {
    tlog_out o;
    tlog_start(&o, "skip", 7);
    tlog_num(&o, "loss", NAN, 7);
    tlog_num(&o, "grad_norm", -INFINITY, 7);
    tlog_fixed(&o, "big", 1e300, 4);
    tlog_fixed(&o, "x", 0.5, 2);
    tlog_str(&o, "what", "a \"quoted\"\\\n word");
    char buf[4096];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    CHECK(f && tlog_write(&o, f));
    if (f) fclose(f);
    CHECK_MSG(!strcmp(buf, "{\"type\":\"skip\",\"step\":7,\"loss\":null,\"grad_norm\":null,\"big\":1.0000000000000001e+300,"
                           "\"x\":0.50,\"what\":\"a \\\"quoted\\\"\\\\\\u000a word\"}\n"),
              "line: %s", buf);
    qkv_json_doc *doc = NULL;
    CHECK_OK(qkv_json_parse(buf, strlen(buf) - 1, &doc, NULL));
    const qkv_json_value *w = qkv_json_get(qkv_json_root(doc), "what");
    CHECK(w && w->type == QKV_JSON_STRING && !strcmp(w->str, "a \"quoted\"\\\n word"));
    qkv_json_free(doc);
}

typedef struct {
    char seen[256];
    double loss;
} visits;

static void visit(void *user, const tlog_line *l) {
    visits *v = user;
    snprintf(v->seen + strlen(v->seen), sizeof v->seen - strlen(v->seen), "%s@%lld ", l->type, (long long)l->step);
    if (!strcmp(l->type, "train")) v->loss = tlog_get(l, "loss");
}

TEST(train_log_filter_keeps_the_lines_up_to_the_checkpoint) {
    const char *text = "{\"type\":\"train\",\"step\":1,\"loss\":null,\"lr\":1e-3}\n"
                       "\n"
                       "{\"step\":2,\"train_loss\":2.5,\"dev_wer\":50.0}\n"
                       "not json\n"
                       "[1,2]\n"
                       "{\"type\":\"eval\",\"step\":-1}\n"
                       "{\"type\":\"train\",\"step\":3,\"loss\":2.0}\n"
                       "{\"type\":\"skip\",\"step\":2,\"what\":\"loss\"}\n"
                       "{\"type\":\"train\",\"st";
    char *kept = NULL;
    size_t kept_len = 0;
    int64_t n_kept = 0, n_dropped = 0;
    visits v = {"", 0};
    CHECK_OK(tlog_filter(text, strlen(text), 2, visit, &v, &kept, &kept_len, &n_kept, &n_dropped));
    CHECK_MSG(kept && !strcmp(kept, "{\"type\":\"train\",\"step\":1,\"loss\":null,\"lr\":1e-3}\n"
                                     "{\"step\":2,\"train_loss\":2.5,\"dev_wer\":50.0}\n"
                                     "{\"type\":\"skip\",\"step\":2,\"what\":\"loss\"}\n"),
              "kept: %s", kept ? kept : "(null)");
    CHECK(kept_len == strlen(kept) && n_kept == 3 && n_dropped == 5);
    CHECK_MSG(!strcmp(v.seen, "train@1 eval@2 skip@2 "), "visited: %s", v.seen);
    CHECK(isnan(v.loss));
    free(kept);
    /* a last line without its newline is kept with one (the buffer holds it: ASan) */
    const char *last = "{\"step\":0}";
    v = (visits){"", 0};
    CHECK_OK(tlog_filter(last, strlen(last), 5, visit, &v, &kept, &kept_len, &n_kept, &n_dropped));
    CHECK(kept && !strcmp(kept, "{\"step\":0}\n") && kept_len == strlen(last) + 1 && n_kept == 1 && n_dropped == 0);
    free(kept);
}
