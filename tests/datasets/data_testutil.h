/*
 * data_testutil.h: helpers for the data-layer tests: scratch directories, whole files, the
 * repository root (where data/ and data/cache/ live).
 */
#ifndef QKV_DATA_TESTUTIL_H
#define QKV_DATA_TESTUTIL_H

#include "harness.h"
#include "qkv/qkv_data.h"

#include <stdbool.h>
#include <stddef.h>

/* A fresh directory /tmp/qkv_test_data_XXXXXX (malloc'd path); dt_rmtree removes it. */
char *dt_tmpdir(void);
/* rm -r path, then free(path). */
void dt_rmtree(char *path);
/* "a/b" (malloc'd). */
char *dt_join(const char *a, const char *b);
/* Write len bytes (len < 0: strlen) to dir/name; false on failure. */
bool dt_write(const char *dir, const char *name, const char *data, long len);
/* The whole file dir/name (name may be NULL: dir is the path), NUL-terminated, or NULL. */
char *dt_read(const char *dir, const char *name, size_t *len);
/* CHECK that file dir/name holds exactly `want`; prints the first difference. */
#define DT_CHECK_FILE(dir, name, want) dt_check_file(__FILE__, __LINE__, dir, name, want)
void dt_check_file(const char *file, int line, const char *dir, const char *name, const char *want);
/* The repository root (from the test data directory, tests/data/../..). */
const char *dt_repo_root(void);
/* Files in dir whose name contains ".tmp." (left-over temporary files). */
int dt_count_tmp(const char *dir);
/* dir/name read as translation pairs (QKV_CORPUS_PAIRS), words on both sides (the Bible). */
qkv_status dt_read_word_pairs(const char *dir, const char *name, qkv_corpus **out);

#endif
