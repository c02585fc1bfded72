/* discover.h - learning which processes exist, promptly.
 *
 * The kernel's process-events connector (NETLINK_CONNECTOR, CN_IDX_PROC; needs
 * CAP_NET_ADMIN) reports fork, exec and exit as they happen; without it (or when it drops
 * events) a scan of /proc finds the same, later. The caller polls serve_discover_fd().
 */
#ifndef SCRY_SERVE_DISCOVER_H
#define SCRY_SERVE_DISCOVER_H

#include <stdint.h>
#include <sys/types.h>

typedef struct serve_discover serve_discover_t;

enum serve_discover_event {
    SERVE_DISCOVER_NEW,  /* a new process (fork of a process) */
    SERVE_DISCOVER_EXEC, /* a process replaced its program */
    SERVE_DISCOVER_EXIT, /* a process (its last thread) exited */
    SERVE_DISCOVER_LOST, /* the kernel dropped events: scan /proc */
};

/* PARENT is the forking process for SERVE_DISCOVER_NEW from the connector, else 0. WHEN_NS
 * is the kernel's CLOCK_MONOTONIC time of a connector event (an exec's tells whether a
 * target opened since runs the new program), 0 for scans and SERVE_DISCOVER_LOST. */
typedef void (*serve_discover_cb)(void *ctx, enum serve_discover_event ev, pid_t pid, pid_t parent,
                                  uint64_t when_ns);

/* Creates a discoverer; with USE_CONNECTOR it subscribes to the process-events connector.
 * Failing to subscribe (no CAP_NET_ADMIN, a kernel without it, a network namespace that is
 * not the initial one) is not an error: serve_discover_fd then returns -1 and the caller
 * relies on scans. Writes why into WHY (may be NULL). Returns NULL when out of memory. */
serve_discover_t *serve_discover_new(int use_connector, char *why, size_t whylen);

/* Closes the socket and frees D. NULL is a no-op. */
void serve_discover_free(serve_discover_t *d);

/* The connector socket to poll for input, or -1 without the connector. */
int serve_discover_fd(const serve_discover_t *d);

/* Reads every pending connector message (non-blocking) and calls CB for each event of a
 * process (thread events are dropped). Bounded: at most 4096 messages per call. Returns
 * the number of events, or a negative code when the socket failed (the caller should then
 * scan and may call serve_discover_free). */
int serve_discover_read(serve_discover_t *d, serve_discover_cb cb, void *ctx);

/* Lists every process in /proc (at most 4 million) and calls CB(ctx, SERVE_DISCOVER_NEW,
 * pid) for each. Returns the count, or SCRY_E_IO when /proc cannot be listed. */
int serve_discover_scan(serve_discover_cb cb, void *ctx);

#endif
