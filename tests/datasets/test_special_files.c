/*
 * test_special_files.c: every reader of whole files (corpora, vocabularies, model and
 * safetensors files) takes regular files only, checked before anything is read: a FIFO with no
 * writer returns at once instead of blocking forever, and /dev/zero (or a symbolic link to it)
 * is refused instead of being read until memory runs out. An alarm fails the test if a reader
 * blocks.
 */
#include "testutil.h"
#include "data_testutil.h"
#include "qkv/qkv_io.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

TEST(data_readers_refuse_fifos_devices_and_directories) {
    char *dir = dt_tmpdir();
    char *fifo = dt_join(dir, "fifo"), *zero = dt_join(dir, "zero-link");
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK(symlink("/dev/zero", zero) == 0);
    const char *paths[] = {fifo, zero, dir};
    const char *kinds[] = {"is a FIFO", "is a character device", "is a directory"};
    alarm(20); /* a reader that blocks on the FIFO ends the run here */
    for (int i = 0; i < 3; i++) {
        qkv_corpus *c = NULL;
        CHECK_ERR(qkv_corpus_read(QKV_CORPUS_PAIRS, paths[i], NULL, &c), QKV_ERR_IO, kinds[i]);
        CHECK(c == NULL);
        qkv_vocab *v = NULL;
        CHECK_ERR(qkv_vocab_load(paths[i], &v), QKV_ERR_IO, kinds[i]);
        CHECK(v == NULL);
        qkv_st_file *f = NULL;
        CHECK_ERR(qkv_st_open(paths[i], &f), QKV_ERR_IO, kinds[i]);
        CHECK(f == NULL);
        qkv_model *m = NULL;
        CHECK_ERR(qkv_model_load(paths[i], &m), QKV_ERR_IO, kinds[i]);
        CHECK_MSG(strstr(qkv_last_error(), paths[i]), "'%s' does not name the path", qkv_last_error());
    }
    alarm(0);
    free(fifo);
    free(zero);
    dt_rmtree(dir);
}

/* A path (or any text from a file or a command line) with control bytes comes back in messages
 * with those bytes written as \xNN, so printing qkv_last_error() cannot move the cursor or
 * change colours on the terminal. */
TEST(error_messages_escape_control_bytes) {
    qkv_corpus *c = NULL;
    CHECK_ERR(qkv_corpus_read(QKV_CORPUS_PAIRS, "/nonexistent/\x1b[31mred\xc2\x9b" "2J\xff.tsv", NULL, &c), QKV_ERR_IO,
              "/nonexistent/\\x1b[31mred\\xc2\\x9b2J\\xff.tsv: cannot open");
    for (const char *m = qkv_last_error(); *m; m++)
        CHECK_MSG((unsigned char)*m >= 0x20 && (unsigned char)*m != 0x7f && (unsigned char)*m != 0x9b,
                  "a control byte 0x%02x at %d in '%s'", (unsigned char)*m, (int)(m - qkv_last_error()), qkv_last_error());
    qkv_set_error(QKV_ERR_IO, "caf\xc3\xa9 \x07 line\nnext"); /* UTF-8 text and line feeds stay */
    CHECK(!strcmp(qkv_last_error(), "caf\xc3\xa9 \\x07 line\nnext"));
}
