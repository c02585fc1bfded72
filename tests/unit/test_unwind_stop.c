/* test_unwind_stop.c - stopping and resuming threads never harms the target.
 *
 * A real 3.11 process runs 200 threads that each compute a checksum. We stop, unwind and
 * resume every thread, round after round, and check after each round that no thread is
 * left stopped ('t'/'T'). Midway, a forked child stops a few threads and is SIGKILLed
 * while they are stopped: the kernel must detach them and they must run on. The target
 * must finish with every checksum right and exit 0.
 */

#include "python_child.h"
#include "test_unwind_live.h"

#define NTHREADS 200

/* The workers wait for a gate file, so the test always gets its rounds of stops in while
 * every thread is alive, however slow the machine is; then they do checked work. */
static const char script[] = "import os, sys, threading, time\n"
                             "N = 200\n"
                             "gate = os.environ['SCRY_STOP_GATE']\n"
                             "def work(i):\n"
                             "    while not os.path.exists(gate): time.sleep(0.01)\n"
                             "    s = 0\n"
                             "    for k in range(150000):\n"
                             "        s += k % 7\n"
                             "    res[i] = s\n"
                             "res = [0] * N\n"
                             "ts = [threading.Thread(target=work, args=(i,)) for i in range(N)]\n"
                             "for t in ts: t.start()\n"
                             "print(os.getpid(), flush=True)\n"
                             "for t in ts: t.join()\n"
                             "exp = sum(k % 7 for k in range(150000))\n"
                             "print('done', all(r == exp for r in res), flush=True)\n";

static int count_stopped(pid_t pid)
{
    pid_t tids[NTHREADS + 16];
    size_t n = python_child_tids(pid, tids, NTHREADS + 16);
    int stopped = 0;
    for (size_t i = 0; i < n; i++) {
        char s = thread_state(pid, tids[i]);
        if (s == 't' || s == 'T')
            stopped++;
    }
    return stopped;
}

/* A child stops up to K threads, tells us, and waits to be killed. */
static void kill_mid_stop(pid_t target)
{
    pid_t tids[NTHREADS + 16];
    size_t n = python_child_tids(target, tids, NTHREADS + 16);
    if (n < 2)
        return;
    size_t k = n < 6 ? n : 6;
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t c = fork();
    if (c == 0) {
        check_child_dies_with_test();
        close(fds[0]);
        char stopped = 0;
        for (size_t i = 0; i < k; i++)
            if (proc_stop_thread(tids[i]) == 0)
                stopped++;
        if (write(fds[1], &stopped, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(fds[1]);
    char stopped = 0;
    CHECK(read(fds[0], &stopped, 1) == 1);
    close(fds[0]);
    int now = count_stopped(target);
    fprintf(stderr, "child stopped %d threads, %d seen stopped; killing it\n", stopped, now);
    CHECK(stopped > 0 && now >= stopped);
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
    int left = -1;
    for (int i = 0; i < 100 && left != 0; i++) {
        sleep_ms(5);
        left = count_stopped(target);
    }
    fprintf(stderr, "after the SIGKILL: %d threads stopped\n", left);
    CHECK_INT(left, ==, 0);
}

int main(void)
{
    const char *python = PYENV "3.11.7/bin/python3.11";
    if (!file_exists(python)) {
        fprintf(stderr, "skip: %s not installed\n", python);
        return 0;
    }
    child_t c = {0, -1};
    char gate[64];
    snprintf(gate, sizeof gate, "/tmp/scry-stop-gate-%d", (int)getpid());
    unlink(gate);
    setenv("SCRY_STOP_GATE", gate, 1);
    CHECK(spawn_python(python, script, NULL, &c) == 0);
    char line[128];
    CHECK(read_line(&c, line, sizeof line, 20000) > 0);
    unwind_t *u = unwind_new(c.pid);
    CHECK(u != NULL);
    static unwind_frame_t frames[UNWIND_MAX_DEPTH];
    int rounds = 0, stops = 0, gone = 0, unwound = 0, killed = 0, left_stopped = 0;
    int done = 0;
    for (; rounds < 1000 && !done; rounds++) {
        pid_t tids[NTHREADS + 16];
        size_t n = python_child_tids(c.pid, tids, NTHREADS + 16);
        for (size_t i = 0; i < n; i++) {
            int rc = proc_stop_thread(tids[i]);
            if (rc == SCRY_E_GONE || rc == SCRY_E_NOPROC) {
                gone++;
                continue;
            }
            if (rc != 0) {
                fprintf(stderr, "stop %d: %d\n", (int)tids[i], rc);
                continue;
            }
            stops++;
            size_t nf = 0;
            if ((i + (size_t)rounds) % 4 == 0 &&
                unwind_thread(u, tids[i], frames, UNWIND_MAX_DEPTH, &nf) == 0 && nf > 0)
                unwound++;
            rc = proc_resume_thread(tids[i]);
            CHECK(rc == 0 || rc == SCRY_E_GONE);
        }
        left_stopped += count_stopped(c.pid);
        if (rounds == 3 && !killed) {
            kill_mid_stop(c.pid);
            killed = 1;
        }
        if (rounds == 6) { /* let the workers run: stops continue while they work */
            FILE *g = fopen(gate, "w");
            CHECK(g != NULL);
            if (g)
                fclose(g);
        }
        struct pollfd p = {.fd = c.out, .events = POLLIN};
        if (poll(&p, 1, 0) > 0)
            done = 1;
    }
    CHECK(proc_reap_pending() == 0);
    fprintf(stderr, "rounds %d, stops %d, unwound %d, gone %d, seen stopped after rounds %d\n",
            rounds, stops, unwound, gone, left_stopped);
    CHECK_INT(left_stopped, ==, 0);
    CHECK(stops > 2 * NTHREADS);
    CHECK(read_line(&c, line, sizeof line, 60000) > 0);
    fprintf(stderr, "target says: %s\n", line);
    CHECK_STR(line, ==, "done True");
    int status = -1;
    CHECK(waitpid(c.pid, &status, 0) == c.pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    unlink(gate);
    c.pid = 0;
    stop_child(&c);
    unwind_free(u);
    return check_summary("test_unwind_stop");
}
