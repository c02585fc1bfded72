#include "launch.h"

#include "procinfo.h"
#include "scry_err.h"

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
    double start = ((double)scry_now_ns() / 1e9);
    pystate_snapshot_t *snap = pystate_snapshot_new();
    if (!snap)
        return SCRY_E_NOMEM;
    int last_err = SCRY_E_NOTPY;
    char exe_seen[512] = "";
    for (unsigned round = 0;; round++) {
        int st = 0;
        pid_t w = waitpid(child, &st, WNOHANG);
        if (w == child) {
            if (status)
                *status = st;
            pystate_snapshot_free(snap);
            return SCRY_E_GONE;
        }
        pystate_target_t *t = NULL;
        int err = pystate_target_open_opts(child, strings, opts, &t, errbuf, errlen);
        if (err == 0) {
            if (on_open) {
                on_open(t, ctx);
                on_open = NULL;
            }
            if (pystate_sample(t, snap) == 0 && pystate_snapshot_count(snap) > 0) {
                pystate_snapshot_free(snap);
                *out = t;
                return 0;
            }
            pystate_target_free(t);
        } else if (err == SCRY_E_UNSUPPORTED || err == SCRY_E_PERM) {
            pystate_snapshot_free(snap);
            return err;
        }
        last_err = err;
        /* A wrapper that execs again restarts the clock: only time spent as the final
         * program counts against the timeout. */
        char exe[512];
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/exe", (int)child);
        ssize_t n = readlink(path, exe, sizeof exe - 1);
        if (n > 0) {
            exe[n] = 0;
            if (strcmp(exe, exe_seen) != 0) {
                snprintf(exe_seen, sizeof exe_seen, "%s", exe);
                start = ((double)scry_now_ns() / 1e9);
            }
        }
        if (((double)scry_now_ns() / 1e9) - start > timeout_s) {
            char what[600];
            procinfo_describe(child, what, sizeof what);
            snprintf(errbuf, errlen,
                     "process %d is not a Python process scry can read after %.0f s: %s",
                     (int)child, timeout_s, what);
            pystate_snapshot_free(snap);
            return last_err == SCRY_E_NOTPY ? SCRY_E_NOTPY : last_err;
        }
        /* Poll fast at first: short programs must be caught. */
        sleep_ns(round < 2000 ? 200000 : 5000000);
    }
}
