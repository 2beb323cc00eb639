/*
 * cmd_average.c: `qkv average`: checkpoint averaging (qkv_model_average).
 *
 *   qkv average -o OUT MODEL...       the element-wise mean of the model files' parameters
 *   qkv average -o OUT --last N RUN   of the last N step-<S>.safetensors a run kept
 *                                     (train.keep_checkpoints)
 *
 * The models must share one configuration. OUT is written atomically; put it in the run directory
 * as model.safetensors (or decode it by path) to use it with the run's vocabularies.
 *
 * Exit status: 0 on success, 1 when a model is missing, malformed or of another configuration, 2
 * for usage errors.
 */
#include "cli_args.h"
#include "commands.h"
#include "task.h"
#include "qkv/qkv.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "qkv average"

static void usage(FILE *f) {
    fprintf(f, "usage: qkv average -o OUT MODEL...\n"
               "       qkv average -o OUT --last N RUN\n\n"
               "Checkpoint averaging: write to OUT the model whose parameters are the element-wise mean of\n"
               "those of the MODEL files, or of the last N step-<S>.safetensors files of the run directory RUN\n"
               "(a run trained with train.keep_checkpoints = N or more). The models must share one\n"
               "configuration. Decode OUT by its path, or copy it over RUN/model.safetensors.\n\n"
               "example:\n"
               "  qkv average -o runs/en-es/avg5.safetensors --last 5 runs/en-es\n"
               "  qkv eval runs/en-es/avg5.safetensors data/bible/bible.en-es.dev.tsv\n");
}

static void free_paths(char **paths, int n) {
    for (int i = 0; paths && i < n; i++)
        free(paths[i]);
    free(paths);
}

/* The paths of the last n step-<S>.safetensors of dir (malloc'd, oldest first), or NULL (printed). */
static char **last_steps(const char *dir, int n) {
    long long steps[1024];
    const int found = task_step_models(dir, steps, 1024);
    if (found < 0) {
        cli_print_error(CMD ": ");
        return NULL;
    }
    if (found < n) {
        fprintf(stderr, CMD ": %s holds %d step-<S>.safetensors file%s, --last asks for %d (train with "
                        "train.keep_checkpoints = %d)\n",
                dir, found, found == 1 ? "" : "s", n, n);
        return NULL;
    }
    char **paths = calloc((size_t)n, sizeof *paths);
    bool ok = paths != NULL;
    for (int i = 0; ok && i < n; i++) { /* steps are the latest first; paths the oldest first */
        const size_t size = strlen(dir) + 48;
        if ((ok = (paths[n - 1 - i] = malloc(size)) != NULL))
            snprintf(paths[n - 1 - i], size, "%s/step-%lld.safetensors", dir, steps[i]);
    }
    if (ok) return paths;
    fprintf(stderr, CMD ": out of memory\n");
    free_paths(paths, n);
    return NULL;
}

int qkv_cmd_average(int argc, char **argv) {
    const char *out = NULL, *run = NULL;
    const char **inputs = calloc((size_t)argc, sizeof *inputs);
    int n = 0, last = 0;
    if (!inputs) {
        fprintf(stderr, CMD ": out of memory\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            free(inputs);
            return 0;
        } else if ((!strcmp(a, "-o") || !strcmp(a, "--out")) && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(a, "--last")) {
            if (!cli_int_option(CMD, argc, argv, &i, 1, 1000, &last)) {
                free(inputs);
                return 2;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, CMD ": unknown option or missing value: %s (qkv average --help)\n", a);
            free(inputs);
            return 2;
        } else {
            inputs[n++] = a;
        }
    }
    if (!out || n == 0 || (last && n != 1)) {
        fprintf(stderr, CMD ": %s\n", !out ? "-o OUT is required"
                                   : last   ? "--last N takes one run directory"
                                            : "no model to average");
        usage(stderr);
        free(inputs);
        return 2;
    }
    char **paths = NULL;
    if (last) {
        run = inputs[0];
        if (!(paths = last_steps(run, last))) {
            free(inputs);
            return 1;
        }
        n = last;
    }
    qkv_model **models = calloc((size_t)n, sizeof *models);
    int rc = models ? 0 : 1;
    for (int k = 0; !rc && k < n; k++)
        if (qkv_model_load(paths ? paths[k] : inputs[k], &models[k])) {
            cli_print_error(CMD ": ");
            rc = 1;
        }
    if (!rc && (qkv_model_average((const qkv_model *const *)models, n, models[0]) || qkv_model_save(models[0], out))) {
        cli_print_error(CMD ": ");
        rc = 1;
    }
    if (!rc) {
        printf("%s: the mean of %d model%s:", out, n, n == 1 ? "" : "s");
        for (int k = 0; k < n; k++)
            printf(" %s", paths ? strrchr(paths[k], '/') + 1 : inputs[k]);
        printf("\n");
    }
    for (int k = 0; models && k < n; k++)
        qkv_model_free(models[k]);
    free(models);
    free_paths(paths, n);
    free(inputs);
    return rc;
}
