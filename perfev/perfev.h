/* perfev.h - the kernel's sampling clock: perf events on every thread of one process.
 *
 * A perfev_t opens one software clock event (task-clock by default) per thread of a target
 * process with perf_event_open, each with its own memory-mapped ring buffer. The kernel
 * writes a sample record into a thread's ring each time that thread has used PERIOD ns of
 * CPU: its tid, the instruction pointer (user or kernel), the time (CLOCK_MONOTONIC), the
 * CPU and the period; with stack_bytes > 0 also the user registers and a copy of the top
 * of its user stack (what `perf record --call-graph dwarf` asks for). Nothing is stopped:
 * the target never sees a ptrace stop or a signal.
 *
 * Threads: the caller says which threads to sample (perfev_set_threads, perfev_add_thread);
 * perfev reads no /proc file. Events of threads that are gone are closed after what is
 * left in their rings has been read.
 *
 * Rings are read with the protocol of the perf ABI (linux/perf_event.h): the kernel's
 * data_head is loaded with acquire semantics, records between our tail and head are
 * parsed (a record that wraps around the end of the ring is copied out first), then the
 * tail is stored with release semantics. Records are treated as untrusted: every size is
 * checked against the ring, the record and the attributes asked for; a record that does
 * not fit is counted (perfev_stats.bad) and the rest of that ring is skipped.
 *
 * A perfev_t is not thread-safe. x86-64 only (register numbering).
 */
#ifndef SCRY_PERFEV_H
#define SCRY_PERFEV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct perfev perfev_t;

/* Which clock drives sampling. */
enum perfev_clock {
    PERFEV_CLOCK_TASK = 0, /* PERF_COUNT_SW_TASK_CLOCK: CPU time of the thread */
    PERFEV_CLOCK_CPU = 1,  /* PERF_COUNT_SW_CPU_CLOCK: the CPU's clock while the thread runs */
};

#define PERFEV_STACK_MAX                                                                           \
    60000u /* largest user stack copy per record (the record size is                               \
              16 bits in the ABI) */

typedef struct perfev_opts {
    pid_t pid;            /* the target process */
    double rate_hz;       /* samples per second of CPU per thread (period = 1e9/rate ns) */
    int clock;            /* enum perfev_clock */
    uint32_t stack_bytes; /* 0: no registers or stack; else bytes of user stack per
                             record (rounded up to 8, at most PERFEV_STACK_MAX) */
    uint32_t ring_pages;  /* data pages per thread's ring, a power of two; 0: a default
                             that fits about 20 ms of records at RATE_HZ */
    int exclude_kernel;   /* 1: user mode only (needed when kernel sampling is refused) */
    int wake_each;        /* 1: every record wakes perfev_wait (read the Python stack while
                             it still is the one sampled); 0: nobody is woken, the rings
                             are read on the caller's own clock */
    int cpu_wide;         /* 1: who runs on each CPU, whatever the process: one cpu-clock
                             event per CPU (perfev_set_cpus), idle time excluded; PID is
                             ignored, CLOCK must be PERFEV_CLOCK_CPU, no stack. Needs
                             CAP_PERFMON (or CAP_SYS_ADMIN, or perf_event_paranoid <= 0) */
    int bpf_prog_fd;      /* > 0: a BPF perf-event program that each thread's event runs at
                             each tick (PERF_EVENT_IOC_SET_BPF); it decides what is written
                             (bpfsamp/). 0: none */
    int switches;         /* 1: each thread's switches off its CPU are noted (context-switch
                             records, read with the samples): perfev_thread_preempted */
} perfev_opts_t;

/* Registers in a sample, in this order (the kernel's x86-64 numbering, compacted). */
enum perfev_reg {
    PERFEV_REG_AX,
    PERFEV_REG_BX,
    PERFEV_REG_CX,
    PERFEV_REG_DX,
    PERFEV_REG_SI,
    PERFEV_REG_DI,
    PERFEV_REG_BP,
    PERFEV_REG_SP,
    PERFEV_REG_IP,
    PERFEV_REG_R8,
    PERFEV_REG_R9,
    PERFEV_REG_R10,
    PERFEV_REG_R11,
    PERFEV_REG_R12,
    PERFEV_REG_R13,
    PERFEV_REG_R14,
    PERFEV_REG_R15,
    PERFEV_NREGS
};

/* One sample record, parsed. Pointers point into perfev-owned memory that is valid only
 * during the callback that receives the sample. */
typedef struct perfev_sample {
    pid_t pid, tid;
    uint32_t cpu;
    uint8_t kernel;     /* IP is in the kernel (the thread was in a system call or trap) */
    uint8_t has_regs;   /* REGS holds the thread's user registers */
    uint64_t ip;        /* instruction pointer at the sample */
    uint64_t time_ns;   /* CLOCK_MONOTONIC */
    uint64_t period_ns; /* CPU ns this record stands for */
    uint64_t regs[PERFEV_NREGS];
    const uint8_t *stack; /* copy of the user stack from regs[SP] up; NULL when none */
    size_t stack_len;     /* valid bytes of STACK */
} perfev_sample_t;

typedef struct perfev_stats {
    uint64_t threads; /* threads with an open event now */
    uint64_t opened;  /* events opened since perfev_open */
    uint64_t open_failed;
    uint64_t samples;   /* sample records delivered */
    uint64_t lost;      /* records the kernel dropped (PERF_RECORD_LOST), ring full */
    uint64_t throttled; /* PERF_RECORD_THROTTLE records */
    uint64_t bad;       /* records rejected by validation */
    uint64_t other;     /* other record types, skipped */
    uint64_t bytes;     /* ring bytes consumed */
} perfev_stats_t;

/* Returns 0 when this process may open a task-clock event on thread TID (0: itself) with
 * the given kernel exclusion, else the reason: SCRY_E_PERM (perf_event_paranoid, a
 * seccomp filter, a capability), SCRY_E_NOSYS (no perf events in this kernel), another
 * negative code. Opens and closes one event; samples nothing. */
int perfev_probe(pid_t tid, int exclude_kernel);

/* Creates a sampler of process OPTS->pid with no thread yet (see perfev_set_threads). On
 * success *OUT owns it (free with perfev_free) and returns 0. Returns SCRY_E_INVAL (bad
 * options) or SCRY_E_NOMEM. */
int perfev_open(const perfev_opts_t *opts, perfev_t **out);

/* Closes every event and unmaps every ring. NULL is a no-op. The target is not touched. */
void perfev_free(perfev_t *p);

typedef void (*perfev_sample_fn)(const perfev_sample_t *s, void *ctx);

/* Makes the set of sampled threads TIDS[0..N) (the caller lists them, e.g. from
 * /proc/PID/task): opens events for threads not open yet and, for open threads not in
 * TIDS, delivers what their rings still hold to CB (may be NULL: dropped) and closes them.
 * A thread that exits meanwhile is skipped. Returns the number of threads with an event,
 * SCRY_E_PERM / SCRY_E_NOSYS when no event could be opened at all for a non-empty TIDS,
 * SCRY_E_INVAL or SCRY_E_NOMEM. */
int perfev_set_threads(perfev_t *p, const pid_t *tids, size_t n, perfev_sample_fn cb, void *ctx);

/* For a cpu_wide sampler: opens one event per CPU the system has (offline CPUs are
 * skipped). Returns the number of CPUs with an event, SCRY_E_PERM / SCRY_E_NOSYS when none
 * could be opened (not allowed: see perfev_opts.cpu_wide), SCRY_E_INVAL for a sampler
 * that is not cpu_wide, or SCRY_E_NOMEM. Records then carry the pid and tid of whatever
 * ran on that CPU when its clock fired. */
int perfev_set_cpus(perfev_t *p);

/* Opens an event for thread TID now (a thread learnt of between two listings). Returns 0
 * (also when it is already open), SCRY_E_GONE (no such thread) or another negative
 * code. */
int perfev_add_thread(perfev_t *p, pid_t tid);

/* True when thread TID has an open event. */
int perfev_has_thread(const perfev_t *p, pid_t tid);

/* Delivers every record waiting in every ring to CB, oldest first per thread, and frees
 * their room in the rings. Returns the number of samples delivered (>= 0). No system
 * call is made. */
int perfev_read(perfev_t *p, perfev_sample_fn cb, void *ctx);

/* Waits until some ring holds a record (only with opts.wake_each) or the CLOCK_MONOTONIC
 * time DEADLINE_NS has come, whichever is first; a signal ends the wait early too, and a
 * long wait (4 ms or more) may end up to half its length early, by a timer kept armed
 * across waits. Returns 1 when a record woke it, 0 otherwise. Reads nothing: perfev_read
 * does. */
int perfev_wait(perfev_t *p, uint64_t deadline_ns);

/* A descriptor that polls readable when perfev_wait would wake (an epoll set of the
 * rings; only with opts.wake_each, else -1): for a caller that waits on several things
 * instead of perfev_wait's long waits (whose timer is in the set, and would wake it). It
 * may also stay readable for a ring whose thread exited until perfev_wait drops it: call
 * perfev_wait (with a deadline just past now) when it is. */
int perfev_wait_fd(const perfev_t *p);

/* The CPU time thread TID has used while its event was open (task-clock) or the CPU clock
 * time it ran (cpu-clock), exact to the moment of the call: a read(2) of its event, for
 * which the kernel brings a running thread's count up to date. Returns 0 and *NS, or
 * SCRY_E_NOTFOUND (no event for TID) / SCRY_E_GONE. (/proc/PID/task/TID/schedstat moves only
 * at the scheduler's ticks and switches: it cannot say whether a thread runs now.) */
int perfev_thread_clock(const perfev_t *p, pid_t tid, uint64_t *ns);

/* With opts.switches: how thread TID last left its CPU, as of the last read of the rings:
 * 1 preempted (runnable: it waits for a CPU), 0 to wait (sleep, I/O, a lock: not runnable
 * then), -1 unknown (no switch read yet, no such thread, or a kernel before 4.17 that does
 * not say); when known, *AT_NS (may be NULL) is when (CLOCK_MONOTONIC). */
int perfev_thread_preempted(const perfev_t *p, pid_t tid, uint64_t *at_ns);

/* With opts.switches: whether thread TID was off its CPU at AT_NS (CLOCK_MONOTONIC), as of
 * the last read of the rings: 1 off (its last switch out came before AT_NS and it was not
 * back on a CPU at AT_NS), 0 on, -1 unknown (no switch read yet, or one read after AT_NS). */
int perfev_thread_off_cpu_at(const perfev_t *p, pid_t tid, uint64_t at_ns);

/* Makes the sampling rate RATE_HZ (0.01 to 100000: period 1e9/RATE_HZ ns) for every open
 * event (PERF_EVENT_IOC_PERIOD; the kernel restarts each thread's clock) and the events
 * opened from now on. Returns 0, SCRY_E_INVAL (rate out of range) or the code of the first
 * event the kernel refused (the others are changed all the same). */
int perfev_set_rate(perfev_t *p, double rate_hz);

/* Counters since perfev_open. */
perfev_stats_t perfev_stats(const perfev_t *p);

/* The sampling period in ns, as opened. */
uint64_t perfev_period_ns(const perfev_t *p);

/* Parses one record of type PERF_RECORD_SAMPLE (REC, LEN bytes including its header) as
 * laid out for a perfev_t opened with STACK_BYTES (0: no registers or stack). Pointers in
 * OUT point into REC. Returns 0, or SCRY_E_CORRUPT when the record is too short, too long,
 * or its stack size exceeds what was asked for. Exposed for tests. */
int perfev_parse_sample(const void *rec, size_t len, uint32_t stack_bytes, perfev_sample_t *out);

#endif
