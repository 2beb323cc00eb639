/*
 * cmd_tokenizer.c: `qkv tokenizer`: learn a subword model, and cut or join text with any tokenizer.
 *
 *   qkv tokenizer learn -o MODEL [--merges N] [--min-frequency N] [--min-char-count N]
 *                       [--no-byte-fallback] [--field K[,K...]] FILE...
 *       Learn a BPE model (qkv_tokenizer.h) from the lines of the files (stdin without any) and
 *       write it to MODEL. Several files make one joint model, as --field 1,2 does of a pairs
 *       file's source and target fields: --field takes the K-th TAB-separated field of each line
 *       (each of them, when several are listed).
 *   qkv tokenizer encode [--tokenizer NAME] [--model MODEL] [--field K] [FILE...]
 *       Each line as its symbols, separated by single spaces (with --field, only field K is
 *       rewritten). NAME is bpe with a MODEL, else chars.
 *   qkv tokenizer decode [--tokenizer NAME] [--model MODEL] [--field K] [FILE...]
 *       The inverse: each line of space-separated symbols joined back into text.
 *
 * Exit status: 0 on success, 1 when an input or the model is missing or malformed (the message
 * names the file and line) or the output cannot be written, 2 for usage errors.
 */
#include "cli_args.h"
#include "commands.h"
#include "input_lines.h"
#include "qkv/qkv.h"
#include "qkv/qkv_registry.h"
#include "qkv/qkv_tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "qkv tokenizer"

static void usage(FILE *f) {
    qkv_bpe_opts d = qkv_bpe_default_opts();
    fprintf(f,
            "usage: qkv tokenizer learn -o MODEL [--merges N] [--min-frequency N] [--min-char-count N]\n"
            "                           [--no-byte-fallback] [--field K[,K...]] FILE...\n"
            "       qkv tokenizer encode [--tokenizer NAME] [--model MODEL] [--field K] [FILE...]\n"
            "       qkv tokenizer decode [--tokenizer NAME] [--model MODEL] [--field K] [FILE...]\n\n"
            "learn: a byte-pair-encoding model from the lines of the FILEs (stdin without any; several\n"
            "  files make one joint model): at most --merges merges (default %d), stopping when the\n"
            "  most frequent pair occurs fewer than --min-frequency times (default %lld); characters\n"
            "  seen fewer than --min-char-count times (default %lld) are spelled as bytes <0xE2>, or,\n"
            "  with --no-byte-fallback, as themselves. --field K learns from the K-th TAB-separated\n"
            "  field of each line (1: a pairs file's source, 2: its target; 1,2: both, a joint model).\n"
            "encode: each line (stdin without FILE) as its symbols separated by single spaces;\n"
            "  --field K rewrites only the K-th TAB-separated field. --tokenizer is bpe when --model\n"
            "  is given, else chars (qkv list tokenizer has them all).\n"
            "decode: the inverse: each line of space-separated symbols joined into text.\n\n"
            "example:\n"
            "  $ qkv tokenizer learn -o spam.bpe --merges 8000 --field 2 data/spam/spam.train.tsv\n"
            "  spam.bpe: 8000 merges, 43 characters (4692 lines)\n"
            "  $ echo 'you have won a free ticket' | qkv tokenizer encode --model spam.bpe\n"
            "  ▁you ▁have ▁won ▁a ▁free ▁ticket\n",
            d.merges, (long long)d.min_frequency, (long long)d.min_char_count);
}

typedef struct options {
    const char *out, *model, *tokenizer;
    int fields[8]; /* --field K (learn: K,K,...: each of them); none: the whole line */
    int n_fields;
    qkv_bpe_opts bpe;
    const char **files;
    int n_files;
} options;

/* 0: parsed; 2: a usage error (printed). */
static int parse(const char *sub, int argc, char **argv, options *o) {
    char cmd[64];
    snprintf(cmd, sizeof cmd, CMD " %s", sub);
    const bool learn = !strcmp(sub, "learn");
    o->bpe = qkv_bpe_default_opts();
    o->files = calloc((size_t)argc, sizeof *o->files);
    if (!o->files) {
        fprintf(stderr, "%s: out of memory\n", cmd);
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const bool has_value = i + 1 < argc;
        int v;
        if (learn && (!strcmp(a, "-o") || !strcmp(a, "--out")) && has_value) {
            o->out = argv[++i];
        } else if (learn && !strcmp(a, "--merges")) {
            if (!cli_int_option(cmd, argc, argv, &i, 0, 10000000, &v)) return 2;
            o->bpe.merges = v;
        } else if (learn && !strcmp(a, "--min-frequency")) {
            if (!cli_int_option(cmd, argc, argv, &i, 1, 1000000000, &v)) return 2;
            o->bpe.min_frequency = v;
        } else if (learn && !strcmp(a, "--min-char-count")) {
            if (!cli_int_option(cmd, argc, argv, &i, 1, 1000000000, &v)) return 2;
            o->bpe.min_char_count = v;
        } else if (learn && !strcmp(a, "--no-byte-fallback")) {
            o->bpe.byte_fallback = false;
        } else if (!learn && !strcmp(a, "--model") && has_value) {
            o->model = argv[++i];
        } else if (!learn && !strcmp(a, "--tokenizer") && has_value) {
            o->tokenizer = argv[++i];
        } else if (!strcmp(a, "--field") && learn && has_value && strchr(argv[i + 1], ',')) {
            /* a list: each field of each line */
            char list[128], *save = NULL;
            snprintf(list, sizeof list, "%s", argv[++i]);
            o->n_fields = 0;
            for (char *k = strtok_r(list, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
                char *end = NULL;
                const long val = strtol(k, &end, 10);
                if (*end || val < 1 || val > 1000 || o->n_fields == 8) {
                    fprintf(stderr, "%s: --field needs up to 8 integers in 1..1000, separated by commas (got '%s')\n",
                            cmd, argv[i]);
                    return 2;
                }
                o->fields[o->n_fields++] = (int)val;
            }
        } else if (!strcmp(a, "--field")) {
            if (!cli_int_option(cmd, argc, argv, &i, 1, 1000, &o->fields[0])) return 2;
            o->n_fields = 1;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "%s: unknown option or missing value: %s (qkv tokenizer --help)\n", cmd, a);
            return 2;
        } else {
            o->files[o->n_files++] = a;
        }
    }
    if (learn && !o->out) {
        fprintf(stderr, "%s: -o MODEL is required (the model file to write)\n", cmd);
        return 2;
    }
    return 0;
}

/* Field k (from 1) of line[0, len): its start and length; NULL (with the message) when the line
 * has fewer fields. k = 0: the whole line. */
static const char *field_of(const char *cmd, const char *file, int64_t line_no, const char *line, int k, size_t *n) {
    const char *s = line;
    for (int f = 1; k && f < k; f++) {
        s = strchr(s, '\t');
        if (!s) {
            fprintf(stderr, "%s: %s:%lld: the line has %d TAB-separated field%s, --field %d asks for field %d\n", cmd,
                    file, (long long)line_no, f, f == 1 ? "" : "s", k, k);
            return NULL;
        }
        s++;
    }
    const char *tab = k ? strchr(s, '\t') : NULL;
    *n = tab ? (size_t)(tab - s) : strlen(s);
    return s;
}

/* ---- learn ---- */

typedef struct learning {
    const options *o;
    qkv_bpe_learner *l;
    int64_t lines;
} learning;

static int learn_line(void *user, const char *file, int64_t line_no, char *line) {
    learning *g = user;
    for (int f = 0; f < (g->o->n_fields ? g->o->n_fields : 1); f++) {
        size_t n;
        const char *text = field_of(CMD " learn", file, line_no, line, g->o->n_fields ? g->o->fields[f] : 0, &n);
        if (!text) return 1;
        if (qkv_bpe_learner_add(g->l, text, n, "line")) {
            char prefix[600];
            snprintf(prefix, sizeof prefix, CMD " learn: %s:%lld: ", file, (long long)line_no);
            cli_print_error(prefix);
            return 1;
        }
    }
    g->lines++;
    return 0;
}

static int cmd_learn(const options *o) {
    learning g = {.o = o};
    if (qkv_bpe_learner_new(&o->bpe, &g.l)) {
        cli_print_error(CMD " learn: ");
        return 2;
    }
    int rc = input_for_each_line("tokenizer learn", o->files, o->n_files, learn_line, &g);
    int32_t merges = 0, chars = 0;
    if (!rc && qkv_bpe_learner_save(g.l, o->out, &merges, &chars)) {
        cli_print_error(CMD " learn: ");
        rc = 1;
    }
    if (!rc)
        printf("%s: %d merges, %d characters (%lld lines)%s\n", o->out, (int)merges, (int)chars, (long long)g.lines,
               merges < o->bpe.merges ? ": no pair left at --min-frequency" : "");
    qkv_bpe_learner_free(g.l);
    return rc;
}

/* ---- encode, decode ---- */

typedef struct text_buf {
    char *p;
    size_t n, cap;
    bool oom;
} text_buf;

/* Room for n more bytes and a NUL; false when out of memory. */
static bool reserve(text_buf *b, size_t n) {
    if (b->oom) return false;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return false;
        }
        b->p = p, b->cap = cap;
    }
    return true;
}

static void put(text_buf *b, const char *s, size_t n) {
    if (!reserve(b, n)) return;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

typedef struct coding {
    const qkv_tokenizer *tok;
    int field;
    const char *cmd; /* "qkv tokenizer encode" */
    text_buf line;   /* the output line */
    /* decode: the symbols of the line */
    const char **sym;
    size_t *sym_len;
    int64_t n_sym, cap_sym;
    int64_t symbols; /* written (encode) or read (decode) */
} coding;

static qkv_status write_symbol(void *ctx, size_t off, size_t len, const char *sym, size_t sym_len) {
    (void)off, (void)len;
    coding *c = ctx;
    if (memchr(sym, ' ', sym_len))
        return qkv_set_error(QKV_ERR_UNSUPPORTED, "the %s tokenizer makes a symbol that holds a space, which a "
                                                  "space-separated line cannot show (bpe spells spaces as markers)",
                             qkv_tokenizer_name(c->tok));
    if (c->symbols++) put(&c->line, " ", 1);
    put(&c->line, sym, sym_len);
    return QKV_OK;
}

static qkv_status read_symbol(void *ctx, size_t off, size_t len, const char *sym, size_t sym_len) {
    (void)off, (void)len;
    coding *c = ctx;
    if (c->n_sym == c->cap_sym) {
        const int64_t cap = c->cap_sym ? 2 * c->cap_sym : 256;
        const char **s = realloc(c->sym, (size_t)cap * sizeof *s);
        if (s) c->sym = s;
        size_t *l = realloc(c->sym_len, (size_t)cap * sizeof *l);
        if (l) c->sym_len = l;
        if (!s || !l) return qkv_set_error(QKV_ERR_OOM, "out of memory");
        c->cap_sym = cap;
    }
    c->sym[c->n_sym] = sym;
    c->sym_len[c->n_sym++] = sym_len;
    c->symbols++;
    return QKV_OK;
}

static int code_line(coding *c, const char *file, int64_t line_no, char *line, bool encode) {
    size_t n;
    const char *text = field_of(c->cmd, file, line_no, line, c->field, &n);
    if (!text) return 1;
    c->line.n = 0;
    c->symbols = 0;
    put(&c->line, line, (size_t)(text - line)); /* the fields before */
    const size_t before = c->line.n;
    qkv_status st;
    if (encode) {
        st = input_line_split(c->tok, file, line_no, text, n, "line", write_symbol, c);
    } else {
        c->n_sym = 0;
        /* the symbols are separated by single spaces; an empty line has none */
        st = input_line_split(qkv_tokenizer_shared(QKV_TOKENIZER_TOKENS), file, line_no, text, n, "line",
                              read_symbol, c);
        size_t len = 0;
        if (!st) st = qkv_tokenizer_join(c->tok, c->sym, c->sym_len, c->n_sym, NULL, 0, &len);
        if (!st && reserve(&c->line, len)) { /* the text in place */
            st = qkv_tokenizer_join(c->tok, c->sym, c->sym_len, c->n_sym, c->line.p + before, len + 1, NULL);
            c->line.n += len;
        }
    }
    if (st) {
        char prefix[128];
        snprintf(prefix, sizeof prefix, "%s: ", c->cmd);
        cli_print_error(prefix);
        return 1;
    }
    put(&c->line, text + n, strlen(text + n)); /* the fields after */
    put(&c->line, "\n", 1);
    if (c->line.oom) {
        fprintf(stderr, "%s: %s:%lld: out of memory\n", c->cmd, file, (long long)line_no);
        return 1;
    }
    if (fwrite(c->line.p, 1, c->line.n, stdout) != c->line.n) {
        fprintf(stderr, "%s: cannot write the output\n", c->cmd);
        return 1;
    }
    return 0;
}

static int encode_line(void *user, const char *file, int64_t line_no, char *line) {
    return code_line(user, file, line_no, line, true);
}

static int decode_line(void *user, const char *file, int64_t line_no, char *line) {
    return code_line(user, file, line_no, line, false);
}

static int cmd_code(const options *o, bool encode) {
    const char *cmd = encode ? CMD " encode" : CMD " decode";
    const char *name = o->tokenizer ? o->tokenizer : o->model ? "bpe" : "chars";
    qkv_tokenizer *tok = NULL;
    const qkv_status st = qkv_tokenizer_from_name(name, o->model, &tok);
    if (st) {
        char prefix[128];
        snprintf(prefix, sizeof prefix, "%s: ", cmd);
        cli_print_error(prefix);
        return st == QKV_ERR_INVALID_ARG ? 2 : 1;
    }
    coding c = {.tok = tok, .field = o->n_fields ? o->fields[0] : 0, .cmd = cmd};
    int rc = input_for_each_line(encode ? "tokenizer encode" : "tokenizer decode", o->files, o->n_files,
                                 encode ? encode_line : decode_line, &c);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "%s: cannot write the output\n", cmd);
        rc = 1;
    }
    free(c.line.p);
    free(c.sym);
    free(c.sym_len);
    qkv_tokenizer_free(tok);
    return rc;
}

int qkv_cmd_tokenizer(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "learn") && strcmp(sub, "encode") && strcmp(sub, "decode")) {
        fprintf(stderr, CMD ": unknown subcommand '%s' (learn, encode, decode)\n", sub);
        return 2;
    }
    options o = {0};
    int rc = parse(sub, argc - 1, argv + 1, &o);
    if (!rc) rc = !strcmp(sub, "learn") ? cmd_learn(&o) : cmd_code(&o, !strcmp(sub, "encode"));
    free(o.files);
    return rc;
}
