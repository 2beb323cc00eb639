/*
 * test_cli_progress.c: the progress display of `qkv train` (tools/cmd_train.c), on a tiny
 * synthetic seq2seq run of N = 6 steps, evaluated every 3, logged every 2.
 *
 * On a terminal (a pseudo-terminal from openpty, output post-processing off so "\n" stays "\n")
 * every optimiser step k redraws one line with a carriage return:
 *     "\r[" + floor(24 k / N) '=' padded to 24 + "] step k/N  epoch E  loss L  R tok/s  lr X  ETA
 * T"
 * - one '\r' per step, for k = 1 .. N in order, and no escape code;
 * - between two redraws no newline, except after an evaluation step, where the bar's line ends
 *   ("\n") before "eval step k: dev ..."; the output ends with a newline;
 * - the loss and lr shown at the evaluation steps are those of log.jsonl's train line of the step
 *   (to the printed digits), the epoch its epoch; tokens/s is positive; the ETA of step N is "0s".
 * With stdout a pipe the same run (same seed: the same losses) prints plain lines
 *     "step k/N epoch E loss L tok/s R lr X eta T"
 * at k = 2, 4, 6 only, with no carriage return or escape code.
 * Where openpty is not available (QKV_HAVE_OPENPTY unset by CMake) the test is skipped.
 */
#include "testutil.h"
#include "cli_util.h"

#include <math.h>
#include <stdio.h>

#ifdef QKV_HAVE_OPENPTY
#include <errno.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

enum { STEPS = 6, EVAL_EVERY = 3, LOG_EVERY = 2 };

/* Run argv with stdout and stderr on a new pseudo-terminal; collect what it writes into out
 * (NUL-terminated, truncated to size - 1); the exit status, or -1. */
static int run_on_pty(char *const argv[], char *out, size_t size) {
    int master = -1, slave = -1;
    if (openpty(&master, &slave, NULL, NULL, NULL) != 0) return -1;
    struct termios t;
    if (tcgetattr(slave, &t) == 0) { /* no "\n" -> "\r\n": the bytes as the program wrote them */
        t.c_oflag &= ~(tcflag_t)OPOST;
        tcsetattr(slave, TCSANOW, &t);
    }
    const pid_t pid = fork();
    if (pid == 0) {
        setsid();
        dup2(slave, STDOUT_FILENO);
        dup2(slave, STDERR_FILENO);
        close(master);
        close(slave);
        execv(argv[0], argv);
        _exit(127);
    }
    close(slave);
    size_t n = 0;
    while (pid > 0) {
        struct pollfd p = {master, POLLIN, 0};
        const int ready = poll(&p, 1, 30000);
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) { /* 30 s without output: give up */
            kill(pid, SIGKILL);
            break;
        }
        char chunk[4096];
        const ssize_t k = read(master, chunk, sizeof chunk);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break; /* EIO: every copy of the terminal's other end is closed */
        const size_t room = size - 1 - n, take = (size_t)k < room ? (size_t)k : room;
        memcpy(out + n, chunk, take);
        n += take;
    }
    out[n] = '\0';
    close(master);
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The loss, lr and epoch of log.jsonl's train line of step k; false when the line is missing. */
static bool logged(const char *run_dir, int k, double *loss, double *lr, long *epoch) {
    char path[128], line[1024], head[64];
    snprintf(path, sizeof path, "%s/log.jsonl", run_dir);
    snprintf(head, sizeof head, "{\"type\":\"train\",\"step\":%d,", k);
    FILE *f = fopen(path, "r");
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f)) {
        const char *l = strstr(line, "\"loss\":"), *r = strstr(line, "\"lr\":");
        const char *e = strstr(line, "\"epoch\":");
        found = !strncmp(line, head, strlen(head)) && l && r && e;
        if (found) {
            *loss = strtod(l + 7, NULL);
            *lr = strtod(r + 5, NULL);
            *epoch = strtol(e + 8, NULL, 10);
        }
    }
    if (f) fclose(f);
    return found;
}

static bool has_escape(const char *s) {
    return strchr(s, '\033') != NULL;
}

/* The redraws of the terminal output: each '\r' and what follows up to the next '\r'. */
static void check_terminal(const char *out, const char *run_dir, double *last_loss) {
    CHECK_MSG(!has_escape(out), "escape code in the terminal output: %s", out);
    const char *at = strchr(out, '\r');
    CHECK_MSG(at && memchr(out, '\n', (size_t)(at - out)),
              "no header line before the first redraw: %s", out);
    int k = 0;
    for (; at; k++) {
        const char *next = strchr(at + 1, '\r');
        const size_t len = next ? (size_t)(next - at) : strlen(at);
        char seg[1024];
        snprintf(seg, sizeof seg, "%.*s", (int)(len < sizeof seg ? len : sizeof seg - 1), at);
        char bar[25] = "", eta[16] = "";
        long long step = 0, total = 0;
        unsigned long long epoch = 0;
        double loss = 0, rate = 0, lr = 0;
        int used = 0;
        const int got = sscanf(
            seg, "\r[%24[= ]] step %lld/%lld  epoch %llu  loss %lf %lf tok/s  lr %lf  ETA %15s%n",
            bar, &step, &total, &epoch, &loss, &rate, &lr, eta, &used);
        CHECK_MSG(got == 8 && strlen(bar) == 24, "redraw %d does not parse: '%s'", k + 1, seg);
        if (got != 8) return;
        const int filled = (int)strspn(bar, "=");
        CHECK_MSG(step == k + 1 && total == STEPS && filled == 24 * (k + 1) / STEPS &&
                      strspn(bar + filled, " ") == (size_t)(24 - filled),
                  "redraw %d: step %lld/%lld, bar '%s'", k + 1, step, total, bar);
        CHECK_MSG(rate > 0 && isfinite(loss) && lr > 0, "redraw %d: '%s'", k + 1, seg);
        const char *rest = seg + used;
        rest += strspn(rest, " ");
        if (step % EVAL_EVERY == 0) { /* the line ends, then the evaluation's line */
            char want[64];
            snprintf(want, sizeof want, "\neval step %lld: dev WER", step);
            CHECK_MSG(!strncmp(rest, want, strlen(want)), "after redraw %d: '%s'", k + 1, rest);
            double log_loss = 0, log_lr = 0;
            long log_epoch = -1;
            CHECK_MSG(logged(run_dir, (int)step, &log_loss, &log_lr, &log_epoch),
                      "log.jsonl has no step %lld", step);
            CHECK_MSG(fabs(loss - log_loss) <= 0.5e-4 + 1e-9 &&
                          fabs(lr - log_lr) <= 0.005 * log_lr && (long)epoch == log_epoch,
                      "step %lld: shown loss %.4f lr %.2e epoch %llu, logged %.6f %.6g %ld", step,
                      loss, lr, epoch, log_loss, log_lr, log_epoch);
        } else {
            CHECK_MSG(*rest == '\0' && !strchr(seg, '\n'), "redraw %d is not one line: '%s'", k + 1,
                      seg);
        }
        if (step == STEPS) {
            CHECK_MSG(!strcmp(eta, "0s"), "ETA of the last step: %s", eta);
            *last_loss = loss;
        }
        at = next;
    }
    CHECK_MSG(k == STEPS, "%d redraws for %d steps", k, STEPS);
    const size_t n = strlen(out);
    CHECK_MSG(n > 0 && out[n - 1] == '\n' && strstr(out, "trained 6 steps"), "end: '%s'", out);
}

/* The plain lines of the piped output. */
static void check_pipe(const char *out, double tty_loss) {
    CHECK_MSG(!strchr(out, '\r') && !has_escape(out), "'\\r' or an escape code: %s", out);
    int lines = 0;
    for (const char *l = out; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != '\0')) {
        if (strncmp(l, "step ", 5)) continue;
        long long step = 0, total = 0;
        unsigned long long epoch = 0;
        double loss = 0, rate = 0, lr = 0;
        char eta[16] = "";
        const int got = sscanf(l, "step %lld/%lld epoch %llu loss %lf tok/s %lf lr %lf eta %15s",
                               &step, &total, &epoch, &loss, &rate, &lr, eta);
        lines++;
        CHECK_MSG(got == 7 && step == LOG_EVERY * lines && total == STEPS && rate > 0 && lr > 0,
                  "log line %d: '%.120s'", lines, l);
        if (step == STEPS)
            CHECK_MSG(loss == tty_loss, "loss %.4f, on the terminal %.4f", loss, tty_loss);
    }
    CHECK_MSG(lines == STEPS / LOG_EVERY, "%d step lines: %s", lines, out);
    CHECK(strstr(out, "eval step 3: dev WER") && strstr(out, "eval step 6: dev WER"));
}
#endif

TEST(cli_train_progress_bar_on_a_terminal_and_plain_lines_in_a_pipe) {
#ifndef QKV_HAVE_OPENPTY
    SKIP("openpty is not available on this system");
#else
    cli_run r;
    CHECK(cli_run_seq2seq(&r, NULL,
                          "model.d_model = 8\nmodel.heads = 2\nmodel.encoder_layers = 1\n"
                          "model.decoder_layers = 1\nmodel.ff = 16\ntrain.steps = 6\n"
                          "train.max_tokens = 32\ntrain.eval_every = 3\ntrain.log_every = 2\n"
                          "train.warmup = 2\n"));
    static char out[65536];
    char *argv[] = {QKV_CLI_PATH, "train", r.conf, NULL};
    const int rc = run_on_pty(argv, out, sizeof out);
    CHECK_MSG(rc == 0, "qkv train on a terminal: exit %d: %s", rc, out);
    double tty_loss = NAN;
    if (rc == 0) check_terminal(out, r.run_dir, &tty_loss);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s train %s --set out.dir=%s/piped", QKV_CLI_PATH, r.conf, r.dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "qkv train into a pipe: %s", out);
    check_pipe(out, tty_loss);
    cli_run_remove(&r);
#endif
}
