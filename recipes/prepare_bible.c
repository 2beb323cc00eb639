/*
 * prepare_bible.c: the Bible, verse-aligned, English-Spanish: the King James Version (Debian
 * sword-text-kjv, SWORD module engKJV2006eb) and the Reina-Valera 1909 (sword-text-sparv,
 * spaRV1909eb), each exported whole by scripts/fetch_data.sh with `diatheke -b MODULE -k Gen-Rev`
 * (diatheke's raw, "internal" output: the module's OSIS markup) -> the translation split files of
 * docs/data.md, section "Bible".
 *
 * Source (cache_dir/kjv.txt, cache_dir/sparv.txt): one verse per line,
 *     [pre-verse markup] Book C:V: text with OSIS markup
 * with the English book names of SWORD's locale ("Genesis", "I Samuel", "Revelation of John"),
 * in canonical order, and a last line "(MODULE)". The pre-verse markup is dropped whole: it holds
 * the headings (in the KJV the psalm titles, which diatheke 1.9 repeats before every later verse
 * until another title replaces it). In the text, <title> and <note> elements are dropped with
 * their content; other tags are removed (line and paragraph milestones become a space); the
 * entities &amp; &lt; &gt; &quot; &apos; are decoded; the pilcrows (U+00B6) of the KJV and the
 * USFM markers left in its text ("\nd ") are removed; blanks are collapsed to single spaces and
 * trimmed. Case and punctuation are kept. The text must be valid UTF-8 without control
 * characters, and no word may spell a reserved symbol of the vocabularies (<pad> ...).
 *
 * Alignment by reference (both modules use the KJV versification, so the references coincide):
 *   - a reference in one export only, or whose text is empty on a side, is dropped (counted);
 *   - the Spanish text keeps its own verse division in a few chapters, which shows as empty
 *     verses at the end of a chapter (Numbers 12:16 ...): the following chapter is then shifted
 *     by as many verses. So a chapter with a reference missing or empty on one side is dropped
 *     whole, and so is the next chapter of the book (the "versification" count);
 *   - the first verse of every psalm is dropped: the Spanish module has the psalm's title in the
 *     verse text, the English one as a heading outside it;
 *   - the rest are written, in canonical order, to the split of their book: dev = Mark and
 *     1 Corinthians, test = John, Romans and Hebrews, train = the other 61 books.
 *
 * Output (out_dir): bible.en-es.{train,dev,test}.tsv ("English<TAB>Spanish"),
 * bible.es-en.{train,dev,test}.tsv (the same lines reversed) and bible.{train,dev,test}.ref, the
 * OSIS reference of each line ("Gen.1.1").
 */
#include "recipes.h"
#include "data/data_internal.h"

#include <stdlib.h>
#include <string.h>

#define WHO "qkv_prepare_bible"
#define N_BOOKS 66
#define MAX_CHAPTER 999
#define MAX_VERSE 999
#define PSALMS 18 /* index of Psalms in books[] */

static const struct {
    const char *name; /* in diatheke's export (SWORD's English locale) */
    const char *osis; /* OSIS book id, used in the .ref files */
    qkv_split split;
} books[N_BOOKS] = {
    {"Genesis", "Gen", QKV_SPLIT_TRAIN},
    {"Exodus", "Exod", QKV_SPLIT_TRAIN},
    {"Leviticus", "Lev", QKV_SPLIT_TRAIN},
    {"Numbers", "Num", QKV_SPLIT_TRAIN},
    {"Deuteronomy", "Deut", QKV_SPLIT_TRAIN},
    {"Joshua", "Josh", QKV_SPLIT_TRAIN},
    {"Judges", "Judg", QKV_SPLIT_TRAIN},
    {"Ruth", "Ruth", QKV_SPLIT_TRAIN},
    {"I Samuel", "1Sam", QKV_SPLIT_TRAIN},
    {"II Samuel", "2Sam", QKV_SPLIT_TRAIN},
    {"I Kings", "1Kgs", QKV_SPLIT_TRAIN},
    {"II Kings", "2Kgs", QKV_SPLIT_TRAIN},
    {"I Chronicles", "1Chr", QKV_SPLIT_TRAIN},
    {"II Chronicles", "2Chr", QKV_SPLIT_TRAIN},
    {"Ezra", "Ezra", QKV_SPLIT_TRAIN},
    {"Nehemiah", "Neh", QKV_SPLIT_TRAIN},
    {"Esther", "Esth", QKV_SPLIT_TRAIN},
    {"Job", "Job", QKV_SPLIT_TRAIN},
    {"Psalms", "Ps", QKV_SPLIT_TRAIN},
    {"Proverbs", "Prov", QKV_SPLIT_TRAIN},
    {"Ecclesiastes", "Eccl", QKV_SPLIT_TRAIN},
    {"Song of Solomon", "Song", QKV_SPLIT_TRAIN},
    {"Isaiah", "Isa", QKV_SPLIT_TRAIN},
    {"Jeremiah", "Jer", QKV_SPLIT_TRAIN},
    {"Lamentations", "Lam", QKV_SPLIT_TRAIN},
    {"Ezekiel", "Ezek", QKV_SPLIT_TRAIN},
    {"Daniel", "Dan", QKV_SPLIT_TRAIN},
    {"Hosea", "Hos", QKV_SPLIT_TRAIN},
    {"Joel", "Joel", QKV_SPLIT_TRAIN},
    {"Amos", "Amos", QKV_SPLIT_TRAIN},
    {"Obadiah", "Obad", QKV_SPLIT_TRAIN},
    {"Jonah", "Jonah", QKV_SPLIT_TRAIN},
    {"Micah", "Mic", QKV_SPLIT_TRAIN},
    {"Nahum", "Nah", QKV_SPLIT_TRAIN},
    {"Habakkuk", "Hab", QKV_SPLIT_TRAIN},
    {"Zephaniah", "Zeph", QKV_SPLIT_TRAIN},
    {"Haggai", "Hag", QKV_SPLIT_TRAIN},
    {"Zechariah", "Zech", QKV_SPLIT_TRAIN},
    {"Malachi", "Mal", QKV_SPLIT_TRAIN},
    {"Matthew", "Matt", QKV_SPLIT_TRAIN},
    {"Mark", "Mark", QKV_SPLIT_DEV},
    {"Luke", "Luke", QKV_SPLIT_TRAIN},
    {"John", "John", QKV_SPLIT_TEST},
    {"Acts", "Acts", QKV_SPLIT_TRAIN},
    {"Romans", "Rom", QKV_SPLIT_TEST},
    {"I Corinthians", "1Cor", QKV_SPLIT_DEV},
    {"II Corinthians", "2Cor", QKV_SPLIT_TRAIN},
    {"Galatians", "Gal", QKV_SPLIT_TRAIN},
    {"Ephesians", "Eph", QKV_SPLIT_TRAIN},
    {"Philippians", "Phil", QKV_SPLIT_TRAIN},
    {"Colossians", "Col", QKV_SPLIT_TRAIN},
    {"I Thessalonians", "1Thess", QKV_SPLIT_TRAIN},
    {"II Thessalonians", "2Thess", QKV_SPLIT_TRAIN},
    {"I Timothy", "1Tim", QKV_SPLIT_TRAIN},
    {"II Timothy", "2Tim", QKV_SPLIT_TRAIN},
    {"Titus", "Titus", QKV_SPLIT_TRAIN},
    {"Philemon", "Phlm", QKV_SPLIT_TRAIN},
    {"Hebrews", "Heb", QKV_SPLIT_TEST},
    {"James", "Jas", QKV_SPLIT_TRAIN},
    {"I Peter", "1Pet", QKV_SPLIT_TRAIN},
    {"II Peter", "2Pet", QKV_SPLIT_TRAIN},
    {"I John", "1John", QKV_SPLIT_TRAIN},
    {"II John", "2John", QKV_SPLIT_TRAIN},
    {"III John", "3John", QKV_SPLIT_TRAIN},
    {"Jude", "Jude", QKV_SPLIT_TRAIN},
    {"Revelation of John", "Rev", QKV_SPLIT_TRAIN},
};

typedef struct verse {
    int32_t book, chapter, verse;
    size_t text, len; /* the cleaned text, in the export's text buffer */
} verse;

typedef struct export {
    char *path;
    verse *v;
    size_t n, cap;
    qkv__buf text;
}
export;

static void export_free(export *e) {
    free(e->v);
    qkv__buf_free(&e->text);
}

static int64_t ref_order(const verse *v) {
    return ((int64_t)v->book * (MAX_CHAPTER + 1) + v->chapter) * (MAX_VERSE + 1) + v->verse;
}

static bool is_letter(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_blank(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* A tag s[0, *n) at s[0] == '<': its name (s + *name_at, *name_len), whether it closes (</x>)
 * or is empty (<x/>). Returns false when no '>' ends it on the line. */
typedef struct tag {
    size_t len, name_at, name_len;
    bool closing, empty;
} tag;

static bool read_tag(const char *s, size_t n, tag *t) {
    const char *gt = memchr(s, '>', n);
    if (!gt) return false;
    t->len = (size_t)(gt - s) + 1;
    t->closing = t->len > 1 && s[1] == '/';
    t->empty = t->len > 2 && gt[-1] == '/';
    t->name_at = t->closing ? 2 : 1;
    size_t k = t->name_at;
    while (k < t->len - 1 && !is_blank(s[k]) && s[k] != '/' && s[k] != '>')
        k++;
    t->name_len = k - t->name_at;
    return true;
}

static bool tag_is(const char *s, const tag *t, const char *name) {
    size_t n = strlen(name);
    return t->name_len == n && !memcmp(s + t->name_at, name, n);
}

/* Elements dropped with their content. */
static bool tag_drops(const char *s, const tag *t) {
    return tag_is(s, t, "title") || tag_is(s, t, "note");
}

/* Tags that separate words (line, paragraph and division boundaries). */
static bool tag_separates(const char *s, const tag *t) {
    static const char *const names[] = {"l", "lg", "lb", "p", "div", "chapter", "milestone", "br"};
    if (t->empty) return true;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (tag_is(s, t, names[i])) return true;
    return false;
}

/* *p is just past an opening tag named name[0, name_len) (title or note): move *p past its
 * matching closing tag (same-name elements may nest). False when the line ends first. */
static bool skip_element(const char *s, size_t n, size_t *p, const char *name, size_t name_len) {
    int depth = 1;
    while (*p < n) {
        const char *lt = memchr(s + *p, '<', n - *p);
        if (!lt) return false;
        *p = (size_t)(lt - s);
        tag t;
        if (!read_tag(s + *p, n - *p, &t)) return false;
        if (!t.empty && t.name_len == name_len && !memcmp(s + *p + t.name_at, name, name_len))
            depth += t.closing ? -1 : 1;
        *p += t.len;
        if (depth == 0) return true;
    }
    return false;
}

#define FAIL(...) QKV_ERROR(QKV_ERR_FORMAT, __VA_ARGS__)

/* Valid UTF-8 without control characters other than blanks. */
static qkv_status check_bytes(const char *path, int64_t line, const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            int k = qkv__utf8_char_len((const unsigned char *)s + i, n - i);
            if (!k)
                return FAIL("%s:%lld: invalid UTF-8 (byte 0x%02X at column %zu): the exports must "
                            "be UTF-8, as diatheke writes them by default (-e UTF8); a Latin-1 "
                            "file converts with iconv -f LATIN1 -t UTF-8",
                            path, (long long)line, c, i + 1);
            i += (size_t)k;
        } else if ((c < 0x20 && !is_blank((char)c)) || c == 0x7f) {
            return FAIL("%s:%lld: control character 0x%02X at column %zu", path, (long long)line, c,
                        i + 1);
        } else {
            i++;
        }
    }
    return QKV_OK;
}

/* The decimal number s[*p ..] (1 .. max) followed by ':'; *p moved past the ':'. */
static bool ref_number(const char *s, size_t n, size_t *p, int64_t max, int32_t *out) {
    size_t q = *p;
    while (q < n && s[q] >= '0' && s[q] <= '9')
        q++;
    int64_t v;
    if (q >= n || s[q] != ':' || !qkv__parse_uint(s + *p, q - *p, max, &v) || v == 0) return false;
    *out = (int32_t)v;
    *p = q + 1;
    return true;
}

static const struct {
    const char *name, *text;
} entities[] = {{"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}};

/* One verse line: the reference into *v, the cleaned text appended to e->text. */
static qkv_status parse_line(export *e, const char *s, size_t n, int64_t line, verse *v) {
    char q[200];
    qkv_status st = check_bytes(e->path, line, s, n);
    if (st) return st;
    size_t p = 0;
    for (;;) { /* pre-verse markup: tags, and <title> / <note> elements whole */
        while (p < n && is_blank(s[p]))
            p++;
        if (p >= n || s[p] != '<') break;
        tag t;
        if (!read_tag(s + p, n - p, &t))
            return FAIL("%s:%lld: unterminated tag %s", e->path, (long long)line,
                        qkv__quote(q, sizeof q, s + p, n - p));
        size_t at = p;
        p += t.len;
        if (!t.closing && !t.empty && tag_drops(s + at, &t) &&
            !skip_element(s, n, &p, s + at + t.name_at, t.name_len))
            return FAIL("%s:%lld: unterminated %s element", e->path, (long long)line,
                        qkv__quote(q, sizeof q, s + at, t.len));
    }
    int book = -1;
    size_t best = 0;
    for (int k = 0; k < N_BOOKS; k++) {
        size_t len = strlen(books[k].name);
        if (len > best && len < n - p && !memcmp(s + p, books[k].name, len) && s[p + len] == ' ')
            book = k, best = len;
    }
    if (book < 0)
        return FAIL("%s:%lld: no verse reference ('Book CHAPTER:VERSE: text', a book of the "
                    "English SWORD locale) at %s",
                    e->path, (long long)line, qkv__quote(q, sizeof q, s + p, n - p));
    size_t r = p + best + 1;
    *v = (verse){.book = book};
    if (!ref_number(s, n, &r, MAX_CHAPTER, &v->chapter) ||
        !ref_number(s, n, &r, MAX_VERSE, &v->verse) || (r < n && s[r] != ' '))
        return FAIL("%s:%lld: bad chapter:verse in %s (expected '%s CHAPTER:VERSE: ', numbers "
                    "1..999)",
                    e->path, (long long)line, qkv__quote(q, sizeof q, s + p, n - p),
                    books[book].name);
    /* the text */
    qkv__buf *b = &e->text;
    v->text = b->n;
    bool space = false;
    for (size_t i = r; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c == '<') {
            tag t;
            if (!read_tag(s + i, n - i, &t))
                return FAIL("%s:%lld: unterminated tag %s in %s %d:%d", e->path, (long long)line,
                            qkv__quote(q, sizeof q, s + i, n - i), books[book].name, v->chapter,
                            v->verse);
            size_t at = i;
            i += t.len;
            if (!t.closing && !t.empty && tag_drops(s + at, &t)) {
                if (!skip_element(s, n, &i, s + at + t.name_at, t.name_len))
                    return FAIL("%s:%lld: unterminated %s element in %s %d:%d", e->path,
                                (long long)line, qkv__quote(q, sizeof q, s + at, t.len),
                                books[book].name, v->chapter, v->verse);
                space = space || tag_is(s + at, &t, "title"); /* a note sits inside a word */
            } else if (tag_separates(s + at, &t)) {
                space = true;
            }
            continue;
        }
        const char *piece = s + i;
        size_t plen = 1;
        if (c == '&') {
            size_t k = 0, ne = sizeof entities / sizeof *entities;
            while (k < ne && !(strlen(entities[k].name) <= n - i &&
                               !memcmp(s + i, entities[k].name, strlen(entities[k].name))))
                k++;
            if (k == ne)
                return FAIL("%s:%lld: unknown entity %s in %s %d:%d (known: &amp; &lt; &gt; "
                            "&quot; &apos;)",
                            e->path, (long long)line,
                            qkv__quote(q, sizeof q, s + i, n - i < 10 ? n - i : 10),
                            books[book].name, v->chapter, v->verse);
            i += strlen(entities[k].name);
            piece = entities[k].text;
            plen = strlen(piece);
        } else if (c == '\\' && i + 1 < n && is_letter(s[i + 1])) {
            /* a USFM marker left in the text: \nd, \wj*, \add ... */
            i++;
            while (i < n && (is_letter(s[i]) || (s[i] >= '0' && s[i] <= '9')))
                i++;
            if (i < n && s[i] == '*') i++;
            space = true;
            continue;
        } else if (is_blank((char)c)) {
            space = true;
            i++;
            continue;
        } else if (c == 0xC2 && i + 1 < n && (unsigned char)s[i + 1] == 0xB6) { /* pilcrow */
            space = true;
            i += 2;
            continue;
        } else {
            if (c >= 0x80) plen = (size_t)qkv__utf8_char_len((const unsigned char *)s + i, n - i);
            i += plen;
        }
        if (space && b->n > v->text) qkv__buf_ch(b, ' ');
        space = false;
        qkv__buf_add(b, piece, plen);
    }
    v->len = b->n - v->text;
    /* no word may be read as a reserved symbol by the corpus readers */
    for (size_t i = 0; i < v->len && !b->oom;) {
        const char *w = b->p + v->text + i;
        const char *sp = memchr(w, ' ', v->len - i);
        size_t wl = sp ? (size_t)(sp - w) : v->len - i;
        if (qkv__vocab_reserved_id(w, wl) >= 0)
            return FAIL("%s:%lld: %s %d:%d has the word %s, a reserved symbol of the "
                        "vocabularies",
                        e->path, (long long)line, books[book].name, v->chapter, v->verse,
                        qkv__quote(q, sizeof q, w, wl));
        i += wl + 1;
    }
    return QKV_OK;
}

/* The closing line of a diatheke export: "(MODULE)". */
static bool is_module_line(const char *s, size_t n) {
    if (n < 3 || s[0] != '(' || s[n - 1] != ')') return false;
    for (size_t i = 1; i + 1 < n; i++)
        if (!(is_letter(s[i]) || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-' ||
              s[i] == '.'))
            return false;
    return true;
}

static qkv_status read_export(export *e) {
    char *data = NULL;
    size_t size;
    qkv_status st = qkv__read_file(WHO, e->path, &data, &size);
    if (st) return st;
    int64_t line = 0;
    bool closed = false;
    for (size_t pos = 0, len; !st && pos < size;) {
        const char *s = qkv__take_line(data, size, &pos, &len);
        line++;
        if (closed) {
            st =
                FAIL("%s:%lld: a line after the closing '(MODULE)' line", e->path, (long long)line);
        } else if (is_module_line(s, len)) {
            closed = true;
        } else if (len == 0) {
            st = FAIL("%s:%lld: blank line (a verse per line expected)", e->path, (long long)line);
        } else {
            if (e->n == e->cap) {
                size_t cap = e->cap ? 2 * e->cap : 1024;
                verse *nv = realloc(e->v, cap * sizeof *nv);
                if (!nv) {
                    st = QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
                    break;
                }
                e->v = nv;
                e->cap = cap;
            }
            verse *v = &e->v[e->n];
            st = parse_line(e, s, len, line, v);
            if (!st && e->n && ref_order(v) <= ref_order(v - 1))
                st = FAIL("%s:%lld: %s %d:%d after %s %d:%d: the verses must follow the canonical "
                          "order, each once",
                          e->path, (long long)line, books[v->book].name, v->chapter, v->verse,
                          books[v[-1].book].name, v[-1].chapter, v[-1].verse);
            if (!st) e->n++;
        }
    }
    free(data);
    if (!st && e->text.oom) st = QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
    if (!st && !closed)
        st = FAIL("%s: no closing '(MODULE)' line: the export is incomplete (rerun "
                  "scripts/fetch_data.sh bible)",
                  e->path);
    if (!st && e->n == 0) st = FAIL("%s: no verses", e->path);
    return st;
}

static int64_t count_words(const char *s, size_t n) {
    int64_t w = n > 0;
    for (size_t i = 0; i < n; i++)
        w += s[i] == ' ';
    return w;
}

static int64_t count_chars(const char *s, size_t n) {
    int64_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

static void add_ref(qkv__buf *b, const verse *v) {
    qkv__buf_str(b, books[v->book].osis);
    qkv__buf_ch(b, '.');
    qkv__buf_i64(b, v->chapter);
    qkv__buf_ch(b, '.');
    qkv__buf_i64(b, v->verse);
    qkv__buf_ch(b, '\n');
}

static void add_pair(qkv__buf *b, const char *src, size_t ns, const char *tgt, size_t nt) {
    qkv__buf_add(b, src, ns);
    qkv__buf_ch(b, '\t');
    qkv__buf_add(b, tgt, nt);
    qkv__buf_ch(b, '\n');
}

#define CHAPTER_SLOTS (MAX_CHAPTER + 2)

/* Walk the references of both exports in canonical order: f(ctx, e, s) with e or s NULL for a
 * reference that one export lacks. */
typedef void (*pair_fn)(void *ctx, const verse *e, const char *et, const verse *s, const char *st);

/* The cleaned text of a verse of x ("" while x holds no text at all: every verse empty). */
static const char *text_of(const export *x, const verse *v) {
    return x->text.p ? x->text.p + v->text : "";
}

static void merge(const export *E, const export *S, pair_fn f, void *ctx) {
    size_t i = 0, j = 0;
    while (i < E->n || j < S->n) {
        const verse *e = i < E->n ? &E->v[i] : NULL, *s = j < S->n ? &S->v[j] : NULL;
        int64_t oe = e ? ref_order(e) : INT64_MAX, os = s ? ref_order(s) : INT64_MAX;
        if (oe < os) s = NULL;
        if (os < oe) e = NULL;
        f(ctx, e, e ? text_of(E, e) : NULL, s, s ? text_of(S, s) : NULL);
        i += e != NULL;
        j += s != NULL;
    }
}

typedef struct align {
    unsigned char *bad; /* [book * CHAPTER_SLOTS + chapter]: chapter dropped (versification) */
    qkv__buf tsv[2][3], ref[3];
    qkv_prepare_counts *c;
} align;

static void mark_mismatch(void *ctx, const verse *e, const char *et, const verse *s,
                          const char *st) {
    (void)et, (void)st;
    align *A = ctx;
    if (e && s && e->len && s->len) return;
    const verse *v = e ? e : s;
    A->bad[v->book * CHAPTER_SLOTS + v->chapter] = 1;
    A->bad[v->book * CHAPTER_SLOTS + v->chapter + 1] = 1;
}

static void write_pair(void *ctx, const verse *e, const char *et, const verse *s, const char *st) {
    align *A = ctx;
    qkv_prepare_counts *c = A->c;
    if (!e || !s) {
        c->only_in[e ? 0 : 1]++;
        return;
    }
    if (!e->len || !s->len) {
        c->empty[e->len ? 1 : 0]++;
        return;
    }
    if (A->bad[e->book * CHAPTER_SLOTS + e->chapter]) {
        c->versification++;
        return;
    }
    if (e->book == PSALMS && e->verse == 1) {
        c->psalm_titles++;
        return;
    }
    qkv_split sp = books[e->book].split;
    add_pair(&A->tsv[0][sp], et, e->len, st, s->len);
    add_pair(&A->tsv[1][sp], st, s->len, et, e->len);
    add_ref(&A->ref[sp], e);
    c->items[sp]++;
    int64_t we = count_words(et, e->len), ws = count_words(st, s->len);
    c->words[0][sp] += we;
    c->words[1][sp] += ws;
    c->chars[0][sp] += count_chars(et, e->len);
    c->chars[1][sp] += count_chars(st, s->len);
    if (we > c->max_src_len) c->max_src_len = we;
    if (ws > c->max_tgt_len) c->max_tgt_len = ws;
}

static qkv_status write_outputs(align *A, const char *out_dir) {
    qkv_status st = qkv__mkdirs(WHO, out_dir);
    static const char *const pair_name[2] = {"en-es", "es-en"};
    for (int s = 0; s < 3 && !st; s++)
        for (int k = 0; k < 3 && !st; k++) {
            const qkv__buf *b = k < 2 ? &A->tsv[k][s] : &A->ref[s];
            char name[40];
            if (k < 2)
                snprintf(name, sizeof name, "bible.%s.%s.tsv", pair_name[k],
                         qkv_split_name((qkv_split)s));
            else
                snprintf(name, sizeof name, "bible.%s.ref", qkv_split_name((qkv_split)s));
            char *path = qkv__path_join(out_dir, name);
            st = !path || b->oom ? QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO)
                                 : qkv__write_file_atomic(WHO, path, b->p ? b->p : "", b->n);
            free(path);
        }
    return st;
}

qkv_status qkv_prepare_bible(const char *cache_dir, const char *out_dir,
                             qkv_prepare_counts *counts) {
    if (!cache_dir || !out_dir) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL argument", WHO);
    qkv_prepare_counts c = {0};
    export E = {.path = qkv__path_join(cache_dir, "kjv.txt")};
    export S = {.path = qkv__path_join(cache_dir, "sparv.txt")};
    align A = {.bad = calloc((size_t)N_BOOKS * CHAPTER_SLOTS, 1), .c = &c};
    qkv_status st =
        !E.path || !S.path || !A.bad ? QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO) : QKV_OK;
    if (!st) st = read_export(&E);
    if (!st) st = read_export(&S);
    if (!st) {
        c.verses[0] = (int64_t)E.n;
        c.verses[1] = (int64_t)S.n;
        merge(&E, &S, mark_mismatch, &A);
        merge(&E, &S, write_pair, &A);
        st = write_outputs(&A, out_dir);
    }
    for (int s = 0; s < 3; s++) {
        qkv__buf_free(&A.tsv[0][s]);
        qkv__buf_free(&A.tsv[1][s]);
        qkv__buf_free(&A.ref[s]);
    }
    free(A.bad);
    free(E.path);
    free(S.path);
    export_free(&E);
    export_free(&S);
    if (!st && counts) *counts = c;
    return st;
}
