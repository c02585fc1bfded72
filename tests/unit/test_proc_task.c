/* test_proc_task.c - proc/'s /proc parsers on captured text, its readers and task listing on
 * this process (with threads of its own), and the open-file table the sampler uses. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "scry_proc.h"
#include "scry_err.h"

static void test_parsers(void)
{
    char st = 0;
    static const char stat1[] = "1234 (python3.11) R 1 1234 1234 0 -1 4194304 2100 0 0 0";
    CHECK(proc_parse_stat_state(stat1, sizeof stat1 - 1, &st) == 0 && st == 'R');
    static const char stat2[] = "77 (a) b) (c) S 1 2 3";
    CHECK(proc_parse_stat_state(stat2, sizeof stat2 - 1, &st) == 0 && st == 'S');
    CHECK(proc_parse_stat_state("77 (abc", 7, &st) == SCRY_E_CORRUPT);
    CHECK(proc_parse_stat_state("", 0, &st) == SCRY_E_CORRUPT);

    proc_syscall_t sc;
    CHECK(proc_parse_syscall("running\n", 8, &sc) == 0 && sc.nr == PROC_SYSCALL_RUNNING);
    static const char s1[] = "202 0x7f00 0x80 0x0 0x0 0x0 0x0 0x7ffd1000 0x7f0012345678\n";
    CHECK(proc_parse_syscall(s1, sizeof s1 - 1, &sc) == 0);
    CHECK(sc.nr == 202 && sc.args[0] == 0x7f00 && sc.args[1] == 0x80 && sc.sp == 0x7ffd1000 &&
          sc.pc == 0x7f0012345678ULL);
    static const char s2[] = "-1 0x7ffd1000 0x401000\n";
    CHECK(proc_parse_syscall(s2, sizeof s2 - 1, &sc) == 0 && sc.nr == PROC_SYSCALL_NONE &&
          sc.pc == 0x401000);
    CHECK(proc_parse_syscall("garbage", 7, &sc) == SCRY_E_CORRUPT);
    CHECK(proc_parse_syscall("230 0x1", 7, &sc) == SCRY_E_CORRUPT);

    uint64_t run = 0, wait = 0, sl = 0;
    static const char ss[] = "123456789 42 7\n";
    CHECK(proc_parse_schedstat(ss, sizeof ss - 1, &run, &wait, &sl) == 0 && run == 123456789 &&
          wait == 42 && sl == 7);
    CHECK(proc_parse_schedstat("1 2", 3, &run, &wait, &sl) == SCRY_E_CORRUPT);
    CHECK(proc_parse_schedstat("-1 2 3", 6, &run, &wait, &sl) == SCRY_E_CORRUPT);
}

static void test_nspid(void)
{
    pid_t ids[PROC_NSPID_MAX];
    size_t n = 0;
    static const char host[] = "Name:\tpython3\nTgid:\t4242\nNSpid:\t4242\nNSpgid:\t4242\n";
    CHECK_INT(proc_parse_status_nspid(host, sizeof host - 1, ids, PROC_NSPID_MAX, &n), ==, 0);
    CHECK_UINT(n, ==, 1);
    CHECK_INT(ids[0], ==, 4242);
    /* A process in a container: host id first, its own id last. */
    static const char nested[] = "Tgid:\t9\nNSpid:\t31337\t120\t1\nNSpgid:\t1\n";
    CHECK_INT(proc_parse_status_nspid(nested, sizeof nested - 1, ids, PROC_NSPID_MAX, &n), ==, 0);
    CHECK_UINT(n, ==, 3);
    CHECK(ids[0] == 31337 && ids[1] == 120 && ids[2] == 1, "%d %d %d", ids[0], ids[1], ids[2]);
    /* No trailing newline, and the line last in the buffer. */
    static const char last[] = "Name:\tx\nNSpid:\t7\t3";
    CHECK_INT(proc_parse_status_nspid(last, sizeof last - 1, ids, PROC_NSPID_MAX, &n), ==, 0);
    CHECK_UINT(n, ==, 2);
    /* Old kernels have no NSpid line; garbage, zero, negative and overflowing ids are
     * refused; more ids than the caller has room for too. */
    static const char old[] = "Name:\tx\nPid:\t7\n";
    CHECK_INT(proc_parse_status_nspid(old, sizeof old - 1, ids, PROC_NSPID_MAX, &n), ==,
              SCRY_E_NOTFOUND);
    static const char *bad[] = {"NSpid:\n",     "NSpid:\tabc\n",         "NSpid:\t0\n",
                                "NSpid:\t-5\n", "NSpid:\t99999999999\n", "NSpid:\t12x\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_INT(proc_parse_status_nspid(bad[i], strlen(bad[i]), ids, PROC_NSPID_MAX, &n), ==,
                  SCRY_E_CORRUPT, "case %zu", i);
    static const char three[] = "NSpid:\t1\t2\t3\n";
    CHECK_INT(proc_parse_status_nspid(three, sizeof three - 1, ids, 2, &n), ==, SCRY_E_CORRUPT);
    char deep[512] = "NSpid:";
    for (int i = 0; i < PROC_NSPID_MAX + 1; i++)
        snprintf(deep + strlen(deep), sizeof deep - strlen(deep), "\t%d", i + 1);
    pid_t many[PROC_NSPID_MAX + 8];
    CHECK_INT(proc_parse_status_nspid(deep, strlen(deep), many, PROC_NSPID_MAX + 8, &n), ==,
              SCRY_E_CORRUPT);
    CHECK_INT(proc_parse_status_nspid(NULL, 0, ids, 1, &n), ==, SCRY_E_INVAL);
}

static volatile int stop_workers;

static void *worker(void *arg)
{
    *(pid_t *)arg = (pid_t)syscall(SYS_gettid);
    while (!stop_workers)
        usleep(1000);
    return NULL;
}

static void test_readers(void)
{
    pid_t me = getpid(), tid = (pid_t)syscall(SYS_gettid);
    char st = 0;
    CHECK_INT(proc_read_task_state(me, tid, &st), ==, 0);
    CHECK_INT(st, ==, 'R');
    proc_syscall_t sc;
    int rc = proc_read_task_syscall(me, tid, &sc);
    CHECK(rc == 0 || rc == SCRY_E_PERM, "rc %d", rc);
    uint64_t run0 = 0, run1 = 0;
    CHECK_INT(proc_read_task_schedstat(me, tid, &run0, NULL), ==, 0);
    volatile double x = 0;
    for (int i = 0; i < 5000000; i++)
        x += i * 0.5;
    CHECK_INT(proc_read_task_schedstat(me, tid, &run1, NULL), ==, 0);
    CHECK_UINT(run1, >, run0);
    CHECK_INT(proc_read_task_state(me, 0x7ffffff0, &st), ==, SCRY_E_GONE);
    /* Our own NSpid: one id per namespace level, the first one is the pid we know. */
    pid_t ids[PROC_NSPID_MAX];
    size_t n = 0;
    CHECK_INT(proc_read_task_nspid(me, tid, ids, PROC_NSPID_MAX, &n), ==, 0);
    CHECK(n >= 1, "n %zu", n);
    CHECK_INT(ids[0], ==, tid);
}

/* The exec mark (pidfile.c) changes when a process execs, and only then. */
static void test_exec_mark(void)
{
    int go[2];
    CHECK_INT(pipe(go), ==, 0);
    pid_t child = fork();
    if (child == 0) {
        check_child_dies_with_test();
        char c;
        if (read(go[0], &c, 1) == 1)
            execl("/bin/sleep", "sleep", "5", (char *)NULL);
        _exit(1);
    }
    CHECK(child > 0);
    uint64_t before = 0, again = 0, after = 0;
    CHECK_INT(proc_read_exec_mark(child, &before), ==, 0);
    CHECK_INT(proc_read_exec_mark(child, &again), ==, 0);
    CHECK(before != 0, "no mark");
    CHECK_UINT(again, ==, before);
    CHECK_INT(write(go[1], "x", 1), ==, 1);
    char exe[256] = "";
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)child);
    for (int i = 0; i < 2000; i++) { /* until the exec is done (2 s at most) */
        ssize_t n = readlink(path, exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = 0;
        if (strstr(exe, "sleep"))
            break;
        usleep(1000);
    }
    CHECK_INT(proc_read_exec_mark(child, &after), ==, 0);
    CHECK(after != before, "mark %llx unchanged after exec", (unsigned long long)after);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    close(go[0]);
    close(go[1]);
    CHECK_INT(proc_read_exec_mark(0x7ffffff0, &after), ==, SCRY_E_GONE);
}

/* Process facts (pidfile.c): the one small-file reader, identity and owner. */
static void test_pidfile(void)
{
    uint64_t start = 0;
    char comm[16] = "";
    const char *stat = "42 (a) b) c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 "
                       "123456 1000 200 18446744073709551615";
    CHECK_INT(proc_parse_stat_identity(stat, strlen(stat), &start, comm, sizeof comm), ==, 0);
    CHECK_STR(comm, ==, "a) b) c");
    CHECK_UINT(start, ==, 123456);
    CHECK_INT(proc_parse_stat_identity(stat, 30, &start, comm, sizeof comm), ==, SCRY_E_CORRUPT);
    CHECK_INT(proc_parse_stat_identity("42 (x", 5, &start, NULL, 0), ==, SCRY_E_CORRUPT);
    uint64_t v = 0;
    CHECK_INT(proc_parse_stat_u64(stat, strlen(stat), 4, &v), ==, 0); /* ppid */
    CHECK_UINT(v, ==, 1);
    CHECK_INT(proc_parse_stat_u64(stat, strlen(stat), 23, &v), ==, 0);
    CHECK_UINT(v, ==, 1000);
    CHECK_INT(proc_parse_stat_u64(stat, strlen(stat), 28, &v), ==, SCRY_E_CORRUPT); /* absent */
    CHECK_INT(proc_parse_stat_u64(stat, strlen(stat), 2, &v), ==, SCRY_E_INVAL);
    CHECK_INT(proc_parse_stat_u64(stat, strlen(stat), 3, &v), ==, SCRY_E_CORRUPT); /* 'S' */
    uid_t uid = 7;
    const char *status = "Name:\tx\nUid:\t1000\t1000\t1000\t1000\nGid:\t5\n";
    CHECK_INT(proc_parse_status_uid(status, strlen(status), &uid), ==, 0);
    CHECK_INT(uid, ==, 1000);
    CHECK_INT(proc_parse_status_uid("Name:\tx\n", 8, &uid), ==, SCRY_E_NOTFOUND);
    CHECK_INT(proc_parse_status_uid("Uid:\t99999999999\n", 17, &uid), ==, SCRY_E_CORRUPT);
    /* a number past 64 bits must not wrap to a small uid (2^64 would read as root) */
    const char *wrap = "Uid:\t18446744073709551616\t0\n";
    CHECK_INT(proc_parse_status_uid(wrap, strlen(wrap), &uid), ==, SCRY_E_CORRUPT);
    const char *neg = "Uid:\t-1\n";
    CHECK_INT(proc_parse_status_uid(neg, strlen(neg), &uid), ==, SCRY_E_CORRUPT);
    /* the process's own executable, as readlink says */
    char exe[512], want[512];
    ssize_t wl = readlink("/proc/self/exe", want, sizeof want - 1);
    CHECK(wl > 0);
    want[wl > 0 ? wl : 0] = 0;
    CHECK_INT(proc_read_exe(getpid(), exe, sizeof exe), ==, (long)wl);
    CHECK_STR(exe, ==, want);
    /* our own process: the reader against what the kernel says */
    pid_t me = getpid();
    char self[64];
    CHECK_INT(proc_read_identity(me, &start, comm, sizeof comm), ==, 0);
    CHECK(start > 0, "start time %llu", (unsigned long long)start);
    CHECK(proc_read_file(me, 0, "comm", self, sizeof self) > 0);
    self[strcspn(self, "\n")] = 0;
    CHECK_STR(comm, ==, self);
    CHECK_INT(proc_read_uid(me, &uid), ==, 0);
    CHECK_INT(uid, ==, getuid());
    char big[8];
    CHECK_INT(proc_read_file(me, 0, "cmdline", big, sizeof big), ==, 7); /* cut, terminated */
    CHECK_INT(big[7], ==, 0);
    CHECK_INT(proc_read_file(me, 0, "no-such-file", big, sizeof big), ==, SCRY_E_GONE);
    CHECK_INT(proc_read_file(0x7ffffff0, 0, "stat", big, sizeof big), ==, SCRY_E_GONE);
    CHECK_INT(proc_read_file(me, 0, "stat", big, 1), ==, SCRY_E_INVAL);
    CHECK(proc_read_file(0, 0, "self/stat", self, sizeof self) > 0);
}

static void test_listing(void)
{
    enum { NW = 5 };
    pthread_t th[NW];
    pid_t wtid[NW] = {0};
    for (int i = 0; i < NW; i++)
        CHECK_INT(pthread_create(&th[i], NULL, worker, &wtid[i]), ==, 0);
    for (int i = 0; i < NW; i++)
        while (!__atomic_load_n(&wtid[i], __ATOMIC_SEQ_CST))
            usleep(100);
    pid_t me = getpid();
    pid_t tids[64];
    int n = proc_list_tasks(me, tids, 64);
    CHECK_INT(n, ==, NW + 1);
    for (int i = 1; i < n; i++)
        CHECK_INT(tids[i - 1], <, tids[i], "sorted");
    for (int w = 0; w < NW; w++) {
        int found = 0;
        for (int i = 0; i < n; i++)
            found |= tids[i] == wtid[w];
        CHECK(found, "worker %d (tid %d) listed", w, wtid[w]);
    }
    CHECK_INT(proc_list_tasks(me, tids, 2), ==, 2); /* bounded by the caller's room */
    CHECK_INT(proc_list_tasks(0x7ffffff0, tids, 64), ==, SCRY_E_GONE);

    /* The open-file table: sleeping workers read S, we read R with a CPU delta. */
    proc_threads_t *pt = proc_threads_new(me);
    CHECK(pt != NULL);
    uint64_t wall = 0, cpu = 0;
    pid_t self = (pid_t)syscall(SYS_gettid);
    CHECK_INT(proc_threads_state(pt, self, &wall), ==, 'R');
    CHECK_UINT(wall, ==, PROC_NO_DELTA); /* first call */
    CHECK_INT(proc_threads_cpu(pt, self, &cpu), ==, 0);
    CHECK_UINT(cpu, ==, PROC_NO_DELTA);
    volatile double x = 0;
    for (int i = 0; i < 5000000; i++)
        x += i * 0.5;
    CHECK_INT(proc_threads_state(pt, self, &wall), ==, 'R');
    CHECK(wall != PROC_NO_DELTA && wall > 0, "wall %llu", (unsigned long long)wall);
    CHECK_INT(proc_threads_cpu(pt, self, &cpu), ==, 0);
    CHECK(cpu != PROC_NO_DELTA && cpu > 0, "cpu %llu", (unsigned long long)cpu);
    char st = proc_threads_state(pt, wtid[0], NULL);
    CHECK(st == 'S' || st == 'R', "worker state %c", st ? st : '0');
    /* On a CPU without a break since the schedstat read: we are, between two reads right
     * after each other (at least once in 200 tries on a loaded host: a preemption in
     * between says 0); a worker asleep in usleep is not. */
    int on = 0;
    for (int i = 0; i < 200 && !on; i++) {
        CHECK_INT(proc_threads_cpu(pt, self, &cpu), ==, 0);
        int r = proc_threads_on_cpu(pt, self);
        CHECK(r == 0 || r == 1 || r == SCRY_E_NOSYS, "on_cpu %d", r);
        if (r == SCRY_E_NOSYS)
            break; /* a kernel without schedstats: nothing to check */
        on |= r == 1;
    }
    CHECK(on, "never on a CPU from one read to the next");
    /* a worker asleep (usleep) at some moment between the two reads left its CPU: never 1 */
    int asleep = 0, wrong = 0;
    for (int i = 0; i < 50; i++) {
        CHECK_INT(proc_threads_cpu(pt, wtid[2], &cpu), ==, 0);
        if (proc_threads_state(pt, wtid[2], NULL) != 'S')
            continue;
        asleep++;
        wrong += proc_threads_on_cpu(pt, wtid[2]) == 1;
    }
    CHECK(asleep > 0 && wrong == 0, "a worker asleep read as on a CPU %d times of %d", wrong,
          asleep);
    stop_workers = 1;
    for (int i = 0; i < NW; i++)
        pthread_join(th[i], NULL);
    CHECK_INT(proc_threads_state(pt, wtid[0], NULL), ==, 0); /* gone */
    CHECK_INT(proc_threads_cpu(pt, wtid[1], &cpu), ==, SCRY_E_GONE);
    proc_threads_free(pt);
    proc_threads_free(NULL);
}

static void test_cgroup(void)
{
    const char *id = "4f3c2b1a00112233445566778899aabbccddeeff00112233445566778899aabb";
    char cg[1024], out[PROC_CONTAINER_ID_LEN + 1];
    proc_container_t ct;
    static const struct {
        const char *fmt, *runtime;
    } v2[] = {
        {"0::/system.slice/docker-%s.scope\n", "docker"},
        {"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12_34.slice/"
         "cri-containerd-%s.scope\n",
         "containerd"},
        {"0::/kubepods/burstable/pod1234/crio-%s.scope", "cri-o"},
        {"0::/machine.slice/libpod-%s.scope/container\n", "podman"},
        {"0::/scry-test/docker-%s.scope\n", "docker"},
    };
    for (size_t i = 0; i < sizeof v2 / sizeof v2[0]; i++) {
        int len = snprintf(cg, sizeof cg, v2[i].fmt, id);
        CHECK_INT(proc_parse_cgroup(cg, (size_t)len, &ct), ==, 0, "case %zu", i);
        CHECK_STR(ct.id, ==, id, "case %zu", i);
        CHECK_STR(ct.runtime, ==, v2[i].runtime, "case %zu", i);
        CHECK(strncmp(ct.cgroup, cg + 3, strlen(ct.cgroup)) == 0 && ct.cgroup[0] == '/',
              "case %zu path %s", i, ct.cgroup);
    }
    /* cgroup v1 (Docker's cgroupfs driver), and a hybrid system whose v2 line is the root:
     * the path stays the v2 one (what 'cgroup' rules match), the id comes from v1. */
    int len = snprintf(cg, sizeof cg,
                       "12:pids:/docker/%s\n4:memory:/docker/%s\n1:name=systemd:/docker/%s\n0::/\n",
                       id, id, id);
    CHECK_INT(proc_parse_cgroup(cg, (size_t)len, &ct), ==, 0);
    CHECK_STR(ct.id, ==, id);
    CHECK_STR(ct.runtime, ==, "docker");
    CHECK_STR(ct.cgroup, ==, "/");
    CHECK(strstr(ct.id_cgroup, "/docker/") == ct.id_cgroup, "%s", ct.id_cgroup);
    /* Upper-case hex is folded; no id on a host session; 65 digits is not an id. */
    static const char upper[] =
        "0::/docker/4F3C2B1A00112233445566778899AABBCCDDEEFF00112233445566778899AABB\n";
    CHECK_INT(proc_parse_cgroup(upper, sizeof upper - 1, &ct), ==, 0);
    CHECK_STR(ct.id, ==, id);
    static const char host[] = "0::/user.slice/user-0.slice/session-1.scope\n";
    CHECK_INT(proc_parse_cgroup(host, sizeof host - 1, &ct), ==, 0);
    CHECK_STR(ct.id, ==, "");
    CHECK_STR(ct.runtime, ==, "");
    CHECK_STR(ct.cgroup, ==, "/user.slice/user-0.slice/session-1.scope");
    len = snprintf(cg, sizeof cg, "/x/%sa", id);
    CHECK_INT(proc_container_id(cg, (size_t)len, out), ==, 0);
    CHECK_STR(out, ==, "");
    /* Bad input: no line with two colons; NULL. A path longer than the field is cut. */
    CHECK_INT(proc_parse_cgroup("garbage\n", 8, &ct), ==, SCRY_E_CORRUPT);
    CHECK_INT(proc_parse_cgroup(NULL, 0, &ct), ==, SCRY_E_INVAL);
    char longp[3000] = "0::/";
    memset(longp + 4, 'a', sizeof longp - 5);
    longp[sizeof longp - 1] = 0;
    CHECK_INT(proc_parse_cgroup(longp, strlen(longp), &ct), ==, 0);
    CHECK_INT((int)strlen(ct.cgroup), ==, (int)sizeof ct.cgroup - 1);
    /* Our own cgroup file reads. */
    CHECK_INT(proc_read_container(getpid(), &ct), ==, 0);
    CHECK_INT(ct.cgroup[0], ==, '/');
    CHECK_INT(proc_read_container(0x7ffffff0, &ct), ==, SCRY_E_GONE);
}

/* In our own PID namespace the map is the identity and reads nothing per lookup. */
static void test_tidmap_identity(void)
{
    pid_t me = getpid(), tid = (pid_t)syscall(SYS_gettid);
    proc_tidmap_t *m = proc_tidmap_new(me);
    CHECK(m != NULL);
    CHECK_INT(proc_tidmap_nested(m), ==, 0);
    CHECK_INT(proc_tidmap_ns_pid(m), ==, me);
    CHECK_INT(proc_tidmap_to_host(m, tid), ==, tid);
    CHECK_INT(proc_tidmap_to_ns(m, tid), ==, tid);
    CHECK_INT(proc_tidmap_to_host(m, 0), ==, 0);
    pid_t tids[8];
    CHECK_INT((int)proc_tidmap_ns_tids(m, tids, 8), >=, 1);
    CHECK_INT(tids[0], ==, me);
    proc_tidmap_free(m);
    proc_tidmap_free(NULL);
    CHECK(proc_tidmap_new(0) == NULL);
    CHECK_INT(proc_tidmap_nested(NULL), ==, 0);
}

int main(void)
{
    test_parsers();
    test_nspid();
    test_readers();
    test_pidfile();
    test_exec_mark();
    test_listing();
    test_cgroup();
    test_tidmap_identity();
    return check_summary("test_proc_task");
}
