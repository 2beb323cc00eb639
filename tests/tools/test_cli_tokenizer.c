/*
 * test_cli_tokenizer.c: `qkv tokenizer learn / encode / decode` as a user runs them (the built
 * binary, QKV_CLI_PATH), in a temporary directory:
 *   - learn writes the model the library learns from the same lines (Sennrich et al.'s words, by
 *     hand in test_bpe.c), joint over several files and from one TAB-separated field;
 *   - encode prints the symbols, decode gives every line back byte for byte, with --field only
 *     that field rewritten; chars and words work as well;
 *   - bad input: a corrupt or missing model, invalid UTF-8, a line without the field, unknown
 *     options, a full disk: a message naming the file and line, exit 1 or 2, no model written.
 */
#include "cli_util.h"
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define M "\xe2\x96\x81"

TEST(cli_tokenizer_learn_encode_decode) {
    cli_run r;
    if (!cli_run_new(&r)) {
        CHECK(false);
        return;
    }
    char a[128], b[128], pairs[128], model[128], text[128], out[8192];
    snprintf(a, sizeof a, "%s/a.txt", r.dir);
    snprintf(b, sizeof b, "%s/b.txt", r.dir);
    snprintf(pairs, sizeof pairs, "%s/pairs.tsv", r.dir);
    snprintf(model, sizeof model, "%s/m.bpe", r.dir);
    snprintf(text, sizeof text, "%s/text.txt", r.dir);
    cli_write_file(a, "low low low low low\nlower lower\n");
    cli_write_file(b, "newest newest newest newest newest newest\nwidest widest widest\n");
    const char *want_model = "#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: deilnorstw\n#merges: 15\n"
                             "s t\ne st\n" M " l\n" M "l o\n" M "lo w\n" M " n\n" M "n e\n" M "ne w\n" M "new est\n" M
                             " w\n" M "w i\n" M "wi d\n" M "wid est\n" M "low e\n" M "lowe r\n";
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " tokenizer learn -o %s %s %s", model, a, b) == 0);
    CHECK(strstr(out, "m.bpe: 15 merges, 11 characters (4 lines): no pair left at --min-frequency"));
    char want_path[160];
    snprintf(want_path, sizeof want_path, "%s/want.bpe", r.dir);
    cli_write_file(want_path, want_model);
    CHECK(cli_same_file(model, want_path));
    /* the same from the second field of a pairs file, and from stdin */
    cli_write_file(pairs, "1\tlow low low low low\n2\tlower lower\n3\tnewest newest newest newest newest newest\n"
                          "4\twidest widest widest\n");
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " tokenizer learn --field 2 -o %s %s", model, pairs) == 0);
    CHECK(cli_same_file(model, want_path));
    CHECK(cli_execf(out, sizeof out, "cat %s %s | " QKV_CLI_PATH " tokenizer learn -o %s", a, b, model) == 0);
    CHECK(cli_same_file(model, want_path));
    /* a joint model of both fields: the lines of a with those of b beside them */
    cli_write_file(pairs, "low low low low low\tnewest newest newest newest newest newest\nlower lower\twidest widest widest\n");
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " tokenizer learn --field 1,2 -o %s %s", model, pairs) == 0);
    CHECK(cli_same_file(model, want_path));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " tokenizer learn --field 1,x -o %s %s", model, pairs) == 2);
    CHECK(strstr(out, "--field needs up to 8 integers in 1..1000, separated by commas (got '1,x')"));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " tokenizer learn --merges 3 -o %s %s %s", model, a, b) == 0);
    CHECK(strstr(out, "3 merges") && !strstr(out, "no pair left"));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " tokenizer learn -o %s %s %s", model, a, b) == 0);

    /* encode and decode */
    cli_write_file(text, "lowest newer\n  widest \xe2\x98\x83\tlow\n\n");
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " tokenizer encode --model %s %s", model, text) == 0);
    CHECK_MSG(!strcmp(out, M "low est " M "new e r\n" M " " M " " M "widest " M " <0xE2> <0x98> <0x83> <0x09> l o w\n\n"),
              "encode printed '%s'", out);
    char enc[160];
    snprintf(enc, sizeof enc, "%s/enc.txt", r.dir);
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " tokenizer encode --model %s %s > %s && " QKV_CLI_PATH
                               " tokenizer decode --model %s %s > %s/dec.txt && cmp %s %s/dec.txt",
              model, text, enc, model, enc, r.dir, text, r.dir) == 0);
    /* --field: only the second field */
    cli_write_file(pairs, "lowest\tlowest newer\tx\n");
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " tokenizer encode --model %s --field 2 %s", model, pairs) == 0);
    CHECK_MSG(!strcmp(out, "lowest\t" M "low est " M "new e r\tx\n"), "encode --field 2 printed '%s'", out);
    CHECK(cli_execf(out, sizeof out,
              QKV_CLI_PATH " tokenizer encode --model %s --field 2 %s | " QKV_CLI_PATH
                           " tokenizer decode --model %s --field 2 | cmp - %s",
              model, pairs, model, pairs) == 0);
    /* tokenizers without a model */
    CHECK(cli_execf(out, sizeof out, "printf 'a  b\\n' | " QKV_CLI_PATH " tokenizer encode --tokenizer words") == 0);
    CHECK(!strcmp(out, "a b\n"));
    CHECK(cli_execf(out, sizeof out, "printf 'ab\\n' | " QKV_CLI_PATH " tokenizer encode") == 0);
    CHECK(!strcmp(out, "a b\n"));
    CHECK(cli_execf(out, sizeof out, "printf 'a b\\n' | " QKV_CLI_PATH " tokenizer encode --tokenizer chars") == 1);
    CHECK(strstr(out, "a symbol that holds a space"));
    cli_run_remove(&r);
}

TEST(cli_tokenizer_bad_input) {
    cli_run r;
    if (!cli_run_new(&r)) {
        CHECK(false);
        return;
    }
    char model[128], bad[128], text[128], out[8192];
    snprintf(model, sizeof model, "%s/m.bpe", r.dir);
    snprintf(bad, sizeof bad, "%s/bad.bpe", r.dir);
    snprintf(text, sizeof text, "%s/text.txt", r.dir);
    cli_write_file(text, "good line\nbad \xc3( line\n");
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " tokenizer learn -o %s %s", model, text) == 1);
    CHECK(strstr(out, "qkv tokenizer learn:") && strstr(out, "text.txt:2: invalid UTF-8 at byte 5 of the line"));
    CHECK(!cli_exists(model));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " tokenizer learn -o %s --field 2 %s", model, text) == 1);
    CHECK(strstr(out, "text.txt:1: the line has 1 TAB-separated field, --field 2 asks for field 2"));
    CHECK(!cli_exists(model));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " tokenizer learn %s", text) == 2);
    CHECK(strstr(out, "-o MODEL is required"));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " tokenizer learn -o %s --merges -1 %s", model, text) == 2);
    CHECK(strstr(out, "--merges needs an integer in 0..10000000 (got '-1')"));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " tokenizer learn -o %s/no/dir/m.bpe %s", r.dir, "/dev/null") == 1);
    CHECK(strstr(out, "no/dir/m.bpe"));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " tokenizer learn -o %s %s/missing.txt", model, r.dir) == 1);
    CHECK(strstr(out, "missing.txt: cannot open"));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " tokenizer split x") == 2);
    CHECK(strstr(out, "unknown subcommand 'split'"));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " tokenizer encode --merges 3") == 2);
    CHECK(strstr(out, "unknown option or missing value: --merges"));

    /* models */
    cli_write_file(bad, "#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: ab\n#merges: 2\na b\n");
    CHECK(cli_execf(out, sizeof out, "echo ab | " QKV_CLI_PATH " tokenizer encode --model %s", bad) == 1);
    CHECK(strstr(out, "bad.bpe:6: the file ends after 1 of its 2 merges"));
    cli_write_file(bad, "#version: 0.2\na b\n");
    CHECK(cli_execf(out, sizeof out, "echo ab | " QKV_CLI_PATH " tokenizer decode --model %s", bad) == 1);
    CHECK(strstr(out, "bad.bpe:1: not a BPE model of qkv"));
    CHECK(cli_execf(out, sizeof out, "echo ab | " QKV_CLI_PATH " tokenizer encode --model %s/none.bpe", r.dir) == 1);
    CHECK(strstr(out, "none.bpe: cannot open"));
    CHECK(cli_execf(out, sizeof out, "echo ab | " QKV_CLI_PATH " tokenizer encode --tokenizer bpe") == 2);
    CHECK(strstr(out, "tokenizer 'bpe' needs its model file"));
    CHECK(cli_execf(out, sizeof out, "echo ab | " QKV_CLI_PATH " tokenizer encode --tokenizer chars --model %s", bad) == 2);
    CHECK(strstr(out, "tokenizer 'chars' takes no model file"));
    CHECK(cli_execf(out, sizeof out, "echo ab | " QKV_CLI_PATH " tokenizer encode --tokenizer unigram") == 2);
    CHECK(strstr(out, "unknown tokenizer 'unigram'"));

    /* inputs: invalid UTF-8 and a missing field name their line; decode refuses a double space */
    cli_write_file(model, "#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: ab\n#merges: 1\na b\n");
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " tokenizer encode --model %s %s", model, text) == 1);
    CHECK(strstr(out, "qkv tokenizer encode: ") && strstr(out, "text.txt:2: invalid UTF-8 at byte 5 of the line"));
    CHECK(cli_execf(out, sizeof out, "printf 'a\\tb\\n' | " QKV_CLI_PATH " tokenizer encode --model %s --field 3", model) == 1);
    CHECK(strstr(out, "<stdin>:1: the line has 2 TAB-separated fields, --field 3 asks for field 3"));
    CHECK(cli_execf(out, sizeof out, "printf '" M "ab  b\\n' | " QKV_CLI_PATH " tokenizer decode --model %s", model) == 1);
    CHECK(strstr(out, "<stdin>:1: empty token in the line"));
    /* a training run: bpe needs its model file, chars takes none */
    char conf[160];
    snprintf(conf, sizeof conf, "%s/run.conf", r.dir);
    cli_write_file(text, "ab\tb a\n");
    char keys[512];
    snprintf(keys, sizeof keys,
             "task = seq2seq\ndata.train = %s\ndata.dev = %s\nout.dir = %s/run\ndata.src_tokenizer = bpe\n", text, text,
             r.dir);
    cli_write_file(conf, keys);
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " train %s", conf) == 1);
    CHECK(strstr(out, "run.conf:5: the tokenizer 'bpe' needs its model file: data.src_tokenizer_model = PATH"));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " train %s --set data.src_tokenizer=chars --set data.src_tokenizer_model=%s",
                    conf, model) == 1);
    CHECK(strstr(out, "data.src_tokenizer_model: the tokenizer 'chars' takes no model file"));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " train %s --set data.src_tokenizer_model=%s/none.bpe", conf, r.dir) == 1);
    CHECK(strstr(out, "none.bpe: cannot open"));
    /* a full disk */
    CHECK(cli_execf(out, sizeof out, "(echo ab | " QKV_CLI_PATH " tokenizer encode --model %s > /dev/full)", model) == 1);
    CHECK(strstr(out, "cannot write the output"));
    cli_run_remove(&r);
}

/* A seq2seq run on subwords: the models travel into the run directory, task.conf names them,
 * --resume ends where an uninterrupted run ends, and decoding reads raw text and writes text. */
TEST(cli_tokenizer_bpe_run) {
    cli_run r;
    if (!cli_run_new(&r)) {
        CHECK(false);
        return;
    }
    static const char *const en[] = {"the", "dog", "cat", "sees", "eats", "big", "small", "house"};
    static const char *const es[] = {"el", "perro", "gato", "ve", "come", "grande", "pequeño", "casa"};
    FILE *f = fopen(r.train, "w");
    unsigned x = 7;
    for (int i = 0; f && i < 80; i++) {
        int w[5];
        for (int k = 0; k < 5; k++)
            w[k] = (int)((x = x * 1103515245u + 12345u) >> 16) % 8;
        fprintf(f, "%s %s %s %s %s\t%s %s %s %s %s\n", en[w[0]], en[w[1]], en[w[2]], en[w[3]], en[w[4]], es[w[0]],
                es[w[1]], es[w[2]], es[w[3]], es[w[4]]);
    }
    if (f) fclose(f);
    char src[96], tgt[96], out[8192], keys[1024];
    snprintf(src, sizeof src, "%s/en.bpe", r.dir);
    snprintf(tgt, sizeof tgt, "%s/es.bpe", r.dir);
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " tokenizer learn --merges 30 --field 1 -o %s %s", src, r.train) == 0);
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " tokenizer learn --merges 30 --field 2 -o %s %s", tgt, r.train) == 0);
    snprintf(keys, sizeof keys,
             "task = seq2seq\ndata.train = %s\ndata.dev = %s\nout.dir = %s\neval.strategy = greedy\n"
             "data.src_tokenizer = bpe\ndata.src_tokenizer_model = %s\ndata.tgt_tokenizer = bpe\n"
             "data.tgt_tokenizer_model = %s\nmodel.d_model = 16\nmodel.heads = 2\nmodel.encoder_layers = 1\n"
             "model.decoder_layers = 1\nmodel.ff = 32\nmodel.dropout = 0.1\ntrain.steps = 16\ntrain.eval_every = 8\n"
             "train.max_tokens = 256\ntrain.threads = 1\neval.metric = bleu\n",
             r.train, r.train, r.run_dir, src, tgt);
    cli_write_file(r.conf, keys);
    CHECK(cli_train_straight_and_resumed(&r, 8, out, sizeof out));
    char path[160], straight[160];
    snprintf(straight, sizeof straight, "%s/straight", r.dir);
    static const char *const files[] = {"model.safetensors", "last.safetensors", "src.vocab", "tgt.vocab",
                                        "src.bpe",           "tgt.bpe",          "task.conf"};
    const char *differs = cli_first_different(straight, r.run_dir, files, 7);
    CHECK_MSG(!differs, "%s differs between the uninterrupted and the resumed run", differs);
    snprintf(path, sizeof path, "%s/src.bpe", r.run_dir);
    CHECK(cli_same_file(path, src));
    snprintf(path, sizeof path, "%s/tgt.bpe", r.run_dir);
    CHECK(cli_same_file(path, tgt));
    CHECK(cli_execf(out, sizeof out, "grep -c 'data.src_tokenizer_model = src.bpe\\|data.tgt_tokenizer_model = tgt.bpe' "
                                     "%s/task.conf", r.run_dir) == 0 && !strcmp(out, "2\n"));
    /* the byte symbols are in both vocabularies: an unseen character is no unknown symbol */
    CHECK(cli_execf(out, sizeof out, "grep -c '^<0x' %s/src.vocab %s/tgt.vocab", r.run_dir, r.run_dir) == 0 &&
          strstr(out, "src.vocab:256") && strstr(out, "tgt.vocab:256"));
    /* model.share_embeddings: one vocabulary of both sides, the same file twice */
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " train %s --set model.share_embeddings=true --set train.steps=2 "
                                     "--set out.dir=%s/shared",
                    r.conf, r.dir) == 0);
    char sv[160], tv[160];
    snprintf(sv, sizeof sv, "%s/shared/src.vocab", r.dir);
    snprintf(tv, sizeof tv, "%s/shared/tgt.vocab", r.dir);
    CHECK(cli_same_file(sv, tv));
    /* and its symbols are those of the two vocabularies of the unshared run */
    CHECK(cli_execf(out, sizeof out, "LC_ALL=C sort -u %s/src.vocab %s/tgt.vocab > %s/union && LC_ALL=C sort %s | cmp - %s/union",
                    r.run_dir, r.run_dir, r.dir, sv, r.dir) == 0);
    CHECK(cli_execf(out, sizeof out, "echo the dog | " QKV_CLI_PATH " decode %s/shared --greedy", r.dir) == 0);
    /* the run's copies serve decoding once the originals are gone */
    CHECK(remove(src) == 0 && remove(tgt) == 0);
    CHECK(cli_execf(out, sizeof out, "printf 'the big dog\\nthe \\342\\230\\203 cat\\n' | " QKV_CLI_PATH " decode %s --greedy",
                    r.run_dir) == 0);
    /* joined text: no symbol spellings (a model this small may emit any byte: U+FFFD then) */
    CHECK_MSG(strstr(out, "the big dog\t") && strstr(out, "\nthe \xe2\x98\x83 cat\t") && !strstr(out, "<0x"),
              "decode printed '%s'", out);
    /* eval.metric = bleu: the dev BLEU picks the model; qkv eval's BLEU is qkv score's on what qkv decode prints */
    CHECK(cli_execf(out, sizeof out, "grep -c '\"dev_bleu\"' %s/log.jsonl", r.run_dir) == 0 && !strcmp(out, "2\n"));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " eval %s %s --greedy", r.run_dir, r.train) == 0);
    const char *bleu = strstr(out, "\nBLEU|nrefs:1|");
    char *end = bleu ? strchr(bleu + 1, '\n') : NULL;
    CHECK_MSG(bleu && end && strstr(out, "80 sentences"), "qkv eval printed '%s'", out);
    char want[512] = "", score[4096];
    if (bleu && end) snprintf(want, sizeof want, "%.*s", (int)(end - bleu - 1), bleu + 1);
    CHECK(cli_execf(score, sizeof score,
                    "cut -f1 %s | " QKV_CLI_PATH " decode %s --greedy | cut -f2 > %s/hyp.txt && cut -f2 %s > %s/ref.txt && "
                    QKV_CLI_PATH " score %s/ref.txt -i %s/hyp.txt --metrics bleu --width 2",
                    r.train, r.run_dir, r.dir, r.train, r.dir, r.dir, r.dir) == 0);
    CHECK_MSG(want[0] && !strncmp(score, want, strlen(want)), "qkv score printed '%s', qkv eval '%s'", score, want);
    /* a corrupt copy is named */
    snprintf(path, sizeof path, "%s/tgt.bpe", r.run_dir);
    cli_write_file(path, "#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: ab\n#merges: 3\na b\n");
    CHECK(cli_execf(out, sizeof out, "echo the | " QKV_CLI_PATH " decode %s --greedy", r.run_dir) == 1);
    CHECK(strstr(out, "tgt.bpe:6: the file ends after 1 of its 3 merges"));
    cli_run_remove(&r);
}
