/*
 * file.c: directories for the viz writers (files are written by qkv__write_file_atomic).
 */
#include "viz_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

qkv_status vz_make_dir(const char *fn, const char *dir) {
    if (!dir || !dir[0]) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL or empty directory", fn);
    if (mkdir(dir, 0777) == 0) return QKV_OK;
    int e = errno;
    struct stat s;
    if (e == EEXIST && stat(dir, &s) == 0 && S_ISDIR(s.st_mode)) return QKV_OK;
    if (e == EEXIST) return QKV_ERROR(QKV_ERR_IO, "%s: %s: exists and is not a directory", fn, dir);
    return QKV_ERROR(QKV_ERR_IO, "%s: %s: cannot create directory: %s", fn, dir, strerror(e));
}
