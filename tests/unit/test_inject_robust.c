/* test_inject_robust.c - failure paths and hostile timing, each against a real CPython that
 * must finish its own work correctly afterwards: a library that does not exist, a call that
 * crashes, a call that never returns (timeout), the tracer SIGKILLed in the middle of a call
 * (the trampoline restores the thread by itself), inject_abort_all from a signal handler,
 * signals arriving during a call, and processes that cannot be traced. */
#include "inject_test_util.h"

#include <sys/ptrace.h>
#include <sys/time.h>

#define PY311 "/root/.pyenv/versions/3.11.7/bin/python3.11"

/* Works for ~1.5 s; prints 'done ok' when its arithmetic is intact, and whether SIGUSR1 ran
 * its Python handler. */
static const char work_py[] =
    "import signal, time\n"
    "got = []\n"
    "signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))\n"
    "S = sum(i % 7 for i in range(10000))\n"
    "print('ready', flush=True)\n"
    "acc = 0.0\n"
    "t = time.monotonic()\n"
    "while time.monotonic() - t < 1.5:\n"
    "    for i in range(10000):\n"
    "        acc += (i % 7) * 1.0\n"
    "print('done', 'ok' if acc % S == 0 and acc > 0 else 'BAD %r' % acc,\n"
    "      'usr1' if got else 'nousr1')\n";

static void start_work(t_proc_t *p)
{
    CHECK(t_spawn(p, PY311, work_py) == 0, "spawn");
    CHECK(t_expect(p, "ready", 10), "ready: %s", p->buf);
    usleep(100000);
}

static void end_work(t_proc_t *p, const char *what, int want_usr1)
{
    int st = t_finish(p, 30);
    CHECK(st == 0, "%s: exit status %d: %s", what, st, p->buf);
    CHECK(strstr(p->buf, "done ok") != NULL, "%s: output %s", what, p->buf);
    if (want_usr1)
        CHECK(strstr(p->buf, "usr1") && !strstr(p->buf, "nousr1"), "%s: %s", what, p->buf);
}

/* Opens a session on PID, loads the test library and finds its function SYM (*FN); returns
 * the session or NULL (each step checked). */
static inject_session_t *open_loaded(pid_t pid, int timeout_ms, const char *sym, raddr_t *fn,
                                     inject_report_t *rep)
{
    inject_opts_t o = {.timeout_ms = timeout_ms};
    inject_session_t *s = NULL;
    int rc = inject_session_open(pid, &o, rep, &s);
    CHECK_RC(rc, 0, *rep);
    if (rc)
        return NULL;
    uint64_t h = 0;
    rc = inject_session_dlopen(s, t_lib, &h);
    CHECK_RC(rc, 0, *rep);
    *fn = 0;
    if (rc == 0) {
        rc = inject_session_symbol(s, t_lib, sym, fn);
        CHECK_RC(rc, 0, *rep);
    }
    if (rc) {
        inject_session_close(s);
        return NULL;
    }
    return s;
}

static void test_missing_library(void)
{
    t_proc_t p;
    start_work(&p);
    inject_report_t rep;
    uint64_t h = 1;
    int rc = inject_call_dlopen(p.pid, "/nonexistent/libnope.so", &h, &rep);
    CHECK_RC(rc, SCRY_E_NOTFOUND, rep);
    CHECK(h == 0, "handle %llu", (unsigned long long)h);
    CHECK(strstr(rep.error, "libnope.so") != NULL, "dlerror text: %s", rep.error);
    fprintf(stderr, "  missing library: %s\n", rep.error);
    end_work(&p, "missing library", 0);
}

static void test_crash(void)
{
    t_proc_t p;
    start_work(&p);
    inject_report_t rep;
    raddr_t fn;
    inject_session_t *s = open_loaded(p.pid, 2000, "scry_test_crash", &fn, &rep);
    if (s) {
        int rc = inject_session_call(s, fn, NULL, 0, NULL);
        CHECK_RC(rc, SCRY_E_FAULT, rep);
        fprintf(stderr, "  crash: %s\n", rep.error);
        rc = inject_session_call(s, fn, NULL, 0, NULL);
        CHECK_RC(rc, SCRY_E_INVAL, rep); /* the session is over */
        CHECK(inject_session_close(s) == 0, "close");
    }
    end_work(&p, "crash", 0);
}

static void test_timeout(void)
{
    t_proc_t p;
    start_work(&p);
    inject_report_t rep;
    raddr_t fn;
    inject_session_t *s = open_loaded(p.pid, 300, "scry_test_sleep_ms", &fn, &rep);
    t_unlink("slept");
    if (s) {
        int rc;
        uint64_t arg = 5000;
        double t0 = ((double)scry_now_ns() / 1e9);
        rc = inject_session_call(s, fn, &arg, 1, NULL);
        double dt = ((double)scry_now_ns() / 1e9) - t0;
        CHECK_RC(rc, SCRY_E_TIMEOUT, rep);
        CHECK(dt < 1.0, "timeout took %.3f s", dt);
        fprintf(stderr, "  timeout after %.3f s: %s\n", dt, rep.error);
        CHECK(inject_session_close(s) == 0, "close");
    }
    end_work(&p, "timeout", 0);
    CHECK(!t_file_exists("slept"), "the abandoned call must not have completed");
}

/* The tracer dies (SIGKILL) while the target runs the remote call: the kernel detaches the
 * thread, which must complete the call and return to its own code by itself. */
static void test_tracer_killed(void)
{
    t_proc_t p;
    start_work(&p);
    t_unlink("slept");
    int st = t_kill_tracer_in_call(p.pid, 800, 300000);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child status %#x", st);
    end_work(&p, "tracer killed", 0);
    CHECK(t_file_exists("slept"), "the call completed in the target after the tracer died");
}

/* inject_abort_all from a signal handler during a call: the thread is released at once and
 * finishes the call by itself. */
static void test_abort(void)
{
    t_proc_t p;
    start_work(&p);
    inject_report_t rep;
    t_unlink("slept");
    raddr_t fn;
    inject_session_t *s = open_loaded(p.pid, 5000, "scry_test_sleep_ms", &fn, &rep);
    if (s) {
        int rc;
        struct sigaction old;
        t_abort_after(&old, 200000);
        uint64_t arg = 600;
        double t0 = ((double)scry_now_ns() / 1e9);
        rc = inject_session_call(s, fn, &arg, 1, NULL);
        double dt = ((double)scry_now_ns() / 1e9) - t0;
        sigaction(SIGALRM, &old, NULL);
        CHECK_RC(rc, SCRY_E_AGAIN, rep);
        CHECK(dt < 0.5, "abort took %.3f s", dt);
        CHECK(inject_session_close(s) == 0, "close");
        inject_report_t rep2;
        rc = inject_call_dlopen(p.pid, t_lib, NULL, &rep2);
        CHECK_RC(rc, SCRY_E_AGAIN, rep2); /* sticky until cleared */
        inject_abort_clear();
    }
    end_work(&p, "abort", 0);
    CHECK(t_file_exists("slept"), "the released call completed by itself");
}

/* A signal for the borrowed thread during the call stays pending (blocked mask): Python's handler
 * still runs. */
static void test_signal_during_call(void)
{
    t_proc_t p;
    start_work(&p);
    inject_report_t rep;
    raddr_t fn;
    inject_session_t *s = open_loaded(p.pid, 5000, "scry_test_sleep_ms", &fn, &rep);
    if (s) {
        int rc;
        pid_t killer = fork();
        if (killer == 0) {
            check_child_dies_with_test();
            usleep(150000);
            kill(p.pid, SIGUSR1);
            _exit(0);
        }
        uint64_t arg = 500, ret = 0;
        rc = inject_session_call(s, fn, &arg, 1, &ret);
        CHECK_RC(rc, 0, rep);
        CHECK(ret == 500, "ret %llu", (unsigned long long)ret);
        waitpid(killer, NULL, 0);
        CHECK(inject_session_close(s) == 0, "close");
        CHECK(rep.signals_deferred >= 1, "signals deferred %d", rep.signals_deferred);
    }
    end_work(&p, "signal", 1);
}

static void test_untraceable(void)
{
    inject_report_t rep;
    /* A pid that no longer exists. */
    pid_t gone = fork();
    if (gone == 0)
        _exit(0);
    waitpid(gone, NULL, 0);
    int rc = inject_call_dlopen(gone, t_lib, NULL, &rep);
    CHECK_RC(rc, SCRY_E_NOPROC, rep);
    rc = inject_call_dlopen(0, t_lib, NULL, &rep);
    CHECK_RC(rc, SCRY_E_INVAL, rep);

    /* A kernel thread. */
    rc = inject_call_dlopen(2, t_lib, NULL, &rep);
    CHECK(rc == SCRY_E_PERM || rc == SCRY_E_NOTFOUND || rc == SCRY_E_AGAIN, "kthreadd: %s (%s)",
          scry_err_name(rc), rep.error);

    t_proc_t p;
    start_work(&p);
    /* Already traced by someone else. */
    int sync;
    pid_t other = t_fork_piped(&sync);
    if (other == 0) {
        long r = ptrace(PTRACE_SEIZE, p.pid, 0, 0);
        if (write(sync, r == 0 ? "y" : "n", 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char c = 0;
    CHECK(read(sync, &c, 1) == 1 && c == 'y', "helper seized the target");
    close(sync);
    rc = inject_call_dlopen(p.pid, t_lib, NULL, &rep);
    CHECK_RC(rc, SCRY_E_PERM, rep);
    kill(other, SIGKILL);
    waitpid(other, NULL, 0);

    /* An unprivileged caller against a root process. */
    pid_t nobody = fork();
    if (nobody == 0) {
        check_child_dies_with_test();
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(100);
        inject_report_t r2;
        int e = inject_call_dlopen(p.pid, t_lib, NULL, &r2);
        _exit(e == SCRY_E_PERM ? 0 : 10 - e);
    }
    int st;
    waitpid(nobody, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "unprivileged: exit %d", WEXITSTATUS(st));

    /* Bad arguments. */
    inject_session_t *s = NULL;
    rc = inject_session_open(p.pid, NULL, &rep, &s);
    CHECK_RC(rc, 0, rep);
    if (s) {
        uint64_t args[7] = {0};
        CHECK(inject_session_call(s, 0x1000, args, 7, NULL) == SCRY_E_INVAL, "7 args");
        CHECK(inject_session_call(s, 0, args, 1, NULL) == SCRY_E_INVAL, "null function");
        CHECK(inject_session_close(s) == 0, "close");
    }
    CHECK(inject_session_close(NULL) == 0, "close(NULL)");
    end_work(&p, "untraceable", 0);
}

int main(void)
{
    if (t_setup("robust") != 0) {
        fprintf(stderr, "cannot build the test library\n");
        return 1;
    }
    test_untraceable();
    test_missing_library();
    test_crash();
    test_timeout();
    test_tracer_killed();
    test_abort();
    test_signal_during_call();
    t_cleanup();
    return t_summary("test_inject_robust");
}
