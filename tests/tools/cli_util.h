/*
 * cli_util.h: what the tests of the `qkv` command line share: running the built binary
 * (QKV_CLI_PATH) through the shell and capturing its output, small files, temporary run
 * directories, and a tiny synthetic G2P-style seq2seq run.
 */
#ifndef QKV_TEST_CLI_UTIL_H
#define QKV_TEST_CLI_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#ifndef QKV_CLI_PATH
#define QKV_CLI_PATH "build/release/qkv"
#endif

/* Run a shell command; capture stdout + stderr into out (the first half of the buffer holds the
 * beginning of the output, the rest its end when it is longer); return the exit status (-1 when
 * it did not exit). The output is read to the end so the command never dies of SIGPIPE. */
int cli_exec(const char *cmd, char *out, size_t size);
/* cli_exec of the command that fmt and its arguments print (at most 4 KiB). */
int cli_execf(char *out, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

void cli_write_file(const char *path, const char *text);
bool cli_exists(const char *path);
/* Whether two files exist and hold the same bytes. */
bool cli_same_file(const char *a, const char *b);
/* The number after `what` in text (NAN when absent). */
double cli_number_after(const char *text, const char *what);

/* n "word<TAB>W O R D" pairs (the phones spell the letters in upper case: a task a tiny model can
 * start on) from a list of 12 words, starting at word `first`. */
void cli_write_pairs(const char *path, int first, int n);

/* A temporary run: a new directory dir (/tmp/qkv_cli_XXXXXX) and the paths dir/train.tsv,
 * dir/dev.tsv, dir/run.conf and out.dir = dir/run (nothing written yet). */
typedef struct cli_run {
    char dir[32], train[64], dev[64], conf[64], run_dir[64];
} cli_run;

bool cli_run_new(cli_run *r);
/* A seq2seq run: cli_run_new, train.tsv with 12 pairs, dev.tsv holding dev_text (NULL: none, the
 * training file is the dev set), and run.conf naming them, out.dir and eval.strategy = greedy,
 * plus the keys of `extra`. */
bool cli_run_seq2seq(cli_run *r, const char *dev_text, const char *extra);
/* Remove the run's directory (a test failure when that fails). */
void cli_run_remove(const cli_run *r);

/* The --resume check every task's CLI test makes: `qkv train r->conf` into r->dir/straight, then
 * train.steps = half_steps into r->run_dir and `--resume` to the end. true when all three exit 0;
 * out holds the output of the last command run (the --resume one on success). */
bool cli_train_straight_and_resumed(const cli_run *r, int half_steps, char *out, size_t size);
/* The first of the n files that differs between directories a and b (or is missing from one);
 * NULL when every one holds the same bytes in both. */
const char *cli_first_different(const char *a, const char *b, const char *const *files, int n);

#endif
