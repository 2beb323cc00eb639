/*
 * input_lines.h: the input lines of `qkv decode` and the commands that read text one line at a
 * time: each named file in turn, or stdin. A line ends at '\n' (a '\r' before it and the '\n' are
 * removed); the last line needs no '\n'. Every line is bounded (INPUT_LINE_MAX bytes), so
 * /dev/zero or a file with no line ends is an error, not a buffer that grows until memory runs
 * out; a NUL byte (binary input), a directory and a read error are errors naming the file and
 * line. A FIFO is read as stdin is, as it arrives.
 */
#ifndef QKV_TOOLS_INPUT_LINES_H
#define QKV_TOOLS_INPUT_LINES_H

#include "qkv/qkv_tokenizer.h"

#include <stdint.h>

#define INPUT_LINE_MAX (1 << 20)

/* fn gets each line with its file's name ("<stdin>") and its number from 1; a non-zero return
 * stops the reading. */
typedef int (*input_line_fn)(void *user, const char *file, int64_t line_no, char *line);

/* Call fn on every line of files[0 .. n_files) (stdin when n_files is 0). A problem with the input
 * is printed as "qkv CMD: FILE[:LINE]: what" on stderr and returns 1; else fn's first non-zero
 * value, or 0. */
int input_for_each_line(const char *cmd, const char *const *files, int n_files, input_line_fn fn,
                        void *user);

/* Cut one input line, text[0, len), with tok and hand each symbol to emit (qkv_tokenizer_split;
 * what names the text in the tokenizer's messages). A line the tokenizer refuses is an error
 * "FILE:LINE: <its message>"; emit's own errors come back as they are (they name their place). */
qkv_status input_line_split(const qkv_tokenizer *tok, const char *file, int64_t line_no, const char *text, size_t len,
                            const char *what, qkv_symbol_fn emit, void *ctx);

#endif
