/* test_cli_data.c: the `qkv data` command (tools/cmd_data.c) run as a process: prepare on a
 * miniature source tree, check on good and malformed files, the naive Bayes baseline on files
 * small enough to score by hand, exit codes and messages. */
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

TEST(cli_data_spam_prepare_and_baseline) {
    if (access(QKV_CLI_PATH, X_OK) != 0) SKIP("the qkv CLI is not built");
    char *dir = dt_tmpdir();
    static const char *const folders[5] = {"easy-ham-1", "easy-ham-2", "hard-ham-1", "spam-1",
                                           "spam-2"};
    char path[1024];
    snprintf(path, sizeof path, "%s/cache", dir);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/cache/spam", dir);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/cache/spam/package", dir);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/cache/spam/package/data", dir);
    mkdir(path, 0777);
    for (int f = 0; f < 5; f++) {
        char *p = dt_join(path, folders[f]);
        mkdir(p, 0777);
        char msg[128];
        snprintf(msg, sizeof msg, "Subject: Note %d\n\nBody of message %d, folder %s.\n", f, f,
                 folders[f]);
        CHECK(dt_write(p, "00001.a.txt", msg, -1));
        free(p);
    }
    /* keys easy-ham-1/00001.a 15, easy-ham-2/00001.a 78, hard-ham-1/00001.a 92, spam-1/00001.a
     * 59, spam-2/00001.a 26: test holds hard-ham-1, dev nothing */
    char args[2048];
    snprintf(args, sizeof args,
             "data prepare spam --cache '%s/cache' --out '%s/out' --max-tokens 4", dir, dir);
    run_result r = run(dir, args);
    CHECK_MSG(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECK_MSG(strstr(r.out, "5 messages: 0 without any token (skipped), 0 duplicates dropped (0 "
                            "with the other label), 5 cut to 4 tokens"),
              "%s", r.out);
    done(&r);
    char *spam = dt_join(dir, "out/spam");
    DT_CHECK_FILE(spam, "spam.test.tsv", "ham\tnote 2 body of\n");
    DT_CHECK_FILE(spam, "spam.dev.tsv", "");
    /* baseline on hand-made files: "buy" -> spam (P(buy|spam) 2/6 > P(buy|ham) 1/6), "hello" ->
     * ham; the third line is a ham predicted spam; the test line has only unseen tokens: equal
     * priors, the tie goes to the first class, ham (right) */
    CHECK(dt_write(spam, "spam.train.tsv", "spam\tbuy now\nham\thello there\n", -1));
    CHECK(dt_write(spam, "spam.dev.tsv", "spam\tbuy\nham\thello\nham\tbuy\n", -1));
    snprintf(args, sizeof args, "data baseline spam --data '%s/out'", dir);
    r = run(dir, args);
    CHECK_MSG(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECK_MSG(strstr(r.out, "2 examples, 2 classes (ham spam), 4 distinct tokens\n") &&
                  strstr(r.out, "spam.dev.tsv: 3 examples, accuracy 66.67% (2 correct); spam: "
                                "precision 50.00% recall 100.00% F1 66.67% (tp 1, fp 1, fn 0)\n") &&
                  strstr(r.out, "spam.test.tsv: 1 examples, accuracy 100.00% (1 correct)"),
              "%s", r.out);
    done(&r);
    /* the general form, a positive label that does not exist, a bad alpha, a missing source */
    snprintf(args, sizeof args, "data baseline '%s/spam.train.tsv' '%s/spam.dev.tsv'", spam, spam);
    r = run(dir, args);
    CHECK(r.code == 0 && strstr(r.out, "accuracy 66.67%") && !strstr(r.out, "precision"));
    done(&r);
    snprintf(args, sizeof args,
             "data baseline '%s/spam.train.tsv' '%s/spam.dev.tsv' --positive eggs", spam, spam);
    r = run(dir, args);
    CHECK_MSG(r.code == 1 && strstr(r.err, "--positive eggs is not a label of"), "%s", r.err);
    done(&r);
    r = run(dir, "data baseline spam --alpha 0");
    CHECK(r.code == 2 && strstr(r.err, "--alpha needs a number in (0, 1000000] (got '0')"));
    done(&r);
    r = run(dir, "data baseline onlyone.tsv");
    CHECK(r.code == 2 && strstr(r.err, "give 'spam', or a training file and evaluation files"));
    done(&r);
    snprintf(args, sizeof args, "data baseline spam --data '%s/nowhere'", dir);
    r = run(dir, args);
    CHECK_MSG(r.code == 1 && strstr(r.err, "nowhere/spam/spam.train.tsv"), "%s", r.err);
    done(&r);
    r = run(dir, "data prepare spam --max-tokens 0");
    CHECK(r.code == 2 && strstr(r.err, "--max-tokens needs an integer in 1..1000000 (got '0')"));
    done(&r);
    snprintf(args, sizeof args, "data prepare spam --cache '%s/nowhere' --out '%s/out'", dir, dir);
    r = run(dir, args);
    CHECK_MSG(r.code == 1 && strstr(r.err, "cannot open the directory") &&
                  strstr(r.err, "scripts/fetch_data.sh spam"),
              "exit %d: %s", r.code, r.err);
    done(&r);
    free(spam);
    dt_rmtree(dir);
}

TEST(cli_data_bible) {
    if (access(QKV_CLI_PATH, X_OK) != 0) SKIP("the qkv CLI is not built");
    char *dir = dt_tmpdir();
    char args[2048];
    /* the hand-written exports of tests/data/bible (test_prepare_bible.c has their files) */
    snprintf(args, sizeof args, "data prepare bible --cache '%s/tests/data' --out '%s/out'",
             dt_repo_root(), dir);
    run_result r = run(dir, args);
    CHECK_MSG(r.code == 0, "exit %d: %s", r.code, r.err);
    CHECK_MSG(strstr(r.out, "verses read: 14 English (KJV), 15 Spanish (RV1909)\n") &&
                  strstr(r.out, "dropped: 0 only in the English, 1 only in the Spanish, 0 empty "
                                "in the English, 1 empty in the Spanish, 3 in chapters of another "
                                "verse division, 1 first verses of psalms (titles)\n") &&
                  strstr(r.out, "    verse pairs                     5        2        2\n") &&
                  strstr(r.out, "longest verse: 17 English words, 17 Spanish words\n"),
              "%s", r.out);
    done(&r);
    char *bible = dt_join(dir, "out/bible");
    DT_CHECK_FILE(bible, "bible.dev.ref", "Mark.1.1\nMark.1.2\n");
    /* a translation file may repeat a source on distant lines: check says so and passes */
    CHECK(dt_write(bible, "rep.tsv", "a\tb\nc\td\na\te\n", -1));
    snprintf(args, sizeof args, "data check pairs '%s/bible.en-es.train.tsv' '%s/rep.tsv'", bible,
             bible);
    r = run(dir, args);
    CHECK_MSG(r.code == 0 && strstr(r.out, "bible.en-es.train.tsv: 5 examples") &&
                  strstr(r.out, "5 distinct sources, 0 with more than one target") &&
                  strstr(r.out, "sources not grouped: ") && strstr(r.out, "rep.tsv:3: word 'a'"),
              "exit %d: %s%s", r.code, r.out, r.err);
    done(&r);
    /* not part of `all`; a missing cache names the setup and the fetch */
    snprintf(args, sizeof args, "data prepare bible --cache '%s/nowhere' --out '%s/out'", dir, dir);
    r = run(dir, args);
    CHECK_MSG(r.code == 1 && strstr(r.err, "nowhere/bible/kjv.txt: cannot open") &&
                  strstr(r.err, "scripts/setup.sh --bible && scripts/fetch_data.sh bible"),
              "exit %d: %s", r.code, r.err);
    done(&r);
    snprintf(args, sizeof args, "data prepare all --cache '%s/nowhere' --out '%s/out'", dir, dir);
    r = run(dir, args);
    CHECK_MSG(r.code == 1 && !strstr(r.out, "bible") && !strstr(r.err, "bible"), "%s%s", r.out,
              r.err);
    done(&r);
    r = run(dir, "data prepare --help");
    CHECK(r.code == 0 && strstr(r.out, "bible: DIR/bible/{kjv,sparv}.txt"));
    done(&r);
    free(bible);
    dt_rmtree(dir);
}

TEST(cli_data_mt_dict) {
    if (access(QKV_CLI_PATH, X_OK) != 0) SKIP("the qkv CLI is not built");
    char *dir = dt_tmpdir();
    char args[2048];
    /* the hand-made dictionary of tests/data/freedict (test_dict_baseline.c has its entries) on
     * a pairs file's first field, on plain lines, and on stdin */
    CHECK(dt_write(dir, "pairs.tsv",
                   "The word of God.\tLa palabra de Dios.\n"
                   "He walked; cities, boxes\tx\n"
                   "\ty\n",
                   -1));
    CHECK(dt_write(dir, "plain.txt", "Only the light\r\nthe\tword\n", -1));
    snprintf(args, sizeof args,
             "data baseline mt-dict --dict '%s/tests/data/freedict' --field 1 '%s/pairs.tsv'",
             dt_repo_root(), dir);
    run_result r = run(dir, args);
    CHECK_MSG(r.code == 0 && !strcmp(r.out, "El palabra de Dios.\nHe andar; ciudad, caja\n\n"),
              "exit %d: %s%s", r.code, r.out, r.err);
    CHECK_MSG(!strcmp(r.err, "mt-dict: 3 lines, 8 words, 7 found in the dictionary (87.5%), 20 "
                             "headwords\n"),
              "%s", r.err);
    done(&r);
    snprintf(args, sizeof args, "data baseline mt-dict --dict '%s/tests/data/freedict' < '%s/plain.txt'",
             dt_repo_root(), dir);
    r = run(dir, args);
    CHECK_MSG(r.code == 0 && !strcmp(r.out, "S\xc3\xb3lo el luz\nel\tpalabra\n"), "exit %d: %s%s",
              r.code, r.out, r.err);
    done(&r);
    /* --field 2 of a line with one field; invalid UTF-8; a missing dictionary; usage */
    CHECK(dt_write(dir, "bad.txt", "the word\nthe caf\xe9\n", -1));
    snprintf(args, sizeof args,
             "data baseline mt-dict --dict '%s/tests/data/freedict' --field 2 '%s/plain.txt'",
             dt_repo_root(), dir);
    r = run(dir, args);
    char want[1024];
    snprintf(want, sizeof want,
             "qkv data baseline mt-dict: %s/plain.txt:1: no field 2 (1 TAB-separated field)\n", dir);
    CHECK_MSG(r.code == 1 && !strcmp(r.err, want), "exit %d: %s", r.code, r.err);
    done(&r);
    snprintf(args, sizeof args, "data baseline mt-dict --dict '%s/tests/data/freedict' '%s/bad.txt'",
             dt_repo_root(), dir);
    r = run(dir, args);
    snprintf(want, sizeof want,
             "qkv data baseline mt-dict: %s/bad.txt:2: invalid UTF-8 (byte 0xE9 at column 8)\n",
             dir);
    CHECK_MSG(r.code == 1 && !strcmp(r.err, want) && !strcmp(r.out, "el palabra\n"),
              "exit %d: %s%s", r.code, r.out, r.err);
    done(&r);
    snprintf(args, sizeof args, "data baseline mt-dict --dict '%s/nowhere' '%s/bad.txt'", dir, dir);
    r = run(dir, args);
    CHECK_MSG(r.code == 1 && strstr(r.err, "nowhere/eng-spa.index: cannot open") &&
                  strstr(r.err, "scripts/fetch_data.sh freedict"),
              "exit %d: %s", r.code, r.err);
    done(&r);
    r = run(dir, "data baseline mt-dict --field 0 x");
    CHECK(r.code == 2 && strstr(r.err, "--field needs an integer in 1..1000 (got '0')"));
    done(&r);
    r = run(dir, "data baseline mt-dict --bogus");
    CHECK(r.code == 2 && strstr(r.err, "unknown option '--bogus'"));
    done(&r);
    r = run(dir, "data baseline mt-dict --help");
    CHECK(r.code == 0 && strstr(r.out, "usage: qkv data baseline mt-dict"));
    done(&r);
    dt_rmtree(dir);
}
