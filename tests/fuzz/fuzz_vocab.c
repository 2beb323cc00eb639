/*
 * fuzz_vocab.c: libFuzzer target for vocabulary files (qkv_vocab_load: src.vocab, tgt.vocab)
 * and the feature vocabularies of the encoder-only tasks (tools/encoder_input.c: enc_input_load
 * reads src.vocab and feat.<name>.vocab of a run; enc_input_token looks a word and its spelling
 * features up in them).
 *
 * Also the lookup of `qkv decode` input lines in a run's source vocabulary (run_dir_encode), with
 * the file's own lines as the inputs.
 *
 * Input: one byte of options (bits 0-2: how many spelling features the run has, 0 .. 7; bit 3:
 * the inputs are cut by the tokens tokenizer, else bit 4: by words, else by characters), then the file's bytes, written as
 * src.vocab and as every feat.<name>.vocab.
 *
 * Invariants: the file loads or is refused with a "FILE:LINE" message; a loaded vocabulary starts
 * with the four reserved symbols, finds every symbol at its id, saves back to the same bytes (the
 * file with its last line end) and still finds every symbol after sorting, in byte order;
 * enc_input_load agrees with qkv_vocab_load; every looked-up word and feature id is in range; an
 * input line is encoded into at most its limit of ids in range, or refused with a message.
 */
#include "fuzz_util.h"

#include "encoder_input.h"
#include "qkv/qkv_data.h"
#include "run_dir.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    return 0;
}

static void check_symbols(const qkv_vocab *v) {
    fz_require_vocab_table(v);
    FZ_REQUIRE(qkv_vocab_symbol(v, qkv_vocab_size(v)) == NULL && qkv_vocab_symbol(v, -1) == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_reader r = {data, size};
    const uint8_t opts = fz_byte(&r);
    const int n_features = opts & 7;
    const char *path = fz_path("src.vocab");
    fz_write_file(path, r.p, r.n);
    qkv_vocab *v = NULL;
    qkv_status st = qkv_vocab_load(path, &v);
    FZ_REQUIRE((st == QKV_OK) == (v != NULL));
    FZ_REQUIRE(st == QKV_OK || (st == QKV_ERR_FORMAT && qkv_last_error()[0] != '\0'));
    if (v) {
        check_symbols(v);
        const char *saved = fz_path("saved.vocab");
        FZ_REQUIRE(qkv_vocab_save(v, saved) == QKV_OK);
        size_t n = 0;
        char *bytes = fz_read_file(saved, &n);
        FZ_REQUIRE(bytes != NULL);
        const bool ends = r.n && r.p[r.n - 1] == '\n';
        FZ_REQUIRE(n == r.n + !ends && !memcmp(bytes, r.p, r.n));
        free(bytes);
        remove(saved);
        /* `qkv decode` input lines looked up in it (run_dir_encode), by characters or tokens */
        run_dir rd;
        memset(&rd, 0, sizeof rd);
        rd.src = v;
        const qkv_tokenizer *tok = qkv_tokenizer_shared((opts >> 3) & 1   ? QKV_TOKENIZER_TOKENS
                                                        : (opts >> 4) & 1 ? QKV_TOKENIZER_WORDS
                                                                          : QKV_TOKENIZER_CHARS);
        fz_reader lines = r;
        for (int64_t line = 1; lines.n && line <= 16; line++) {
            size_t len;
            const char *s = fz_field(&lines, '\n', &len);
            char *text = fz_strndup(s, len);
            int32_t ids[16];
            int64_t count = -1;
            qkv_status est = run_dir_encode(&rd, "input.txt", line, text, tok, ids, 16, &count);
            FZ_REQUIRE(est == QKV_OK || qkv_last_error()[0] != '\0');
            if (!est) {
                FZ_REQUIRE(count >= 0 && count <= 16);
                for (int64_t k = 0; k < count; k++)
                    FZ_REQUIRE(ids[k] >= 0 && ids[k] < qkv_vocab_size(v));
            }
            free(text);
        }
        FZ_REQUIRE(qkv_vocab_sort(v) == QKV_OK);
        check_symbols(v);
        for (int32_t id = QKV_VOCAB_RESERVED + 1; id < qkv_vocab_size(v); id++) {
            const char *a = qkv_vocab_symbol(v, id - 1), *b = qkv_vocab_symbol(v, id);
            const size_t la = strlen(a), lb = strlen(b);
            const int c = memcmp(a, b, la < lb ? la : lb);
            FZ_REQUIRE(c < 0 || (c == 0 && la < lb));
        }
    }

    /* the same bytes as a run's word and feature vocabularies */
    enc_input_settings s = {.min_count = 1, .feature_min_count = 1, .n_features = n_features};
    for (int k = 0; k < n_features; k++) {
        s.features[k] = (qkv_word_feature)(k * 4 % QKV_FEAT_COUNT); /* distinct for k < 9 */
        char name[64];
        snprintf(name, sizeof name, "feat.%s.vocab", qkv_word_feature_name(s.features[k]));
        fz_write_file(fz_path(name), r.p, r.n);
    }
    enc_input in;
    qkv_status st2 = enc_input_load(&in, &s, fz_dir(), NULL);
    FZ_REQUIRE((st2 == QKV_OK) == (st == QKV_OK));
    if (!st2) {
        /* look up a few symbols (and a word made of the input's first bytes) with their features */
        int32_t word = -1, feats[QKV_FEAT_COUNT];
        for (int32_t id = 0; id < qkv_vocab_size(v) && id < 8; id++) {
            const char *sym = qkv_vocab_symbol(v, id);
            FZ_REQUIRE(enc_input_token(&in, sym, strlen(sym), &word, feats) == QKV_OK);
            FZ_REQUIRE(word >= 0 && word < qkv_vocab_size(in.words));
            for (int k = 0; k < n_features; k++)
                FZ_REQUIRE(feats[k] >= 0 && feats[k] < qkv_vocab_size(in.feat[k]));
        }
        enc_input_free(&in);
    }
    for (int k = 0; k < n_features; k++) {
        char name[64];
        snprintf(name, sizeof name, "feat.%s.vocab", qkv_word_feature_name(s.features[k]));
        remove(fz_path(name));
    }
    qkv_vocab_free(v);
    remove(path);
    return 0;
}
