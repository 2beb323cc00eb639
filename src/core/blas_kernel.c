/*
 * blas_kernel.c: which of OpenBLAS's kernel sets runs qkv's products, and a way out when
 * OpenBLAS chose a slow one.
 *
 * OpenBLAS built with DYNAMIC_ARCH (Debian's, and most distributions') carries one kernel set per
 * CPU family and picks one when the library loads, from the CPU's vendor, family and model, or
 * from the environment variable OPENBLAS_CORETYPE when it is set. A CPU newer than the OpenBLAS
 * version falls through the model table to the generic SSE3 set, "Prescott", however wide its
 * vector units: OpenBLAS 0.3.21 (Debian 12) on an Intel Xeon of model 207 (Emerald Rapids, AVX-512)
 * runs sgemm at 64 GFLOP/s on two cores with Prescott, 307 with its AVX-512 set "SkylakeX" and 162
 * with its AVX2 set "Haswell" (BENCHMARKS.md). The variable is read once, at load
 * time, so a process can only act on it by starting again: qkv_blas_reexec_with_advice, for the
 * main of a program, sets it and re-executes the program.
 *
 * The advice is deliberately narrow: only an OpenBLAS built with DYNAMIC_ARCH (a single-target
 * build ignores the variable), only when it fell back to Prescott (never when it recognised the
 * CPU, even where another of its sets would be faster: on one AMD Zen 4 machine it chose its
 * AVX-512 set, and its Haswell set was faster there), and only when the user has not set
 * OPENBLAS_CORETYPE. SkylakeX needs AVX-512 F, DQ, BW and VL with the OS
 * saving the registers (what the compiler's cpu check tests); Haswell needs AVX2 and FMA.
 *
 * Results: another kernel set sums a product in another order, so the bits of every result
 * change with it (as they do between machines); the same kernel set, seed and thread count give
 * the same bits (docs/design.md, "Determinism").
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#if defined(__linux__)
#include <unistd.h>
#endif

#if defined(QKV_WITH_OPENBLAS)
/* OpenBLAS's own functions, declared here: the cblas.h CMake found may be another library's. */
char *openblas_get_corename(void);
char *openblas_get_config(void);
#endif

const char *qkv__blas_kernel_advice_for(const char *corename, const char *coretype_env, bool dynamic_arch,
                                        bool avx512, bool avx2_fma) {
    if (coretype_env != NULL) return NULL; /* the user's choice, even an empty one */
    if (!dynamic_arch) return NULL;         /* one kernel set built in: the variable changes nothing */
    if (corename == NULL || strcmp(corename, "Prescott") != 0) return NULL;
    if (avx512) return "SkylakeX";
    if (avx2_fma) return "Haswell";
    return NULL;
}

const char *qkv_blas_kernel(void) {
#if defined(QKV_WITH_OPENBLAS)
    const char *name = openblas_get_corename();
    return name != NULL ? name : "unknown";
#elif defined(QKV_WITH_BLAS)
    return "cblas";
#else
    return "none";
#endif
}

const char *qkv_blas_kernel_advice(void) {
#if defined(QKV_WITH_OPENBLAS) && defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
    const bool avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const char *config = openblas_get_config(); /* "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY ..." */
    const bool dynamic_arch = config != NULL && strstr(config, "DYNAMIC_ARCH") != NULL;
    return qkv__blas_kernel_advice_for(qkv_blas_kernel(), getenv("OPENBLAS_CORETYPE"), dynamic_arch, avx512,
                                       avx2_fma);
#else
    return NULL;
#endif
}

qkv_status qkv_blas_reexec_with_advice(char **argv) {
    const char *advice = qkv_blas_kernel_advice();
    if (advice == NULL) return QKV_OK;
#if defined(__linux__)
    if (argv == NULL || argv[0] == NULL)
        return qkv_set_error(QKV_ERR_INVALID_ARG, "qkv_blas_reexec_with_advice: argv is NULL or empty");
    /* Started through the dynamic loader (ld-linux-x86-64.so.2 ./qkv ...), /proc/self/exe is the
     * loader and argv is not its command line: nothing to re-execute safely. */
    char exe[4096];
    const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        const char *slash = strrchr(exe, '/'), *base = slash ? slash + 1 : exe;
        if (strncmp(base, "ld-", 3) == 0 || strncmp(base, "ld.so", 5) == 0)
            return qkv_set_error(QKV_ERR_UNSUPPORTED, "started through the dynamic loader: set OPENBLAS_CORETYPE=%s "
                                 "to run OpenBLAS's %s kernels instead of its generic ones", advice, advice);
    }
    /* QKV_BLAS_REEXEC says who set the variable and why (qkv --version prints it). */
    if (setenv("OPENBLAS_CORETYPE", advice, 1) != 0 || setenv("QKV_BLAS_REEXEC", qkv_blas_kernel(), 1) != 0)
        return qkv_set_error(QKV_ERR_BACKEND, "cannot set OPENBLAS_CORETYPE=%s", advice);
    execv("/proc/self/exe", argv); /* returns only on failure */
    const int err = errno;
    unsetenv("OPENBLAS_CORETYPE"); /* the environment as it was: this process runs on Prescott */
    unsetenv("QKV_BLAS_REEXEC");
    return qkv_set_error(QKV_ERR_BACKEND, "cannot re-execute with OPENBLAS_CORETYPE=%s (%s); running "
                         "on OpenBLAS's generic kernels", advice, strerror(err));
#else
    return qkv_set_error(QKV_ERR_UNSUPPORTED, "OpenBLAS runs generic kernels here: set OPENBLAS_CORETYPE=%s "
                         "before starting the program", advice);
#endif
}
