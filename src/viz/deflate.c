/*
 * deflate.c: a zlib stream writer (RFC 1950 around RFC 1951 deflate) with its checksums, for the
 * PNG writer; no zlib dependency.
 *
 * Two encodings:
 *   stored:  the data in blocks of at most 65535 bytes (BTYPE 00: LEN, NLEN, raw bytes);
 *   fixed:   one block with the fixed Huffman codes of RFC 1951 3.2.6 (BTYPE 01): literals and
 *            greedy LZ77 matches (3 .. 258 bytes back up to 32768 bytes), found through hash
 *            chains over 3-byte prefixes (at most 64 candidates per position, the longest
 *            match wins, the nearest among equals). Filtered heatmap rows are runs of zero
 *            bytes and repeats of the row above, which this compresses ~50-100x.
 * Huffman codes are sent most significant bit first, everything else least significant bit
 * first (RFC 1951 3.1.1). CRC-32 is the IEEE 802.3 polynomial (reflected 0xEDB88320, as in PNG
 * and zlib); Adler-32 is RFC 1950's, sums modulo 65521.
 */
#include "viz_internal.h"

#include <stdlib.h>
#include <string.h>

uint32_t vz_crc32(uint32_t crc, const void *p, size_t n) {
    uint32_t table[256]; /* 2 K operations per call: nothing next to the data it covers */
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    const unsigned char *s = p;
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = table[(crc ^ s[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

uint32_t vz_adler32(uint32_t adler, const void *p, size_t n) {
    const unsigned char *s = p;
    uint32_t a = adler & 0xFFFF, b = adler >> 16;
    while (n) {
        size_t k = n < 5552 ? n : 5552; /* the most bytes before b can overflow 32 bits */
        n -= k;
        while (k--) {
            a += *s++;
            b += a;
        }
        a %= 65521;
        b %= 65521;
    }
    return b << 16 | a;
}

/* ---- bit writer ------------------------------------------------------------------------------ */

typedef struct {
    vz_buf *out;
    uint64_t acc; /* pending bits, the first one in bit 0 */
    int n;
} bits;

static void put_bits(bits *w, uint32_t v, int n) {
    w->acc |= (uint64_t)v << w->n;
    w->n += n;
    while (w->n >= 8) {
        vz_putc(w->out, (char)(w->acc & 0xFF));
        w->acc >>= 8;
        w->n -= 8;
    }
}

/* A Huffman code of n bits, most significant bit first. */
static void put_code(bits *w, uint32_t code, int n) {
    uint32_t r = 0;
    for (int i = 0; i < n; i++)
        r |= ((code >> i) & 1u) << (n - 1 - i);
    put_bits(w, r, n);
}

static void flush_byte(bits *w) {
    if (w->n > 0) put_bits(w, 0, 8 - w->n);
}

/* ---- fixed-Huffman block --------------------------------------------------------------------- */

static const uint16_t len_base[29] = {3,  4,  5,  6,   7,   8,   9,   10,  11, 13,
                                      15, 17, 19, 23,  27,  31,  35,  43,  51, 59,
                                      67, 83, 99, 115, 131, 163, 195, 227, 258};
static const uint8_t len_extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                      2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const uint16_t dist_base[30] = {
    1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
    193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static const uint8_t dist_extra[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                       6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

/* Literal/length symbol 0 .. 287 with its fixed code (RFC 1951 3.2.6). */
static void put_litlen(bits *w, int sym) {
    if (sym < 144)
        put_code(w, 0x30u + (uint32_t)sym, 8);
    else if (sym < 256)
        put_code(w, 0x190u + (uint32_t)(sym - 144), 9);
    else if (sym < 280)
        put_code(w, (uint32_t)(sym - 256), 7);
    else
        put_code(w, 0xC0u + (uint32_t)(sym - 280), 8);
}

static void put_match(bits *w, int len, int dist) {
    int i = 28;
    while (len_base[i] > len)
        i--;
    put_litlen(w, 257 + i);
    put_bits(w, (uint32_t)(len - len_base[i]), len_extra[i]);
    int j = 29;
    while (dist_base[j] > dist)
        j--;
    put_code(w, (uint32_t)j, 5);
    put_bits(w, (uint32_t)(dist - dist_base[j]), dist_extra[j]);
}

#define WBITS 15
#define WSIZE (1 << WBITS) /* window: the farthest match distance */
#define WMASK (WSIZE - 1)
#define HBITS 15
#define MIN_MATCH 3
#define MAX_MATCH 258
#define MAX_CHAIN 64

static uint32_t hash3(const unsigned char *p) {
    return ((uint32_t)p[0] << 10 ^ (uint32_t)p[1] << 5 ^ p[2]) & ((1u << HBITS) - 1);
}

static bool fixed_block(bits *w, const unsigned char *d, size_t n) {
    /* head[h]: last position with hash h, or -1; prev[p & WMASK]: the position before p with
     * the same hash. Positions are size_t; -1 marks "none". */
    int64_t *head = malloc(sizeof(int64_t) << HBITS);
    int64_t *prev = malloc(sizeof(int64_t) * WSIZE);
    if (!head || !prev) {
        free(head);
        free(prev);
        return false;
    }
    for (size_t i = 0; i < (1u << HBITS); i++)
        head[i] = -1;
    put_bits(w, 1, 1); /* BFINAL */
    put_bits(w, 1, 2); /* BTYPE 01: fixed Huffman */
    size_t pos = 0;
    while (pos < n) {
        int best_len = 0;
        size_t best_dist = 0;
        if (n - pos >= MIN_MATCH) {
            size_t limit = n - pos < MAX_MATCH ? n - pos : MAX_MATCH;
            int64_t cand = head[hash3(d + pos)];
            for (int chain = 0; cand >= 0 && chain < MAX_CHAIN; chain++) {
                size_t c = (size_t)cand;
                if (pos - c > WSIZE) break;
                size_t k = 0;
                while (k < limit && d[c + k] == d[pos + k])
                    k++;
                if ((int)k > best_len) {
                    best_len = (int)k;
                    best_dist = pos - c;
                    if (k == limit) break;
                }
                int64_t next = prev[c & WMASK];
                if (next >= cand) break; /* the slot was reused by a later position */
                cand = next;
            }
        }
        size_t step = 1;
        if (best_len >= MIN_MATCH) {
            put_match(w, best_len, (int)best_dist);
            step = (size_t)best_len;
        } else {
            put_litlen(w, d[pos]);
        }
        for (size_t k = 0; k < step; k++, pos++) { /* index every position passed */
            if (n - pos < MIN_MATCH) continue;
            uint32_t h = hash3(d + pos);
            prev[pos & WMASK] = head[h];
            head[h] = (int64_t)pos;
        }
        if (w->out->oom) break;
    }
    put_litlen(w, 256); /* end of block */
    free(head);
    free(prev);
    return !w->out->oom;
}

static void stored_blocks(bits *w, const unsigned char *d, size_t n) {
    size_t pos = 0;
    do {
        size_t k = n - pos < 65535 ? n - pos : 65535;
        bool last = pos + k == n;
        put_bits(w, last ? 1 : 0, 1);
        put_bits(w, 0, 2); /* BTYPE 00 */
        flush_byte(w);
        unsigned char hdr[4] = {(unsigned char)(k & 0xFF), (unsigned char)(k >> 8),
                                (unsigned char)(~k & 0xFF), (unsigned char)((~k >> 8) & 0xFF)};
        vz_put(w->out, hdr, 4);
        vz_put(w->out, d + pos, k);
        pos += k;
    } while (pos < n && !w->out->oom);
}

bool vz_zlib(vz_buf *out, const unsigned char *data, size_t n, bool stored) {
    /* CMF 0x78: deflate with a 32 KiB window; FLG 0x01: no dictionary, level "fastest", and
     * 0x7801 is a multiple of 31 as RFC 1950 requires. */
    vz_put(out, "\x78\x01", 2);
    bits w = {out, 0, 0};
    if (stored)
        stored_blocks(&w, data, n);
    else if (!fixed_block(&w, data, n))
        out->oom = true;
    flush_byte(&w);
    uint32_t a = vz_adler32(1, data, n);
    unsigned char t[4] = {(unsigned char)(a >> 24), (unsigned char)(a >> 16),
                          (unsigned char)(a >> 8), (unsigned char)a};
    vz_put(out, t, 4);
    return !out->oom;
}
