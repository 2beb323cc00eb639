/* viz_testutil.c: the independent decoders and checkers of viz_testutil.h. */
#include "viz_testutil.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- inflate (RFC 1951), after the structure of Mark Adler's puff.c -------------------------- */

typedef struct {
    const unsigned char *src;
    size_t n, pos;
    uint32_t bitbuf;
    int bitcnt;
    bool err;
    unsigned char *out;
    size_t on, ocap;
} in_state;

static int getbits(in_state *s, int need) {
    uint32_t val = s->bitbuf;
    while (s->bitcnt < need) {
        if (s->pos >= s->n) {
            s->err = true;
            return 0;
        }
        val |= (uint32_t)s->src[s->pos++] << s->bitcnt;
        s->bitcnt += 8;
    }
    s->bitbuf = val >> need;
    s->bitcnt -= need;
    return (int)(val & ((1u << need) - 1));
}

static void out_byte(in_state *s, unsigned char c) {
    if (s->on == s->ocap) {
        s->ocap = s->ocap ? 2 * s->ocap : 1024;
        s->out = realloc(s->out, s->ocap);
        if (!s->out) {
            fprintf(stderr, "vt_inflate: out of memory\n");
            exit(2);
        }
    }
    s->out[s->on++] = c;
}

typedef struct {
    short count[16];
    short symbol[288];
} huff;

static void construct(huff *h, const short *length, int n) {
    short offs[16];
    memset(h->count, 0, sizeof h->count);
    for (int i = 0; i < n; i++)
        h->count[length[i]]++;
    offs[1] = 0;
    for (int len = 1; len < 15; len++)
        offs[len + 1] = (short)(offs[len] + h->count[len]);
    for (int i = 0; i < n; i++)
        if (length[i]) h->symbol[offs[length[i]]++] = (short)i;
}

static int decode(in_state *s, const huff *h) {
    int code = 0, first = 0, index = 0;
    for (int len = 1; len < 16; len++) {
        code |= getbits(s, 1);
        int count = h->count[len];
        if (code - count < first) return h->symbol[index + (code - first)];
        index += count;
        first += count;
        first <<= 1;
        code <<= 1;
    }
    return -1;
}

unsigned char *vt_inflate(const unsigned char *src, size_t n, size_t *out_n, const char **why) {
    static const short lbase[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                    31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
    static const short lext[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                   2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
    static const short dbase[30] = {1,    2,    3,    4,    5,    7,    9,    13,    17,    25,
                                    33,   49,   65,   97,   129,  193,  257,  385,   513,   769,
                                    1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
    static const short dext[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                   6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
    in_state s = {.src = src, .n = n};
    huff lit, dist;
    short len[288];
    for (int i = 0; i < 288; i++)
        len[i] = i < 144 ? 8 : i < 256 ? 9 : i < 280 ? 7 : 8;
    construct(&lit, len, 288);
    for (int i = 0; i < 30; i++)
        len[i] = 5;
    construct(&dist, len, 30);
    *why = NULL;
    int last;
    do {
        last = getbits(&s, 1);
        int type = getbits(&s, 2);
        if (s.err) break;
        if (type == 0) {
            s.bitbuf = 0, s.bitcnt = 0; /* to a byte boundary */
            if (s.pos + 4 > n) {
                *why = "stored block header past the end";
                break;
            }
            unsigned L = src[s.pos] | src[s.pos + 1] << 8;
            unsigned NL = src[s.pos + 2] | src[s.pos + 3] << 8;
            s.pos += 4;
            if (L != (~NL & 0xFFFF)) {
                *why = "stored block: NLEN is not the complement of LEN";
                break;
            }
            if (s.pos + L > n) {
                *why = "stored block past the end";
                break;
            }
            for (unsigned i = 0; i < L; i++)
                out_byte(&s, src[s.pos + i]);
            s.pos += L;
        } else if (type == 1) {
            for (;;) {
                int sym = decode(&s, &lit);
                if (s.err || sym < 0) break;
                if (sym < 256) {
                    out_byte(&s, (unsigned char)sym);
                } else if (sym == 256) {
                    break;
                } else {
                    sym -= 257;
                    if (sym >= 29) {
                        *why = "invalid length symbol";
                        break;
                    }
                    int l = lbase[sym] + getbits(&s, lext[sym]);
                    int ds = decode(&s, &dist);
                    if (ds < 0 || ds >= 30) {
                        *why = "invalid distance symbol";
                        break;
                    }
                    size_t d = (size_t)(dbase[ds] + getbits(&s, dext[ds]));
                    if (d > s.on) {
                        *why = "distance beyond the start of the output";
                        break;
                    }
                    for (int i = 0; i < l; i++)
                        out_byte(&s, s.out[s.on - d]);
                }
            }
        } else {
            *why = type == 2 ? "dynamic-Huffman block (not expected from this writer)"
                             : "block type 3 is invalid";
        }
    } while (!last && !*why && !s.err);
    if (!*why && s.err) *why = "data ends inside a block";
    if (*why) {
        free(s.out);
        return NULL;
    }
    *out_n = s.on;
    if (!s.out) s.out = malloc(1);
    return s.out;
}

uint32_t vt_crc32(const void *p, size_t n) {
    const unsigned char *s = p;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= s[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return c ^ 0xFFFFFFFFu;
}

uint32_t vt_adler32(const void *p, size_t n) {
    const unsigned char *s = p;
    uint32_t a = 1, b = 0;
    for (size_t i = 0; i < n; i++) {
        a = (a + s[i]) % 65521;
        b = (b + a) % 65521;
    }
    return b << 16 | a;
}

/* ---- PNG ------------------------------------------------------------------------------------- */

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int paeth(int a, int b, int c) {
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

static bool unfilter(const unsigned char *raw, int w, int h, vt_image *img, const char **why) {
    size_t stride = (size_t)w * 3;
    img->rgb = malloc(stride * (size_t)h + 1);
    for (int y = 0; y < h; y++) {
        const unsigned char *src = raw + (size_t)y * (stride + 1);
        unsigned char *row = img->rgb + (size_t)y * stride;
        const unsigned char *prev = y ? row - stride : NULL;
        int f = src[0];
        if (f > 4) {
            *why = "filter type above 4";
            return false;
        }
        img->filters_used |= 1 << f;
        for (size_t i = 0; i < stride; i++) {
            int a = i >= 3 ? row[i - 3] : 0, b = prev ? prev[i] : 0;
            int c = prev && i >= 3 ? prev[i - 3] : 0;
            int pred = f == 0 ? 0 : f == 1 ? a : f == 2 ? b : f == 3 ? (a + b) / 2 : paeth(a, b, c);
            row[i] = (unsigned char)(src[1 + i] + pred);
        }
    }
    return true;
}

bool vt_png_decode(const unsigned char *png, size_t n, vt_image *img, const char **why) {
    memset(img, 0, sizeof *img);
    *why = NULL;
    if (n < 8 || memcmp(png, "\x89PNG\r\n\x1a\n", 8)) {
        *why = "bad signature";
        return false;
    }
    unsigned char *z = NULL;
    size_t zn = 0, pos = 8;
    bool seen_ihdr = false, seen_iend = false, idat_done = false;
    while (pos < n && !*why) {
        if (n - pos < 12) {
            *why = "truncated chunk";
            break;
        }
        uint32_t len = be32(png + pos);
        const unsigned char *type = png + pos + 4, *data = png + pos + 8;
        if (len > n - pos - 12) {
            *why = "chunk length past the end";
            break;
        }
        if (vt_crc32(type, len + 4) != be32(data + len)) {
            *why = "chunk CRC mismatch";
            break;
        }
        if (seen_iend) {
            *why = "data after IEND";
        } else if (!memcmp(type, "IHDR", 4)) {
            if (seen_ihdr || pos != 8 || len != 13) {
                *why = "IHDR not first, repeated, or not 13 bytes";
                break;
            }
            seen_ihdr = true;
            img->w = (int)be32(data), img->h = (int)be32(data + 4);
            if (img->w <= 0 || img->h <= 0) *why = "zero width or height";
            if (data[8] != 8 || data[9] != 2) *why = "not 8-bit RGB";
            if (data[10] || data[11] || data[12]) *why = "compression, filter or interlace not 0";
        } else if (!memcmp(type, "IDAT", 4)) {
            if (!seen_ihdr || idat_done) {
                *why = "IDAT before IHDR or not consecutive";
                break;
            }
            z = realloc(z, zn + len + 1);
            memcpy(z + zn, data, len);
            zn += len;
            img->n_idat++;
        } else if (!memcmp(type, "IEND", 4)) {
            if (len) *why = "IEND not empty";
            seen_iend = true;
        } else if (!(type[0] & 0x20)) {
            *why = "unknown critical chunk";
        }
        if (img->n_idat && memcmp(type, "IDAT", 4)) idat_done = true;
        pos += 12 + len;
    }
    if (!*why && (!seen_iend || !img->n_idat)) *why = "no IEND or no IDAT";
    if (!*why && zn < 6) *why = "zlib stream too short";
    if (!*why) {
        unsigned cmf = z[0], flg = z[1];
        if ((cmf & 0x0F) != 8 || (cmf >> 4) > 7) *why = "zlib CM is not 8 or CINFO above 7";
        if ((cmf * 256 + flg) % 31) *why = "zlib FCHECK fails";
        if (flg & 0x20) *why = "zlib preset dictionary";
    }
    if (!*why) {
        size_t rn;
        unsigned char *raw = vt_inflate(z + 2, zn - 6, &rn, why);
        if (raw) {
            size_t expect = ((size_t)img->w * 3 + 1) * (size_t)img->h;
            if (rn != expect)
                *why = "inflated size is not h (3 w + 1)";
            else if (vt_adler32(raw, rn) != be32(z + zn - 4))
                *why = "Adler-32 mismatch";
            else
                unfilter(raw, img->w, img->h, img, why);
            free(raw);
        }
    }
    free(z);
    if (*why) {
        free(img->rgb);
        img->rgb = NULL;
        return false;
    }
    return true;
}

static const char python_png[] =
    "import sys, struct, zlib\n"
    "d = open(sys.argv[1], 'rb').read()\n"
    "if d[:8] != b'\\x89PNG\\r\\n\\x1a\\n': print('ERR signature'); sys.exit(0)\n"
    "i = 8; idat = b''; w = h = 0\n"
    "while i < len(d):\n"
    "    n, = struct.unpack('>I', d[i:i+4]); t = d[i+4:i+8]; c = d[i+8:i+8+n]\n"
    "    if zlib.crc32(t + c) & 0xffffffff != struct.unpack('>I', d[i+8+n:i+12+n])[0]:\n"
    "        print('ERR crc of', t); sys.exit(0)\n"
    "    if t == b'IHDR': w, h = struct.unpack('>II', c[:8])\n"
    "    if t == b'IDAT': idat += c\n"
    "    i += 12 + n\n"
    "raw = zlib.decompress(idat)\n"
    "s = 3 * w; out = bytearray(); prev = bytearray(s)\n"
    "for y in range(h):\n"
    "    f = raw[y * (s + 1)]; r = bytearray(raw[y * (s + 1) + 1:(y + 1) * (s + 1)])\n"
    "    for x in range(s):\n"
    "        a = r[x - 3] if x >= 3 else 0; b = prev[x]; c = prev[x - 3] if x >= 3 else 0\n"
    "        if f == 1: r[x] = (r[x] + a) & 255\n"
    "        elif f == 2: r[x] = (r[x] + b) & 255\n"
    "        elif f == 3: r[x] = (r[x] + (a + b) // 2) & 255\n"
    "        elif f == 4:\n"
    "            p = a + b - c; pa = abs(p - a); pb = abs(p - b); pc = abs(p - c)\n"
    "            r[x] = (r[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255\n"
    "    out += r; prev = r\n"
    "print('OK', w, h); print(out.hex())\n";

int vt_python_png(const char *path, vt_image *img, char *why) {
    memset(img, 0, sizeof *img);
    if (system("python3 -c 'import zlib' >/dev/null 2>&1") != 0) return 0;
    char script[] = "/tmp/qkv_test_png_XXXXXX";
    int fd = mkstemp(script);
    if (fd < 0) {
        snprintf(why, 256, "mkstemp: %s", strerror(errno));
        return -1;
    }
    ssize_t wr = write(fd, python_png, sizeof python_png - 1);
    close(fd);
    if (wr != (ssize_t)(sizeof python_png - 1)) {
        unlink(script);
        snprintf(why, 256, "cannot write the script");
        return -1;
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd, "python3 %s '%s' 2>&1", script, path);
    FILE *p = popen(cmd, "r");
    if (!p) {
        unlink(script);
        snprintf(why, 256, "popen: %s", strerror(errno));
        return -1;
    }
    char head[256] = "";
    int rc = -1;
    if (fgets(head, sizeof head, p) && sscanf(head, "OK %d %d", &img->w, &img->h) == 2 &&
        img->w > 0 && img->h > 0) {
        size_t n = (size_t)img->w * (size_t)img->h * 3;
        img->rgb = malloc(n);
        rc = 1;
        for (size_t i = 0; i < n; i++) {
            unsigned v;
            if (fscanf(p, "%2x", &v) != 1) {
                snprintf(why, 256, "python3 printed fewer pixels than expected");
                rc = -1;
                break;
            }
            img->rgb[i] = (unsigned char)v;
        }
    } else {
        snprintf(why, 256, "python3: %s", head);
    }
    pclose(p);
    unlink(script);
    if (rc < 0) {
        free(img->rgb);
        img->rgb = NULL;
    }
    return rc;
}

/* ---- markup ---------------------------------------------------------------------------------- */

static bool entity_ok(const char *s) { /* s at '&' */
    static const char *const named[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
    for (int i = 0; i < 5; i++)
        if (!strncmp(s, named[i], strlen(named[i]))) return true;
    if (s[1] != '#') return false;
    int i = 2, d = 0;
    while (isdigit((unsigned char)s[i]))
        i++, d++;
    return d > 0 && s[i] == ';';
}

bool vt_markup_ok(const char *s, bool xml, char *why) {
    static const char *const voids[] = {"meta", "br", "hr", "img", "input", "link"};
    char stack[512][32];
    int depth = 0;
    size_t i = 0;
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        int k_ = snprintf(why, 256, "at byte %zu: ", i);                                           \
        snprintf(why + k_, (size_t)(256 - k_), __VA_ARGS__);                                       \
        return false;                                                                              \
    } while (0)
    while (s[i]) {
        if (s[i] == '&') {
            if (!entity_ok(s + i)) FAIL("'&' starts no entity: %.12s", s + i);
            i++;
            continue;
        }
        if (s[i] == '>') FAIL("raw '>' in text");
        if (s[i] != '<') {
            i++;
            continue;
        }
        const char *end_mark = !strncmp(s + i, "<!--", 4) ? "-->"
                               : !strncmp(s + i, "<?", 2) ? "?>"
                               : !strncmp(s + i, "<!", 2) ? ">"
                                                          : NULL;
        if (end_mark) {
            const char *e = strstr(s + i, end_mark);
            if (!e) FAIL("unterminated <! or <?");
            i = (size_t)(e - s) + strlen(end_mark);
            continue;
        }
        bool closing = s[i + 1] == '/';
        size_t j = i + 1 + closing, k = j;
        while (isalnum((unsigned char)s[k]) || s[k] == ':' || s[k] == '-')
            k++;
        if (k == j || k - j >= 32) FAIL("stray '<' or bad tag name");
        char name[32];
        memcpy(name, s + j, k - j);
        name[k - j] = '\0';
        char quote = 0;
        while (s[k] && (quote || s[k] != '>')) {
            if (quote && s[k] == quote)
                quote = 0;
            else if (!quote && (s[k] == '"' || s[k] == '\''))
                quote = s[k];
            else if (s[k] == '<')
                FAIL("'<' inside tag <%s>", name);
            else if (s[k] == '&' && !entity_ok(s + k))
                FAIL("'&' starts no entity in tag <%s>", name);
            k++;
        }
        if (!s[k]) FAIL("unterminated tag <%s>", name);
        bool self_closing = s[k - 1] == '/';
        i = k + 1;
        if (closing) {
            if (depth == 0 || strcmp(stack[depth - 1], name))
                FAIL("</%s> closes <%s>", name, depth ? stack[depth - 1] : "(nothing)");
            depth--;
            continue;
        }
        if (self_closing) continue;
        bool is_void = false;
        for (int v = 0; !xml && v < 6; v++)
            is_void |= !strcmp(name, voids[v]);
        if (is_void) continue;
        if (!xml && !strcmp(name, "style")) { /* raw text up to </style> */
            const char *e = strstr(s + i, "</style>");
            if (!e) FAIL("unterminated <style>");
            if (memchr(s + i, '<', (size_t)(e - (s + i)))) FAIL("'<' inside <style>");
            i = (size_t)(e - s) + 8;
            continue;
        }
        if (depth == 512) FAIL("nesting deeper than 512");
        strcpy(stack[depth++], name);
    }
    if (depth) FAIL("<%s> is never closed", stack[depth - 1]);
#undef FAIL
    return true;
}

int vt_count(const char *s, const char *needle) {
    int n = 0;
    size_t k = strlen(needle);
    for (const char *p = strstr(s, needle); p; p = strstr(p + k, needle))
        n++;
    return n;
}

/* ---- files ----------------------------------------------------------------------------------- */

char *vt_tmp_dir(void) {
    char *d = malloc(64);
    snprintf(d, 64, "/tmp/qkv_test_viz_XXXXXX");
    if (!mkdtemp(d)) {
        fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
        exit(2);
    }
    return d;
}

static void remove_tree(const char *d) {
    DIR *dir = opendir(d);
    if (dir) {
        struct dirent *e;
        char p[1024];
        while ((e = readdir(dir))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            snprintf(p, sizeof p, "%s/%s", d, e->d_name);
            struct stat st;
            if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
                remove_tree(p);
            else
                remove(p);
        }
        closedir(dir);
    }
    rmdir(d);
}

void vt_tmp_clean(char *d) {
    remove_tree(d);
    free(d);
}

unsigned char *vt_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    unsigned char *b = malloc(cap);
    size_t r;
    while ((r = fread(b + len, 1, cap - len - 1, f)) > 0) {
        len += r;
        if (cap - len - 1 == 0) b = realloc(b, cap *= 2);
    }
    fclose(f);
    b[len] = 0;
    *n = len;
    return b;
}

int vt_count_files(const char *dir, const char *needle) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, needle)) n++;
    if (d) closedir(d);
    return n;
}
