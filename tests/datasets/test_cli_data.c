/* test_cli_data.c: the `qkv data` command (tools/cmd_data.c) run as a process: prepare on a
 * miniature source tree, check on good and malformed files, exit codes and messages. */
#include "data_testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    int code;
    char *out, *err;
} run_result;

static run_result run(const char *dir, const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s/out.txt' 2>'%s/err.txt'", QKV_CLI_PATH, args, dir, dir);
    fflush(NULL);
    int status = system(cmd);
    run_result r = {status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1, NULL, NULL};
    r.out = dt_read(dir, "out.txt", NULL);
    r.err = dt_read(dir, "err.txt", NULL);
    if (!r.out) r.out = strdup("");
    if (!r.err) r.err = strdup("");
    return r;
}

static void done(run_result *r) {
    free(r->out);
    free(r->err);
}

TEST(cli_data_prepare_and_check) {
    if (access(QKV_CLI_PATH, X_OK) != 0) SKIP("the qkv CLI is not built");
    char *dir = dt_tmpdir();
    char *cache = dt_join(dir, "cache"), *cmu = dt_join(dir, "cache/cmudict"),
         *pkg = dt_join(dir, "cache/cmudict/package");
    mkdir(cache, 0777);
    mkdir(cmu, 0777);
    mkdir(pkg, 0777);
    CHECK(dt_write(pkg, "index.js",
                   "export const dictionary = {\n  \"or\": \"AO1 R\",\n  \"or(2)\": \"ER0\",\n"
                   "  \"a\": \"AH0\"\n}\n",
                   -1));
    CHECK(
        dt_write(cache, "digits.csv",
                 "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,"
                 "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,16,3\n",
                 -1));
    char args[2048];
    snprintf(args, sizeof args, "data prepare g2p digits --cache '%s' --out '%s/out'", cache, dir);
    run_result r = run(dir, args);
    CHECK_MSG(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECK_MSG(strstr(r.out, "3 entries, 0 skipped, 0 comments removed"), "%s", r.out);
    CHECK(strstr(r.out, "images") && strstr(r.out, "train per class: 0 0 0 1 0 0 0 0 0 0\n"));
    done(&r);
    char *g2p = dt_join(dir, "out/g2p");
    DT_CHECK_FILE(g2p, "cmudict.nostress.train.tsv", "a\tAH\n");
    DT_CHECK_FILE(g2p, "cmudict.nostress.dev.tsv", "or\tAO R\nor\tER\n");
    /* check a good and a malformed file */
    snprintf(args, sizeof args, "data check pairs '%s/cmudict.nostress.dev.tsv'", g2p);
    r = run(dir, args);
    CHECK_MSG(r.code == 0 && strstr(r.out, "2 examples") &&
                  strstr(r.out, "1 distinct sources, 1 with more than one target"),
              "exit %d: %s%s", r.code, r.out, r.err);
    done(&r);
    CHECK(dt_write(dir, "bad.tsv", "a\tAH\nb B\n", -1));
    snprintf(args, sizeof args, "data check pairs '%s/bad.tsv'", dir);
    r = run(dir, args);
    char want[512];
    snprintf(want, sizeof want,
             "qkv data check: %s/bad.tsv:2: no TAB between source and target "
             "in 'b B'\n",
             dir);
    CHECK_MSG(r.code == 1 && !strcmp(r.err, want), "exit %d: %s", r.code, r.err);
    done(&r);
    /* a missing source: exit 1 and the fetch hint */
    snprintf(args, sizeof args, "data prepare brown --cache '%s' --out '%s/out'", cache, dir);
    r = run(dir, args);
    CHECK_MSG(r.code == 1 && strstr(r.err, "scripts/fetch_data.sh brown"), "exit %d: %s", r.code,
              r.err);
    done(&r);
    /* usage errors */
    r = run(dir, "data bogus");
    CHECK(r.code == 2 && strstr(r.err, "unknown subcommand 'bogus'"));
    done(&r);
    r = run(dir, "data prepare nothing");
    CHECK(r.code == 2 && strstr(r.err, "unknown data set or option 'nothing'"));
    done(&r);
    r = run(dir, "data check words x");
    CHECK(r.code == 2 && strstr(r.err, "unknown kind 'words'"));
    done(&r);
    r = run(dir, "--help");
    CHECK(r.code == 0 && strstr(r.out, "data "));
    done(&r);
    free(g2p);
    free(cache);
    free(cmu);
    free(pkg);
    dt_rmtree(dir);
}
