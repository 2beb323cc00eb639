/* test_json.c: the strict JSON parser of src/io/json.c on its own: values, escapes, integer
 * limits, structure, and every class of error with its byte offset. */
#include "io/json.h"
#include "testutil.h"

static qkv_json_doc *parse_ok(const char *text) {
    qkv_json_doc *doc = NULL;
    qkv_json_error err;
    qkv_status st = qkv_json_parse(text, strlen(text), &doc, &err);
    CHECK_MSG(st == QKV_OK, "parse of %s failed: %s at %zu", text, err.message, err.offset);
    return doc;
}

/* text must be rejected with a message containing `needle` at byte `offset`. */
static void parse_bad(const char *text, size_t len, const char *needle, size_t offset) {
    qkv_json_doc *doc = (qkv_json_doc *)1;
    qkv_json_error err;
    qkv_status st = qkv_json_parse(text, len, &doc, &err);
    CHECK_MSG(st == QKV_ERR_FORMAT && doc == NULL, "'%.*s' was accepted", (int)len, text);
    CHECK_MSG(strstr(err.message, needle) != NULL, "'%.*s': message '%s' lacks '%s'", (int)len,
              text, err.message, needle);
    CHECK_MSG(err.offset == offset, "'%.*s': error at byte %zu, expected %zu (%s)", (int)len, text,
              err.offset, offset, err.message);
    CHECK_MSG(strstr(qkv_last_error(), "JSON: ") && strstr(qkv_last_error(), needle),
              "last error '%s'", qkv_last_error());
}
#define BAD(text, needle, offset) parse_bad(text, sizeof(text) - 1, needle, offset)

TEST(json_scalars_and_containers) {
    qkv_json_doc *doc = parse_ok(" {\"a\": [1, -2, 3.5, true, false, null, \"x\"], \"b\": {}, "
                                 "\"c\": [], \"d\": {\"e\": [[0]]}}\n");
    const qkv_json_value *root = qkv_json_root(doc);
    CHECK(root->type == QKV_JSON_OBJECT && root->count == 4);
    const qkv_json_value *a = qkv_json_get(root, "a");
    CHECK(a && a->type == QKV_JSON_ARRAY && a->count == 7);
    CHECK(a->items[0].type == QKV_JSON_INT && !a->items[0].negative && a->items[0].magnitude == 1);
    CHECK(a->items[1].type == QKV_JSON_INT && a->items[1].negative && a->items[1].magnitude == 2);
    CHECK(a->items[2].type == QKV_JSON_NUMBER && !strcmp(a->items[2].str, "3.5"));
    CHECK(a->items[3].type == QKV_JSON_BOOL && a->items[3].boolean);
    CHECK(a->items[4].type == QKV_JSON_BOOL && !a->items[4].boolean);
    CHECK(a->items[5].type == QKV_JSON_NULL);
    CHECK(a->items[6].type == QKV_JSON_STRING && !strcmp(a->items[6].str, "x") &&
          a->items[6].len == 1);
    CHECK(qkv_json_get(root, "b")->type == QKV_JSON_OBJECT && qkv_json_get(root, "b")->count == 0);
    CHECK(qkv_json_get(root, "c")->type == QKV_JSON_ARRAY && qkv_json_get(root, "c")->count == 0);
    const qkv_json_value *e = qkv_json_get(qkv_json_get(root, "d"), "e");
    CHECK(e && e->count == 1 && e->items[0].count == 1 && e->items[0].items[0].magnitude == 0);
    CHECK(qkv_json_get(root, "zz") == NULL && qkv_json_get(a, "a") == NULL);
    /* members keep document order and their key offsets */
    CHECK(!strcmp(root->items[0].key, "a") && root->items[0].offset == 2);
    CHECK(!strcmp(root->items[3].key, "d"));
    qkv_json_free(doc);

    /* any value may be the top level */
    doc = parse_ok("\"top\"");
    CHECK(qkv_json_root(doc)->type == QKV_JSON_STRING);
    qkv_json_free(doc);
    doc = parse_ok("7");
    CHECK(qkv_json_root(doc)->type == QKV_JSON_INT && qkv_json_root(doc)->magnitude == 7);
    qkv_json_free(doc);
    doc = parse_ok("-0.0e+5");
    CHECK(qkv_json_root(doc)->type == QKV_JSON_NUMBER &&
          !strcmp(qkv_json_root(doc)->str, "-0.0e+5"));
    qkv_json_free(doc);
}

TEST(json_integer_limits) {
    qkv_json_doc *doc = parse_ok("[18446744073709551615, 0, -0, 9223372036854775808, 1E2, 12e-1]");
    const qkv_json_value *r = qkv_json_root(doc);
    uint64_t u = 0;
    CHECK(qkv_json_u64(&r->items[0], &u) && u == UINT64_MAX);
    CHECK(qkv_json_u64(&r->items[1], &u) && u == 0);
    CHECK(qkv_json_u64(&r->items[2], &u) && u == 0); /* -0 is zero */
    CHECK(qkv_json_u64(&r->items[3], &u) && u == (uint64_t)1 << 63);
    CHECK(r->items[4].type == QKV_JSON_NUMBER && !qkv_json_u64(&r->items[4], &u));
    CHECK(r->items[5].type == QKV_JSON_NUMBER);
    qkv_json_free(doc);
    doc = parse_ok("-18446744073709551615");
    CHECK(qkv_json_root(doc)->negative && qkv_json_root(doc)->magnitude == UINT64_MAX);
    CHECK(!qkv_json_u64(qkv_json_root(doc), &u));
    qkv_json_free(doc);
    BAD("18446744073709551616", "integer out of range", 0);
    BAD("[1, 99999999999999999999]", "integer out of range", 4);
    BAD("-18446744073709551616", "integer out of range", 0);
    /* a huge number with a fraction or exponent is a NUMBER, not an overflow */
    doc = parse_ok("99999999999999999999.5");
    CHECK(qkv_json_root(doc)->type == QKV_JSON_NUMBER);
    qkv_json_free(doc);
}

TEST(json_string_escapes_and_unicode) {
    qkv_json_doc *doc =
        parse_ok("[\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t\", \"\\u00e9\\u20AC\", "
                 "\"\\ud83d\\ude00\", \"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\", "
                 "\"a\\u0000b\", \"\"]");
    const qkv_json_value *r = qkv_json_root(doc);
    CHECK(!strcmp(r->items[0].str, "q\" b\\ s/ \b\f\n\r\t"));
    CHECK(!strcmp(r->items[1].str, "\xc3\xa9\xe2\x82\xac")); /* U+00E9 U+20AC */
    CHECK(!strcmp(r->items[2].str, "\xf0\x9f\x98\x80"));     /* U+1F600 from a surrogate pair */
    CHECK(!strcmp(r->items[3].str, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80")); /* raw UTF-8 */
    CHECK(r->items[4].len == 3 && memcmp(r->items[4].str, "a\0b", 3) == 0);       /* \u0000 */
    CHECK(r->items[5].len == 0 && r->items[5].str[0] == '\0');
    qkv_json_free(doc);
    /* escaped keys are decoded too */
    doc = parse_ok("{\"k\\u0041\": 1}");
    CHECK(qkv_json_get(qkv_json_root(doc), "kA") != NULL);
    qkv_json_free(doc);
}

TEST(json_string_errors) {
    BAD("\"abc", "unterminated string", 4);
    BAD("\"abc\\", "unterminated string", 4);
    BAD("\"a\\x\"", "invalid escape", 2);
    BAD("\"\\u12g4\"", "4 hex digits", 1);
    BAD("\"\\u12\"", "4 hex digits", 1);
    BAD("\"\\ud800\"", "not followed by a low surrogate", 1);
    BAD("\"\\ud800\\u0041\"", "not followed by a low surrogate", 1);
    BAD("\"\\udc00\"", "unpaired low surrogate", 1);
    BAD("\"a\tb\"", "control character", 2);
    BAD("\"a\nb\"", "control character", 2);
    BAD("\"\xff\"", "invalid UTF-8", 1);
    BAD("\"\xc0\xaf\"", "invalid UTF-8", 1);         /* overlong '/' */
    BAD("\"\xe0\x80\xaf\"", "invalid UTF-8", 1);     /* overlong, 3 bytes */
    BAD("\"\xed\xa0\x80\"", "invalid UTF-8", 1);     /* an encoded surrogate */
    BAD("\"\xf4\x90\x80\x80\"", "invalid UTF-8", 1); /* above U+10FFFF */
    BAD("\"ab\xc3\"", "invalid UTF-8", 3);           /* truncated sequence */
    BAD("\"\x80\"", "invalid UTF-8", 1);             /* lone continuation byte */
}

TEST(json_structure_errors) {
    BAD("", "unexpected end of input", 0);
    BAD("   ", "unexpected end of input", 3);
    BAD("{", "unterminated object", 1);
    BAD("[1, 2", "unterminated array", 5);
    BAD("[1 2]", "expected ',' or ']'", 3);
    BAD("[1,]", "expected a value", 3);
    BAD("{\"a\":1,}", "expected a string key", 7);
    BAD("{\"a\" 1}", "expected ':'", 5);
    BAD("{a:1}", "expected a string key", 1);
    BAD("{\"a\":1 \"b\":2}", "expected ',' or '}'", 7);
    BAD("{} x", "unexpected characters after the JSON value", 3);
    BAD("{}{}", "unexpected characters after the JSON value", 2);
    BAD("tru", "invalid literal", 0);
    BAD("nul", "invalid literal", 0);
    BAD("True", "unexpected character", 0);
    BAD("01", "leading zeros", 0);
    BAD("[-01]", "leading zeros", 1);
    BAD("-", "expected a digit", 1);
    BAD("+1", "unexpected character", 0);
    BAD("1.", "after the decimal point", 2);
    BAD(".5", "unexpected character", 0);
    BAD("1e", "exponent", 2);
    BAD("1e+", "exponent", 3);
    BAD("[1]\x0b", "unexpected characters", 3); /* vertical tab is not JSON whitespace */
    BAD("{\"a\":1,\"b\":2,\"a\":3}", "duplicate key \"a\"", 13);
    BAD("{\"x\":{\"k\\u0041\":1,\"kA\":2}}", "duplicate key \"kA\"", 18);
    /* embedded NUL outside strings */
    parse_bad("[1]\0", 4, "unexpected characters", 3);
}

TEST(json_depth_limit) {
    char deep[2 * QKV_JSON_MAX_DEPTH + 8];
    /* exactly QKV_JSON_MAX_DEPTH nested arrays are fine */
    memset(deep, '[', QKV_JSON_MAX_DEPTH);
    memset(deep + QKV_JSON_MAX_DEPTH, ']', QKV_JSON_MAX_DEPTH);
    qkv_json_doc *doc = NULL;
    CHECK_OK(qkv_json_parse(deep, 2 * QKV_JSON_MAX_DEPTH, &doc, NULL));
    qkv_json_free(doc);
    /* one more is rejected at the innermost bracket, before any recursion past the limit */
    memset(deep, '[', QKV_JSON_MAX_DEPTH + 1);
    memset(deep + QKV_JSON_MAX_DEPTH + 1, ']', QKV_JSON_MAX_DEPTH + 1);
    parse_bad(deep, 2 * QKV_JSON_MAX_DEPTH + 2, "nesting deeper than", QKV_JSON_MAX_DEPTH);
    /* a very deep input stops at the limit too (no stack overflow) */
    size_t n = 1000000;
    char *huge = malloc(n);
    memset(huge, '{', n);
    huge[0] = '[';
    qkv_json_error err;
    CHECK(qkv_json_parse(huge, n, &doc, &err) == QKV_ERR_FORMAT && doc == NULL);
    free(huge);
}

TEST(json_many_members_and_duplicate_detection_scale) {
    /* 20000 members: the duplicate check sorts (n log n); then one duplicate at the end */
    const int n = 20000;
    size_t cap = (size_t)n * 24 + 64, k = 0;
    char *text = malloc(cap);
    k += (size_t)snprintf(text + k, cap - k, "{");
    for (int i = 0; i < n; i++)
        k += (size_t)snprintf(text + k, cap - k, "%s\"t%d\":%d", i ? "," : "", i, i);
    snprintf(text + k, cap - k, "}");
    qkv_json_doc *doc = parse_ok(text);
    const qkv_json_value *r = qkv_json_root(doc);
    CHECK(r->count == n && qkv_json_get(r, "t12345")->magnitude == 12345);
    qkv_json_free(doc);
    size_t dup_at = k + 1;
    snprintf(text + k, cap - k, ",\"t7\":1}");
    parse_bad(text, strlen(text), "duplicate key \"t7\"", dup_at);
    free(text);
}

TEST(json_utf8_validator) {
    CHECK(qkv_json_utf8_valid("abc \xc3\xa9 \xf0\x9f\x98\x80", 11));
    CHECK(!qkv_json_utf8_valid("\xc3", 1));
    CHECK(!qkv_json_utf8_valid("\xed\xbf\xbf", 3));
    CHECK(qkv_json_utf8_valid("", 0));
}
