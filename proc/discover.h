/* discover.h - learning which processes exist, promptly.
 *
 * The kernel's process-events connector (NETLINK_CONNECTOR, CN_IDX_PROC; needs
 * CAP_NET_ADMIN) reports fork, exec and exit as they happen; without it (or when it drops
 * events) a scan of /proc finds the same, later. The caller polls proc_discover_fd().
 */
#ifndef SCRY_PROC_DISCOVER_H
#define SCRY_PROC_DISCOVER_H

#include <stdint.h>
#include <sys/types.h>

typedef struct proc_discover proc_discover_t;

enum proc_discover_event {
    PROC_DISCOVER_NEW,  /* a new process (fork of a process) */
    PROC_DISCOVER_EXEC, /* a process replaced its program */
    PROC_DISCOVER_EXIT, /* a process (its last thread) exited */
    PROC_DISCOVER_LOST, /* the kernel dropped events: scan /proc */
};

/* PARENT is the forking process for PROC_DISCOVER_NEW from the connector, else 0. WHEN_NS
 * is the kernel's CLOCK_MONOTONIC time of a connector event (an exec's tells whether a
 * target opened since runs the new program), 0 for scans and PROC_DISCOVER_LOST. */
typedef void (*proc_discover_cb)(void *ctx, enum proc_discover_event ev, pid_t pid, pid_t parent,
                                 uint64_t when_ns);

/* Creates a discoverer; with USE_CONNECTOR it subscribes to the process-events connector.
 * Failing to subscribe (no CAP_NET_ADMIN, a kernel without it, a network namespace that is
 * not the initial one) is not an error: proc_discover_fd then returns -1 and the caller
 * relies on scans. Writes why into WHY (may be NULL). Returns NULL when out of memory. */
proc_discover_t *proc_discover_new(int use_connector, char *why, size_t whylen);

/* Closes the socket and frees D. NULL is a no-op. */
void proc_discover_free(proc_discover_t *d);

/* The connector socket to poll for input, or -1 without the connector. */
int proc_discover_fd(const proc_discover_t *d);

/* Reads every pending connector message (non-blocking) and calls CB for each event of a
 * process (thread events are dropped). Bounded: at most 4096 messages per call. Returns
 * the number of events, or a negative code when the socket failed (the caller should then
 * scan and may call proc_discover_free). */
int proc_discover_read(proc_discover_t *d, proc_discover_cb cb, void *ctx);

/* Lists every process in /proc (at most 4 million) and calls CB(ctx, PROC_DISCOVER_NEW,
 * pid) for each. Returns the count, or SCRY_E_IO when /proc cannot be listed. */
int proc_discover_scan(proc_discover_cb cb, void *ctx);

/* One process as a listing of /proc saw it. */
typedef struct proc_entry {
    pid_t pid;
    pid_t ppid;
    uint64_t start_time; /* with the pid, the process's identity */
    char state;          /* 'R', 'S', ..., 'Z' for a zombie */
} proc_entry_t;

/* Lists every process (at most CAP) with its parent, start time and state into OUT, sorted
 * by pid; processes that vanish while listed are left out. Returns the count, or
 * SCRY_E_IO when /proc cannot be listed. */
int proc_list_all(proc_entry_t *out, size_t cap);

/* The entry of PID in ENTS (N entries sorted by pid, as proc_list_all gives), or NULL. */
const proc_entry_t *proc_entry_find(const proc_entry_t *ents, size_t n, pid_t pid);

/* The living descendants of ROOT (zombies left out) in ENTS (N entries sorted by pid): their
 * pids into OUT, at most CAP, every parent before its children. Returns the count. */
size_t proc_descendants(const proc_entry_t *ents, size_t n, pid_t root, pid_t *out, size_t cap);

#endif
