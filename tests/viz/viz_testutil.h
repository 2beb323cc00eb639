/*
 * viz_testutil.h: independent decoders and checkers for the viz tests. Nothing here calls the
 * code under test: the inflater follows RFC 1951 (stored and fixed-Huffman blocks; the writer
 * makes no others), the PNG reader follows the PNG specification with its own bitwise CRC-32 and
 * Adler-32, and the markup checker knows just enough of XML/HTML to find an unbalanced tag, a
 * stray '<' or an '&' that starts no entity.
 */
#ifndef QKV_VIZ_TESTUTIL_H
#define QKV_VIZ_TESTUTIL_H

#include "testutil.h"

/* Inflate the raw deflate data src[0..n): the bytes (malloc'd) and their count; NULL when the
 * data is malformed or uses dynamic-Huffman blocks, with the reason in *why. */
unsigned char *vt_inflate(const unsigned char *src, size_t n, size_t *out_n, const char **why);

uint32_t vt_crc32(const void *p, size_t n);   /* bit by bit, polynomial 0xEDB88320 */
uint32_t vt_adler32(const void *p, size_t n); /* by the definition, sums mod 65521 */

/* A decoded 8-bit RGB PNG. */
typedef struct vt_image {
    int w, h;
    unsigned char *rgb; /* 3 w h bytes, malloc'd */
    int n_idat;         /* IDAT chunks seen */
    int filters_used;   /* bit t set when some row used filter type t */
} vt_image;

/* Parse and check a PNG: signature; chunk CRCs; IHDR first with 8-bit RGB, deflate, filter 0,
 * no interlace; IDATs consecutive; IEND last and empty; the zlib header (CM 8, CINFO <= 7, FCHECK,
 * no dictionary), inflated size = h (3 w + 1), Adler-32; filter types 0..4 undone.
 * false with a reason in *why. */
bool vt_png_decode(const unsigned char *png, size_t n, vt_image *img, const char **why);

/* Decode the PNG file at path with python3's zlib (chunk CRCs, inflate, unfilter) into img.
 * Returns 1 when decoded, 0 when python3 or its zlib is missing (the caller skips), -1 when
 * python3 rejected the file (message in why[256]). */
int vt_python_png(const char *path, vt_image *img, char *why);

/* Markup check. xml: every element must be closed or self-closed; html: the void elements
 * (meta, br, hr, img, input, link) need no close tag and <style> holds raw text. false with the
 * offset and a reason in why[256]. */
bool vt_markup_ok(const char *s, bool xml, char *why);

/* Number of times needle occurs in s. */
int vt_count(const char *s, const char *needle);

/* A fresh directory under /tmp (malloc'd name) and its recursive removal (one level). */
char *vt_tmp_dir(void);
void vt_tmp_clean(char *dir);
/* Whole file into a malloc'd buffer (NUL-terminated); NULL if it cannot be read. */
unsigned char *vt_read_file(const char *path, size_t *n);
/* Entries of dir whose name contains needle. */
int vt_count_files(const char *dir, const char *needle);

#endif
