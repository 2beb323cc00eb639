/* cmd_inspect.c: `qkv inspect FILE.safetensors` (filled in with the safetensors reader). */
#include "commands.h"

#include <stdio.h>

int qkv_cmd_inspect(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "qkv inspect: not built yet\n");
    return 1;
}
