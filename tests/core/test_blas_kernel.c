/*
 * test_blas_kernel.c: the choice of OpenBLAS's kernel set (src/core/blas_kernel.c). The rule on
 * its inputs, case by case; then as it runs: this test process and the `qkv` CLI both start
 * through qkv_blas_reexec_with_advice, so on a CPU with AVX2 and FMA neither may be left on
 * OpenBLAS's generic SSE3 kernels ("Prescott") unless the user asked for them. On a CPU that
 * OpenBLAS 0.3.21 does not recognise (Intel Xeon model 207) that is exactly what happens without
 * the re-execution; elsewhere the checks hold by OpenBLAS's own choice.
 */
#include "tools/cli_util.h"
#include "core/internal.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TEST(blas_kernel_advice_rule) {
    /* Only a fallback to Prescott is corrected, only in a DYNAMIC_ARCH build, and only when the
     * user has not chosen. */
    CHECK(!strcmp(qkv__blas_kernel_advice_for("Prescott", NULL, true, true, true), "SkylakeX"));
    CHECK(!strcmp(qkv__blas_kernel_advice_for("Prescott", NULL, true, false, true), "Haswell"));
    CHECK(qkv__blas_kernel_advice_for("Prescott", NULL, true, false, false) == NULL); /* an old CPU */
    CHECK(qkv__blas_kernel_advice_for("Prescott", NULL, false, true, true) == NULL);  /* one target built */
    CHECK(qkv__blas_kernel_advice_for("Prescott", "Prescott", true, true, true) == NULL);
    CHECK(qkv__blas_kernel_advice_for("Prescott", "", true, true, true) == NULL); /* set, though empty */
    CHECK(qkv__blas_kernel_advice_for("Haswell", NULL, true, true, true) == NULL);  /* OpenBLAS's choice */
    CHECK(qkv__blas_kernel_advice_for("Zen", NULL, true, true, true) == NULL);
    CHECK(qkv__blas_kernel_advice_for("SkylakeX", NULL, true, true, true) == NULL);
    CHECK(qkv__blas_kernel_advice_for(NULL, NULL, true, true, true) == NULL);
}

/* Whether this CPU can run OpenBLAS's Haswell kernels, and the build runs OpenBLAS. */
static bool avx2_cpu_with_openblas(void) {
    const char *k = qkv_blas_kernel();
    if (!strcmp(k, "none") || !strcmp(k, "cblas")) return false;
#if defined(__x86_64__) && defined(__GNUC__)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

/* Whether it can run the SkylakeX ones. */
static bool avx512_cpu(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
#else
    return false;
#endif
}

TEST(blas_kernel_this_process_runs_the_advised_kernels) {
    /* The harness's main re-executed the suite if OpenBLAS had fallen back: no advice is left,
     * unless re-executing cannot work here (not Linux, no /proc). */
    if (qkv_blas_kernel_advice() != NULL && access("/proc/self/exe", X_OK) != 0)
        SKIP("OpenBLAS fell back to generic kernels and this system cannot re-execute a process");
    CHECK(qkv_blas_kernel_advice() == NULL);
    if (!avx2_cpu_with_openblas()) SKIP("no OpenBLAS or no AVX2 + FMA");
    const char *env = getenv("OPENBLAS_CORETYPE");
    if (env && !getenv("QKV_BLAS_REEXEC")) SKIP("OPENBLAS_CORETYPE set by the user");
    CHECK_MSG(strcmp(qkv_blas_kernel(), "Prescott") != 0, "OpenBLAS runs its generic kernels on an AVX2 CPU");
}

TEST(blas_kernel_cli_version_reports_the_advised_kernels) {
    if (!avx2_cpu_with_openblas()) SKIP("no OpenBLAS or no AVX2 + FMA");
    char out[1024];
    /* As a user starts it: neither variable set. */
    const int rc = cli_exec("env -u OPENBLAS_CORETYPE -u QKV_BLAS_REEXEC " QKV_CLI_PATH " --version", out, sizeof out);
    CHECK(rc == 0);
    const char *line = strstr(out, "blas kernels: ");
    CHECK_MSG(line != NULL, "no 'blas kernels:' line in: %s", out);
    if (!line) return;
    char kernel[64] = "";
    CHECK(sscanf(line, "blas kernels: %63s", kernel) == 1);
    CHECK_MSG(strcmp(kernel, "Prescott") != 0, "qkv runs OpenBLAS's generic kernels: %s", line);
    /* When qkv chose, it chose by the rule from what OpenBLAS had picked. */
    if (strstr(line, "set by qkv")) {
        const char *advised = qkv__blas_kernel_advice_for("Prescott", NULL, true, avx512_cpu(), true);
        CHECK_MSG(advised && !strcmp(kernel, advised), "qkv chose %s, the rule says %s", kernel,
                  advised ? advised : "nothing");
    }
    /* A value the user set is left alone. */
    CHECK(cli_exec("env -u QKV_BLAS_REEXEC OPENBLAS_CORETYPE=Haswell " QKV_CLI_PATH " --version", out, sizeof out) == 0);
    CHECK_MSG(strstr(out, "(OPENBLAS_CORETYPE set by the user)") != NULL, "%s", out);
}
