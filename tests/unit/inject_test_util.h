/* inject_test_util.h - helpers shared by the test_inject_*.c tests (header-only, static).
 *
 * The tests start real interpreters (never mocks), build a small test library with the
 * system compiler at run time, inject it and check both the injected code's effects and
 * that the target carries on correctly.
 */
#ifndef INJECT_TEST_UTIL_H
#define INJECT_TEST_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "inject.h"
#include "scry_err.h"
#include "check.h"
#include "python_child.h"
#include "scry_time.h"

#define CHECK_RC(rc, want, rep)                                                                    \
    CHECK((rc) == (want), "got %s (%d), want %d; report error: %s", scry_err_name(rc), (rc),       \
          (want), (rep).error)

static char t_dir[128];
static char t_lib[256];

static inline void t_path(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", t_dir, name);
}

static inline int t_file_exists(const char *name)
{
    char p[256];
    struct stat st;
    t_path(p, sizeof p, name);
    return stat(p, &st) == 0;
}

static inline int t_read_file(const char *name, char *buf, size_t size)
{
    char p[256];
    t_path(p, sizeof p, name);
    FILE *f = fopen(p, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = 0;
    fclose(f);
    return (int)n;
}

static const char t_lib_src[] =
    "#include <fcntl.h>\n"
    "#include <string.h>\n"
    "#include <time.h>\n"
    "#include <unistd.h>\n"
    "static void put(const char *name, const char *s) {\n"
    "    char p[512]; strcpy(p, DIR); strcat(p, \"/\"); strcat(p, name);\n"
    "    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);\n"
    "    if (fd >= 0) { write(fd, s, strlen(s)); close(fd); }\n"
    "}\n"
    "__attribute__((constructor)) static void ctor(void) { put(\"marker\", \"loaded\"); }\n"
    "long scry_test_answer(const char *s) {\n"
    "    double v[64]; for (int i = 0; i < 64; i++) v[i] = i * 1.5; /* clobber vector regs */\n"
    "    double acc = 0; for (int i = 0; i < 64; i++) acc += v[i] * v[63 - i];\n"
    "    put(\"arg\", s);\n"
    "    return 42 + (long)strlen(s) + (acc < 0 ? 1 : 0);\n"
    "}\n"
    "long scry_test_add(long a, long b, long c, long d, long e, long f) {\n"
    "    return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f;\n"
    "}\n"
    "long scry_test_sleep_ms(long ms) {\n"
    "    __asm__ volatile(\"vzeroall\"); /* clobber every vector register */\n"
    "    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};\n"
    "    while (nanosleep(&ts, &ts) != 0) {}\n"
    "    put(\"slept\", \"done\");\n"
    "    return ms;\n"
    "}\n"
    "long scry_test_crash(void) { volatile long *p = (long *)8; return *p; }\n";

/* Creates the scratch directory and compiles the test library into it. Returns 0 or -1. */
static inline int t_setup(const char *tag)
{
    snprintf(t_dir, sizeof t_dir, "/tmp/scry-inject-%s-%d", tag, (int)getpid());
    mkdir(t_dir, 0755);
    char src[256], cmd[1024];
    t_path(src, sizeof src, "testlib.c");
    t_path(t_lib, sizeof t_lib, "libscrytest.so");
    FILE *f = fopen(src, "w");
    if (!f)
        return -1;
    fputs(t_lib_src, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "cc -O2 -shared -fPIC -DDIR='\"%s\"' -o %s %s", t_dir, t_lib, src);
    return system(cmd) == 0 ? 0 : -1;
}

static inline void t_cleanup(void)
{
    check_rmtree(t_dir);
}

static inline void t_unlink(const char *name)
{
    char p[256];
    t_path(p, sizeof p, name);
    unlink(p);
}

static inline void t__on_alarm(int sig)
{
    (void)sig;
    inject_abort_all();
}

/* Arms SIGALRM to abort every injection in progress (inject_abort_all) in USEC
 * microseconds; *OLD gets the action it replaced (restore it with sigaction). */
static inline void t_abort_after(struct sigaction *old, long usec)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = t__on_alarm;
    sigaction(SIGALRM, &sa, old);
    struct itimerval it = {{0, 0}, {usec / 1000000, usec % 1000000}};
    setitimer(ITIMER_REAL, &it, NULL);
}

/* Forks a child that dies with the test, joined to the parent by a pipe: *FD is the write
 * end in the child, the read end in the parent (the other end closed). Returns fork's
 * result (0 in the child). */
static inline pid_t t_fork_piped(int *fd)
{
    int p[2];
    CHECK(pipe(p) == 0, "pipe");
    pid_t child = fork();
    if (child == 0) {
        check_child_dies_with_test();
        close(p[0]);
        *fd = p[1];
        return 0;
    }
    close(p[1]);
    *fd = p[0];
    return child;
}

/* Forks a tracer that loads t_lib into PID and calls scry_test_sleep_ms(SLEEP_MS) there,
 * and SIGKILLs it KILL_AFTER_US after it reached the call (the kernel then detaches the
 * thread in the middle of the call). Returns the tracer's wait status. */
static inline int t_kill_tracer_in_call(pid_t pid, uint64_t sleep_ms, useconds_t kill_after_us)
{
    int sync;
    pid_t child = t_fork_piped(&sync);
    if (child == 0) {
        inject_opts_t o = {.timeout_ms = 10000};
        inject_report_t rep;
        inject_session_t *s = NULL;
        raddr_t fn = 0;
        if (inject_session_open(pid, &o, &rep, &s) || inject_session_dlopen(s, t_lib, NULL) ||
            inject_session_symbol(s, t_lib, "scry_test_sleep_ms", &fn))
            _exit(2);
        if (write(sync, "x", 1) != 1)
            _exit(3);
        inject_session_call(s, fn, &sleep_ms, 1, NULL);
        _exit(4); /* not reached: killed during the call */
    }
    char c;
    CHECK(read(sync, &c, 1) == 1, "child reached the call");
    close(sync);
    usleep(kill_after_us);
    kill(child, SIGKILL);
    int st = 0;
    waitpid(child, &st, 0);
    return st;
}

typedef struct t_proc {
    pid_t pid;
    int out; /* child's stdout+stderr */
    int in;  /* child's stdin (write end), -1 when closed */
    char buf[65536];
    size_t len;
} t_proc_t;

/* Starts EXE -u -c SCRIPT with pipes on stdin and stdout/stderr. Returns 0 or -1. */
static inline int t_spawn(t_proc_t *p, const char *exe, const char *script)
{
    char *const argv[] = {(char *)exe, (char *)"-u", (char *)"-c", (char *)script, NULL};
    python_child_t c;
    memset(p, 0, sizeof *p);
    if (python_child_exec(&c, argv, NULL, 1) != 0)
        return -1;
    p->pid = c.pid;
    p->out = c.out_fd;
    p->in = c.in_fd;
    return 0;
}

/* Reads child output until NEEDLE appears or TIMEOUT_S passes. Returns 1 when found. */
static inline int t_expect(t_proc_t *p, const char *needle, double timeout_s)
{
    double end = ((double)scry_now_ns() / 1e9) + timeout_s;
    while (!strstr(p->buf, needle)) {
        double left = end - ((double)scry_now_ns() / 1e9);
        if (left <= 0)
            return 0;
        struct pollfd pf = {p->out, POLLIN, 0};
        if (poll(&pf, 1, (int)(left * 1000) + 1) <= 0)
            continue;
        if (p->len >= sizeof p->buf - 1)
            return 0;
        ssize_t n = read(p->out, p->buf + p->len, sizeof p->buf - 1 - p->len);
        if (n <= 0)
            return strstr(p->buf, needle) != NULL;
        p->len += (size_t)n;
        p->buf[p->len] = 0;
    }
    return 1;
}

/* t_spawn, then waits up to 10 s for the script to print "ready" and SETTLE_US more for it
 * to reach what it does next; each step checked. */
static inline void t_start_ready(t_proc_t *p, const char *exe, const char *script,
                                 useconds_t settle_us)
{
    CHECK(t_spawn(p, exe, script) == 0, "spawn");
    CHECK(t_expect(p, "ready", 10), "ready");
    usleep(settle_us);
}

/* Waits up to TIMEOUT_S for the child to exit, collecting output. Returns the exit status
 * (0..255), 128+signal when killed, or -1 on timeout (then it is killed). */
static inline int t_finish(t_proc_t *p, double timeout_s)
{
    if (p->in >= 0) {
        close(p->in);
        p->in = -1;
    }
    t_expect(p, "\x01never\x01", timeout_s);
    int st;
    double end = ((double)scry_now_ns() / 1e9) + 2;
    pid_t r;
    while ((r = waitpid(p->pid, &st, WNOHANG)) == 0 && ((double)scry_now_ns() / 1e9) < end)
        usleep(10000);
    close(p->out);
    if (r != p->pid) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, &st, 0);
        return -1;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static inline int t_summary(const char *name)
{
    return check_summary(name);
}

#endif
