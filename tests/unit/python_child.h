/* python_child.h - a real Python interpreter started by a unit test: the script's stdout
 * is read line by line, closing its stdin ends it; it dies with the test
 * (check_child_dies_with_test). For tests that need a live target, not a mock. */
#ifndef SCRY_TESTS_PYTHON_CHILD_H
#define SCRY_TESTS_PYTHON_CHILD_H

#include "check.h"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct python_child {
    pid_t pid;
    int in_fd;  /* its stdin */
    int out_fd; /* its stdout */
} python_child_t;

/* The interpreter unit tests use: pyenv's 3.12.1, else Debian's python3.11 (NULL: none). */
__attribute__((unused)) static const char *python_child_interp(void)
{
    static const char *const cands[] = {"/root/.pyenv/versions/3.12.1/bin/python3.12",
                                        "/usr/bin/python3.11", "/usr/bin/python3"};
    for (size_t i = 0; i < sizeof cands / sizeof *cands; i++)
        if (access(cands[i], X_OK) == 0)
            return cands[i];
    return NULL;
}

/* Starts ARGV (ARGV[0]: the interpreter's path) with ENV (NULL: the test's environment), its
 * stdin and stdout (with MERGE_STDERR its stderr too) on pipes. Returns 0 or -1. */
__attribute__((unused)) static int python_child_exec(python_child_t *c, char *const argv[],
                                                     char *const *env, int merge_stderr)
{
    int in[2], out[2];
    if (pipe(in) != 0)
        return -1;
    if (pipe(out) != 0) {
        close(in[0]);
        close(in[1]);
        return -1;
    }
    c->pid = fork();
    if (c->pid == 0) {
        check_child_dies_with_test();
        dup2(in[0], 0);
        dup2(out[1], 1);
        if (merge_stderr)
            dup2(out[1], 2);
        close(in[1]);
        close(out[0]);
        if (env)
            execve(argv[0], argv, env);
        else
            execv(argv[0], argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    c->in_fd = in[1];
    c->out_fd = out[0];
    return c->pid > 0 ? 0 : -1;
}

/* Starts PY -c SCRIPT with ENV (NULL: the test's environment). Returns 0 or -1. */
__attribute__((unused)) static int python_child_start(python_child_t *c, const char *py,
                                                      const char *script, char *const *env)
{
    char *const argv[] = {(char *)py, (char *)"-c", (char *)script, NULL};
    return python_child_exec(c, argv, env, 0);
}

/* Reads one line of the child's stdout (without the newline) within TIMEOUT_MS. Returns
 * its length or -1. */
__attribute__((unused)) static int python_child_line(python_child_t *c, char *buf, size_t cap,
                                                     int timeout_ms)
{
    size_t n = 0;
    while (n + 1 < cap) {
        struct pollfd p = {.fd = c->out_fd, .events = POLLIN};
        if (poll(&p, 1, timeout_ms) <= 0 || read(c->out_fd, buf + n, 1) != 1)
            return -1;
        if (buf[n] == '\n')
            break;
        n++;
    }
    buf[n] = '\0';
    return (int)n;
}

/* Fills TIDS with up to CAP thread ids of PID (/proc/PID/task). Returns how many. */
__attribute__((unused)) static size_t python_child_tids(pid_t pid, pid_t *tids, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    size_t n = 0;
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < cap) {
        int t = atoi(e->d_name);
        if (t > 0)
            tids[n++] = t;
    }
    closedir(d);
    return n;
}

/* Ends the child (SIGKILL) and reaps it. */
__attribute__((unused)) static void python_child_end(python_child_t *c)
{
    if (c->pid <= 0)
        return;
    kill(c->pid, SIGKILL);
    waitpid(c->pid, NULL, 0);
    close(c->in_fd);
    close(c->out_fd);
    c->pid = -1;
}

#endif
