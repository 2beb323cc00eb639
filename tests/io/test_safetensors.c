/* test_safetensors.c: safetensors reader and writer (src/io/safetensors.c, safetensors_write.c), parameter checkpoints
 * (src/io/params_io.c) and the `qkv inspect` command.
 *
 * The byte-exact tests compare the writer's output with files written out by hand from the
 * format description (HuggingFace's layout: compact JSON, "__metadata__" first, space padding to
 * a multiple of 8); the malformed-file tests feed hand-made headers to the reader, one defect
 * each, and check the status and the message. */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- helpers --------------------------------------------------------------------------------- */

/* A fresh directory under /tmp; tmp_clean removes it with everything inside (one level). */
static char *tmp_dir(void) {
    char *d = malloc(64);
    snprintf(d, 64, "/tmp/qkv_test_st_XXXXXX");
    if (!mkdtemp(d)) {
        fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
        exit(2);
    }
    return d;
}

static void tmp_clean(char *d) {
    DIR *dir = opendir(d);
    if (dir) {
        struct dirent *e;
        char p[512];
        while ((e = readdir(dir))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            snprintf(p, sizeof p, "%s/%s", d, e->d_name);
            if (remove(p) != 0) rmdir(p);
        }
        closedir(dir);
    }
    rmdir(d);
    free(d);
}

/* char var[512] = "dir/name" */
#define PATH_IN(var, dir, name)                                                                    \
    char var[512];                                                                                 \
    snprintf(var, sizeof var, "%s/%s", dir, name)

/* Number of entries in dir whose name contains ".tmp." (left-over temporary files). */
static int count_temp_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    if (d) closedir(d);
    return n;
}

static unsigned char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

static void write_all(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
}

/* An unpadded file: u64 N = strlen(header), the header, data_len bytes 0, 1, 2, ... */
static unsigned char *st_bytes(const char *header, size_t data_len, size_t *len) {
    size_t n = strlen(header);
    *len = 8 + n + data_len;
    unsigned char *b = malloc(*len + 1);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(b + 8, header, n);
    for (size_t i = 0; i < data_len; i++)
        b[8 + n + i] = (unsigned char)i;
    return b;
}

/* The bytes must be rejected by qkv_st_parse with QKV_ERR_FORMAT and a message naming the
 * buffer ("<memory>") and containing needle. */
static void reject_bytes(const unsigned char *b, size_t len, const char *needle, int line) {
    qkv_st_file *f = (qkv_st_file *)1;
    qkv_status st = qkv_st_parse(b, len, &f);
    const char *msg = qkv_last_error();
    if (st != QKV_ERR_FORMAT || f != NULL || !strstr(msg, needle) || strncmp(msg, "<memory>: ", 10))
        qkv_test_fail(__FILE__, line, "expected format error '%s', got %s: %s", needle,
                      qkv_status_str(st), msg);
    if (st == QKV_OK) qkv_st_close(f);
}

static void reject_header(const char *header, size_t data_len, const char *needle, int line) {
    size_t len;
    unsigned char *b = st_bytes(header, data_len, &len);
    reject_bytes(b, len, needle, line);
    free(b);
}
#define REJECT(header, data_len, needle) reject_header(header, data_len, needle, __LINE__)

/* ---- round trips ----------------------------------------------------------------------------- */

TEST(st_round_trip_dtypes_scalar_empty_and_metadata) {
    char *dir = tmp_dir();
    PATH_IN(path, dir, "rt.safetensors");
    float f32[6] = {1.5f, -2.25f, 3.0f, 0.0f, -0.0f, 1e-30f};
    double f64[3] = {0.1, -1e300, 3.0};
    int32_t i32[4] = {1, -2, INT32_MAX, INT32_MIN};
    uint8_t u8[5] = {0, 1, 127, 128, 255};
    uint16_t bf16[2] = {0x3f80, 0xc000}; /* 1.0, -2.0 as raw bf16 bits */
    int64_t i64[1] = {-1234567890123LL};
    float scalar = 42.0f;
    uint8_t boolv[3] = {1, 0, 1};
    const qkv_st_tensor t[] = {
        {"layer.0.weight", "F32", 2, (int64_t[]){2, 3}, f32},
        {"f64", "F64", 1, (int64_t[]){3}, f64},
        {"ids", "I32", 2, (int64_t[]){2, 2}, i32},
        {"bytes", "U8", 1, (int64_t[]){5}, u8},
        {"half", "BF16", 1, (int64_t[]){2}, bf16},
        {"big", "I64", 1, (int64_t[]){1}, i64},
        {"scalar", "F32", 0, NULL, &scalar},
        {"empty", "F32", 2, (int64_t[]){0, 4}, NULL},
        {"mask", "BOOL", 1, (int64_t[]){3}, boolv},
    };
    const int64_t n = sizeof t / sizeof *t;
    const char *mk[] = {"format", "quote", "unicode", "ctrl", "empty"};
    const char *mv[] = {"pt", "a \"b\" \\ c\n\t/", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
                        "\x01\x1f", ""};
    CHECK_OK(qkv_st_save(path, t, n, mk, mv, 5));
    CHECK(count_temp_files(dir) == 0);

    qkv_st_file *f = NULL;
    CHECK_OK(qkv_st_open(path, &f));
    if (!f) return;
    CHECK(qkv_st_count(f) == n);
    const size_t sizes[] = {4, 8, 4, 1, 2, 8, 4, 4, 1};
    for (int64_t i = 0; i < n && i < qkv_st_count(f); i++) {
        qkv_st_entry e;
        CHECK_OK(qkv_st_get(f, i, &e));
        CHECK_MSG(!strcmp(e.name, t[i].name), "entry %lld is '%s', expected '%s'", (long long)i,
                  e.name, t[i].name);
        CHECK(!strcmp(e.dtype_name, t[i].dtype_name));
        CHECK(e.ndim == t[i].ndim);
        uint64_t numel = 1;
        for (int d = 0; d < e.ndim; d++) {
            CHECK(e.shape[d] == t[i].shape[d]);
            numel *= (uint64_t)t[i].shape[d];
        }
        CHECK(e.nbytes == numel * sizes[i]);
        if (e.nbytes) CHECK(memcmp(e.data, t[i].data, (size_t)e.nbytes) == 0);
        qkv_st_entry g;
        CHECK_OK(qkv_st_find(f, t[i].name, &g));
        CHECK(g.data == e.data && g.nbytes == e.nbytes);
    }
    qkv_st_entry e;
    CHECK_OK(qkv_st_get(f, 0, &e));
    CHECK(e.known_dtype && e.dtype == QKV_F32 && ((uintptr_t)e.data % 64) == 0);
    CHECK_OK(qkv_st_find(f, "ids", &e));
    CHECK(e.known_dtype && e.dtype == QKV_I32);
    CHECK_OK(qkv_st_find(f, "half", &e));
    CHECK(!e.known_dtype);
    CHECK_ERR(qkv_st_find(f, "nope", &e), QKV_ERR_INVALID_ARG, "no tensor named 'nope'");
    CHECK_ERR(qkv_st_get(f, n, &e), QKV_ERR_INVALID_ARG, "out of range");

    CHECK(qkv_st_metadata_count(f) == 5);
    for (int i = 0; i < 5; i++) {
        const char *k = NULL, *v = NULL;
        CHECK_OK(qkv_st_metadata_at(f, i, &k, &v));
        CHECK(k && v && !strcmp(k, mk[i]) && !strcmp(v, mv[i]));
        CHECK(qkv_st_metadata_get(f, mk[i]) && !strcmp(qkv_st_metadata_get(f, mk[i]), mv[i]));
    }
    CHECK(qkv_st_metadata_get(f, "absent") == NULL);
    qkv_st_close(f);

    /* no tensors, no metadata: "{}" padded to 8 bytes, an empty data buffer */
    CHECK_OK(qkv_st_save(path, NULL, 0, NULL, NULL, 0));
    size_t len;
    unsigned char *b = read_all(path, &len);
    CHECK(len == 16 && memcmp(b, "\x08\0\0\0\0\0\0\0{}      ", 16) == 0);
    free(b);
    CHECK_OK(qkv_st_open(path, &f));
    CHECK(qkv_st_count(f) == 0 && qkv_st_metadata_count(f) == 0);
    qkv_st_close(f);
    tmp_clean(dir);
}

TEST(st_writer_bytes_are_exact) {
    char *dir = tmp_dir();
    PATH_IN(path, dir, "exact.safetensors");
    /* {"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} is 79
     * bytes, padded with one space to N = 80 = 0x50; then 1.0f and 2.0f little-endian. */
    static const char expected1[] =
        "\x50\x00\x00\x00\x00\x00\x00\x00"
        "{\"__metadata__\":{\"k\":\"v\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
        "\"data_offsets\":[0,8]}} "
        "\x00\x00\x80\x3f\x00\x00\x00\x40";
    float a[2] = {1.0f, 2.0f};
    const qkv_st_tensor t1 = {"a", "F32", 1, (int64_t[]){2}, a};
    CHECK_OK(qkv_st_save(path, &t1, 1, (const char *[]){"k"}, (const char *[]){"v"}, 1));
    size_t len;
    unsigned char *b = read_all(path, &len);
    CHECK_MSG(len == sizeof expected1 - 1 && memcmp(b, expected1, len) == 0,
              "file 1 differs (%zu bytes, expected %zu)", len, sizeof expected1 - 1);
    free(b);

    /* No metadata; a 0-d F64 scalar 0.5 and an empty I32 (0, 3) tensor:
     * {"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]},"e":{"dtype":"I32","shape":[0,3],
     * "data_offsets":[8,8]}} is 108 bytes, padded with 4 spaces to N = 112 = 0x70. */
    static const char expected2[] =
        "\x70\x00\x00\x00\x00\x00\x00\x00"
        "{\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]},"
        "\"e\":{\"dtype\":\"I32\",\"shape\":[0,3],\"data_offsets\":[8,8]}}    "
        "\x00\x00\x00\x00\x00\x00\xe0\x3f";
    double s = 0.5;
    const qkv_st_tensor t2[] = {{"s", "F64", 0, NULL, &s},
                                {"e", "I32", 2, (int64_t[]){0, 3}, NULL}};
    CHECK_OK(qkv_st_save(path, t2, 2, NULL, NULL, 0));
    b = read_all(path, &len);
    CHECK_MSG(len == sizeof expected2 - 1 && memcmp(b, expected2, len) == 0,
              "file 2 differs (%zu bytes, expected %zu)", len, sizeof expected2 - 1);
    free(b);

    /* Escapes as serde_json writes them: \" \\ \n \t and \u00XX for other control bytes. */
    static const char expected3[] = "\x28\x00\x00\x00\x00\x00\x00\x00"
                                    "{\"__metadata__\":{\"q\\\"\\\\\":\"\\n\\t\\u0001/\"}}";
    CHECK_OK(
        qkv_st_save(path, NULL, 0, (const char *[]){"q\"\\"}, (const char *[]){"\n\t\x01/"}, 1));
    b = read_all(path, &len);
    CHECK_MSG(len == sizeof expected3 - 1 && memcmp(b, expected3, len) == 0,
              "file 3 differs (%zu bytes, expected %zu): %.*s", len, sizeof expected3 - 1, (int)len,
              (const char *)b);
    free(b);
    tmp_clean(dir);
}

TEST(st_reader_sorts_by_offset_and_accepts_whitespace) {
    /* Header order differs from data order; whitespace and newlines around tokens; extra
     * padding; F8 and U64 dtypes are known names without a qkv dtype. */
    const char *h =
        "\n {\"b\" : {\"dtype\":\"F32\", \"shape\":[1], \"data_offsets\":[4, 8]},\n"
        "  \"a\": {\"data_offsets\":[0,4], \"shape\":[2, 2], \"dtype\":\"F8_E4M3\"},"
        "  \"__metadata__\": {\"x\": \"y\"},"
        "  \"c\": {\"dtype\":\"U64\", \"shape\":[1], \"data_offsets\":[8, 16]}}  \t\r\n";
    size_t len;
    unsigned char *b = st_bytes(h, 16, &len);
    qkv_st_file *f = NULL;
    CHECK_OK(qkv_st_parse(b, len, &f));
    free(b); /* the file keeps its own copy */
    if (!f) return;
    qkv_st_entry e;
    CHECK(qkv_st_count(f) == 3);
    CHECK_OK(qkv_st_get(f, 0, &e));
    CHECK(!strcmp(e.name, "a") && !strcmp(e.dtype_name, "F8_E4M3") && !e.known_dtype &&
          e.nbytes == 4);
    CHECK(((const unsigned char *)e.data)[3] == 3);
    CHECK_OK(qkv_st_get(f, 1, &e));
    CHECK(!strcmp(e.name, "b") && e.known_dtype && e.dtype == QKV_F32);
    CHECK(((const unsigned char *)e.data)[0] == 4);
    CHECK_OK(qkv_st_get(f, 2, &e));
    CHECK(!strcmp(e.name, "c") && e.nbytes == 8);
    CHECK(!strcmp(qkv_st_metadata_get(f, "x"), "y"));
    qkv_st_close(f);
    CHECK(qkv_st_dtype_size("F8_E5M2") == 1 && qkv_st_dtype_size("BF16") == 2 &&
          qkv_st_dtype_size("U32") == 4 && qkv_st_dtype_size("F64") == 8 &&
          qkv_st_dtype_size("f32") == 0 && qkv_st_dtype_size(NULL) == 0);
}

/* ---- malformed files ------------------------------------------------------------------------- */

TEST(st_rejects_bad_sizes) {
    reject_bytes((const unsigned char *)"\x05\0\0\0\0", 5, "file is 5 bytes, shorter than",
                 __LINE__);
    reject_bytes((const unsigned char *)"", 0, "file is 0 bytes", __LINE__);
    reject_bytes((const unsigned char *)"\0\0\0\0\0\0\0\0{}", 10, "header size is 0", __LINE__);
    /* 100,000,001 = 0x05F5E101 */
    reject_bytes((const unsigned char *)"\x01\xe1\xf5\x05\0\0\0\0{}", 10, "exceeds the limit",
                 __LINE__);
    reject_bytes((const unsigned char *)"\xff\xff\xff\xff\xff\xff\xff\xff{}", 10,
                 "exceeds the limit", __LINE__);
    /* N = 100 but only 2 bytes follow */
    reject_bytes((const unsigned char *)"\x64\0\0\0\0\0\0\0{}", 10,
                 "header size 100 exceeds the 2 bytes after the size field", __LINE__);
    /* a good file cut inside its header, and cut inside its data */
    size_t len;
    unsigned char *b =
        st_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, &len);
    reject_bytes(b, 20, "truncated file?", __LINE__);
    reject_bytes(b, len - 3, "extend past the end of the 5-byte data buffer", __LINE__);
    free(b);
}

TEST(st_rejects_bad_json) {
    REJECT("{\"a\":", 0,
           "header is not valid JSON: unexpected end of input (expected a value) at "
           "byte 5 of the header");
    REJECT("{\"a\":{}} x", 0, "unexpected characters after the JSON value at byte 9");
    REJECT("{}x", 0, "unexpected characters after the JSON value at byte 2");
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
           8, "duplicate key \"a\"");
    REJECT("[1, 2]", 0, "header must be a JSON object, got array");
    REJECT("\"{}\"", 0, "header must be a JSON object, got string");
    REJECT("{\"\xff\":1}", 0, "invalid UTF-8");
    REJECT("{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4,
           "contains a NUL character");
}

TEST(st_rejects_bad_tensor_entries) {
    REJECT("{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
           "tensor 'a': unknown dtype \"F33\"");
    REJECT("{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
           "unknown dtype \"f32\"");
    REJECT("{\"a\":{\"dtype\":5,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
           "tensor 'a': \"dtype\" must be a string, got integer");
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":\"1\",\"data_offsets\":[0,4]}}", 4,
           "\"shape\" must be a list of non-negative integers, got string");
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
           "\"shape\"[0] must be a non-negative integer, got -1");
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2, 1.5],\"data_offsets\":[0,4]}}", 4,
           "\"shape\"[1] must be a non-negative integer, got number");
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[null],\"data_offsets\":[0,4]}}", 4, "got null");
    REJECT("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1,
           "\"shape\" has 9 dims (at most 8)");
    REJECT("{\"a\":{\"dtype\":\"U8\",\"shape\":[9223372036854775808],\"data_offsets\":[0,1]}}", 1,
           "is too large");
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}",
           4, "overflows 64-bit sizes");
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,4]}}", 4,
           "overflows 64-bit sizes"); /* 2^62 elements fit, 2^64 bytes do not */
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4,
           "\"data_offsets\" must be two non-negative integers");
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":\"0,4\"}}", 4,
           "\"data_offsets\" must be two non-negative integers");
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-1,3]}}", 4,
           "\"data_offsets\" must be two non-negative integers");
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 4,
           "\"data_offsets\" must be two non-negative integers");
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4,
           "\"data_offsets\" [4, 0] decrease");
    REJECT("{\"a\":3}", 0, "tensor 'a': entry must be an object, got integer");
    REJECT("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4,
           "tensor 'a': missing field \"shape\"");
    REJECT("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "missing field \"dtype\"");
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "missing field \"data_offsets\"");
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"extra\":1}}", 4,
           "unknown field \"extra\"");
    /* shape x dtype size against the offsets */
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
           "tensor 'a': shape (3) of F32 needs 12 bytes but data_offsets [0, 8] span 8");
    REJECT("{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,0],\"data_offsets\":[0,4]}}", 4,
           "shape (2, 0) of BF16 needs 0 bytes");
}

TEST(st_rejects_bad_layout) {
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
           12, "tensor 'b' (data_offsets [4, 12]) overlaps tensor 'a' ([0, 8])");
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
           8, "overlaps"); /* the same bytes twice */
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
           12, "hole of 4 bytes between tensor 'a' (ends at 4) and tensor 'b' (begins at 8)");
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
           "hole of 4 bytes at the start of the data buffer");
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
           "data_offsets [0, 8] extend past the end of the 4-byte data buffer");
    REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8,
           "the data buffer has 8 bytes but the tensors cover only 4");
    REJECT("{}", 3, "the data buffer has 3 bytes but the tensors cover only 0");
    /* empty tensors may sit anywhere on the tiling, including at the very end */
    size_t len;
    unsigned char *b = st_bytes("{\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
                                "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                                "\"y\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}",
                                4, &len);
    qkv_st_file *f = NULL;
    CHECK_OK(qkv_st_parse(b, len, &f));
    qkv_st_entry e;
    if (f) {
        CHECK_OK(qkv_st_get(f, 0, &e));
        CHECK(!strcmp(e.name, "y"));
        CHECK_OK(qkv_st_get(f, 2, &e));
        CHECK(!strcmp(e.name, "z") && e.nbytes == 0);
    }
    qkv_st_close(f);
    free(b);
}

TEST(st_rejects_bad_metadata) {
    REJECT("{\"__metadata__\":{\"k\":1}}", 0,
           "__metadata__ value of \"k\" must be a string, got integer");
    REJECT("{\"__metadata__\":{\"k\":{\"x\":\"y\"}}}", 0, "must be a string, got object");
    REJECT("{\"__metadata__\":[\"k\"]}", 0, "__metadata__ must be an object of strings, got array");
    REJECT("{\"__metadata__\":\"k\"}", 0, "__metadata__ must be an object of strings, got string");
    REJECT("{\"__metadata__\":{\"k\":\"a\\u0000\"}}", 0, "contains a NUL character");
    REJECT("{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate key \"__metadata__\"");
}

TEST(st_open_errors_name_the_file) {
    char *dir = tmp_dir();
    PATH_IN(missing, dir, "missing.safetensors");
    qkv_st_file *f = (qkv_st_file *)1;
    CHECK_ERR(qkv_st_open(missing, &f), QKV_ERR_IO, "cannot open: No such file or directory");
    CHECK(f == NULL && strstr(qkv_last_error(), missing));
    CHECK_ERR(qkv_st_open(dir, &f), QKV_ERR_IO, "not a regular file");
    PATH_IN(bad, dir, "bad.safetensors");
    write_all(bad, "\x10\0\0\0\0\0\0\0{", 9);
    CHECK_ERR(qkv_st_open(bad, &f), QKV_ERR_FORMAT, "exceeds the 1 bytes after the size field");
    CHECK(strncmp(qkv_last_error(), bad, strlen(bad)) == 0);
    CHECK_ERR(qkv_st_open(NULL, &f), QKV_ERR_INVALID_ARG, "NULL");
    tmp_clean(dir);
}

/* ---- writer errors and atomicity ------------------------------------------------------------- */

TEST(st_save_rejects_bad_arguments_without_writing) {
    char *dir = tmp_dir();
    PATH_IN(path, dir, "x.safetensors");
    float v[2] = {1, 2};
    qkv_st_tensor t[2] = {{"a", "F32", 1, (int64_t[]){2}, v}, {"a", "F32", 1, (int64_t[]){2}, v}};
    CHECK_ERR(qkv_st_save(path, t, 2, NULL, NULL, 0), QKV_ERR_INVALID_ARG,
              "duplicate tensor name 'a'");
    t[1].name = "__metadata__";
    CHECK_ERR(qkv_st_save(path, t, 2, NULL, NULL, 0), QKV_ERR_INVALID_ARG, "is reserved");
    t[1].name = "bad\xff";
    CHECK_ERR(qkv_st_save(path, t, 2, NULL, NULL, 0), QKV_ERR_INVALID_ARG, "not valid UTF-8");
    t[1].name = "";
    CHECK_ERR(qkv_st_save(path, t, 2, NULL, NULL, 0), QKV_ERR_INVALID_ARG, "has no name");
    t[1].name = "b";
    t[1].dtype_name = "F128";
    CHECK_ERR(qkv_st_save(path, t, 2, NULL, NULL, 0), QKV_ERR_INVALID_ARG, "unknown dtype 'F128'");
    t[1].dtype_name = "F32";
    t[1].shape = (int64_t[]){-2};
    CHECK_ERR(qkv_st_save(path, t, 2, NULL, NULL, 0), QKV_ERR_INVALID_ARG, "dim 0 is negative");
    t[1].shape = (int64_t[]){2};
    t[1].ndim = 9;
    CHECK_ERR(qkv_st_save(path, t, 2, NULL, NULL, 0), QKV_ERR_INVALID_ARG, "9 dims");
    t[1].ndim = 1;
    t[1].data = NULL;
    CHECK_ERR(qkv_st_save(path, t, 2, NULL, NULL, 0), QKV_ERR_INVALID_ARG, "data is NULL");
    t[1].data = v;
    CHECK_ERR(qkv_st_save(path, t, 2, (const char *[]){"k", "k"}, (const char *[]){"1", "2"}, 2),
              QKV_ERR_INVALID_ARG, "duplicate metadata key 'k'");
    CHECK_ERR(qkv_st_save(path, t, 2, (const char *[]){"k"}, (const char *[]){NULL}, 1),
              QKV_ERR_INVALID_ARG, "metadata 0 is NULL");
    CHECK_ERR(qkv_st_save(path, t, -1, NULL, NULL, 0), QKV_ERR_INVALID_ARG, "negative");
    CHECK(access(path, F_OK) != 0 && count_temp_files(dir) == 0); /* nothing was written */
    CHECK_OK(qkv_st_save(path, t, 2, NULL, NULL, 0));
    tmp_clean(dir);
}

TEST(st_save_is_atomic) {
    char *dir = tmp_dir();
    float v[3] = {1, 2, 3};
    const qkv_st_tensor t = {"v", "F32", 1, (int64_t[]){3}, v};
    /* a directory that does not exist: a clean I/O error naming the path, no file anywhere */
    char nodir[600];
    snprintf(nodir, sizeof nodir, "%s/no/such/dir/model.safetensors", dir);
    CHECK_ERR(qkv_st_save(nodir, &t, 1, NULL, NULL, 0), QKV_ERR_IO, "No such file or directory");
    CHECK(strstr(qkv_last_error(), nodir) != NULL);
    CHECK(count_temp_files(dir) == 0);

    /* overwriting replaces the old file as a whole */
    PATH_IN(path, dir, "m.safetensors");
    write_all(path, "old contents", 12);
    CHECK_OK(qkv_st_save(path, &t, 1, NULL, NULL, 0));
    qkv_st_file *f = NULL;
    CHECK_OK(qkv_st_open(path, &f));
    CHECK(qkv_st_count(f) == 1);
    qkv_st_close(f);
    CHECK(count_temp_files(dir) == 0);

    /* the rename fails (the target is a non-empty directory): the error says so and the
     * temporary file is gone */
    PATH_IN(sub, dir, "sub");
    mkdir(sub, 0755);
    char keep[600];
    snprintf(keep, sizeof keep, "%s/keep", sub);
    write_all(keep, "x", 1);
    CHECK_ERR(qkv_st_save(sub, &t, 1, NULL, NULL, 0), QKV_ERR_IO, "rename failed");
    CHECK(strstr(qkv_last_error(), sub) != NULL);
    CHECK(count_temp_files(dir) == 0);
    remove(keep);
    tmp_clean(dir);
}

TEST(st_save_full_disk_is_a_clean_io_error) {
    /* A child process limits its file size (RLIMIT_FSIZE, SIGXFSZ ignored) so write() fails
     * part-way with EFBIG, as it would with ENOSPC on a full disk. */
    char *dir = tmp_dir();
    PATH_IN(path, dir, "big.safetensors");
    char expect[256];
    snprintf(expect, sizeof expect, "write failed: %s", strerror(EFBIG));
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {100000, 100000};
        setrlimit(RLIMIT_FSIZE, &rl);
        size_t n = 1 << 18; /* 1 MiB of F32 */
        float *data = calloc(n, sizeof *data);
        const qkv_st_tensor t = {"w", "F32", 1, (int64_t[]){(int64_t)n}, data};
        qkv_status st = qkv_st_save(path, &t, 1, NULL, NULL, 0);
        int ok = st == QKV_ERR_IO && strstr(qkv_last_error(), expect) &&
                 strstr(qkv_last_error(), path) && count_temp_files(dir) == 0 &&
                 access(path, F_OK) != 0;
        if (!ok) fprintf(stdout, "  child: %s: %s\n", qkv_status_str(st), qkv_last_error());
        free(data);
        fflush(stdout);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    tmp_clean(dir);
}

/* ---- parameter checkpoints ------------------------------------------------------------------- */

static qkv_params *make_params(const char *const *names, const int64_t (*shapes)[3],
                               const int *ndims, int n) {
    qkv_params *p = NULL;
    qkv_params_new(&p);
    for (int i = 0; i < n; i++)
        CHECK_OK(qkv_params_add(p, names[i], ndims[i], shapes[i], NULL));
    CHECK_OK(qkv_params_finalize(p));
    return p;
}

TEST(params_save_load_round_trip_and_mismatches) {
    char *dir = tmp_dir();
    PATH_IN(path, dir, "params.safetensors");
    const char *names[] = {"enc.w", "enc.b", "scale"};
    const int64_t shapes[][3] = {{2, 3}, {3}, {0}};
    const int ndims[] = {2, 1, 0};
    qkv_params *a = make_params(names, shapes, ndims, 3);
    qkv_real *da = qkv_params_block(a, QKV_BLOCK_DATA);
    for (int i = 0; i < 10; i++)
        da[i] = (qkv_real)(0.1 * i - 0.35);
    CHECK_OK(qkv_params_save(a, path, (const char *[]){"step"}, (const char *[]){"7"}, 1));

    /* the file: every parameter in registration order, in the build's dtype */
    qkv_st_file *f = NULL;
    CHECK_OK(qkv_st_open(path, &f));
    CHECK(qkv_st_count(f) == 3 && !strcmp(qkv_st_metadata_get(f, "step"), "7"));
    for (int i = 0; i < 3 && i < qkv_st_count(f); i++) {
        qkv_st_entry e;
        qkv_st_get(f, i, &e);
        CHECK(!strcmp(e.name, names[i]) && e.ndim == ndims[i]);
        CHECK(!strcmp(e.dtype_name, sizeof(qkv_real) == 4 ? "F32" : "F64"));
    }
    qkv_st_close(f);

    /* exact round trip */
    qkv_params *b = make_params(names, shapes, ndims, 3);
    CHECK_OK(qkv_params_load(b, path));
    CHECK(memcmp(da, qkv_params_block(b, QKV_BLOCK_DATA), 10 * sizeof(qkv_real)) == 0);
    qkv_params_free(b);

    /* wrong shape: an error naming the tensor and both shapes; nothing changes */
    const int64_t shapes_t[][3] = {{3, 2}, {3}, {0}};
    b = make_params(names, shapes_t, ndims, 3);
    qkv_real *db = qkv_params_block(b, QKV_BLOCK_DATA);
    for (int i = 0; i < 10; i++)
        db[i] = 9;
    CHECK_ERR(qkv_params_load(b, path), QKV_ERR_SHAPE,
              "tensor 'enc.w' has shape (2, 3) in the file but the parameter is (3, 2)");
    for (int i = 0; i < 10; i++)
        CHECK(db[i] == 9);
    qkv_params_free(b);

    /* a parameter the file lacks */
    const char *names_more[] = {"enc.w", "enc.b", "scale", "dec.w"};
    const int64_t shapes_more[][3] = {{2, 3}, {3}, {0}, {4}};
    const int ndims_more[] = {2, 1, 0, 1};
    b = make_params(names_more, shapes_more, ndims_more, 4);
    CHECK_ERR(qkv_params_load(b, path), QKV_ERR_FORMAT,
              "1 parameter is missing from the file: 'dec.w'");
    qkv_params_free(b);

    /* a tensor that is not a parameter */
    const char *names_less[] = {"enc.w", "scale"};
    const int64_t shapes_less[][3] = {{2, 3}, {0}};
    const int ndims_less[] = {2, 0};
    b = make_params(names_less, shapes_less, ndims_less, 2);
    CHECK_ERR(qkv_params_load(b, path), QKV_ERR_FORMAT,
              "the file has 1 tensor that is not a parameter: 'enc.b'");
    qkv_params_free(b);

    /* not finalized */
    qkv_params *raw = NULL;
    qkv_params_new(&raw);
    CHECK_ERR(qkv_params_load(raw, path), QKV_ERR_STATE, "not finalized");
    CHECK_ERR(qkv_params_save(raw, path, NULL, NULL, 0), QKV_ERR_STATE, "not finalized");
    qkv_params_free(raw);
    PATH_IN(none, dir, "none.safetensors");
    CHECK_ERR(qkv_params_load(a, none), QKV_ERR_IO, "cannot open");
    qkv_params_free(a);
    tmp_clean(dir);
}

TEST(params_load_converts_f32_and_f64) {
    char *dir = tmp_dir();
    PATH_IN(p32, dir, "f32.safetensors");
    PATH_IN(p64, dir, "f64.safetensors");
    PATH_IN(pi, dir, "i32.safetensors");
    const double x64[3] = {0.1, -1.0 / 3.0, 12345.678901234};
    const float x32[3] = {0.1f, -1.0f / 3.0f, 12345.678901234f};
    const int32_t xi[3] = {1, 2, 3};
    CHECK_OK(
        qkv_st_save(p64, &(qkv_st_tensor){"w", "F64", 1, (int64_t[]){3}, x64}, 1, NULL, NULL, 0));
    CHECK_OK(
        qkv_st_save(p32, &(qkv_st_tensor){"w", "F32", 1, (int64_t[]){3}, x32}, 1, NULL, NULL, 0));
    CHECK_OK(
        qkv_st_save(pi, &(qkv_st_tensor){"w", "I32", 1, (int64_t[]){3}, xi}, 1, NULL, NULL, 0));
    const char *names[] = {"w"};
    const int64_t shapes[][3] = {{3}};
    const int ndims[] = {1};
    qkv_params *p = make_params(names, shapes, ndims, 1);
    const qkv_real *d = qkv_params_block(p, QKV_BLOCK_DATA);
    CHECK_OK(qkv_params_load(p, p64)); /* float build: rounds to nearest; double: exact */
    for (int i = 0; i < 3; i++)
        CHECK(d[i] == (qkv_real)x64[i]);
    CHECK_OK(qkv_params_load(p, p32)); /* double build: widening is exact */
    for (int i = 0; i < 3; i++)
        CHECK(d[i] == (qkv_real)x32[i]);
    CHECK_ERR(qkv_params_load(p, pi), QKV_ERR_FORMAT,
              "tensor 'w' has dtype I32; parameters load from");
    qkv_params_free(p);
    tmp_clean(dir);
}

/* A NaN or infinite value in the file (F32 and F64 files; an F64 value beyond float's range in the
 * float build): an error naming the tensor, the value's kind and its element; nothing changes. */
TEST(params_load_rejects_non_finite_values) {
    char *dir = tmp_dir();
    PATH_IN(path, dir, "bad.safetensors");
    const char *names[] = {"a", "w"};
    const int64_t shapes[][3] = {{2}, {4}};
    const int ndims[] = {1, 1};
    qkv_params *p = make_params(names, shapes, ndims, 2);
    qkv_real *d = qkv_params_block(p, QKV_BLOCK_DATA);
    for (int i = 0; i < 6; i++)
        d[i] = 7;
    const float a32[2] = {1, 2}, nan32[4] = {0.5f, -1, NAN, 3}, inf32[4] = {INFINITY, 0, 0, 0};
    const double a64[2] = {1, 2}, big64[4] = {0, 1e300, 0, 0};
    const struct {
        const char *dtype;
        const void *a, *w;
        const char *want;
    } cases[] = {
        {"F32", a32, nan32, "tensor 'w' holds NaN at element 2"},
        {"F32", a32, inf32, "tensor 'w' holds an infinite value at element 0"},
        {"F64", a64, big64, "tensor 'w' holds a value beyond float's range at element 1"},
    };
    for (int c = 0; c < 3; c++) {
        if (c == 2 && sizeof(qkv_real) == sizeof(double)) continue; /* 1e300 is a double */
        const qkv_st_tensor t[2] = {{"a", cases[c].dtype, 1, (int64_t[]){2}, cases[c].a},
                                    {"w", cases[c].dtype, 1, (int64_t[]){4}, cases[c].w}};
        CHECK_OK(qkv_st_save(path, t, 2, NULL, NULL, 0));
        CHECK_ERR(qkv_params_load(p, path), QKV_ERR_FORMAT, cases[c].want);
        for (int i = 0; i < 6; i++)
            CHECK(d[i] == 7);
    }
    qkv_params_free(p);
    tmp_clean(dir);
}

/* ---- qkv inspect ----------------------------------------------------------------------------- */

typedef struct {
    int exited, code;
    char out[8192], err[4096];
} cli_result;

static void slurp(const char *path, char *buf, size_t size) {
    size_t len = 0;
    unsigned char *b = read_all(path, &len);
    if (len >= size) len = size - 1;
    if (b) memcpy(buf, b, len);
    buf[len] = '\0';
    free(b);
}

static void run_cli(const char *dir, const char *args, cli_result *r) {
    char cmd[4096];
    PATH_IN(out, dir, "out.txt");
    PATH_IN(err, dir, "err.txt");
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>'%s'", QKV_CLI_PATH, args, out, err);
    fflush(NULL);
    int status = system(cmd);
    r->exited = status != -1 && WIFEXITED(status);
    r->code = r->exited ? WEXITSTATUS(status) : -1;
    slurp(out, r->out, sizeof r->out);
    slurp(err, r->err, sizeof r->err);
    remove(out);
    remove(err);
}

TEST(cli_inspect_good_and_bad_files) {
    if (access(QKV_CLI_PATH, X_OK) != 0) SKIP("the qkv CLI is not built");
    char *dir = tmp_dir();
    PATH_IN(good, dir, "good.safetensors");
    static float w[12 * 5], b5[5];
    const qkv_st_tensor t[] = {{"encoder.weight", "F32", 2, (int64_t[]){12, 5}, w},
                               {"encoder.bias", "F32", 1, (int64_t[]){5}, b5},
                               {"step", "I64", 0, NULL, (int64_t[]){3}}};
    CHECK_OK(qkv_st_save(good, t, 3, (const char *[]){"format", "note"},
                         (const char *[]){"pt", "two\nlines"}, 2));
    char args[2048];
    cli_result r;
    snprintf(args, sizeof args, "inspect '%s'", good);
    run_cli(dir, args, &r);
    CHECK_MSG(r.exited && r.code == 0, "exit %d, stderr: %s", r.code, r.err);
    CHECK(strstr(r.out, "format = pt") && strstr(r.out, "note = two\\nlines"));
    CHECK(strstr(r.out, "encoder.weight") && strstr(r.out, "(12, 5)"));
    CHECK(strstr(r.out, "encoder.bias") && strstr(r.out, "(5)"));
    CHECK(strstr(r.out, "step") && strstr(r.out, "I64") && strstr(r.out, "()"));
    CHECK_MSG(strstr(r.out, "3 tensors, 66 parameters"), "output:\n%s", r.out); /* 60 + 5 + 1 */
    CHECK(r.err[0] == '\0');

    /* bad files: exit 1, "qkv inspect: FILE: reason" on stderr, nothing on stdout, no crash */
    const struct {
        const char *bytes;
        size_t len;
        const char *reason;
    } bad[] = {
        {"\x01\x02", 2, "shorter than the 8-byte header size field"},
        {"\x40\0\0\0\0\0\0\0{}", 10, "truncated file?"},
        {"\x06\0\0\0\0\0\0\0{\"a\":}", 14, "not valid JSON"},
        {"\x02\0\0\0\0\0\0\0[]", 10, "must be a JSON object"},
        {"\x02\0\0\0\0\0\0\0{}abc", 13, "cover only 0"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        PATH_IN(path, dir, "bad.safetensors");
        write_all(path, bad[i].bytes, bad[i].len);
        snprintf(args, sizeof args, "inspect '%s'", path);
        run_cli(dir, args, &r);
        char want[600];
        snprintf(want, sizeof want, "qkv inspect: %s: ", path);
        CHECK_MSG(r.exited && r.code == 1, "bad file %zu: exit %d", i, r.code);
        CHECK_MSG(strncmp(r.err, want, strlen(want)) == 0 && strstr(r.err, bad[i].reason),
                  "bad file %zu: stderr '%s'", i, r.err);
        CHECK_MSG(!strstr(r.err, ".c:"), "stderr has a source location: %s", r.err);
        CHECK(r.out[0] == '\0');
    }
    PATH_IN(absent, dir, "absent.safetensors");
    snprintf(args, sizeof args, "inspect '%s'", absent);
    run_cli(dir, args, &r);
    CHECK(r.exited && r.code == 1 && strstr(r.err, "No such file or directory"));

    /* usage */
    run_cli(dir, "inspect", &r);
    CHECK(r.exited && r.code == 2 && strstr(r.err, "usage: qkv inspect"));
    run_cli(dir, "inspect --bogus x", &r);
    CHECK(r.exited && r.code == 2 && strstr(r.err, "unknown option '--bogus'"));
    snprintf(args, sizeof args, "inspect '%s' '%s'", good, good);
    run_cli(dir, args, &r);
    CHECK(r.exited && r.code == 2 && strstr(r.err, "one file at a time"));
    run_cli(dir, "inspect --help", &r);
    CHECK(r.exited && r.code == 0 && strstr(r.out, "usage: qkv inspect") &&
          strstr(r.out, "example"));
    tmp_clean(dir);
}
