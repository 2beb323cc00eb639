/*
 * test_cli_score.c: `qkv score` as a user runs it (the built binary, QKV_CLI_PATH): sacreBLEU's
 * README example (two reference files; BLEU 48.53 with its score line and signature, chrF2 59.73)
 * from a file and from stdin, the options reaching the signature, bootstrap intervals repeating
 * for a seed, and bad input: line counts that differ, invalid UTF-8, an empty file, unknown
 * metrics and names, no reference: a message, exit 1 or 2.
 */
#include "cli_util.h"
#include "harness.h"

#include <stdio.h>
#include <string.h>

TEST(cli_score) {
    cli_run r;
    if (!cli_run_new(&r)) {
        CHECK(false);
        return;
    }
    char ref1[96], ref2[96], hyp[96], bad[96], out[4096], again[4096];
    snprintf(ref1, sizeof ref1, "%s/ref1.txt", r.dir);
    snprintf(ref2, sizeof ref2, "%s/ref2.txt", r.dir);
    snprintf(hyp, sizeof hyp, "%s/hyp.txt", r.dir);
    snprintf(bad, sizeof bad, "%s/bad.txt", r.dir);
    /* sacreBLEU's README (2.x): "Using the Python API" */
    cli_write_file(ref1, "The dog bit the man.\nIt was not unexpected.\nThe man bit him first.\n");
    cli_write_file(ref2, "The dog bit the man.\nNo one was surprised.\nThe man had bitten the dog.\n");
    cli_write_file(hyp, "The dog bit the man.\nIt wasn't surprising.\nThe man had just bitten him.\n");
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " score %s %s -i %s --width 2", ref1, ref2, hyp) == 0);
    CHECK_MSG(!strcmp(out, "BLEU|nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.0.0 = 48.53 82.4/50.0/45.5/37.5 "
                           "(BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)\n"
                           "chrF2|nrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.0.0 = 59.73\n"),
              "qkv score printed '%s'", out);
    CHECK(cli_execf(again, sizeof again, QKV_CLI_PATH " score %s %s --width 2 < %s", ref1, ref2, hyp) == 0);
    CHECK(!strcmp(out, again));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " score %s -i %s --metrics chrf++ --lowercase", ref1, hyp) == 0);
    CHECK(strstr(out, "chrF2++|nrefs:1|case:lc|eff:yes|nc:6|nw:2|space:no|version:2.0.0 = ") && !strstr(out, "BLEU"));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " score %s -i %s --metrics bleu --tokenize none --smooth floor", ref1,
              hyp) == 0);
    CHECK(strstr(out, "BLEU|nrefs:1|case:mixed|eff:no|tok:none|smooth:floor[0.10]|version:2.0.0 = "));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " score %s %s -i %s --confidence --resamples 200 --seed 7", ref1, ref2,
              hyp) == 0);
    CHECK(strstr(out, "BLEU|nrefs:2|bs:200|seed:7|") && strstr(out, "(μ = "));
    CHECK(cli_execf(again, sizeof again, QKV_CLI_PATH " score %s %s -i %s --confidence --resamples 200 --seed 7", ref1, ref2,
              hyp) == 0);
    CHECK(!strcmp(out, again));

    /* bad input */
    cli_write_file(bad, "one\ntwo\n");
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " score %s -i %s", bad, hyp) == 1);
    CHECK(strstr(out, "bad.txt has 2 lines, the hypotheses (") && strstr(out, "hyp.txt) 3"));
    cli_write_file(bad, "The dog.\nIt \xc3(.\nThe man.\n");
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " score %s -i %s", ref1, bad) == 1);
    CHECK(strstr(out, "qkv score: ") && strstr(out, "bad.txt:2: ") && strstr(out, "UTF-8"));
    cli_write_file(bad, "");
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " score %s -i %s", bad, bad) == 1);
    CHECK(strstr(out, "bad.txt: no hypothesis to score"));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " score %s -i %s/none.txt", ref1, r.dir) == 1);
    CHECK(strstr(out, "none.txt: cannot open"));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " score %s -i %s --metrics bleu,ter", ref1, hyp) == 2);
    CHECK(strstr(out, "unknown metric 'ter' in --metrics (bleu, chrf, chrf++)"));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " score %s -i %s --tokenize intl", ref1, hyp) == 2);
    CHECK(strstr(out, "--tokenize: ") && strstr(out, "'intl'") && strstr(out, "13a, none"));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " score -i %s", hyp) == 2);
    CHECK(strstr(out, "no reference file"));
    CHECK(cli_execf(out, sizeof out, QKV_CLI_PATH " score %s -i %s --width 11", ref1, hyp) == 2);
    CHECK(strstr(out, "--width needs an integer in 0..10 (got '11')"));
    cli_run_remove(&r);
}
