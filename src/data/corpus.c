/*
 * corpus.c: the readers of the four text formats (pairs, tagged sentences, label + tokens, plain
 * text) and the grouping of consecutive G2P variants.
 *
 * The file is copied into the corpus; symbols are (offset, length) spans into that copy, stored
 * back to back per field with an offset array per field (example i's source symbols are
 * src[src_off[i] .. src_off[i + 1])). A symbol a tokenizer spells differently from the text
 * (subwords) is copied into a second buffer, `extra`: offsets past the text's NUL point there.
 * Text fields are cut by the fields' tokenizers (qkv_tokenizer.h); a tagged file's words and tags
 * are its columns. Every line is validated before it is used; the first problem stops the read
 * with "FILE:LINE: problem" (QKV_ERR_FORMAT).
 */
#include "data_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct span {
    int64_t off;
    int64_t len;
} span;

struct qkv_corpus {
    qkv_corpus_kind kind;
    char *name;
    char *text; /* the file's bytes, NUL-terminated */
    size_t size;
    int64_t n, cap;  /* examples */
    int64_t *line;   /* (n) first line of each example */
    span *key;       /* (n) the source field as written (pairs, labeled) */
    int64_t *off[2]; /* (n + 1) per field: offsets into sym[field] */
    span *sym[2];    /* per field: every symbol, back to back */
    int64_t n_sym[2], cap_sym[2];
    char *extra; /* symbols that are not spans of the text; offset size + 1 + k is extra[k] */
    size_t n_extra, cap_extra;
};

static const char *span_text(const qkv_corpus *c, span s) {
    return s.off <= (int64_t)c->size ? c->text + s.off : c->extra + (s.off - (int64_t)c->size - 1);
}

/* ---- growth ---- */

static bool push_sym(qkv_corpus *c, int field, int64_t off, int64_t len) {
    if (c->n_sym[field] == c->cap_sym[field]) {
        int64_t cap = c->cap_sym[field] ? c->cap_sym[field] * 2 : 1024;
        span *q = realloc(c->sym[field], (size_t)cap * sizeof *q);
        if (!q) return false;
        c->sym[field] = q;
        c->cap_sym[field] = cap;
    }
    c->sym[field][c->n_sym[field]++] = (span){off, len};
    return true;
}

/* A symbol handed out by a tokenizer: a span when it lies in the text, else a copy in extra. */
static bool push_symbol(qkv_corpus *c, int field, const char *sym, size_t len) {
    const uintptr_t p = (uintptr_t)sym, t = (uintptr_t)c->text;
    if (p >= t && p - t <= c->size && len <= c->size - (p - t)) return push_sym(c, field, (int64_t)(p - t), (int64_t)len);
    if (len > c->cap_extra - c->n_extra) {
        size_t cap = c->cap_extra ? c->cap_extra : 1024;
        while (cap - c->n_extra < len) {
            if (cap > SIZE_MAX / 2) return false;
            cap *= 2;
        }
        char *q = realloc(c->extra, cap);
        if (!q) return false;
        c->extra = q;
        c->cap_extra = cap;
    }
    if (len) memcpy(c->extra + c->n_extra, sym, len);
    const int64_t off = (int64_t)(c->size + 1 + c->n_extra);
    c->n_extra += len;
    return push_sym(c, field, off, (int64_t)len);
}

/* Open example n: its line, key and the start of its fields. line and key hold cap entries,
 * the offset arrays cap + 1. */
static bool begin_example(qkv_corpus *c, int64_t line, span key) {
    if (c->n == c->cap) {
        int64_t cap = c->cap ? c->cap * 2 : 256;
        int64_t *ln = realloc(c->line, (size_t)cap * sizeof *ln);
        if (ln) c->line = ln;
        span *k = realloc(c->key, (size_t)cap * sizeof *k);
        if (k) c->key = k;
        int64_t *o0 = realloc(c->off[0], (size_t)(cap + 1) * sizeof *o0);
        if (o0) c->off[0] = o0;
        int64_t *o1 = realloc(c->off[1], (size_t)(cap + 1) * sizeof *o1);
        if (o1) c->off[1] = o1;
        if (!ln || !k || !o0 || !o1) return false;
        c->cap = cap;
    }
    c->line[c->n] = line;
    c->key[c->n] = key;
    c->off[0][c->n] = c->n_sym[0];
    c->off[1][c->n] = c->n_sym[1];
    return true;
}

static void end_example(qkv_corpus *c) {
    c->n++;
    c->off[0][c->n] = c->n_sym[0];
    c->off[1][c->n] = c->n_sym[1];
}

/* ---- the parser ---- */

typedef struct parser {
    qkv_corpus *c;
    const qkv_read_opts *o;
    const qkv_tokenizer *tok[2]; /* per field: the tokenizer of its text (not used by tagged files) */
    const char *name;
    int64_t line;
    char q[200]; /* quoting scratch */
} parser;

#define PFAIL(P, ...) parse_fail((P), __FILE__, __LINE__, __VA_ARGS__)

__attribute__((format(printf, 4, 5))) static qkv_status
parse_fail(parser *P, const char *file, int src_line, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return qkv__error(QKV_ERR_FORMAT, file, src_line, "%s:%lld: %s", P->name, (long long)P->line,
                      msg);
}

static qkv_status oom(const parser *P) {
    return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory reading the corpus", P->name);
}

/* Checks that hold for every line: no '\r', no NUL, valid UTF-8. */
static qkv_status check_line(parser *P, const char *s, size_t len) {
    for (size_t i = 0; i < len;) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '\r')
            return PFAIL(P, "carriage return (the files use '\\n' line ends, not CRLF)");
        if (ch == '\0') return PFAIL(P, "NUL byte at column %zu", i + 1);
        int k = qkv__utf8_char_len((const unsigned char *)s + i, len - i);
        if (k == 0) return PFAIL(P, "invalid UTF-8 at column %zu", i + 1);
        i += (size_t)k;
    }
    return QKV_OK;
}

/* Every vocabulary keeps ids 0 .. 3 for <pad> <unk> <bos> <eos>: a data token spelling one would
 * be read as that id. <unk> may stand in a source or a text (an unknown word, as the Penn
 * Treebank writes it), never in what a model learns to output (a target, tag or label). */
static qkv_status check_reserved(parser *P, bool unk_ok, const char *s, size_t len, const char *what) {
    const int32_t id = qkv__vocab_reserved_id(s, len);
    if (id < 0 || (id == QKV_VOCAB_UNK && unk_ok)) return QKV_OK;
    return PFAIL(P, "%s in the %s is a reserved symbol: the vocabularies keep it (ids 0-3: <pad> <unk> <bos> <eos>)%s",
                 qkv__quote(P->q, sizeof P->q, s, len), what,
                 id == QKV_VOCAB_UNK ? "; <unk> may stand in a source or a text, not in an output" : "");
}

/* Where the symbols of one text field go: qkv_tokenizer_split hands each to sink_symbol. A plain
 * text (pieces) also opens and closes its examples there, text_chunk symbols at most per piece. */
typedef struct field_sink {
    parser *P;
    int field;
    int64_t base;        /* the field's offset in the corpus text */
    bool unk_ok;         /* <unk> may stand here (a source or a text) */
    const char *what;    /* "source", "target", "tokens", "text" */
    bool pieces;         /* a plain text */
    int64_t piece_start; /* offset in the field of the open piece's first symbol; -1: none open */
    size_t piece_end;    /* offset in the field where its last symbol ends */
    bool any;            /* an example was opened for this line */
    bool failed;         /* sink_symbol returned the error (already "FILE:LINE: ...") */
    int64_t n_sym;       /* symbols of the field */
} field_sink;

static void close_piece(field_sink *k) {
    qkv_corpus *c = k->P->c;
    c->key[c->n] = (span){k->base + k->piece_start, (int64_t)k->piece_end - k->piece_start};
    end_example(c);
    k->piece_start = -1;
}

static qkv_status sink_symbol(void *ctx, size_t off, size_t len, const char *sym, size_t sym_len) {
    field_sink *k = ctx;
    parser *P = k->P;
    qkv_corpus *c = P->c;
    qkv_status st = QKV_OK;
    if (k->pieces) {
        const int64_t chunk = P->o->text_chunk;
        if (k->piece_start >= 0 && chunk > 0 && c->n_sym[k->field] - c->off[k->field][c->n] == chunk) close_piece(k);
        if (k->piece_start < 0) {
            if (!begin_example(c, P->line, (span){k->base + (int64_t)off, 0})) st = oom(P);
            k->piece_start = (int64_t)off;
            k->any = true;
        }
        k->piece_end = off + len;
    }
    if (!st) st = check_reserved(P, k->unk_ok, sym, sym_len, k->what);
    if (!st && !push_symbol(c, k->field, sym, sym_len)) st = oom(P);
    k->n_sym++;
    k->failed = st != QKV_OK;
    return st;
}

/* Cut s[0, len) (at offset base of the text) with the field's tokenizer into field `field`. A
 * text the tokenizer refuses becomes "FILE:LINE: <its message>". */
static qkv_status tokenize_field(parser *P, field_sink *k, const char *s, size_t len) {
    qkv_status st = qkv_tokenizer_split(P->tok[k->field], s, len, k->what, sink_symbol, k);
    if (st && !k->failed && st == QKV_ERR_FORMAT) return PFAIL(P, "%s", qkv_last_error());
    if (!st && k->n_sym == 0 && !k->pieces)
        return PFAIL(P, "the %s has no %s (only blanks)", k->what, qkv_tokenizer_unit(P->tok[k->field]));
    return st;
}

static qkv_status split_field(parser *P, int field, const char *s, size_t len, int64_t base, const char *what) {
    field_sink k = {.P = P, .field = field, .base = base, .unk_ok = field == QKV_FIELD_SRC, .what = what};
    return tokenize_field(P, &k, s, len);
}

static qkv_status check_max(parser *P, int64_t n, int64_t max, const char *what, const char *unit) {
    if (max > 0 && n > max)
        return PFAIL(P, "%s has %lld %s, more than the maximum %lld", what, (long long)n, unit,
                     (long long)max);
    return QKV_OK;
}

static qkv_status parse_pair(parser *P, const char *s, size_t len, int64_t base) {
    qkv_corpus *c = P->c;
    if (len == 0) return PFAIL(P, "blank line (each line is 'source<TAB>target')");
    const char *tab = memchr(s, '\t', len);
    if (!tab)
        return PFAIL(P, "no TAB between source and target in %s",
                     qkv__quote(P->q, sizeof P->q, s, len));
    size_t a = (size_t)(tab - s);
    if (memchr(tab + 1, '\t', len - a - 1))
        return PFAIL(P, "more than one TAB (each line is 'source<TAB>target')");
    if (a == 0) return PFAIL(P, "empty source before the TAB");
    if (a + 1 == len) return PFAIL(P, "empty target after the TAB");
    if (!begin_example(c, P->line, (span){base, (int64_t)a})) return oom(P);
    qkv_status st = split_field(P, QKV_FIELD_SRC, s, a, base, "source");
    if (st) return st;
    st = split_field(P, QKV_FIELD_TGT, tab + 1, len - a - 1, base + (int64_t)a + 1, "target");
    if (st) return st;
    int64_t ns = c->n_sym[0] - c->off[0][c->n], nt = c->n_sym[1] - c->off[1][c->n];
    if ((st = check_max(P, ns, P->o->max_src_len, "the source", qkv_tokenizer_unit(P->tok[QKV_FIELD_SRC])))) return st;
    if ((st = check_max(P, nt, P->o->max_tgt_len, "the target", qkv_tokenizer_unit(P->tok[QKV_FIELD_TGT])))) return st;
    end_example(c);
    return QKV_OK;
}

static qkv_status parse_labeled(parser *P, const char *s, size_t len, int64_t base) {
    qkv_corpus *c = P->c;
    if (len == 0) return PFAIL(P, "blank line (each line is 'label<TAB>tokens')");
    const char *tab = memchr(s, '\t', len);
    if (!tab)
        return PFAIL(P, "no TAB between label and tokens in %s",
                     qkv__quote(P->q, sizeof P->q, s, len));
    size_t a = (size_t)(tab - s);
    if (memchr(tab + 1, '\t', len - a - 1))
        return PFAIL(P, "more than one TAB (each line is 'label<TAB>tokens')");
    if (a == 0) return PFAIL(P, "empty label before the TAB");
    if (a + 1 == len) return PFAIL(P, "no tokens after the TAB");
    span key = {base + (int64_t)a + 1, (int64_t)(len - a - 1)};
    if (!begin_example(c, P->line, key)) return oom(P);
    qkv_status st = split_field(P, QKV_FIELD_SRC, tab + 1, len - a - 1, key.off, "tokens");
    if (st) return st;
    if ((st = check_reserved(P, false, s, a, "label"))) return st;
    if (!push_sym(c, QKV_FIELD_TGT, base, (int64_t)a)) return oom(P);
    int64_t ns = c->n_sym[0] - c->off[0][c->n];
    if ((st = check_max(P, ns, P->o->max_src_len, "the token list", qkv_tokenizer_unit(P->tok[QKV_FIELD_SRC]))))
        return st;
    end_example(c);
    return QKV_OK;
}

/* A plain-text line: its symbols into the target field, as one example or, with text_chunk, as
 * pieces of at most text_chunk symbols. */
static qkv_status parse_text(parser *P, const char *s, size_t len, int64_t base) {
    qkv_corpus *c = P->c;
    field_sink k = {.P = P, .field = QKV_FIELD_TGT, .base = base, .unk_ok = true, .what = "text", .pieces = true,
                    .piece_start = -1};
    qkv_status st = tokenize_field(P, &k, s, len);
    if (st) return st;
    if (k.piece_start >= 0) close_piece(&k);
    if (P->o->text_chunk == 0 &&
        (st = check_max(P, k.n_sym, P->o->max_tgt_len, "the text", qkv_tokenizer_unit(P->tok[QKV_FIELD_TGT]))))
        return st;
    if (!k.any) { /* an empty text */
        if (!begin_example(c, P->line, (span){base, 0})) return oom(P);
        end_example(c);
    }
    return QKV_OK;
}

typedef struct tag_state {
    int64_t columns;    /* fields per token line, from the first one */
    int64_t first_line; /* line of the first token line */
    bool open;          /* a sentence is being read */
    bool after_blank;   /* the previous line was blank, or we are at the start */
} tag_state;

static qkv_status parse_tagged(parser *P, tag_state *T, const char *s, size_t len, int64_t base) {
    qkv_corpus *c = P->c;
    if (len == 0) {
        if (!T->open)
            return PFAIL(P, "empty sentence (a blank line %s)",
                         P->line == 1 ? "at the start of the file" : "after another blank line");
        end_example(c);
        T->open = false;
        return QKV_OK;
    }
    /* The fields: word, tag 1, tag 2, ... */
    int64_t columns = 1;
    for (size_t i = 0; i < len; i++)
        columns += s[i] == '\t';
    int tag_col = P->o->tag_column > 0 ? P->o->tag_column : 1;
    if (T->columns == 0) {
        if (columns < 2)
            return PFAIL(P, "no TAB: a token line is 'word<TAB>tag[<TAB>tag ...]', found %s",
                         qkv__quote(P->q, sizeof P->q, s, len));
        if (tag_col >= columns)
            return PFAIL(P, "tag column %d asked for, but the lines have %lld tag column%s",
                         tag_col, (long long)(columns - 1), columns == 2 ? "" : "s");
        T->columns = columns;
        T->first_line = P->line;
    } else if (columns != T->columns) {
        return PFAIL(P, "%lld columns, but the first token line (line %lld) has %lld",
                     (long long)columns, (long long)T->first_line, (long long)T->columns);
    }
    if (!T->open) {
        if (!begin_example(c, P->line, (span){0, 0})) return oom(P);
        T->open = true;
    }
    size_t start = 0;
    int64_t col = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != '\t') continue;
        if (i == start)
            return col == 0 ? PFAIL(P, "empty word before the first TAB")
                            : PFAIL(P, "empty tag in column %lld", (long long)col + 1);
        if (col == 0 || col == tag_col) {
            qkv_status st = check_reserved(P, col == 0, s + start, i - start, col == 0 ? "word" : "tag");
            if (st) return st;
        }
        if (col == 0 && !push_sym(c, QKV_FIELD_SRC, base + (int64_t)start, (int64_t)(i - start)))
            return oom(P);
        if (col == tag_col &&
            !push_sym(c, QKV_FIELD_TGT, base + (int64_t)start, (int64_t)(i - start)))
            return oom(P);
        col++;
        start = i + 1;
    }
    int64_t nt = c->n_sym[0] - c->off[0][c->n];
    qkv_status st;
    if ((st = check_max(P, nt, P->o->max_src_len, "the sentence", "tokens"))) return st;
    if ((st = check_max(P, nt, P->o->max_tgt_len, "the sentence", "tags"))) return st;
    return QKV_OK;
}

static qkv_status parse_all(parser *P) {
    qkv_corpus *c = P->c;
    tag_state T = {0};
    qkv_status st = QKV_OK;
    for (size_t pos = 0, len; !st && pos < c->size;) {
        const char *s = qkv__take_line(c->text, c->size, &pos, &len);
        const int64_t base = s - c->text;
        P->line++;
        st = check_line(P, s, len);
        if (st) break;
        switch (c->kind) {
        case QKV_CORPUS_PAIRS:
            st = parse_pair(P, s, len, base);
            break;
        case QKV_CORPUS_LABELED:
            st = parse_labeled(P, s, len, base);
            break;
        case QKV_CORPUS_TAGGED:
            st = parse_tagged(P, &T, s, len, base);
            break;
        case QKV_CORPUS_TEXT:
            st = parse_text(P, s, len, base);
            break;
        }
    }
    if (!st && T.open) end_example(c); /* no blank line after the last sentence */
    return st;
}

qkv_status qkv_corpus_parse(qkv_corpus_kind kind, const char *text, size_t len, const char *name,
                            const qkv_read_opts *opts, qkv_corpus **out) {
    if (!out || (!text && len))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_corpus_parse: NULL argument");
    *out = NULL;
    if (kind != QKV_CORPUS_PAIRS && kind != QKV_CORPUS_TAGGED && kind != QKV_CORPUS_LABELED &&
        kind != QKV_CORPUS_TEXT)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_corpus_parse: unknown corpus kind %d",
                         (int)kind);
    qkv_read_opts o = opts ? *opts : (qkv_read_opts){0};
    if (o.max_src_len < 0 || o.max_tgt_len < 0 || o.tag_column < 0 || o.text_chunk < 0)
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "qkv_corpus_parse: negative option (max_src_len %lld, max_tgt_len %lld, "
                         "tag_column %d, text_chunk %lld)",
                         (long long)o.max_src_len, (long long)o.max_tgt_len, o.tag_column,
                         (long long)o.text_chunk);
    if (!name) name = "<memory>";
    qkv_corpus *c = calloc(1, sizeof *c);
    if (!c) return QKV_ERROR(QKV_ERR_OOM, "qkv_corpus_parse: out of memory");
    c->kind = kind;
    c->name = malloc(strlen(name) + 1);
    c->text = malloc(len + 1);
    c->off[0] = malloc(sizeof(int64_t));
    c->off[1] = malloc(sizeof(int64_t));
    if (!c->name || !c->text || !c->off[0] || !c->off[1]) {
        qkv_corpus_free(c);
        return QKV_ERROR(QKV_ERR_OOM, "qkv_corpus_parse: out of memory");
    }
    strcpy(c->name, name);
    if (len) memcpy(c->text, text, len);
    c->text[len] = '\0';
    c->size = len;
    c->off[0][0] = c->off[1][0] = 0;
    parser P = {.c = c, .o = &o, .name = c->name};
    P.tok[QKV_FIELD_SRC] = o.src_tokenizer ? o.src_tokenizer
                           : qkv_tokenizer_shared(kind == QKV_CORPUS_PAIRS && !o.src_tokens ? QKV_TOKENIZER_CHARS
                                                                                               : QKV_TOKENIZER_TOKENS);
    P.tok[QKV_FIELD_TGT] = o.tgt_tokenizer ? o.tgt_tokenizer
                           : kind != QKV_CORPUS_TEXT ? qkv_tokenizer_shared(QKV_TOKENIZER_TOKENS)
                           : qkv_tokenizer_shared(o.text_words ? QKV_TOKENIZER_WORDS : QKV_TOKENIZER_CHARS);
    qkv_status st = parse_all(&P);
    if (st) {
        qkv_corpus_free(c);
        return st;
    }
    *out = c;
    return QKV_OK;
}

qkv_status qkv_corpus_read(qkv_corpus_kind kind, const char *path, const qkv_read_opts *opts,
                           qkv_corpus **out) {
    if (!path || !out) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_corpus_read: NULL argument");
    *out = NULL;
    char *text;
    size_t len;
    qkv_status st = qkv__read_file("qkv_corpus_read", path, &text, &len);
    if (st) return st;
    st = qkv_corpus_parse(kind, text, len, path, opts, out);
    free(text);
    return st;
}

void qkv_corpus_free(qkv_corpus *c) {
    if (!c) return;
    free(c->name);
    free(c->text);
    free(c->line);
    free(c->key);
    free(c->extra);
    for (int f = 0; f < 2; f++) {
        free(c->off[f]);
        free(c->sym[f]);
    }
    free(c);
}

qkv_corpus_kind qkv_corpus_kind_of(const qkv_corpus *c) {
    return c ? c->kind : QKV_CORPUS_PAIRS;
}
const char *qkv_corpus_name(const qkv_corpus *c) {
    return c ? c->name : NULL;
}
int64_t qkv_corpus_size(const qkv_corpus *c) {
    return c ? c->n : 0;
}

int64_t qkv_corpus_line(const qkv_corpus *c, int64_t i) {
    return c && i >= 0 && i < c->n ? c->line[i] : 0;
}

int64_t qkv_corpus_length(const qkv_corpus *c, int64_t i, int field) {
    if (!c || i < 0 || i >= c->n || (field != QKV_FIELD_SRC && field != QKV_FIELD_TGT)) return -1;
    return c->off[field][i + 1] - c->off[field][i];
}

const char *qkv_corpus_symbol(const qkv_corpus *c, int64_t i, int field, int64_t k, size_t *len) {
    int64_t n = qkv_corpus_length(c, i, field);
    if (n < 0 || k < 0 || k >= n) return NULL;
    span s = c->sym[field][c->off[field][i] + k];
    if (len) *len = (size_t)s.len;
    return span_text(c, s);
}

const char *qkv_corpus_key(const qkv_corpus *c, int64_t i, size_t *len) {
    if (!c || i < 0 || i >= c->n || c->kind == QKV_CORPUS_TAGGED) return NULL;
    if (len) *len = (size_t)c->key[i].len;
    return c->text + c->key[i].off;
}

/* ---- groups -------------------------------------------------------------------------------- */

/* Words are tracked in a vocabulary (a string set with ids); first_line[id] is the line where
 * the word's group starts, 0 while unseen (the reserved ids start unseen like any other). */
qkv_status qkv_corpus_groups(const qkv_corpus *c, qkv_groups *out) {
    if (!c || !out) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_corpus_groups: NULL argument");
    *out = (qkv_groups){0};
    if (c->kind != QKV_CORPUS_PAIRS)
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "qkv_corpus_groups: %s: grouping needs a pairs corpus (G2P)", c->name);
    int64_t *start = malloc((size_t)(c->n + 1) * sizeof *start);
    /* at most n distinct words: ids < n + QKV_VOCAB_RESERVED */
    int64_t *first_line = calloc((size_t)(c->n + QKV_VOCAB_RESERVED), sizeof *first_line);
    qkv_vocab *words = NULL;
    qkv_status st = start && first_line
                        ? qkv_vocab_new(&words)
                        : QKV_ERROR(QKV_ERR_OOM, "qkv_corpus_groups: out of memory");
    int64_t g = 0;
    char q[200];
    for (int64_t i = 0; !st && i < c->n; i++) {
        span k = c->key[i];
        const char *w = c->text + k.off;
        if (i > 0) {
            span p = c->key[i - 1];
            if (p.len == k.len && memcmp(c->text + p.off, w, (size_t)k.len) == 0) continue;
        }
        int32_t id;
        st = qkv_vocab_add(words, w, (size_t)k.len, &id);
        if (st) break;
        if (first_line[id] != 0) {
            st = QKV_ERROR(QKV_ERR_FORMAT,
                           "%s:%lld: word %s already seen at line %lld (a word's lines must be "
                           "consecutive: is the file sorted?)",
                           c->name, (long long)c->line[i],
                           qkv__quote(q, sizeof q, w, (size_t)k.len), (long long)first_line[id]);
            break;
        }
        first_line[id] = c->line[i];
        start[g++] = i;
    }
    free(first_line);
    qkv_vocab_free(words);
    if (st) {
        free(start);
        return st;
    }
    start[g] = c->n;
    out->n = g;
    out->start = start;
    return QKV_OK;
}

void qkv_groups_free(qkv_groups *g) {
    if (!g) return;
    free(g->start);
    *g = (qkv_groups){0};
}
