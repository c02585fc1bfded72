/* test_unwind_live.h - helpers shared by the unwind tests that run real interpreters.
 * Header-only (static functions) so every test stays one executable. */
#ifndef TEST_UNWIND_LIVE_H
#define TEST_UNWIND_LIVE_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "scry_err.h"
#include "scry_proc.h"
#include "unwind.h"
#include "check.h"

#define PYENV "/root/.pyenv/versions/"

__attribute__((unused)) static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* Builds tests/func/native_ext/scryext.c against INCDIR into DIR/scryext.so. */
__attribute__((unused)) static int build_ext(const char *incdir, const char *dir)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s' && cc -shared -fPIC -O1 -g -fno-omit-frame-pointer -I'%s' "
             "'%s/../func/native_ext/scryext.c' -o '%s/scryext.so'",
             dir, incdir, SCRY_TEST_DATA, dir);
    return system(cmd) == 0 ? 0 : -1;
}

typedef struct child {
    pid_t pid;
    int out; /* read end of its stdout */
} child_t;

/* Starts PYTHON -c SCRIPT with PYTHONPATH=EXTDIR (may be NULL); stdout to a pipe. */
__attribute__((unused)) static int spawn_python(const char *python, const char *script,
                                                const char *extdir, child_t *c)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        check_child_dies_with_test();
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        if (extdir)
            setenv("PYTHONPATH", extdir, 1);
        setenv("PYTHONUNBUFFERED", "1", 1);
        execl(python, python, "-c", script, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    c->pid = pid;
    c->out = fds[0];
    return 0;
}

/* Reads one line from the child within TIMEOUT_MS. Returns its length or -1. */
__attribute__((unused)) static int read_line(child_t *c, char *buf, size_t cap, int timeout_ms)
{
    size_t n = 0;
    while (n + 1 < cap) {
        struct pollfd p = {.fd = c->out, .events = POLLIN};
        if (poll(&p, 1, timeout_ms) <= 0)
            return -1;
        char ch;
        if (read(c->out, &ch, 1) != 1)
            return -1;
        if (ch == '\n')
            break;
        buf[n++] = ch;
    }
    buf[n] = '\0';
    return (int)n;
}

__attribute__((unused)) static void stop_child(child_t *c)
{
    if (c->pid > 0) {
        kill(c->pid, SIGKILL);
        waitpid(c->pid, NULL, 0);
        c->pid = 0;
    }
    if (c->out >= 0)
        close(c->out);
    c->out = -1;
}

__attribute__((unused)) static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Starts PYTHON -c SCRIPT (PYTHONPATH=EXTDIR, may be NULL) into C, waits up to TIMEOUT_MS
 * for its first line (its pid), then SETTLE_MS for it to reach its loop; each step checked. */
__attribute__((unused)) static void start_target(child_t *c, const char *python, const char *script,
                                                 const char *extdir, int timeout_ms, int settle_ms)
{
    *c = (child_t){0, -1};
    CHECK(spawn_python(python, script, extdir, c) == 0, "%s", python);
    char line[64];
    CHECK(read_line(c, line, sizeof line, timeout_ms) > 0, "%s: no first line", python);
    sleep_ms(settle_ms);
}

/* Stops TID, unwinds it, resumes it. Returns the unwind_thread result (or the stop's). */
__attribute__((unused)) static int sample_thread(unwind_t *u, pid_t tid, unwind_frame_t *f,
                                                 size_t max, size_t *n)
{
    *n = 0;
    int rc = proc_stop_thread(tid);
    if (rc != 0)
        return rc;
    rc = unwind_thread(u, tid, f, max, n);
    int rr = proc_resume_thread(tid);
    return rc ? rc : rr;
}

__attribute__((unused)) static void print_stack(const char *title, const unwind_frame_t *f,
                                                size_t n)
{
    fprintf(stderr, "--- %s (%zu frames)\n", title, n);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "  #%-2zu %016llx %s+0x%llx (%s)%s%s\n", i, (unsigned long long)f[i].ip,
                f[i].symbol ? f[i].symbol : "?", (unsigned long long)f[i].offset,
                f[i].lib ? f[i].lib : "?", f[i].is_eval ? " [eval]" : "",
                f[i].in_python ? " [py]" : "");
}

/* Index of the first frame whose symbol contains SYM (and lib contains LIB when not
 * NULL), or -1. */
__attribute__((unused)) static int find_frame(const unwind_frame_t *f, size_t n, const char *sym,
                                              const char *lib)
{
    for (size_t i = 0; i < n; i++) {
        if (sym && (!f[i].symbol || !strstr(f[i].symbol, sym)))
            continue;
        if (lib && (!f[i].lib || !strstr(f[i].lib, lib)))
            continue;
        return (int)i;
    }
    return -1;
}

/* Thread state character from /proc. */
__attribute__((unused)) static char thread_state(pid_t pid, pid_t tid)
{
    char state;
    return proc_read_task_state(pid, tid, &state) == 0 ? state : 0;
}

#endif
