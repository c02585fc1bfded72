/* ctl.h - the control socket of `scry serve`: requests, their parser, the server side, and the
 * client used by `scry ctl`.
 *
 * Protocol: a client connects to the Unix stream socket, sends one JSON object (at most
 * SERVE_CTL_MAX_REQUEST bytes, ended by a newline or by shutting down its write side) and
 * reads one JSON object back, then scry serve closes the connection.
 *   {"cmd": "list"}                    targets with their rates, CPU, samples, errors
 *   {"cmd": "dump", "pid": N}          every thread's stack now (text and JSON)
 *   {"cmd": "flush"}                   end the current windows now
 *   {"cmd": "record", "pid": N, "memory": true, "duration": 60, "format": "json"}
 *                                      a recording of one process (CPU, with "memory" its
 *                                      allocations through the shim) for "duration" seconds
 *                                      (default 10), answered at its end with the profile in
 *                                      "text" (the --format of scry record; default "text")
 *                                      and scry record's messages in "log"
 *   {"cmd": "set-rate", "rate": HZ[, "pid": N]}
 *   {"cmd": "reload"}
 * Replies are {"ok": true, ...} or {"ok": false, "error": "..."}. The peer's credentials
 * (SO_PEERCRED) authorise each request: root may do anything; another user sees and acts
 * on their own processes only, and may not flush, reload or change the global rate.
 */
#ifndef SCRY_SERVE_CTL_H
#define SCRY_SERVE_CTL_H

#include <json-c/json.h>

#include <stddef.h>
#include <stdint.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>

#define SERVE_CTL_MAX_REQUEST       4096
#define SERVE_CTL_MAX_REPLY         (64u << 20)
#define SERVE_CTL_MAX_CONNS         64 /* connections open at once */
#define SERVE_CTL_MAX_CONNS_PER_UID 8

enum serve_ctl_cmd {
    SERVE_CTL_LIST,
    SERVE_CTL_DUMP,
    SERVE_CTL_FLUSH,
    SERVE_CTL_RECORD,
    SERVE_CTL_SET_RATE,
    SERVE_CTL_RELOAD,
};

typedef struct serve_ctl_req {
    enum serve_ctl_cmd cmd;
    pid_t pid;         /* 0: none given */
    double rate_hz;    /* set-rate */
    int memory;        /* record */
    int native;        /* dump, record */
    double duration_s; /* record; 0: default */
    char format[32];   /* record: a report format name ("" : text); [a-z0-9-] only */
} serve_ctl_req_t;

/* The peer of a request. */
#define SERVE_CTL_MAX_GROUPS 256

typedef struct serve_ctl_peer {
    pid_t pid;
    uid_t uid; /* SO_PEERCRED: the client's effective ids when it connected */
    gid_t gid;
    int fd; /* the connection (a handler that answers later writes there: serve_ctl_reply) */
    uint32_t ngroups; /* SO_PEERGROUPS (none when it has more than SERVE_CTL_MAX_GROUPS) */
    gid_t groups[SERVE_CTL_MAX_GROUPS];
} serve_ctl_peer_t;

/* Parses one request of LEN bytes (not necessarily NUL-terminated; trailing whitespace
 * allowed). Strict: one JSON object, nesting depth <= 2, only the known keys with values
 * of the right type and range, "cmd" required, "pid" required by dump and record.
 * Returns 0, or SCRY_E_INVAL with the reason in MSG. Never reads past LEN. */
int serve_ctl_parse(const char *buf, size_t len, serve_ctl_req_t *req, char *msg, size_t msglen);

/* Sets OK[i] to 1 when PEER may see or act on process PIDS[i] (N of them), else 0: root
 * may on any; another user exactly when the kernel's ptrace access check in
 * PTRACE_MODE_READ_REALCREDS lets a process with PEER's uid and gid read it: every uid and
 * gid of the target (real, effective, saved) equal to the peer's, the target dumpable and
 * holding no capability the peer lacks, or the target in a user namespace the peer owns.
 * The kernel decides: a child process takes PEER's ids (no groups, no capabilities) and
 * asks kcmp(2), which makes that check, about each pid. Returns 0, or a negative code
 * (fork failed, no answer within 0.5 s, or N over SERVE_CTL_MAX_PIDS) with OK all 0. */
int serve_ctl_may_read(const serve_ctl_peer_t *peer, const pid_t *pids, size_t n,
                       unsigned char *ok);

#define SERVE_CTL_MAX_PIDS 65536

/* Fills REPLY (an empty JSON object the server then sends) for request REQ from PEER and
 * returns 0. A handler sets "ok"; when it does not, the server adds "ok": true. A handler
 * that answers later (a process it forked, holding its own copy of PEER->fd, sends the
 * reply with serve_ctl_reply) returns 1: the server then sends nothing. */
typedef int (*serve_ctl_handler)(void *ctx, const serve_ctl_req_t *req,
                                 const serve_ctl_peer_t *peer, json_object *reply);

/* Sends REPLY (adding "ok": true when it has no "ok") and a newline on connection FD, within
 * TIMEOUT_S seconds. Returns 0 or SCRY_E_IO. */
int serve_ctl_reply(int fd, json_object *reply, double timeout_s);

typedef struct serve_ctl serve_ctl_t;

typedef struct serve_ctl_stats {
    uint64_t requests;
    uint64_t bad_requests; /* malformed, oversized, too slow */
    uint64_t refused;      /* connections over the limits */
} serve_ctl_stats_t;

/* Creates the listening socket at PATH (its directory is created with mode 0755; a stale
 * socket nobody answers on is replaced; the socket is mode 0666: authorisation is per
 * request). Returns NULL with a message in MSG (another scry serve is listening there, the
 * path is not a socket, no permission). */
serve_ctl_t *serve_ctl_new(const char *path, char *msg, size_t msglen);

/* Closes and unlinks the socket. NULL is a no-op. */
void serve_ctl_free(serve_ctl_t *c);

/* The descriptors to poll (the listening socket first, then each connection, POLLIN or
 * POLLOUT), at most MAX (SERVE_CTL_MAX_CONNS + 1 is enough); returns how many. */
size_t serve_ctl_pollfds(const serve_ctl_t *c, struct pollfd *fds, size_t max);

/* The earliest deadline of a connection (CLOCK_MONOTONIC ns; UINT64_MAX: none): poll's
 * timeout should end by then so that serve_ctl_serve drops it. */
uint64_t serve_ctl_deadline_ns(const serve_ctl_t *c);

/* Does what FDS (as filled by serve_ctl_pollfds, revents set by poll) allow without ever
 * blocking: reads requests, answers a complete one through HANDLER, sends replies as far
 * as the socket takes them, drops connections past their deadline (a request must arrive
 * within 1 s, with an error reply; a reply be taken within 5 s), accepts new connections
 * (at most 16 a call). Once 20 ms went by in a call, what is left waits for the next one
 * (poll reports it again at once). A connection over SERVE_CTL_MAX_CONNS in all or
 * SERVE_CTL_MAX_CONNS_PER_UID for its user is answered with an error and closed at once.
 * Returns the number of requests read. */
int serve_ctl_serve(serve_ctl_t *c, const struct pollfd *fds, size_t nfds,
                    serve_ctl_handler handler, void *ctx);

/* In a child process forked by a handler: closes the listening socket and every
 * connection but KEEP_FD (the socket file stays). */
void serve_ctl_close_in_child(serve_ctl_t *c, int keep_fd);

const serve_ctl_stats_t *serve_ctl_stats(const serve_ctl_t *c);

/* Client: sends REQUEST (a JSON text) to scry serve at PATH and returns its reply
 * (malloc'ed, NUL-terminated) in *REPLY. Waits at most TIMEOUT_S. Returns 0, SCRY_E_NOTFOUND
 * (no scry serve at PATH), SCRY_E_PERM, SCRY_E_TIMEOUT, SCRY_E_IO. */
int serve_ctl_call(const char *path, const char *request, double timeout_s, char **reply);

#endif
