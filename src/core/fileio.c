/*
 * fileio.c: atomic file writes. The bytes go to "<path>.tmp.<pid>.<n>" (created exclusively, n a
 * process-wide counter, so threads writing the same path never share a temporary file), which is
 * fsynced and renamed over <path>, and the directory is fsynced so the rename is durable. A reader
 * sees the old file or the whole new one; on failure (a full disk included) the temporary file is
 * removed and the error names the path, the step and strerror.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void qkv__fsync_parent_dir(const char *path) {
    /* Best effort: some file systems refuse fsync on directories. */
    char *dir = malloc(strlen(path) + 2);
    if (!dir) return;
    strcpy(dir, path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        strcpy(dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

qkv_status qkv__open_regular(const char *who, const char *path, int *fd, uint64_t *size) {
    *fd = -1;
    *size = 0;
    const char *sep = who && who[0] ? ": " : "";
    if (!who) who = "";
    int d = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (d < 0) return QKV_ERROR(QKV_ERR_IO, "%s%s%s: cannot open: %s", who, sep, path, strerror(errno));
    struct stat sb;
    if (fstat(d, &sb) != 0) {
        const int e = errno;
        close(d);
        return QKV_ERROR(QKV_ERR_IO, "%s%s%s: cannot stat: %s", who, sep, path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(d);
        const char *what = S_ISDIR(sb.st_mode)    ? "a directory"
                           : S_ISFIFO(sb.st_mode) ? "a FIFO"
                           : S_ISCHR(sb.st_mode)  ? "a character device"
                           : S_ISBLK(sb.st_mode)  ? "a block device"
                           : S_ISSOCK(sb.st_mode) ? "a socket"
                                                  : "not a regular file";
        return QKV_ERROR(QKV_ERR_IO, "%s%s%s: is %s, not a regular file (files are read whole: save the data to a file)",
                         who, sep, path, what);
    }
    /* reads of a regular file ignore O_NONBLOCK; clear it all the same */
    const int flags = fcntl(d, F_GETFL);
    if (flags >= 0) (void)fcntl(d, F_SETFL, flags & ~O_NONBLOCK);
    *fd = d;
    *size = (uint64_t)sb.st_size;
    return QKV_OK;
}

qkv_status qkv__read_regular(const char *who, const char *path, uint64_t max_bytes, char **data, size_t *len) {
    *data = NULL;
    *len = 0;
    int fd = -1;
    uint64_t size = 0;
    qkv_status st = qkv__open_regular(who, path, &fd, &size);
    if (st) return st;
    const char *sep = who && who[0] ? ": " : "";
    if (!who) who = "";
    if (size > max_bytes || size >= SIZE_MAX) {
        close(fd);
        return QKV_ERROR(QKV_ERR_IO, "%s%s%s: %llu bytes, more than the %llu this file may hold", who, sep, path,
                         (unsigned long long)size, (unsigned long long)max_bytes);
    }
    /* the size at open bounds the read: a file that grows meanwhile is read as it was */
    char *p = malloc((size_t)size + 1);
    if (!p) {
        close(fd);
        return QKV_ERROR(QKV_ERR_OOM, "%s%s%s: out of memory reading the file (%llu bytes)", who, sep, path,
                         (unsigned long long)size);
    }
    size_t got = 0;
    while (got < (size_t)size) {
        ssize_t r = read(fd, p + got, (size_t)size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            const int e = r < 0 ? errno : 0;
            close(fd);
            free(p);
            return QKV_ERROR(QKV_ERR_IO, "%s%s%s: read failed: %s", who, sep, path,
                             e ? strerror(e) : "the file shrank while it was read");
        }
        got += (size_t)r;
    }
    close(fd);
    p[got] = '\0';
    *data = p;
    *len = got;
    return QKV_OK;
}

qkv_status qkv_file_read(const char *path, uint64_t max_bytes, char **data, size_t *len) {
    if (!path || !data || !len) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_file_read: NULL argument");
    return qkv__read_regular(NULL, path, max_bytes, data, len);
}

static atomic_uint tmp_counter;

qkv_status qkv__create_temp(const char *fn, const char *path, char **tmp, int *fd) {
    *tmp = NULL;
    *fd = -1;
    if (!path || !path[0]) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL or empty path", fn);
    size_t len = strlen(path);
    if (len > 4000)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: path of %zu bytes is too long", fn, len);
    char *name = malloc(len + 64);
    if (!name) return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", fn);
    int d = -1, e = 0;
    for (int attempt = 0; attempt < 100; attempt++) { /* EEXIST: a stale file of an old run */
        unsigned k = atomic_fetch_add(&tmp_counter, 1u);
        snprintf(name, len + 64, "%s.tmp.%ld.%u", path, (long)getpid(), k);
        d = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        e = errno;
        if (d >= 0 || e != EEXIST) break;
    }
    if (d < 0) {
        qkv_status st = QKV_ERROR(QKV_ERR_IO, "%s: %s: cannot create %s: %s", fn, path, name, strerror(e));
        free(name);
        return st;
    }
    *tmp = name;
    *fd = d;
    return QKV_OK;
}

qkv_status qkv_file_write_atomic(const char *path, const void *data, size_t n) {
    if (!data && n) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_file_write_atomic: NULL data");
    return qkv__write_file_atomic("qkv_file_write_atomic", path, data, n);
}

qkv_status qkv__write_file_atomic(const char *fn, const char *path, const void *data, size_t n) {
    char *tmp = NULL;
    int fd = -1, e = 0;
    qkv_status created = qkv__create_temp(fn, path, &tmp, &fd);
    if (created) return created;
    const char *what = NULL;
    const unsigned char *p = data;
    while (n > 0) {
        ssize_t r = write(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) { /* 0 bytes written cannot progress: report a full disk */
            e = r < 0 ? errno : ENOSPC, what = "write";
            break;
        }
        p += r;
        n -= (size_t)r;
    }
    if (!what && fsync(fd) != 0) e = errno, what = "fsync";
    if (close(fd) != 0 && !what) e = errno, what = "close";
    if (!what && rename(tmp, path) != 0) e = errno, what = "rename";
    qkv_status st = QKV_OK;
    if (what) {
        unlink(tmp);
        st = QKV_ERROR(QKV_ERR_IO, "%s: %s: %s failed: %s", fn, path, what, strerror(e));
    }
    free(tmp);
    if (st == QKV_OK) qkv__fsync_parent_dir(path);
    return st;
}

