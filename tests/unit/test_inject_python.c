/* test_inject_python.c - injecting a library into real CPython processes: busy, sleeping in
 * a syscall, blocked on read (Debian's static /usr/bin/python3.11), 20 threads, and several
 * pyenv versions. Each case checks the injected code ran (constructor marker, return value)
 * and that the target then finished its own work with the right output and exit status 0. */
#include "inject_test_util.h"

#include <dirent.h>
#include <sys/syscall.h>

#define PYENV "/root/.pyenv/versions/"

static const char busy_py[] = "import sys\n"
                              "print('ready', flush=True)\n"
                              "acc = 0.0\n"
                              "x = 0\n"
                              "for i in range(3000000):\n"
                              "    acc += (i % 7) * 0.5 / (1 + (i % 13))\n"
                              "    x ^= i * 2654435761 % 1000003\n"
                              "print('result', repr(acc), x)\n";

static void busy_expected(double *acc, unsigned long long *x)
{
    *acc = 0.0;
    *x = 0;
    for (unsigned long long i = 0; i < 3000000; i++) {
        *acc += (double)(i % 7) * 0.5 / (double)(1 + (i % 13));
        *x ^= i * 2654435761ull % 1000003ull;
    }
}

static void show(const char *what, const inject_report_t *r)
{
    fprintf(stderr,
            "  %s: tid %d attempts %d in_syscall %d nr %ld stopped %.3f ms call %.3f ms "
            "syscall stops %d signals %d%s%s\n",
            what, (int)r->tid, r->attempts, r->in_syscall, r->syscall_nr, r->stopped_ns / 1e6,
            r->call_ns / 1e6, r->syscall_stops, r->signals_deferred, r->error[0] ? " err: " : "",
            r->error);
}

/* Loads the test library into PID and checks its effects. */
static void inject_and_check(pid_t pid, const char *tag, inject_report_t *rep)
{
    char arg[64], got[128];
    snprintf(arg, sizeof arg, "hello-%s", tag);
    t_unlink("marker");
    t_unlink("arg");
    uint64_t handle = 0, ret = 0;
    memset(rep, 0, sizeof *rep);
    int rc = inject_load_and_call(pid, t_lib, "scry_test_answer", arg, NULL, &handle, &ret, rep);
    show(tag, rep);
    CHECK_RC(rc, 0, *rep);
    CHECK(handle != 0, "dlopen handle");
    CHECK(ret == 42 + strlen(arg), "return value %llu", (unsigned long long)ret);
    CHECK(t_file_exists("marker"), "constructor marker missing (%s)", tag);
    CHECK(t_read_file("arg", got, sizeof got) > 0 && strcmp(got, arg) == 0, "arg file '%s'",
          t_read_file("arg", got, sizeof got) > 0 ? got : "?");
    CHECK(rep->tid > 0, "tid");
}

static void case_busy(const char *exe, const char *tag)
{
    t_proc_t p;
    if (access(exe, X_OK) != 0) {
        fprintf(stderr, "  skip %s (%s missing)\n", tag, exe);
        return;
    }
    CHECK(t_spawn(&p, exe, busy_py) == 0, "spawn");
    CHECK(t_expect(&p, "ready", 10), "ready (%s)", p.buf);
    usleep(100000);
    inject_report_t rep;
    inject_and_check(p.pid, tag, &rep);
    CHECK(!rep.in_syscall, "a busy thread is not in a syscall");

    /* Six integer arguments through the one-shot API. */
    raddr_t add = 0;
    int rc = inject_find_symbol(p.pid, t_lib, "scry_test_add", &add);
    CHECK_RC(rc, 0, rep);
    uint64_t args[6] = {1, 2, 3, 4, 5, 6}, ret = 0;
    inject_report_t rep2;
    rc = inject_call_function(p.pid, add, args, 6, &ret, &rep2);
    CHECK_RC(rc, 0, rep2);
    CHECK(ret == 1 + 4 + 9 + 16 + 25 + 36, "add returned %llu", (unsigned long long)ret);

    int st = t_finish(&p, 60);
    CHECK(st == 0, "exit status %d, output: %s", st, p.buf);
    double acc, pacc = -1;
    unsigned long long x, px = 0;
    busy_expected(&acc, &x);
    const char *r = strstr(p.buf, "result ");
    CHECK(r && sscanf(r, "result %lf %llu", &pacc, &px) == 2, "no result: %s", p.buf);
    CHECK(pacc == acc && px == x, "%s: got %.17g %llu want %.17g %llu", tag, pacc, px, acc, x);
}

static void case_sleep(const char *exe, const char *tag)
{
    static const char py[] = "import time\n"
                             "print('ready', flush=True)\n"
                             "t = time.monotonic()\n"
                             "time.sleep(1.5)\n"
                             "print('slept %.3f' % (time.monotonic() - t))\n";
    t_proc_t p;
    t_start_ready(&p, exe, py, 300000);
    inject_report_t rep;
    inject_and_check(p.pid, tag, &rep);
    CHECK(rep.in_syscall, "the sleeping thread was in a syscall");
    CHECK(rep.syscall_nr == SYS_clock_nanosleep || rep.syscall_nr == SYS_select ||
              rep.syscall_nr == SYS_pselect6,
          "syscall %ld", rep.syscall_nr);
    int st = t_finish(&p, 20);
    CHECK(st == 0, "exit status %d: %s", st, p.buf);
    double slept = 0;
    const char *s = strstr(p.buf, "slept ");
    CHECK(s && sscanf(s, "slept %lf", &slept) == 1, "output %s", p.buf);
    fprintf(stderr, "  %s: slept %.3f s (asked 1.5)\n", tag, slept);
    CHECK(slept >= 1.49 && slept < 1.9, "slept %.3f", slept);
}

static void case_read_static(void)
{
    static const char py[] = "import sys\n"
                             "print('ready', flush=True)\n"
                             "line = sys.stdin.readline()\n"
                             "print('echo', line.strip())\n";
    t_proc_t p;
    t_start_ready(&p, "/usr/bin/python3.11", py, 200000);
    inject_report_t rep;
    inject_and_check(p.pid, "debian-3.11-read", &rep);
    CHECK(rep.in_syscall && rep.syscall_nr == SYS_read, "in read: %d %ld", rep.in_syscall,
          rep.syscall_nr);
    CHECK(write(p.in, "hello\n", 6) == 6, "write stdin");
    CHECK(t_expect(&p, "echo hello", 10), "echo: %s", p.buf);
    int st = t_finish(&p, 10);
    CHECK(st == 0, "exit status %d: %s", st, p.buf);
}

static void case_threads(const char *exe)
{
    static const char py[] =
        "import threading\n"
        "def work(k, out):\n"
        "    s = 0\n"
        "    for i in range(1500000):\n"
        "        s += (i * k) % 7\n"
        "    out[k] = s\n"
        "out = [0] * 20\n"
        "ts = [threading.Thread(target=work, args=(k, out)) for k in range(20)]\n"
        "for t in ts: t.start()\n"
        "print('ready', flush=True)\n"
        "for t in ts: t.join()\n"
        "print('total', sum(out))\n";
    long long want = 0;
    for (long long k = 0; k < 20; k++)
        for (long long i = 0; i < 1500000; i++)
            want += (i * k) % 7;
    t_proc_t p;
    t_start_ready(&p, exe, py, 50000);
    inject_report_t rep;
    inject_and_check(p.pid, "3.11-20-threads", &rep);

    /* Again, on a thread that is not the main one (the library is loaded already: dlopen
     * only takes a reference, the constructor does not run twice). */
    char task[64];
    snprintf(task, sizeof task, "/proc/%d/task", (int)p.pid);
    pid_t other = 0;
    DIR *d = opendir(task);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL)
        if (atoi(de->d_name) > 0 && atoi(de->d_name) != p.pid)
            other = atoi(de->d_name);
    if (d)
        closedir(d);
    CHECK(other > 0, "a second thread");
    inject_opts_t o = {.tid = other};
    uint64_t ret = 0;
    t_unlink("arg");
    int rc = inject_load_and_call(p.pid, t_lib, "scry_test_answer", "thread", &o, NULL, &ret, &rep);
    show("3.11-20-threads, forced tid", &rep);
    CHECK_RC(rc, 0, rep);
    CHECK(rep.tid == other && ret == 42 + 6, "tid %d ret %llu", (int)rep.tid,
          (unsigned long long)ret);
    CHECK(t_file_exists("arg"), "arg written");
    int st = t_finish(&p, 60);
    CHECK(st == 0, "exit status %d: %s", st, p.buf);
    long long total = -1;
    const char *s = strstr(p.buf, "total ");
    CHECK(s && sscanf(s, "total %lld", &total) == 1 && total == want, "total %lld want %lld: %s",
          total, want, p.buf);
}

/* A target that spends its time in malloc/mmap/munmap: threads inside libc's allocator are
 * skipped until one is at a safe point. */
static void case_malloc_heavy(const char *exe)
{
    static const char py[] = "import time\n"
                             "print('ready', flush=True)\n"
                             "t = time.monotonic(); n = 0\n"
                             "while time.monotonic() - t < 1.5:\n"
                             "    bufs = [bytearray(300000) for _ in range(8)]\n"
                             "    n += len(bufs)\n"
                             "print('allocated', n > 0)\n";
    t_proc_t p;
    t_start_ready(&p, exe, py, 100000);
    inject_report_t rep;
    inject_and_check(p.pid, "3.11-malloc-heavy", &rep);
    int st = t_finish(&p, 30);
    CHECK(st == 0 && strstr(p.buf, "allocated True"), "exit %d: %s", st, p.buf);
}

int main(void)
{
    if (t_setup("py") != 0) {
        fprintf(stderr, "cannot build the test library\n");
        return 1;
    }
    case_busy(PYENV "3.11.7/bin/python3.11", "3.11-busy");
    case_sleep(PYENV "3.11.7/bin/python3.11", "3.11-sleep");
    case_read_static();
    case_threads(PYENV "3.11.7/bin/python3.11");
    case_malloc_heavy(PYENV "3.11.7/bin/python3.11");
    case_busy("/usr/bin/python3.11", "debian-3.11-busy");
    case_busy(PYENV "3.8.18/bin/python3.8", "3.8-busy");
    case_sleep(PYENV "3.8.18/bin/python3.8", "3.8-sleep");
    case_busy(PYENV "3.12.1/bin/python3.12", "3.12-busy");
    case_busy(PYENV "3.13.0/bin/python3.13", "3.13-busy");
    t_cleanup();
    return t_summary("test_inject_python");
}
