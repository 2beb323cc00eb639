/*
 * fuzz_safetensors.c: libFuzzer target for the safetensors reader (qkv_st_parse) and the JSON
 * parser under it. Not part of the test binaries (CMake excludes "/fuzz_" files); built with
 * -DQKV_FUZZ=ON by clang with -fsanitize=fuzzer,address,undefined. `make fuzz` builds it in
 * build/fuzz with the other targets and `make fuzz FUZZ_TIME=N` runs each N seconds
 * (scripts/fuzz.sh), this one on the seed corpus tests/io/fuzz_corpus with the dictionary
 * tests/io/fuzz_safetensors.dict.
 *
 * Every input must either be rejected with QKV_ERR_FORMAT and a message, or parse into a file
 * whose entries all lie inside the buffer (every byte is read, so ASan sees any overrun) and can
 * be found again by name. Anything else aborts, which libFuzzer reports as a crash.
 */
#include "io/json.h"
#include "qkv/qkv.h"

#include <stdlib.h>
#include <string.h>

static void require(int cond) {
    if (!cond) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    qkv_st_file *f = NULL;
    qkv_status st = qkv_st_parse(data, size, &f);
    require(st == QKV_OK || st == QKV_ERR_FORMAT);
    require((st == QKV_OK) == (f != NULL));
    require(st == QKV_OK || qkv_last_error()[0] != '\0');
    if (f) {
        unsigned sum = 0;
        uint64_t total = 0;
        for (int64_t i = 0; i < qkv_st_count(f); i++) {
            qkv_st_entry e, g;
            require(qkv_st_get(f, i, &e) == QKV_OK);
            require(e.ndim >= 0 && e.ndim <= QKV_ST_MAX_DIMS);
            require(qkv_st_dtype_size(e.dtype_name) > 0);
            const unsigned char *p = e.data;
            for (uint64_t k = 0; k < e.nbytes; k++)
                sum += p[k];
            total += e.nbytes;
            require(qkv_st_find(f, e.name, &g) == QKV_OK && g.data == e.data);
        }
        require(total <= size);
        for (int64_t i = 0; i < qkv_st_metadata_count(f); i++) {
            const char *k, *v;
            require(qkv_st_metadata_at(f, i, &k, &v) == QKV_OK);
            require(qkv_st_metadata_get(f, k) != NULL && strlen(v) < size);
        }
        qkv_st_close(f);
        (void)sum;
    }
    /* the JSON parser on the raw bytes too (most inputs never get past the size field) */
    qkv_json_doc *doc = NULL;
    st = qkv_json_parse((const char *)data, size, &doc, NULL);
    require(st == QKV_OK || st == QKV_ERR_FORMAT);
    qkv_json_free(doc);
    return 0;
}
