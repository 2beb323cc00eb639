/*
 * prepare_digits.c: scikit-learn's 8x8 digits (digits.csv.gz of Debian python3-sklearn, a copy of
 * the test set of the UCI "Optical Recognition of Handwritten Digits" data; scripts/fetch_data.sh
 * gunzips it to digits.csv) -> digits.{train,dev,test}.tsv, byte-identical to make_splits.py.
 *
 * Source: 1,797 lines of 65 comma-separated integers: 64 pixel counts 0..16 (8x8, row-major),
 * then the label 0..9. Row i (0-based) goes to qkv_split_of("<i>", 70, 80).
 * Output line: "label<TAB>p0 p1 ... p63".
 */
#include "recipes.h"
#include "data/data_internal.h"

#include <stdlib.h>
#include <string.h>

#define WHO "qkv_prepare_digits"

qkv_status qkv_prepare_digits(const char *csv, const char *out_dir, qkv_prepare_counts *counts) {
    if (!csv || !out_dir) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL argument", WHO);
    qkv_prepare_counts c = {0};
    char *text;
    size_t size;
    qkv_status st = qkv__read_file(WHO, csv, &text, &size);
    if (st) return st;
    if (size >= 2 && (unsigned char)text[0] == 0x1f && (unsigned char)text[1] == 0x8b) {
        free(text);
        return QKV_ERROR(QKV_ERR_FORMAT,
                         "%s: gzip data: gunzip it first (scripts/fetch_data.sh digits does)", csv);
    }
    qkv__buf out[3] = {{0}};
    int64_t line = 0;
    char q[200];
    for (size_t pos = 0, len; !st && pos < size;) {
        const char *s = qkv__take_line(text, size, &pos, &len);
        line++;
        if (len == 0) {
            st = QKV_ERROR(QKV_ERR_FORMAT, "%s:%lld: blank line", csv, (long long)line);
            break;
        }
        int64_t v[65];
        int nv = 0;
        for (size_t i = 0; i <= len && !st; nv++) {
            size_t j = i;
            while (j < len && s[j] != ',')
                j++;
            int64_t x;
            if (nv >= 65) {
                st =
                    QKV_ERROR(QKV_ERR_FORMAT, "%s:%lld: more than 65 values", csv, (long long)line);
            } else if (!qkv__parse_uint(s + i, j - i, nv == 64 ? 9 : 16, &x)) {
                st = QKV_ERROR(QKV_ERR_FORMAT, "%s:%lld: value %d is %s, not an integer in 0..%d",
                               csv, (long long)line, nv + 1, qkv__quote(q, sizeof q, s + i, j - i),
                               nv == 64 ? 9 : 16);
            } else {
                v[nv] = x;
            }
            i = j + 1;
        }
        if (st) break;
        if (nv != 65) {
            st = QKV_ERROR(QKV_ERR_FORMAT, "%s:%lld: %d values, expected 65 (64 pixels, label)",
                           csv, (long long)line, nv);
            break;
        }
        char key[24];
        int kl = snprintf(key, sizeof key, "%lld", (long long)(line - 1));
        qkv_split sp = qkv_split_of(key, (size_t)kl, 70, 80);
        qkv__buf_i64(&out[sp], v[64]);
        qkv__buf_ch(&out[sp], '\t');
        for (int k = 0; k < 64; k++) {
            if (k) qkv__buf_ch(&out[sp], ' ');
            qkv__buf_i64(&out[sp], v[k]);
        }
        qkv__buf_ch(&out[sp], '\n');
        c.items[sp]++;
        c.units[sp]++;
        c.per_class[sp][v[64]]++;
        c.source_entries++;
    }
    free(text);
    if (!st && (out[0].oom || out[1].oom || out[2].oom))
        st = QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
    if (!st) st = qkv__mkdirs(WHO, out_dir);
    for (int s = 0; s < 3 && !st; s++) {
        char name[32];
        snprintf(name, sizeof name, "digits.%s.tsv", qkv_split_name((qkv_split)s));
        char *path = qkv__path_join(out_dir, name);
        st = path ? qkv__write_file_atomic(WHO, path, out[s].p, out[s].n)
                  : QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
        free(path);
    }
    for (int s = 0; s < 3; s++)
        qkv__buf_free(&out[s]);
    if (!st && counts) *counts = c;
    return st;
}
