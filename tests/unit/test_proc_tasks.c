/* test_sampler_tasks.c - which stops count (proc_tasks_stop_counts): a stop of a running thread
 * taken at a system call's exit counts only while such stops stay within the thread's share
 * of system time; every other stop counts.
 *
 * Known answers: a thread with 1% system time and 100 of 1,000 stops at system-call exits
 * keeps 1% of 1,000 (+1) of them; one with 50% keeps all its 300; stops of a sleeping thread
 * and stops not at a system call always count; before TASKS_SHARE_MIN_TICKS ticks of CPU
 * only the first one counts; a tid whose times went backwards (reused) starts over.
 */
#include "check.h"
#include "tasks.h"

static proc_task_t running(uint64_t utime, uint64_t stime)
{
    return (proc_task_t){.tid = 42, .state = 'R', .stopped = 1, .utime = utime, .stime = stime};
}

/* N stops of TASK, every EVERY-th at a system call's exit; returns those at one counted. */
static int feed(proc_task_t *task, int n, int every, int *dropped)
{
    int kept = 0;
    *dropped = 0;
    for (int i = 0; i < n; i++) {
        task->at_syscall = (uint8_t)(i % every == 0);
        int counts = proc_tasks_stop_counts(task);
        if (task->at_syscall && counts)
            kept++;
        if (!counts)
            ++*dropped;
        CHECK(counts || task->at_syscall); /* only a stop at a system call is ever dropped */
    }
    return kept;
}

static void test_low_system_share(void)
{
    proc_task_t t = running(990, 10); /* 1% system since it was listed (times from 0) */
    int dropped;
    int kept = feed(&t, 1000, 10, &dropped);
    CHECK_INT(kept, >=, 10);
    CHECK_INT(kept, <=, 12);
    CHECK_INT(dropped, ==, 100 - kept);
    CHECK_INT(t.stops_running, ==, 1000);
}

static void test_high_system_share(void)
{
    proc_task_t t = running(500, 500);
    int dropped;
    int kept = feed(&t, 1000, 3, &dropped); /* 334 at system calls, 50% allowed */
    CHECK_INT(kept, ==, 334);
    CHECK_INT(dropped, ==, 0);
}

static void test_always_counted(void)
{
    proc_task_t t = running(1000, 0);
    t.state = 'S'; /* asleep when asked: its stop is where it waits */
    t.at_syscall = 1;
    for (int i = 0; i < 50; i++)
        CHECK_INT(proc_tasks_stop_counts(&t), ==, 1);
    CHECK_INT(t.stops_running, ==, 0);
    proc_task_t u = running(1000, 0);
    u.stopped = 0; /* read without a stop */
    u.at_syscall = 1;
    CHECK_INT(proc_tasks_stop_counts(&u), ==, 1);
}

static void test_too_early(void)
{
    proc_task_t t = running(5, 1); /* 6 ticks of CPU: no share yet */
    int dropped;
    int kept = feed(&t, 20, 1, &dropped);
    CHECK_INT(kept, ==, 1);
    CHECK_INT(dropped, ==, 19);
}

static void test_reused_tid(void)
{
    proc_task_t t = running(100, 100);
    t.utime0 = 5000; /* a thread that had more CPU than this one has: another thread */
    t.stime0 = 10;
    t.at_syscall = 1;
    CHECK_INT(proc_tasks_stop_counts(&t), ==, 1); /* starts over: the first one counts */
    CHECK(t.utime0 == 100 && t.stime0 == 100);
}

int main(void)
{
    test_low_system_share();
    test_high_system_share();
    test_always_counted();
    test_too_early();
    test_reused_tid();
    return check_summary("test_sampler_tasks");
}
