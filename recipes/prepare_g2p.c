/*
 * prepare_g2p.c: CMUdict (npm cmu-pronouncing-dictionary@3.0.0, package/index.js) -> the G2P
 * split files of docs/data.md, byte-identical to the reference make_splits.py.
 *
 * index.js is an ES module `export const dictionary = {...}` whose object literal is valid JSON;
 * it is parsed with the project's strict JSON parser (src/io/json.h). Each member is
 * "word" or "word(N)" (variant N; plain = 1) -> "PH PH ...", possibly with a "# comment".
 *
 *   word      = key without "(N)", lower case; words with characters outside a-z ' - . are
 *               skipped (counted); every phone must be one of the 69 ARPAbet symbols with stress
 *   order     = words sorted by bytes; a word's variants by N, then file order; identical
 *               variants kept once
 *   split     = qkv_split_of(word, 88, 90): all variants of a word share a split
 *   no stress = stress digits removed (39 symbols), variants that became identical merged
 *
 * Output (out_dir): cmudict.{train,dev,test}.tsv and cmudict.nostress.{train,dev,test}.tsv with
 * lines "word<TAB>PH1 PH2 ...", sorted by word; graphemes.txt (character<TAB>count over words),
 * phones.txt and phones.nostress.txt (phone<TAB>count over pronunciations).
 */
#include "recipes.h"
#include "data/data_internal.h"

#include "io/json.h"

#include <stdlib.h>
#include <string.h>

#define WHO "qkv_prepare_g2p"
#define N_BASE 39
#define N_PHONES 69

static const char *const base_phones[N_BASE] = {
    "AA", "AE", "AH", "AO", "AW", "AY", "B",  "CH", "D", "DH", "EH", "ER", "EY",
    "F",  "G",  "HH", "IH", "IY", "JH", "K",  "L",  "M", "N",  "NG", "OW", "OY",
    "P",  "R",  "S",  "SH", "T",  "TH", "UH", "UW", "V", "W",  "Y",  "Z",  "ZH"};

/* The 69 phones with stress, sorted by bytes (the order of phones.txt), and their base phone. */
typedef struct phone_table {
    char name[N_PHONES][4];
    int8_t base[N_PHONES]; /* index into base_phones */
} phone_table;

static int by_cstr(const void *a, const void *b) {
    return strcmp(a, b);
}

static void build_phones(phone_table *t) {
    int n = 0;
    for (int i = 0; i < N_BASE; i++) {
        const char *p = base_phones[i];
        if (strchr("AEIOU", p[0])) /* a vowel carries stress 0, 1 or 2 */
            for (char d = '0'; d <= '2'; d++)
                snprintf(t->name[n++], 4, "%s%c", p, d);
        else
            snprintf(t->name[n++], 4, "%s", p);
    }
    qsort(t->name, N_PHONES, sizeof t->name[0], by_cstr);
    for (int k = 0; k < N_PHONES; k++) {
        char b[4];
        size_t len = strlen(t->name[k]);
        memcpy(b, t->name[k], len + 1);
        while (len > 0 && b[len - 1] >= '0' && b[len - 1] <= '2')
            b[--len] = '\0';
        for (int i = 0; i < N_BASE; i++)
            if (!strcmp(b, base_phones[i])) t->base[k] = (int8_t)i;
    }
}

static int phone_id(const phone_table *t, const char *s, size_t n) {
    char key[4];
    if (n == 0 || n > 3) return -1;
    memcpy(key, s, n);
    key[n] = '\0';
    const char(*hit)[4] = bsearch(key, t->name, N_PHONES, sizeof t->name[0], by_cstr);
    return hit ? (int)(hit - t->name) : -1;
}

typedef struct entry {
    const char *word; /* lower-case copy, NUL-terminated */
    size_t wlen;
    int64_t variant; /* N of "word(N)", 1 without */
    int64_t order;   /* position in the file */
    int64_t ph, nph; /* phones[ph .. ph + nph) */
} entry;

static int by_entry(const void *pa, const void *pb) {
    const entry *a = pa, *b = pb;
    int c = strcmp(a->word, b->word);
    if (c) return c;
    if (a->variant != b->variant) return a->variant < b->variant ? -1 : 1;
    return (a->order > b->order) - (a->order < b->order);
}

static bool word_char(char c) {
    return (c >= 'a' && c <= 'z') || c == '\'' || c == '.' || c == '-';
}

static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* 1-based line of byte offset `at` in text. */
static int64_t line_of(const char *text, size_t at) {
    int64_t line = 1;
    for (size_t i = 0; i < at; i++)
        line += text[i] == '\n';
    return line;
}

typedef struct g2p_state {
    const char *path;
    const char *text;  /* the whole file */
    size_t json_start; /* offset of the object literal in text */
    phone_table pt;
    entry *e;
    int64_t n;
    char *words; /* lower-case words, NUL-separated */
    int8_t *phones;
    int64_t n_phones;
} g2p_state;

/* Fill entry k from member m of the dictionary object. *skip: the word has other characters. */
static qkv_status read_member(g2p_state *S, const qkv_json_value *m, char *word_at, int64_t *ph_at,
                              qkv_prepare_counts *counts, bool *skip) {
    char q[200], q2[200];
    int64_t line = 0;
#define MLINE (line ? line : (line = line_of(S->text, S->json_start + m->offset)))
    if (m->type != QKV_JSON_STRING)
        return QKV_ERROR(QKV_ERR_FORMAT,
                         "%s:%lld: the pronunciation of %s is a JSON %s, not a string", S->path,
                         (long long)MLINE, qkv__quote(q, sizeof q, m->key, m->key_len),
                         qkv_json_type_name(m->type));
    /* "word(N)" -> word, N */
    size_t klen = m->key_len;
    const char *key = m->key;
    int64_t variant = 1;
    if (klen >= 3 && key[klen - 1] == ')') {
        size_t open = klen - 1;
        while (open > 0 && key[open - 1] >= '0' && key[open - 1] <= '9')
            open--;
        if (open > 0 && open < klen - 1 && key[open - 1] == '(') {
            if (klen - 1 - open > 18)
                return QKV_ERROR(QKV_ERR_FORMAT, "%s:%lld: variant number of %s is too long",
                                 S->path, (long long)MLINE, qkv__quote(q, sizeof q, key, klen));
            variant = 0;
            for (size_t i = open; i < klen - 1; i++)
                variant = variant * 10 + (key[i] - '0');
            klen = open - 1;
        }
    }
    /* the pronunciation, without a "# comment" */
    const char *pron = m->str;
    size_t plen = m->len;
    const char *hash = memchr(pron, '#', plen);
    if (hash) {
        plen = (size_t)(hash - pron);
        counts->comments++;
    }
    *skip = klen == 0;
    for (size_t i = 0; i < klen; i++) {
        char c = key[i] >= 'A' && key[i] <= 'Z' ? (char)(key[i] - 'A' + 'a') : key[i];
        if (!word_char(c)) *skip = true;
        word_at[i] = c;
    }
    word_at[klen] = '\0';
    if (*skip) return QKV_OK;
    entry *e = &S->e[S->n];
    *e = (entry){word_at, klen, variant, S->n, *ph_at, 0};
    for (size_t i = 0; i < plen;) {
        while (i < plen && is_space(pron[i]))
            i++;
        size_t j = i;
        while (j < plen && !is_space(pron[j]))
            j++;
        if (j == i) break;
        int id = phone_id(&S->pt, pron + i, j - i);
        if (id < 0)
            return QKV_ERROR(QKV_ERR_FORMAT, "%s:%lld: unknown phone %s in the pronunciation of %s",
                             S->path, (long long)MLINE, qkv__quote(q, sizeof q, pron + i, j - i),
                             qkv__quote(q2, sizeof q2, m->key, m->key_len));
        S->phones[(*ph_at)++] = (int8_t)id;
        e->nph++;
        i = j;
    }
    if (e->nph == 0)
        return QKV_ERROR(QKV_ERR_FORMAT, "%s:%lld: empty pronunciation for %s", S->path,
                         (long long)MLINE, qkv__quote(q, sizeof q, m->key, m->key_len));
#undef MLINE
    return QKV_OK;
}

/* Whether phones a[0, n) equal b[0, n) after mapping through map (NULL: identity). */
static bool same(const int8_t *a, const int8_t *b, int64_t n, const int8_t *map) {
    for (int64_t i = 0; i < n; i++)
        if ((map ? map[a[i]] : a[i]) != (map ? map[b[i]] : b[i])) return false;
    return true;
}

static void put_line(qkv__buf *b, const entry *e, const int8_t *ph, const phone_table *pt,
                     bool nostress) {
    qkv__buf_add(b, e->word, e->wlen);
    qkv__buf_ch(b, '\t');
    for (int64_t k = 0; k < e->nph; k++) {
        if (k) qkv__buf_ch(b, ' ');
        qkv__buf_str(b, nostress ? base_phones[pt->base[ph[k]]] : pt->name[ph[k]]);
    }
    qkv__buf_ch(b, '\n');
}

/* Write the split and inventory files of the sorted entries. */
static qkv_status write_outputs(g2p_state *S, const char *out_dir, qkv_prepare_counts *c) {
    qkv__buf files[2][3] = {{{0}}}, graph = {0}, phs = {0}, phn = {0};
    int64_t gcount[256] = {0}, scount[N_PHONES] = {0}, ncount[N_BASE] = {0};
    const int8_t *base = S->pt.base;
    for (int64_t i = 0; i < S->n;) {
        int64_t j = i + 1;
        while (j < S->n && !strcmp(S->e[j].word, S->e[i].word))
            j++;
        const entry *w = &S->e[i];
        qkv_split sp = qkv_split_of(w->word, w->wlen, 88, 90);
        c->items[sp]++;
        if ((int64_t)w->wlen > c->max_src_len) c->max_src_len = (int64_t)w->wlen;
        for (size_t k = 0; k < w->wlen; k++)
            gcount[(unsigned char)w->word[k]]++;
        int64_t n_ns = 0;
        for (int64_t a = i; a < j; a++) { /* with stress: distinct variants in order */
            const entry *e = &S->e[a];
            const int8_t *pa = S->phones + e->ph;
            bool dup = false;
            for (int64_t b = i; b < a && !dup; b++)
                dup = S->e[b].nph == e->nph && same(S->phones + S->e[b].ph, pa, e->nph, NULL);
            if (dup) continue;
            c->units[sp]++;
            if (e->nph > c->max_tgt_len) c->max_tgt_len = e->nph;
            for (int64_t k = 0; k < e->nph; k++)
                scount[pa[k]]++;
            put_line(&files[0][sp], e, pa, &S->pt, false);
        }
        for (int64_t a = i; a < j; a++) { /* without stress: distinct after mapping */
            const entry *e = &S->e[a];
            const int8_t *pa = S->phones + e->ph;
            bool dup = false;
            for (int64_t b = i; b < a && !dup; b++)
                dup = S->e[b].nph == e->nph && same(S->phones + S->e[b].ph, pa, e->nph, base);
            if (dup) continue;
            n_ns++;
            for (int64_t k = 0; k < e->nph; k++)
                ncount[base[pa[k]]]++;
            put_line(&files[1][sp], e, pa, &S->pt, true);
        }
        c->units_ns[sp] += n_ns;
        c->multi_ns[sp] += n_ns > 1;
        i = j;
    }
    for (int ch = 0; ch < 256; ch++)
        if (gcount[ch]) {
            qkv__buf_ch(&graph, (char)ch);
            qkv__buf_ch(&graph, '\t');
            qkv__buf_i64(&graph, gcount[ch]);
            qkv__buf_ch(&graph, '\n');
            c->n_src_symbols++;
        }
    for (int k = 0; k < N_PHONES; k++)
        if (scount[k]) {
            qkv__buf_str(&phs, S->pt.name[k]);
            qkv__buf_ch(&phs, '\t');
            qkv__buf_i64(&phs, scount[k]);
            qkv__buf_ch(&phs, '\n');
            c->n_tgt_symbols++;
        }
    for (int k = 0; k < N_BASE; k++) /* base_phones is sorted by bytes */
        if (ncount[k]) {
            qkv__buf_str(&phn, base_phones[k]);
            qkv__buf_ch(&phn, '\t');
            qkv__buf_i64(&phn, ncount[k]);
            qkv__buf_ch(&phn, '\n');
            c->n_tgt_symbols_ns++;
        }
    qkv_status st = QKV_OK;
    bool oom = graph.oom || phs.oom || phn.oom;
    for (int v = 0; v < 2; v++)
        for (int s = 0; s < 3; s++)
            oom = oom || files[v][s].oom;
    if (oom) st = QKV_ERROR(QKV_ERR_OOM, "%s: out of memory writing the splits", WHO);
    for (int v = 0; v < 2 && !st; v++)
        for (int s = 0; s < 3 && !st; s++) {
            char name[64];
            snprintf(name, sizeof name, "cmudict%s.%s.tsv", v ? ".nostress" : "",
                     qkv_split_name((qkv_split)s));
            char *path = qkv__path_join(out_dir, name);
            st = path ? qkv__write_file_atomic(WHO, path, files[v][s].p, files[v][s].n)
                      : QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
            free(path);
        }
    const char *inv_names[3] = {"graphemes.txt", "phones.txt", "phones.nostress.txt"};
    qkv__buf *inv[3] = {&graph, &phs, &phn};
    for (int k = 0; k < 3 && !st; k++) {
        char *path = qkv__path_join(out_dir, inv_names[k]);
        st = path ? qkv__write_file_atomic(WHO, path, inv[k]->p, inv[k]->n)
                  : QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
        free(path);
    }
    for (int v = 0; v < 2; v++)
        for (int s = 0; s < 3; s++)
            qkv__buf_free(&files[v][s]);
    qkv__buf_free(&graph);
    qkv__buf_free(&phs);
    qkv__buf_free(&phn);
    return st;
}

qkv_status qkv_prepare_g2p(const char *index_js, const char *out_dir, qkv_prepare_counts *counts) {
    if (!index_js || !out_dir) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL argument", WHO);
    qkv_prepare_counts c = {0};
    g2p_state S = {.path = index_js};
    build_phones(&S.pt);
    char *text;
    size_t size;
    qkv_status st = qkv__read_file(WHO, index_js, &text, &size);
    if (st) return st;
    S.text = text;
    const char *open = strstr(text, "= {");
    const char *close = strrchr(text, '}');
    qkv_json_doc *doc = NULL;
    if (!open || !close || close < open + 2) {
        st = QKV_ERROR(QKV_ERR_FORMAT,
                       "%s: no 'export const dictionary = {...}' object literal (is this the "
                       "index.js of cmu-pronouncing-dictionary?)",
                       index_js);
    } else {
        S.json_start = (size_t)(open + 2 - text);
        qkv_json_error err;
        st = qkv_json_parse(open + 2, (size_t)(close - open - 1), &doc, &err);
        if (st == QKV_ERR_FORMAT)
            st =
                QKV_ERROR(QKV_ERR_FORMAT, "%s:%lld: the dictionary is not valid JSON: %s", index_js,
                          (long long)line_of(text, S.json_start + err.offset), err.message);
    }
    const qkv_json_value *root = doc ? qkv_json_root(doc) : NULL;
    if (!st && root->type != QKV_JSON_OBJECT)
        st = QKV_ERROR(QKV_ERR_FORMAT, "%s: the dictionary is a JSON %s, not an object", index_js,
                       qkv_json_type_name(root->type));
    if (!st) {
        int64_t n = root->count;
        size_t word_bytes = 0, phone_bound = 0;
        for (int64_t i = 0; i < n; i++) {
            word_bytes += root->items[i].key_len + 1;
            phone_bound += root->items[i].len / 2 + 1; /* a phone and its separator: >= 2 bytes */
        }
        S.e = malloc((size_t)(n ? n : 1) * sizeof *S.e);
        S.words = malloc(word_bytes ? word_bytes : 1);
        S.phones = malloc(phone_bound ? phone_bound : 1);
        if (!S.e || !S.words || !S.phones) st = QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
        char *w = S.words;
        int64_t ph = 0;
        for (int64_t i = 0; i < n && !st; i++) {
            bool skip = false;
            st = read_member(&S, &root->items[i], w, &ph, &c, &skip);
            if (st) break;
            c.source_entries++;
            if (skip) {
                c.skipped++;
                continue;
            }
            w += S.e[S.n].wlen + 1;
            S.n++;
        }
    }
    if (!st) {
        qsort(S.e, (size_t)S.n, sizeof *S.e, by_entry);
        st = qkv__mkdirs(WHO, out_dir);
    }
    if (!st) st = write_outputs(&S, out_dir, &c);
    qkv_json_free(doc);
    free(S.e);
    free(S.words);
    free(S.phones);
    free(text);
    if (!st && counts) *counts = c;
    return st;
}
