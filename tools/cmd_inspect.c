/*
 * cmd_inspect.c: `qkv inspect FILE.safetensors`: the metadata (key = value), one line per tensor
 * (name, dtype, shape), then the tensor and parameter (element) counts. The file is fully
 * validated first (qkv_st_open); any problem is reported as "qkv inspect: FILE: reason".
 * Exit status: 0 on success, 1 when the file cannot be read or is malformed, 2 for usage errors.
 */
#include "cli_args.h"
#include "commands.h"
#include "qkv/qkv.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: qkv inspect FILE.safetensors\n\n"
               "List the metadata, tensors (name, dtype, shape) and parameter count of a\n"
               "safetensors file after validating it.\n\n"
               "example:\n"
               "  $ qkv inspect model.safetensors\n"
               "  metadata:\n"
               "    format = pt\n"
               "  tensors:\n"
               "    embed.weight  F32  (100, 16)\n"
               "    head.bias     F32  (100)\n"
               "  2 tensors, 1700 parameters\n");
}

/* Print s with control characters escaped, so a hostile file cannot drive the terminal. */
static void print_escaped(const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\n')
            fputs("\\n", stdout);
        else if (*p == '\t')
            fputs("\\t", stdout);
        else if (*p < 0x20 || *p == 0x7f)
            printf("\\x%02x", *p);
        else
            putchar(*p);
    }
}


int qkv_cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    bool options_done = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!options_done && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
            usage(stdout);
            return 0;
        }
        if (!options_done && !strcmp(a, "--")) {
            options_done = true;
        } else if (!options_done && a[0] == '-' && a[1]) {
            fprintf(stderr, "qkv inspect: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (path) {
            fprintf(stderr, "qkv inspect: one file at a time ('%s' and '%s')\n", path, a);
            return 2;
        } else {
            path = a;
        }
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    qkv_st_file *f = NULL;
    if (qkv_st_open(path, &f) != QKV_OK) {
        cli_print_error("qkv inspect: "); /* the message starts with the path */
        return 1;
    }
    int64_t n = qkv_st_count(f), n_meta = qkv_st_metadata_count(f);
    if (n_meta) printf("metadata:\n");
    for (int64_t i = 0; i < n_meta; i++) {
        const char *k, *v;
        qkv_st_metadata_at(f, i, &k, &v);
        printf("  ");
        print_escaped(k);
        printf(" = ");
        print_escaped(v);
        printf("\n");
    }
    size_t name_w = 0;
    for (int64_t i = 0; i < n; i++) {
        qkv_st_entry e;
        qkv_st_get(f, i, &e);
        size_t w = strlen(e.name);
        if (w > name_w) name_w = w < 60 ? w : 60;
    }
    if (n) printf("tensors:\n");
    uint64_t params = 0;
    for (int64_t i = 0; i < n; i++) {
        qkv_st_entry e;
        qkv_st_get(f, i, &e);
        uint64_t numel = 1;
        for (int d = 0; d < e.ndim; d++)
            numel *= (uint64_t)e.shape[d];
        params += numel; /* cannot overflow: the tensors' bytes fit in the file */
        printf("  ");
        print_escaped(e.name);
        printf("%*s  %-7s (", (int)(name_w > strlen(e.name) ? name_w - strlen(e.name) : 0), "",
               e.dtype_name);
        for (int d = 0; d < e.ndim; d++)
            printf(d ? ", %lld" : "%lld", (long long)e.shape[d]);
        printf(")\n");
    }
    printf("%lld tensor%s, %llu parameter%s\n", (long long)n, n == 1 ? "" : "s",
           (unsigned long long)params, params == 1 ? "" : "s");
    qkv_st_close(f);
    return 0;
}
