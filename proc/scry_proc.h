/* scry_proc.h - the process layer: what scry learns about a target's threads from /proc, and
 * the one way scry stops and resumes a single thread with ptrace.
 *
 * Tasks: listing /proc/PID/task, parsers of /proc/PID/task/TID/{stat,status,syscall,
 * schedstat} (pure functions over the file content, tested on captured text) and readers
 * that open the files. Everything read from /proc is untrusted: parsers bound every field.
 *
 * Stop/resume: proc_stop_thread seizes thread TID (PTRACE_SEIZE, no options: in particular
 * no PTRACE_O_EXITKILL, so if scry dies the kernel detaches and the target runs on),
 * interrupts it (PTRACE_INTERRUPT) and waits, bounded, for the stop. Only that thread
 * stops; the rest of the process runs. proc_resume_thread detaches it again.
 * ptrace belongs to the calling thread: the same thread must stop, read and resume. The
 * bookkeeping (a signal to re-inject, threads whose stop timed out) is thread-local. Never
 * leave a thread stopped: every successful stop must be followed by proc_resume_thread,
 * and a scry thread that stops threads should call proc_reap_pending now and then (it is
 * also called at every stop).
 */
#ifndef SCRY_PROC_H
#define SCRY_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- /proc task files ---------------------------------------------------------------- */

/* Values of proc_syscall_t.nr besides a syscall number. */
#define PROC_SYSCALL_RUNNING -2 /* "running": on a CPU or runnable */
#define PROC_SYSCALL_NONE    -1 /* blocked in the kernel but not in a syscall */
#define PROC_SYSCALL_UNKNOWN -3 /* not read */

typedef struct proc_syscall {
    long nr;          /* syscall number or one of PROC_SYSCALL_* */
    uint64_t args[6]; /* when nr >= 0 */
    uint64_t sp, pc;  /* user sp and pc, when given */
} proc_syscall_t;

#define PROC_NSPID_MAX 32 /* PID namespaces nest at most 32 deep (MAX_PID_NS_LEVEL) */

/* Parses the content of /proc/PID/task/TID/stat (LEN bytes, need not be terminated) and
 * stores the state character. Returns 0, SCRY_E_INVAL or SCRY_E_CORRUPT. */
int proc_parse_stat_state(const char *buf, size_t len, char *state);

/* Parses /proc/PID/task/TID/syscall content: "running", "-1 sp pc" or "nr a1..a6 sp pc".
 * Returns 0, SCRY_E_INVAL or SCRY_E_CORRUPT. */
int proc_parse_syscall(const char *buf, size_t len, proc_syscall_t *out);

/* Parses /proc/PID/task/TID/schedstat: "run_ns wait_ns timeslices". Returns 0, SCRY_E_INVAL
 * or SCRY_E_CORRUPT. Any out pointer may be NULL. */
int proc_parse_schedstat(const char *buf, size_t len, uint64_t *run_ns, uint64_t *wait_ns,
                         uint64_t *slices);

/* Parses the "NSpid:" line of /proc/PID[/task/TID]/status: the id in the reader's PID
 * namespace first, then in each nested namespace, the innermost (the process's own) last.
 * Stores at most CAP ids in IDS and their count in *N. Returns 0, SCRY_E_NOTFOUND (no NSpid
 * line: kernel before 4.1), SCRY_E_INVAL or SCRY_E_CORRUPT (malformed, or more than
 * PROC_NSPID_MAX or CAP ids). */
int proc_parse_status_nspid(const char *buf, size_t len, pid_t *ids, size_t cap, size_t *n);

/* Parses the "voluntary_ctxt_switches:" and "nonvoluntary_ctxt_switches:" lines of
 * /proc/PID/task/TID/status: how often the thread gave up its CPU to wait, and how often it
 * was preempted. Returns 0, SCRY_E_NOTFOUND (a line missing), SCRY_E_INVAL or SCRY_E_CORRUPT. */
int proc_parse_status_switches(const char *buf, size_t len, uint64_t *vol, uint64_t *nonvol);

/* Readers of the files above for thread TID of process PID. Return 0, SCRY_E_GONE (no
 * such thread), SCRY_E_PERM (syscall needs ptrace access), SCRY_E_IO or SCRY_E_CORRUPT. */
int proc_read_task_state(pid_t pid, pid_t tid, char *state);
int proc_read_task_syscall(pid_t pid, pid_t tid, proc_syscall_t *out);
int proc_read_task_schedstat(pid_t pid, pid_t tid, uint64_t *run_ns, uint64_t *wait_ns);
int proc_read_task_switches(pid_t pid, pid_t tid, uint64_t *vol, uint64_t *nonvol);
int proc_read_task_nspid(pid_t pid, pid_t tid, pid_t *ids, size_t cap, size_t *n);

/* Lists the threads of PID (/proc/PID/task) into TIDS, sorted ascending, at most CAP.
 * Returns the count, or SCRY_E_GONE (no such process) / SCRY_E_INVAL. */
int proc_list_tasks(pid_t pid, pid_t *tids, size_t cap);

/* How many threads PID has, from the link count of /proc/PID/task (one stat, no listing:
 * a cheap check that the thread set changed). Returns the count, or SCRY_E_GONE. */
int proc_count_tasks(pid_t pid);

/* Per-thread stat and schedstat files of one process kept open between reads, so each
 * read is one pread (the sampler reads them every tick). */
typedef struct proc_threads proc_threads_t;

#define PROC_NO_DELTA UINT64_MAX

/* Creates the table for process PID. NULL when out of memory. */
proc_threads_t *proc_threads_new(pid_t pid);

/* Closes every file and frees. NULL is a no-op. */
void proc_threads_free(proc_threads_t *p);

/* The scheduler state letter of thread TID ('R', 'S', 'D', ...), or 0 when unknown (the
 * thread is gone: its files are closed). When WALL_DELTA_NS is not NULL it receives the
 * wall time since the previous call that asked for it (CLOCK_MONOTONIC), or PROC_NO_DELTA
 * on the first such call. */
char proc_threads_state(proc_threads_t *p, pid_t tid, uint64_t *wall_delta_ns);

/* As proc_threads_state, from the same read, with the thread's user and system CPU time
 * so far (fields 14 and 15: clock ticks) in *UTIME and *STIME (0 when unreadable). */
char proc_threads_state_times(proc_threads_t *p, pid_t tid, uint64_t *wall_delta_ns,
                              uint64_t *utime, uint64_t *stime);

/* The CPU time (schedstat) thread TID used since the previous call for it, or
 * PROC_NO_DELTA on the first call. Returns 0 or SCRY_E_GONE. */
int proc_threads_cpu(proc_threads_t *p, pid_t tid, uint64_t *cpu_delta_ns);

/* Whether thread TID has been on a CPU without a break from the last proc_threads_cpu read
 * for it until now: the kernel counts each arrival of a thread on a CPU (schedstat's third
 * field, read then) and each departure (its voluntary and involuntary context switches,
 * read now from its status file: one pread), so arrivals then minus departures now is 1
 * exactly when it was on one then and has not left it since. The scheduler state says
 * less: 'R' is also a thread woken up that waits for a CPU. Returns 1, 0, SCRY_E_NOSYS (the
 * kernel keeps no such counts), SCRY_E_INVAL (no proc_threads_cpu read yet) or
 * SCRY_E_GONE. */
int proc_threads_on_cpu(proc_threads_t *p, pid_t tid);

/* ---- thread ids across PID namespaces (tidmap.c) --------------------------------------
 * A process in its own PID namespace (a container) stores its own thread ids
 * (threading.get_native_id(), glibc's struct pthread): those are the last column of NSpid;
 * /proc and ptrace take the first. The map of one process, from
 * /proc/PID/task/TID/status. For a process in the namespace of scry's /proc, every
 * lookup is the identity and reads nothing. */
typedef struct proc_tidmap proc_tidmap_t;

/* Creates the map of process PID (reads its NSpid once). NULL when out of memory or PID
 * is not positive. A process that cannot be read is taken as not nested. */
proc_tidmap_t *proc_tidmap_new(pid_t pid);

/* A fixed map of a process that is no longer running (a core file): PID and the N thread
 * ids of TIDS (at most 8192 kept), each its own host id; nothing is ever read from /proc.
 * NULL when out of memory or PID is not positive. */
proc_tidmap_t *proc_tidmap_new_fixed(pid_t pid, const pid_t *tids, size_t n);

/* Frees. NULL is a no-op. */
void proc_tidmap_free(proc_tidmap_t *m);

/* 1 when the process's PID namespace is not the one /proc shows (ids differ), else 0. */
int proc_tidmap_nested(const proc_tidmap_t *m);

/* The process id as the process itself sees it (its PID when not nested; 0 for NULL). */
pid_t proc_tidmap_ns_pid(const proc_tidmap_t *m);

/* Rereads the thread list, keeping the pairs of threads still listed and reading the
 * status of new ones. Returns 0, SCRY_E_GONE, SCRY_E_NOMEM or SCRY_E_INVAL. */
int proc_tidmap_refresh(proc_tidmap_t *m);

/* The host id of the thread the process knows as NS_TID (proc_tidmap_to_host), or the
 * process's own id of host thread HOST_TID (proc_tidmap_to_ns); 0 when no thread has it
 * now. A miss rereads the list (at most every 10 ms, so a thread that just started is
 * found and a stale id costs little). */
pid_t proc_tidmap_to_host(proc_tidmap_t *m, pid_t ns_tid);
pid_t proc_tidmap_to_ns(proc_tidmap_t *m, pid_t host_tid);

/* Stores the process's own ids of its threads (rereading the list) in OUT, at most CAP;
 * returns the count (0 on failure). */
size_t proc_tidmap_ns_tids(proc_tidmap_t *m, pid_t *out, size_t cap);

/* ---- small /proc files and process facts (pidfile.c) ----------------------------------- */

/* Reads /proc/PID/NAME, or /proc/PID/task/TID/NAME when TID > 0, or /proc/NAME when PID is
 * 0 (e.g. "sys/kernel/yama/ptrace_scope"), into BUF: at most CAP-1 bytes, NUL-terminated
 * (the file may hold NULs: cmdline). The one reader of such files. Returns the length read,
 * SCRY_E_GONE (no such process, thread or file), SCRY_E_PERM, SCRY_E_INVAL or SCRY_E_IO. */
long proc_read_file(pid_t pid, pid_t tid, const char *name, char *buf, size_t cap);

/* Reads the target of /proc/PID/exe (the executable's path) into BUF: at most CAP-1 bytes,
 * NUL-terminated ("" on failure). Returns the length, SCRY_E_NOTFOUND (no such link: a
 * kernel thread, or the process is gone), SCRY_E_PERM, SCRY_E_GONE, SCRY_E_INVAL or
 * SCRY_E_IO. */
long proc_read_exe(pid_t pid, char *buf, size_t cap);

/* Parses /proc/PID/stat (LEN bytes, need not be terminated): the start time (field 22,
 * clock ticks after boot; with the pid it names a process across pid reuse) into
 * *START_TIME and the comm (between the first '(' and the last ')', cut to COMMLEN-1 bytes)
 * into COMM unless COMMLEN is 0. Returns 0, SCRY_E_INVAL or SCRY_E_CORRUPT. */
int proc_parse_stat_identity(const char *buf, size_t len, uint64_t *start_time, char *comm,
                             size_t commlen);

/* Parses numeric field FIELD (3..52, numbered as in proc(5)) of /proc/PID/stat content
 * (LEN bytes, need not be terminated; the comm may hold spaces and ')') into *OUT.
 * Returns 0, SCRY_E_INVAL or SCRY_E_CORRUPT (a missing or non-numeric field). */
int proc_parse_stat_u64(const char *buf, size_t len, int field, uint64_t *out);

/* Parses the real uid (first number of the "Uid:" line) of /proc/PID/status content.
 * Returns 0, SCRY_E_NOTFOUND, SCRY_E_INVAL or SCRY_E_CORRUPT. */
int proc_parse_status_uid(const char *buf, size_t len, uid_t *uid);

/* Readers of the two above for process PID. Return 0 or a negative code (SCRY_E_GONE when
 * the process does not exist). */
int proc_read_identity(pid_t pid, uint64_t *start_time, char *comm, size_t commlen);
int proc_read_uid(pid_t pid, uid_t *uid);

/* Whether process PID runs in another user namespace than the caller (a rootless
 * container): its /proc/PID/uid_map differs from the caller's (readable without ptrace
 * access). Returns 1, 0, or a negative code when a map cannot be read. */
int proc_other_userns(pid_t pid);

/* Whether host uid HOST_UID has an id in process PID's user namespace: a line "inside
 * outside count" of /proc/PID/uid_map with outside <= HOST_UID < outside + count (a rootless
 * container's namespace maps its user's uid and subordinate ids, not host root). Returns
 * 1, 0, or a negative code when the map cannot be read or is malformed. */
int proc_userns_maps_uid(pid_t pid, uint32_t host_uid);

/* A mark of process PID's current program image: the address of its stack's start
 * (/proc/PID/stat field 28), drawn anew by address-space randomisation at every execve.
 * A changed mark means the process exec'd (the pid and start time stay). 0 when the kernel
 * hides it (no ptrace read access) or randomisation is off: then no exec is seen. Returns
 * 0 or a negative code (SCRY_E_GONE when the process does not exist). */
int proc_read_exec_mark(pid_t pid, uint64_t *mark);

/* ---- container identity (cgroup.c) -------------------------------------------------- */
#define PROC_CONTAINER_ID_LEN 64

typedef struct proc_container {
    char cgroup[1024]; /* the cgroup v2 path (the "0::" line), else the first line's */
    char id[PROC_CONTAINER_ID_LEN + 1]; /* the 64-hex container id (lower case), or "" */
    char runtime[16];     /* "docker", "containerd", "cri-o", "podman" by the path's pattern,
                             "" when no id or an unknown pattern */
    char id_cgroup[1024]; /* the path the id was found in (v1 systems: not cgroup) */
} proc_container_t;

/* Finds the last run of exactly 64 hex digits in the LEN bytes at CG (docker, containerd,
 * CRI-O and podman name their cgroups after the container id: docker-ID.scope, /docker/ID,
 * cri-containerd-ID.scope, crio-ID.scope, libpod-ID.scope) and stores it lower case in
 * OUT. Returns 1 when found, else 0 (OUT = ""). */
int proc_container_id(const char *cg, size_t len, char out[PROC_CONTAINER_ID_LEN + 1]);

/* Parses /proc/PID/cgroup content (LEN bytes, need not be terminated) into *OUT: the id is
 * the v2 line's when it has one, else the first v1 line's. Returns 0, SCRY_E_INVAL or
 * SCRY_E_CORRUPT (no "ID:CONTROLLERS:PATH" line). Paths are cut to fit. */
int proc_parse_cgroup(const char *text, size_t len, proc_container_t *out);

/* Reads /proc/PID/cgroup (at most 8 KiB) into *OUT. Returns 0, SCRY_E_GONE, SCRY_E_PERM,
 * SCRY_E_IO, SCRY_E_INVAL or SCRY_E_CORRUPT. */
int proc_read_container(pid_t pid, proc_container_t *out);

/* ---- ptrace stops (ptrace.c: every stop scry makes is written there) -------------------
 * Everything uses PTRACE_SEIZE (never PTRACE_ATTACH): seizing sends no SIGSTOP, the target
 * cannot observe it, and a tracer that dies detaches its tracees automatically. Waits are
 * bounded. Threads are addressed by TID (the main thread's TID is the PID); the calling
 * thread becomes the tracer: every later ptrace call on that TID must come from it. */

/* What a wait observed. */
enum proc_stop_kind {
    PROC_STOP_EVENT = 1, /* PTRACE_EVENT_STOP: our PTRACE_INTERRUPT, or a group-stop */
    PROC_STOP_SIGNAL,    /* signal-delivery-stop: SIG is about to be delivered */
    PROC_STOP_SYSCALL,   /* syscall-entry or syscall-exit stop (PTRACE_O_TRACESYSGOOD) */
    PROC_STOP_OTHER,     /* another PTRACE_EVENT_* stop */
    PROC_EXITED,         /* the thread exited or was killed: no longer traced */
};

typedef struct proc_stop {
    int kind;   /* enum proc_stop_kind */
    int sig;    /* signal of a SIGNAL stop; for EVENT stops the stop signal (SIGTRAP for an
                   interrupt, SIGSTOP/SIGTSTP/SIGTTIN/SIGTTOU for a group-stop) */
    int status; /* raw wait status */
} proc_stop_t;

/* Attaches to thread TID with PTRACE_SEIZE and the PTRACE_O_* OPTIONS (0 for none; never
 * PTRACE_O_EXITKILL). Does not stop it. Returns 0, SCRY_E_NOPROC (no such thread),
 * SCRY_E_PERM (not allowed, or already traced by another tracer), SCRY_E_INVAL or SCRY_E_IO. */
int proc_seize(pid_t tid, unsigned long options);

/* Asks a seized thread to stop (PTRACE_INTERRUPT). Returns 0, SCRY_E_GONE or SCRY_E_IO. */
int proc_interrupt(pid_t tid);

/* Describes the wait status STATUS of a tracee in *OUT. */
void proc_stop_classify(int status, proc_stop_t *out);

/* Waits up to TIMEOUT_MS (>= 0) for the next stop or exit of seized thread TID: it yields
 * the CPU for the first 200 us (a stop is usually that quick), then polls every 50 us up to
 * 2 ms, then with a back-off doubling to 1 ms, so it never blocks unboundedly. Returns 0 with *OUT
 * filled (PROC_EXITED included), SCRY_E_TIMEOUT, or SCRY_E_GONE (not our tracee any more). */
int proc_wait(pid_t tid, int timeout_ms, proc_stop_t *out);

/* True when stop ST is a group-stop (the whole process was stopped by a stop signal). */
int proc_stop_is_group(const proc_stop_t *st);

/* Asks seized thread TID to stop (PTRACE_INTERRUPT) and waits up to TIMEOUT_MS for that
 * stop, delivering the signals that arrive first (each in its order, as without scry; the
 * interrupt stays pending and stops the thread right after) and resuming past other stops.
 * Returns 0 (stopped at the interrupt: TID stays traced and stopped), 1 (the process is in
 * a group-stop: job control; TID is stopped there), SCRY_E_GONE (it exited), SCRY_E_TIMEOUT
 * (not stopped in time: it still runs and is still seized; it cannot be detached until it
 * stops), SCRY_E_INVAL or SCRY_E_IO. */
int proc_interrupt_wait(pid_t tid, int timeout_ms);

/* Resumes a stopped tracee, delivering SIG (0 for none). proc_cont: PTRACE_CONT;
 * proc_cont_syscall: PTRACE_SYSCALL (stop again at the next syscall entry/exit).
 * Returns 0, SCRY_E_GONE or SCRY_E_IO. */
int proc_cont(pid_t tid, int sig);
int proc_cont_syscall(pid_t tid, int sig);

/* Detaches from a stopped tracee, delivering SIG when the tracee is in a signal-delivery-stop
 * (ignored by the kernel in event stops). Returns 0, SCRY_E_GONE or SCRY_E_IO. */
int proc_detach(pid_t tid, int sig);

/* ---- stopping one thread for the time of a read (built on the primitives) ------------ */

#define PROC_STOP_TIMEOUT_MS 50 /* default bound on the wait for the stop */
#define PROC_MAX_PENDING     64 /* threads remembered per scry thread */

/* Stops thread TID (any thread of any process scry may trace) and waits up to
 * PROC_STOP_TIMEOUT_MS for it. Returns 0 when TID is stopped and traced by the calling
 * thread (then call proc_resume_thread), SCRY_E_INVAL (TID is already stopped by this
 * thread), SCRY_E_GONE (the thread exited meanwhile; it is not stopped), SCRY_E_PERM (no
 * permission, or another tracer such as gdb holds it), SCRY_E_TIMEOUT (it did not stop in
 * time, e.g. in uninterruptible sleep or not scheduled on a loaded machine: it is NOT
 * stopped now; the next proc_stop_thread of TID waits for that same stop, and
 * proc_reap_pending detaches it when it arrives), SCRY_E_AGAIN (the bookkeeping table is
 * full: nothing was done), SCRY_E_IO. */
int proc_stop_thread(pid_t tid);

/* Same with an explicit bound in milliseconds (0 = only poll once). */
int proc_stop_thread_timeout(pid_t tid, int timeout_ms);

/* Lets TID run again (PTRACE_DETACH, re-injecting a signal that arrived during the stop).
 * Returns 0, SCRY_E_GONE (it exited while stopped; it was reaped) or SCRY_E_INVAL (TID
 * was not stopped by proc_stop_thread in this thread). */
int proc_resume_thread(pid_t tid);

/* Detaches threads whose stop timed out once they have stopped, and reaps threads that
 * exited while traced. Returns how many are still pending (0 when none). Cheap when none
 * is pending. */
int proc_reap_pending(void);

#endif
