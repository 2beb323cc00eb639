/* cli_testutil.c: see cli_testutil.h. */
#include "cli_testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

int cli_run(const char *cmd, char *out, size_t size) {
    char full[8192];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    size_t n = 0, k;
    char chunk[4096];
    while ((k = fread(chunk, 1, sizeof chunk, p)) > 0) {
        if (n + k > size - 1) { /* keep the last part */
            const size_t drop = n + k - (size - 1) < n ? n + k - (size - 1) : n;
            memmove(out, out + drop, n - drop);
            n -= drop;
            if (k > size - 1 - n) k = size - 1 - n;
        }
        memcpy(out + n, chunk, k);
        n += k;
    }
    out[n] = '\0';
    const int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void cli_write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

bool cli_same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa && fb;
    while (same) {
        const int ca = fgetc(fa), cb = fgetc(fb);
        same = ca == cb;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

double cli_number_after(const char *text, const char *what) {
    const char *p = strstr(text, what);
    return p ? strtod(p + strlen(what), NULL) : NAN;
}
