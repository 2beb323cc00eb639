/*
 * cmd_list.c: `qkv list [NAME...]`: the library's enumerations (qkv_registry.h) with every value
 * and its help line: the names that configuration files (docs/cli.md) and model files
 * ("qkv.config") accept. Without a NAME, every enumeration.
 * Exit status: 0, or 2 for an unknown NAME or option.
 */
#include "commands.h"
#include "qkv/qkv.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: qkv list [NAME...]\n\n"
               "The values of the library's enumerations, each with what it is: the names that\n"
               "configuration files and model files accept. NAME is one of:");
    for (int i = 0; i < QKV_REGISTRY_COUNT; i++) fprintf(f, "%s %s", i ? "," : "", qkv_registry_get(i)->name);
    fprintf(f, "\n\nexample:\n"
               "  $ qkv list norm\n"
               "  norm: attention normaliser (qkv_attn_norm)\n"
               "    softmax       exp(e_j) / sum_k exp(e_k) over the allowed keys\n"
               "    ...\n");
}

static void print_registry(const qkv_registry *r) {
    int width = 0;
    for (int i = 0; i < r->count; i++) {
        const int n = (int)strlen(r->entries[i].name);
        if (n > width) width = n;
    }
    printf("%s: %s (%s)\n", r->name, r->what, r->c_type);
    for (int i = 0; i < r->count; i++)
        printf("  %-*s  %s\n", width, r->entries[i].name, r->entries[i].help);
}

int qkv_cmd_list(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!qkv_registry_by_name(argv[i])) {
            fprintf(stderr, "qkv list: unknown %s '%s' (qkv list --help names them)\n",
                    argv[i][0] == '-' ? "option" : "enumeration", argv[i]);
            return 2;
        }
    }
    int printed = 0;
    for (int i = 1; i < argc; i++, printed++) {
        if (printed) printf("\n");
        print_registry(qkv_registry_by_name(argv[i]));
    }
    for (int i = 0; argc < 2 && i < QKV_REGISTRY_COUNT; i++, printed++) {
        if (printed) printf("\n");
        print_registry(qkv_registry_get(i));
    }
    return 0;
}
