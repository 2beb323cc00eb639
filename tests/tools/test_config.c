/* test_config.c: the configuration files of the qkv CLI (tools/config.c). */
#include "config.h"
#include "testutil.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

TEST(config_reads_values_overrides_and_reports_unknown_keys) {
    char path[] = "/tmp/qkv_cfg_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    write_file(path, "# a model\nmodel.d_model = 256\n\n  data.train = a b=c.tsv  \nmodel.norm_first = true\nmodel.dropuot = 0.1\n");
    config c;
    CHECK(config_load(&c, path));
    CHECK(config_set(&c, "model.d_model=128"));
    int64_t d = 0;
    const char *train = NULL;
    bool nf = false;
    double dropout = 0;
    CHECK(config_int(&c, "model.d_model", 64, 1, 4096, &d) && d == 128); /* --set wins */
    CHECK(config_str(&c, "data.train", NULL, &train) && !strcmp(train, "a b=c.tsv"));
    CHECK(config_bool(&c, "model.norm_first", false, &nf) && nf);
    CHECK(config_double(&c, "model.dropout", 0.25, 0, 1, &dropout) && dropout == 0.25); /* absent: default */
    CHECK(!config_check_unused(&c));
    char want[600];
    snprintf(want, sizeof want, "%s:6: unknown key 'model.dropuot'", path);
    CHECK_MSG(!strcmp(c.error, want), "error '%s', expected '%s'", c.error, want);
    config_free(&c);
    unlink(path);
}

TEST(config_rejects_malformed_lines_and_values) {
    char path[] = "/tmp/qkv_cfg_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    config c;
    write_file(path, "model.d_model 256\n");
    CHECK(!config_load(&c, path) && strstr(c.error, ":1: expected 'key = value'"));
    config_free(&c);
    write_file(path, "a = 1\na = 2\n");
    CHECK(!config_load(&c, path) && strstr(c.error, ":2: key 'a' is set twice"));
    config_free(&c);
    write_file(path, "model.layers = three\nmodel.heads = 0\nmodel.act = swish\nflag = maybe\n");
    CHECK(config_load(&c, path));
    int64_t v;
    int e;
    bool b;
    CHECK(!config_int(&c, "model.layers", 1, 1, 10, &v) && strstr(c.error, ":1: model.layers = 'three' is not an integer"));
    CHECK(!config_int(&c, "model.heads", 1, 1, 64, &v) && strstr(c.error, ":2: model.heads = 0 is outside [1, 64]"));
    CHECK(!config_enum(&c, "model.act", 0, (const char *[]){"relu", "gelu"}, 2, &e) && strstr(c.error, "not one of: relu, gelu"));
    CHECK(!config_bool(&c, "flag", false, &b) && strstr(c.error, ":4: flag = 'maybe'"));
    CHECK(!config_set(&c, "novalue") && strstr(c.error, "expected key=value"));
    config_free(&c);
    CHECK(!config_load(&c, "/nonexistent/qkv.conf") && strstr(c.error, "/nonexistent/qkv.conf: cannot open: No such file"));
    config_free(&c);
    unlink(path);
}

/* An override that makes the entry array grow: the overridden file entry still counts as read
 * (it was once marked through a pointer into the array before the array moved). */
TEST(config_override_past_the_initial_capacity) {
    char path[] = "/tmp/qkv_cfg_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    FILE *f = fopen(path, "w");
    for (int i = 0; i < 32; i++) /* exactly the first capacity */
        fprintf(f, "key%d = %d\n", i, i);
    fclose(f);
    config c;
    CHECK(config_load(&c, path));
    CHECK(config_set(&c, "key0=100")); /* the 33rd entry */
    for (int i = 0; i < 32; i++) {
        int64_t v = -1;
        char key[16];
        snprintf(key, sizeof key, "key%d", i);
        CHECK(config_int(&c, key, -1, 0, 1000, &v) && v == (i ? i : 100));
    }
    CHECK_MSG(config_check_unused(&c), "%s", c.error);
    config_free(&c);
    unlink(path);
}

/* A file of 200,000 keys loads and reads back in time linear in its size (~0.1 s; a parser that
 * compares every new key with all earlier ones takes ~40 s). The alarm is a hang guard with a
 * margin of two orders of magnitude, not a benchmark. */
TEST(config_many_keys_load_in_linear_time) {
    char path[] = "/tmp/qkv_cfg_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    enum { N = 200000 };
    FILE *f = fopen(path, "w");
    for (int i = 0; i < N; i++) fprintf(f, "section%d.key%d = %d\n", i % 97, i, i);
    fclose(f);
    alarm(30);
    config c;
    CHECK_MSG(config_load(&c, path), "%s", c.error);
    CHECK(config_set(&c, "section3.key100=-1"));
    bool all = true;
    for (int i = 0; i < N; i++) {
        char key[48];
        int64_t v = 0;
        snprintf(key, sizeof key, "section%d.key%d", i % 97, i);
        all &= config_int(&c, key, -2, -1, N, &v) && v == (i == 100 ? -1 : i);
    }
    CHECK(all);
    CHECK_MSG(config_check_unused(&c), "%s", c.error);
    alarm(0);
    config_free(&c);
    unlink(path);
}

/* Keys and values are echoed with control bytes escaped (an ESC sequence from a file or --set
 * never reaches the terminal); a NUL byte is reported as such; a FIFO or a directory is refused
 * before anything is read. */
TEST(config_messages_escape_control_bytes_and_name_nul_bytes) {
    char path[] = "/tmp/qkv_cfg_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    config c;
    write_file(path, "model.heads = \x1b[2J\xc2\x9b" "31m\n");
    CHECK(config_load(&c, path));
    int64_t v = 0;
    CHECK(!config_int(&c, "model.heads", 1, 1, 64, &v));
    CHECK_MSG(strstr(c.error, ":1: model.heads = '\\x1b[2J\\xc2\\x9b31m' is not an integer") && !strchr(c.error, '\x1b'),
              "%s", c.error);
    config_free(&c);
    CHECK(config_load(&c, NULL));
    CHECK(!config_set(&c, "model.x\x07y=1") && strstr(c.error, "key 'model.x\\x07y' may contain only") &&
          !strchr(c.error, '\a'));
    config_free(&c);
    FILE *f = fopen(path, "w");
    fwrite("a = 1\nb = 2\0\nc = 3\n", 1, 19, f);
    fclose(f);
    CHECK(!config_load(&c, path) && strstr(c.error, ":2: a NUL byte at column 6"));
    config_free(&c);
    unlink(path);
    CHECK(mkfifo(path, 0600) == 0);
    alarm(20); /* opening a FIFO with no writer must not block */
    CHECK_MSG(!config_load(&c, path) && strstr(c.error, "is a FIFO, not a regular file"), "%s", c.error);
    alarm(0);
    config_free(&c);
    unlink(path);
    CHECK(!config_load(&c, "/tmp") && strstr(c.error, "/tmp: is a directory"));
    config_free(&c);
}
