/* push.h - sending windows to a profile store over HTTP, through an on-disk spool. The
 * protocol is a backend (push_backend.h): Pyroscope's ingest API (push_pyroscope.c) today.
 *
 * Every window is first written to the spool directory (SEQ.pb.gz, the gzipped pprof, then
 * SEQ.query, the backend's metadata: that file marks it complete), then a thread posts the
 * spool in order, oldest first. The backend judges the answer: delivered (the entry is
 * deleted), rejected for good (deleted, counted, logged; for Pyroscope a 4xx but 408 and
 * 429), or to be retried (kept: no connection, timeout, for Pyroscope a 5xx), later with
 * exponential backoff (0.5 s doubling to 10 s), so windows are delivered in order once the
 * server is back. When the spool grows past its limit, the oldest entries are dropped,
 * counted and logged. Authentication: basic auth (user + password file), a bearer token
 * file, and a tenant header (the backend's: X-Scope-OrgID for Pyroscope); files are read
 * again for every request (rotation).
 */
#ifndef SCRY_SERVE_PUSH_H
#define SCRY_SERVE_PUSH_H

#include <stddef.h>
#include <stdint.h>

typedef struct serve_push serve_push_t;

typedef struct serve_push_opts {
    const char *backend; /* NULL: the first of push.c's list ("pyroscope") */
    const char *url;     /* http(s)://host:port[/prefix] */
    const char *user, *password_file, *token_file, *tenant;
    double timeout_s;
    const char *spool_dir;
    uint64_t spool_max_bytes;
    double backoff_max_s; /* 0: 10 s */
} serve_push_opts_t;

typedef struct serve_push_label {
    const char *key; /* [a-zA-Z_][a-zA-Z0-9_]* */
    const char *value;
} serve_push_label_t;

typedef struct serve_push_stats {
    uint64_t pushed;   /* windows delivered */
    uint64_t attempts; /* requests made */
    uint64_t failures; /* requests that failed and will be retried */
    uint64_t rejected; /* windows the server refused (4xx) */
    uint64_t dropped;  /* windows dropped because the spool was full */
    uint64_t spooled;  /* windows waiting now */
    uint64_t spool_bytes;
    int last_status; /* HTTP status of the last request, or -1 for a transport error */
} serve_push_stats_t;

/* Opens the spool (creating the directory; entries left by an earlier run are kept and
 * sent first) and starts the sending thread. Returns NULL with a message in MSG (no
 * backend of that name, libcurl missing, no URL or spool, a spool that cannot be opened). */
serve_push_t *serve_push_new(const serve_push_opts_t *o, char *msg, size_t msglen);

/* Stops the thread (an ongoing request is abandoned within about 100 ms) and frees P;
 * the spool stays on disk for the next run. NULL is a no-op. */
void serve_push_free(serve_push_t *p);

/* Spools one window for SERVICE with LABELS (for Pyroscope, values are sanitised: ',', '{',
 * '}', '=', '"' and control characters become '_'), FROM/UNTIL Unix seconds, the sampling
 * rate, and the gzipped pprof bytes. Enforces the spool limit (dropping the oldest).
 * Returns 0, SCRY_E_INVAL (a service name or label key the backend refuses), SCRY_E_TRUNC,
 * SCRY_E_NOMEM, SCRY_E_IO (spool not writable). */
int serve_push_enqueue(serve_push_t *p, const char *service, const serve_push_label_t *labels,
                       size_t n_labels, int64_t from, int64_t until, double rate_hz,
                       const void *pprof, size_t len);

/* Waits until the spool is empty or TIMEOUT_S passed; a window is counted (pushed or
 * rejected) before it leaves the spool, so the stats read after are complete. Returns 0 when
 * empty, else SCRY_E_TIMEOUT. */
int serve_push_drain(serve_push_t *p, double timeout_s);

/* Copies the counters (thread-safe). */
void serve_push_stats(serve_push_t *p, serve_push_stats_t *out);

/* Pyroscope's "SERVICE{k=v,...}" application name into OUT (push_pyroscope.c). Returns 0,
 * SCRY_E_INVAL for a bad service name or key, SCRY_E_TRUNC when OUT is too small. */
int serve_push_app_name(const char *service, const serve_push_label_t *labels, size_t n, char *out,
                        size_t outlen);

#endif
