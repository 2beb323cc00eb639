/*
 * qkv.c: the command-line tool, git-style: `qkv <command> [options]`.
 * Each command lives in its own file (cmd_<name>.c) as `int qkv_cmd_<name>(int argc, char **argv)`.
 */
#include "qkv/qkv.h"
#include "commands.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const qkv_command commands[] = {
    {"train", "train a sequence-to-sequence Transformer from a configuration file", qkv_cmd_train},
    {"eval", "decode a data set with a trained model and report WER / PER", qkv_cmd_eval},
    {"decode", "decode inputs (one per line) with a trained model: beam, greedy, sampling", qkv_cmd_decode},
    {"attn", "attention maps of every layer and head for one input: SVG, PNG, HTML, terminal", qkv_cmd_attn},
    {"average", "checkpoint averaging: the mean of the parameters of model files (a run's last N)", qkv_cmd_average},
    {"inspect", "list the tensors, dtypes, shapes and metadata of a .safetensors file", qkv_cmd_inspect},
    {"data", "prepare the split files of the real data sets; check data files", qkv_cmd_data},
    {"tokenizer", "learn a subword (BPE) model; cut text into symbols and join them back", qkv_cmd_tokenizer},
    {"score", "BLEU, chrF and chrF++ of hypotheses against references, as sacreBLEU computes them", qkv_cmd_score},
    {"list", "the names configuration and model files accept: score functions, normalisers, ...", qkv_cmd_list},
};

static void usage(FILE *f) {
    fprintf(f, "usage: qkv <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\noptions:\n  --help      this text (qkv <command> --help: the command's)\n"
               "  --version   version and build configuration\n");
}

int main(int argc, char **argv) {
    /* Before anything is read or written: where OpenBLAS fell back to its generic kernels on a
     * CPU it does not know, start again with its AVX-512 / AVX2 ones (qkv_base.h). */
    if (qkv_blas_reexec_with_advice(argv) != QKV_OK) fprintf(stderr, "qkv: note: %s\n", qkv_last_error());
    /* A file size limit (ulimit -f) reached while writing sends SIGXFSZ, whose default action kills
     * the process with no message and a temporary file left behind; ignored, the write fails with
     * EFBIG instead, and the atomic writers report it and remove their temporary as for a full
     * disk. */
    signal(SIGXFSZ, SIG_IGN);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("qkv %s\n", qkv_version());
        const char *coretype = getenv("OPENBLAS_CORETYPE"), *was = getenv("QKV_BLAS_REEXEC");
        if (coretype && was)
            printf("blas kernels: %s (OPENBLAS_CORETYPE=%s set by qkv: OpenBLAS chose %s for this CPU)\n",
                   qkv_blas_kernel(), coretype, was);
        else
            printf("blas kernels: %s (%s)\n", qkv_blas_kernel(),
                   coretype ? "OPENBLAS_CORETYPE set by the user" : "the BLAS library's own choice");
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "qkv: unknown command '%s' (qkv --help lists them)\n", argv[1]);
    return 2;
}
