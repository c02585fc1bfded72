#include "launch.h"

#include "procinfo.h"
#include "scry_err.h"
#include "scry_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "scry_time.h"

int launch_start(char **argv, char **env_extra, int inherit_fd,
                 void (*before_exec)(pid_t child, void *ctx), void *ctx, pid_t *child)
{
    int pipefd[2], gate[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0)
        return scry_err_from_errno(errno);
    if (pipe2(gate, O_CLOEXEC) != 0) {
        int err = scry_err_from_errno(errno);
        close(pipefd[0]);
        close(pipefd[1]);
        return err;
    }
    pid_t pid = fork();
    if (pid < 0) {
        int err = scry_err_from_errno(errno);
        close(pipefd[0]);
        close(pipefd[1]);
        close(gate[0]);
        close(gate[1]);
        return err;
    }
    if (pid == 0) {
        close(pipefd[0]);
        close(gate[1]);
        char go;
        ssize_t r;
        do { /* wait until scry is ready (or gone: EOF) */
            r = read(gate[0], &go, 1);
        } while (r < 0 && errno == EINTR);
        for (size_t i = 0; env_extra && env_extra[i]; i++)
            putenv(env_extra[i]);
        if (inherit_fd >= 0)
            fcntl(inherit_fd, F_SETFD, 0);
        execvp(argv[0], argv);
        int e = errno;
        ssize_t w = write(pipefd[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    close(pipefd[1]);
    close(gate[0]);
    if (before_exec)
        before_exec(pid, ctx);
    ssize_t w = write(gate[1], "g", 1);
    (void)w;
    close(gate[1]);
    int e = 0;
    ssize_t n;
    do {
        n = read(pipefd[0], &e, sizeof e);
    } while (n < 0 && errno == EINTR);
    close(pipefd[0]);
    if (n == (ssize_t)sizeof e) {
        waitpid(pid, NULL, 0);
        fprintf(stderr, "scry: cannot run '%s': %s\n", argv[0], strerror(e));
        return e == ENOENT ? SCRY_E_NOTFOUND : SCRY_E_PERM;
    }
    *child = pid;
    return 0;
}

static void sleep_ns(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

int launch_wait_python(pid_t child, strtab_t *strings, double timeout_s,
                       const pystate_open_opts_t *opts,
                       void (*on_open)(pystate_target_t *t, void *ctx), void *ctx,
                       pystate_target_t **out, int *status, char *errbuf, size_t errlen)
{
    uint64_t start = scry_now_ns();
    uint64_t timeout_ns = (uint64_t)(timeout_s * 1e9);
    pystate_snapshot_t *snap = pystate_snapshot_new();
    if (!snap)
        return SCRY_E_NOMEM;
    int last_err = SCRY_E_NOTPY, rc = 0;
    char exe_seen[512] = "";   /* the program the child runs now */
    char exe_opened[512] = ""; /* the program HELD (or the last open attempt) was opened for */
    pystate_target_t *held = NULL;
    uint64_t last_try = 0;
    for (unsigned round = 0;; round++) {
        int st = 0;
        pid_t w = waitpid(child, &st, WNOHANG);
        if (w == child) {
            if (status)
                *status = st;
            rc = SCRY_E_GONE;
            goto done;
        }
        /* A wrapper that execs again restarts the clock: only time spent as the final
         * program counts against the timeout. */
        char exe[512];
        if (proc_read_exe(child, exe, sizeof exe) > 0) {
            if (strcmp(exe, exe_seen) != 0) {
                snprintf(exe_seen, sizeof exe_seen, "%s", exe);
                start = scry_now_ns();
            }
        }
        /* Opening parses the program's ELF files. In the first 200 ms of a program it is
         * tried every round (the loader may still be mapping libpython); later at most
         * every 100 ms. An opened target is sampled each round while the runtime starts,
         * and opened afresh every 100 ms (nothing read before initialisation is kept
         * longer), or at once when the program exec'd. */
        uint64_t now = scry_now_ns();
        if (held && (strcmp(exe, exe_opened) != 0 || now - last_try >= 100000000ull)) {
            pystate_target_free(held);
            held = NULL;
        }
        if (!held && (strcmp(exe, exe_opened) != 0 || now - start < 200000000ull ||
                      now - last_try >= 100000000ull)) {
            last_try = now;
            snprintf(exe_opened, sizeof exe_opened, "%s", exe);
            int err = pystate_target_open_opts(child, strings, opts, &held, errbuf, errlen);
            if (err == SCRY_E_UNSUPPORTED || err == SCRY_E_PERM) {
                rc = err;
                goto done;
            }
            if (err) {
                held = NULL;
                last_err = err;
            } else if (on_open) {
                on_open(held, ctx);
                on_open = NULL;
            }
        }
        if (held && pystate_sample(held, snap) == 0 && pystate_snapshot_count(snap) > 0) {
            *out = held;
            held = NULL;
            goto done;
        }
        if (scry_now_ns() - start > timeout_ns) {
            char what[600];
            proc_describe(child, what, sizeof what);
            snprintf(errbuf, errlen,
                     "process %d is not a Python process scry can read after %.0f s: %s",
                     (int)child, timeout_s, what);
            rc = last_err == SCRY_E_NOTPY ? SCRY_E_NOTPY : last_err;
            goto done;
        }
        /* Poll fast at first: short programs must be caught. */
        sleep_ns(round < 2000 ? 200000 : 5000000);
    }
done:
    pystate_target_free(held);
    pystate_snapshot_free(snap);
    return rc;
}
