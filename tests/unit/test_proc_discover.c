/* test_proc_discover.c - a process that forks, execs and exits is reported by the
 * kernel's process-events connector within a second (when this kernel lets us subscribe),
 * and /proc scans find it too. */
#include "discover.h"
#include "scry_err.h"
#include "scry_time.h"
#include "test_serve_util.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct seen {
    pid_t watch;
    int new_, exec_, exit_, lost;
    int bad_time; /* an event of the child whose kernel time is 0 or in the future */
    int scanned;
} seen_t;

static void on_event(void *ctx, enum proc_discover_event ev, pid_t pid, pid_t parent,
                     uint64_t when_ns)
{
    (void)parent;
    seen_t *s = ctx;
    if (ev == PROC_DISCOVER_LOST)
        s->lost++;
    if (pid != s->watch)
        return;
    if (when_ns == 0 || when_ns > scry_now_ns())
        s->bad_time++;
    if (ev == PROC_DISCOVER_NEW)
        s->new_++;
    else if (ev == PROC_DISCOVER_EXEC)
        s->exec_++;
    else if (ev == PROC_DISCOVER_EXIT)
        s->exit_++;
}

static void on_scan(void *ctx, enum proc_discover_event ev, pid_t pid, pid_t parent,
                    uint64_t when_ns)
{
    (void)parent;
    (void)when_ns;
    seen_t *s = ctx;
    if (ev == PROC_DISCOVER_NEW && pid == s->watch)
        s->scanned++;
}

static void pump(proc_discover_t *d, seen_t *s, int (*done)(const seen_t *), double max_s)
{
    double t0 = ((double)scry_now_ns() / 1e9);
    while (!done(s) && ((double)scry_now_ns() / 1e9) - t0 < max_s) {
        struct pollfd p = {.fd = proc_discover_fd(d), .events = POLLIN};
        poll(&p, 1, 50);
        /* events of other processes are skipped */
        pid_t keep = s->watch;
        CHECK(proc_discover_read(d, on_event, s) >= 0, "read");
        s->watch = keep;
    }
}

static int got_exec(const seen_t *s)
{
    return s->exec_ > 0;
}

static int got_exit(const seen_t *s)
{
    return s->exit_ > 0;
}

/* proc_descendants over a made-up listing: depth, order, zombies, a reparented orphan,
 * the bound; proc_list_all over the real /proc: this process and its parent, sorted. */
static void test_descendants(void)
{
    /* 10 -> 11 -> 13 -> 14; 10 -> 12 (zombie) -> 15; 16 -> 1 (an orphan); 9 -> 17 */
    proc_entry_t e[] = {
        {1, 0, 1, 'S'},   {9, 1, 2, 'S'},   {10, 1, 3, 'S'},  {11, 10, 4, 'S'}, {12, 10, 5, 'Z'},
        {13, 11, 6, 'R'}, {14, 13, 7, 'S'}, {15, 12, 8, 'S'}, {16, 1, 9, 'S'},  {17, 9, 10, 'S'},
    };
    size_t n = sizeof e / sizeof e[0];
    pid_t out[16];
    size_t k = proc_descendants(e, n, 10, out, 16);
    CHECK(k == 3 && out[0] == 11 && out[1] == 13 && out[2] == 14,
          "10's living descendants 11, 13, 14 in order (%zu: %d %d %d)", k, k > 0 ? out[0] : 0,
          k > 1 ? out[1] : 0, k > 2 ? out[2] : 0);
    CHECK(proc_descendants(e, n, 14, out, 16) == 0, "a leaf has none");
    CHECK(proc_descendants(e, n, 10, out, 2) == 2, "bounded by CAP");
    CHECK(proc_descendants(e, n, 1, out, 16) == 7,
          "init's: all but the zombie and its child "
          "(%zu)",
          proc_descendants(e, n, 1, out, 16));
    CHECK(proc_entry_find(e, n, 13) == &e[5] && proc_entry_find(e, n, 8) == NULL, "find");

    static proc_entry_t all[65536];
    int got = proc_list_all(all, 65536);
    CHECK(got > 1, "listed %d processes", got);
    const proc_entry_t *me = got > 0 ? proc_entry_find(all, (size_t)got, getpid()) : NULL;
    CHECK(me && me->ppid == getppid() && me->start_time > 0, "this process with its parent");
    int sorted = 1;
    for (int i = 1; i < got; i++)
        sorted &= all[i - 1].pid < all[i].pid;
    CHECK(sorted, "sorted by pid");
    CHECK(proc_list_all(all, 1) == 1, "bounded by CAP");
}

int main(void)
{
    test_descendants();
    char why[256];
    proc_discover_t *d = proc_discover_new(1, why, sizeof why);
    CHECK(d != NULL, "new");
    if (!d)
        return test_summary("test_proc_discover");
    int pipefd[2];
    if (pipe(pipefd) != 0)
        return 1;
    pid_t child = fork();
    if (child == 0) {
        check_child_dies_with_test();
        char c;
        close(pipefd[1]);
        if (read(pipefd[0], &c, 1) != 1)
            _exit(1);
        execl("/bin/sleep", "sleep", "30", (char *)NULL);
        _exit(127);
    }
    close(pipefd[0]);
    seen_t s = {.watch = child};
    int n = proc_discover_scan(on_scan, &s);
    CHECK(n > 1 && s.scanned == 1, "scan found %d processes, child %d times", n, s.scanned);
    if (proc_discover_fd(d) < 0) {
        printf("SKIP connector part: %s\n", why);
    } else {
        double t0 = ((double)scry_now_ns() / 1e9);
        CHECK(write(pipefd[1], "x", 1) == 1, "go");
        pump(d, &s, got_exec, 2.0);
        double t_exec = ((double)scry_now_ns() / 1e9) - t0;
        CHECK(s.exec_ == 1, "exec seen %d times (%.3f s)", s.exec_, t_exec);
        CHECK(s.bad_time == 0, "%d events with a kernel time of 0 or later than now", s.bad_time);
        CHECK(t_exec < 1.0, "exec reported within a second: %.3f s", t_exec);
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        t0 = ((double)scry_now_ns() / 1e9);
        pump(d, &s, got_exit, 2.0);
        CHECK(s.exit_ == 1, "exit seen %d times", s.exit_);
        printf("connector: exec after %.1f ms, exit after %.1f ms\n", t_exec * 1000,
               (((double)scry_now_ns() / 1e9) - t0) * 1000);
        /* a fork of a new process is reported as NEW */
        pid_t c2 = fork();
        if (c2 == 0) {
            check_child_dies_with_test();
            usleep(200 * 1000);
            _exit(0);
        }
        seen_t s2 = {.watch = c2};
        t0 = ((double)scry_now_ns() / 1e9);
        while (!s2.new_ && ((double)scry_now_ns() / 1e9) - t0 < 2.0) {
            struct pollfd p = {.fd = proc_discover_fd(d), .events = POLLIN};
            poll(&p, 1, 50);
            proc_discover_read(d, on_event, &s2);
        }
        CHECK(s2.new_ == 1, "fork seen %d times", s2.new_);
        waitpid(c2, NULL, 0);
        child = 0;
    }
    if (child > 0) {
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
    }
    proc_discover_free(d);
    /* without the connector: no socket, read is a no-op */
    d = proc_discover_new(0, why, sizeof why);
    CHECK(d && proc_discover_fd(d) == -1 && strstr(why, "disabled"), "%s", why);
    seen_t none = {.watch = 1};
    CHECK(proc_discover_read(d, on_event, &none) == 0, "no-op");
    proc_discover_free(d);
    return test_summary("test_proc_discover");
}
