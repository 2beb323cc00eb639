/*
 * png.c: PNG encoding of an 8-bit RGB image (ISO/IEC 15948, "PNG Specification, Second Edition").
 *
 * File: the 8-byte signature, IHDR (width, height, bit depth 8, colour type 2 = RGB, compression
 * 0, filter method 0, no interlace), the zlib stream of the filtered scanlines split into IDAT
 * chunks of at most 1 MiB, IEND. Each chunk is length (big-endian), type, data, and the CRC-32
 * of type and data. No time or text chunk: the same pixels give the same bytes.
 *
 * Scanline filters (spec 9.2), per byte x with a = the byte 3 to the left, b = the byte above,
 * c = the byte above-left (0 outside the image): none x, sub x - a, up x - b,
 * average x - floor((a + b) / 2), Paeth x - paeth(a, b, c). Each row takes the filter whose
 * output has the least sum of |signed byte| (the heuristic of the spec's 12.8 and libpng).
 */
#include "viz_internal.h"

#include <stdlib.h>
#include <string.h>

static void put_u32(vz_buf *b, uint32_t v) {
    unsigned char t[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 8), (unsigned char)v};
    vz_put(b, t, 4);
}

static void chunk(vz_buf *b, const char type[4], const unsigned char *data, size_t n) {
    put_u32(b, (uint32_t)n);
    vz_put(b, type, 4);
    vz_put(b, data, n);
    uint32_t crc = vz_crc32(0, type, 4);
    crc = vz_crc32(crc, data, n);
    put_u32(b, crc);
}

static int paeth(int a, int b, int c) {
    int p = a + b - c;
    int pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    if (pa <= pb && pa <= pc) return a;
    return pb <= pc ? b : c;
}

/* Filter row y (stride bytes, prev = the row above or NULL) with filter type t into out. */
static void filter_row(int t, const unsigned char *row, const unsigned char *prev, size_t stride,
                       unsigned char *out) {
    for (size_t i = 0; i < stride; i++) {
        int x = row[i];
        int a = i >= 3 ? row[i - 3] : 0;
        int b = prev ? prev[i] : 0;
        int c = prev && i >= 3 ? prev[i - 3] : 0;
        int p = 0;
        switch (t) {
        case 0:
            p = 0;
            break;
        case 1:
            p = a;
            break;
        case 2:
            p = b;
            break;
        case 3:
            p = (a + b) / 2;
            break;
        case 4:
            p = paeth(a, b, c);
            break;
        }
        out[i] = (unsigned char)(x - p);
    }
}

static unsigned long cost(const unsigned char *f, size_t n) {
    unsigned long s = 0;
    for (size_t i = 0; i < n; i++)
        s += f[i] < 128 ? f[i] : 256u - f[i];
    return s;
}

bool vz_png_encode(vz_buf *out, const unsigned char *rgb, int w, int h, bool stored) {
    size_t stride = (size_t)w * 3;
    size_t raw_n = (stride + 1) * (size_t)h;
    unsigned char *raw = malloc(raw_n);
    unsigned char *trial = malloc(stride ? stride : 1);
    if (!raw || !trial) {
        free(raw);
        free(trial);
        out->oom = true;
        return false;
    }
    for (int y = 0; y < h; y++) {
        const unsigned char *row = rgb + (size_t)y * stride;
        const unsigned char *prev = y ? row - stride : NULL;
        unsigned char *dst = raw + (size_t)y * (stride + 1);
        unsigned long best = 0;
        for (int t = 0; t < 5; t++) {
            filter_row(t, row, prev, stride, trial);
            unsigned long c = cost(trial, stride);
            if (t == 0 || c < best) {
                best = c;
                dst[0] = (unsigned char)t;
                memcpy(dst + 1, trial, stride);
            }
        }
    }
    free(trial);

    vz_put(out, "\x89PNG\r\n\x1a\n", 8);
    unsigned char ihdr[13];
    for (int k = 0; k < 4; k++) {
        ihdr[k] = (unsigned char)((uint32_t)w >> (24 - 8 * k));
        ihdr[4 + k] = (unsigned char)((uint32_t)h >> (24 - 8 * k));
    }
    ihdr[8] = 8;  /* bit depth */
    ihdr[9] = 2;  /* colour type: RGB */
    ihdr[10] = 0; /* compression: deflate */
    ihdr[11] = 0; /* filter method 0 */
    ihdr[12] = 0; /* no interlace */
    chunk(out, "IHDR", ihdr, 13);

    vz_buf z = {0};
    bool ok = vz_zlib(&z, raw, raw_n, stored);
    free(raw);
    if (!ok) {
        vz_free(&z);
        out->oom = true;
        return false;
    }
    const size_t max_chunk = (size_t)1 << 20;
    for (size_t off = 0; off < z.n; off += max_chunk)
        chunk(out, "IDAT", (const unsigned char *)z.p + off,
              z.n - off < max_chunk ? z.n - off : max_chunk);
    vz_free(&z);
    chunk(out, "IEND", NULL, 0);
    return !out->oom;
}
