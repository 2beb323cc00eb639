/*
 * cmd_list.c: `qkv list [NAME...]`: the library's enumerations (qkv_registry.h) and the CLI's
 * task families (task.h) with every value and its help line: the names that configuration files
 * (docs/cli.md) and model files ("qkv.config") accept. Without a NAME, every one.
 * Exit status: 0, or 2 for an unknown NAME or option.
 */
#include "commands.h"
#include "task.h"
#include "qkv/qkv.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: qkv list [NAME...]\n\n"
               "The values of the library's enumerations, each with what it is: the names that\n"
               "configuration files and model files accept. NAME is one of:");
    for (int i = 0; i < QKV_REGISTRY_COUNT; i++) fprintf(f, "%s %s", i ? "," : "", qkv_registry_get(i)->name);
    fprintf(f, ", task");
    fprintf(f, "\n\nexample:\n"
               "  $ qkv list norm\n"
               "  norm: attention normaliser (qkv_attn_norm)\n"
               "    softmax       exp(e_j) / sum_k exp(e_k) over the allowed keys\n"
               "    ...\n");
}

/* The task families of `qkv train` (the `task` key), as a table of the same form. */
static void print_tasks(void) {
    int width = 0;
    for (int i = 0; i < task_count(); i++) {
        const int n = (int)strlen(task_at(i)->name);
        if (n > width) width = n;
    }
    printf("task: task family of qkv train (task_ops, tools/task.h)\n");
    for (int i = 0; i < task_count(); i++) printf("  %-*s  %s\n", width, task_at(i)->name, task_at(i)->summary);
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
        if (!qkv_registry_by_name(argv[i]) && strcmp(argv[i], "task")) {
            fprintf(stderr, "qkv list: unknown %s '%s' (qkv list --help names them)\n",
                    argv[i][0] == '-' ? "option" : "enumeration", argv[i]);
            return 2;
        }
    }
    int printed = 0;
    for (int i = 1; i < argc; i++, printed++) {
        if (printed) printf("\n");
        if (!strcmp(argv[i], "task")) print_tasks();
        else print_registry(qkv_registry_by_name(argv[i]));
    }
    for (int i = 0; argc < 2 && i <= QKV_REGISTRY_COUNT; i++, printed++) {
        if (printed) printf("\n");
        if (i == QKV_REGISTRY_COUNT) print_tasks();
        else print_registry(qkv_registry_get(i));
    }
    return 0;
}
