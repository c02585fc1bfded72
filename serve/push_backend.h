/* push_backend.h - the seam between the push's spool (push.c: the queue on disk, the
 * sending thread, retries with backoff, credentials, the transfer) and one ingest protocol
 * (push_pyroscope.c). A backend is a table of functions, found by name in push.c's list:
 * another protocol (OTLP) is one more file and one more entry there; the spool knows no
 * format.
 *
 * The spool keeps each window as two files: the backend's metadata text (SEQ.query, from
 * encode, when the window is queued) and the body (SEQ.pb.gz, the window's gzipped pprof).
 * To send one it reads both, resets a curl handle with the transfer's options (timeouts,
 * abort when the push stops, user agent, http and https only, the answer's body
 * discarded), has the backend prepare the request, adds the credentials (basic auth, a
 * bearer token, the tenant in the backend's header), sends it and asks the backend what
 * the answer means. */
#ifndef SCRY_SERVE_PUSH_BACKEND_H
#define SCRY_SERVE_PUSH_BACKEND_H

#include "curl_dl.h"
#include "push.h"

#include <stddef.h>
#include <stdint.h>

/* One window as serve_push_enqueue received it. */
typedef struct serve_push_window {
    const char *service;
    const serve_push_label_t *labels;
    size_t n_labels;
    int64_t from, until; /* Unix seconds */
    double rate_hz;
} serve_push_window_t;

/* What the spool does with an entry after the server's answer. */
enum serve_push_verdict {
    SERVE_PUSH_DONE,   /* delivered: removed, counted as pushed */
    SERVE_PUSH_REJECT, /* refused for good: removed, counted as rejected, logged */
    SERVE_PUSH_RETRY,  /* kept: sent again after the backoff, counted as a failure */
};

/* A request being built (push.c owns it): CURL is reset, with the transfer's options set;
 * the backend appends its headers to HEADERS and may set MIME as its body; the spool frees
 * both after the transfer. */
typedef struct serve_push_request {
    CURL *curl;
    struct curl_slist *headers;
    curl_mime *mime;
} serve_push_request_t;

typedef struct serve_push_backend {
    const char *name;          /* serve_push_opts_t.backend */
    const char *tenant_header; /* the header that carries serve_push_opts_t.tenant */
    /* Writes the metadata of window W (text without line breaks, kept in the spool with the
     * body until it is sent) into OUT. Returns its length, or SCRY_E_INVAL (a name or label
     * the protocol refuses), SCRY_E_TRUNC (OUTLEN too small), SCRY_E_NOMEM. */
    int (*encode)(const serve_push_window_t *w, char *out, size_t outlen);
    /* Sets the URL (from BASE_URL, the user's, and META, encode's text) and the body (BODY,
     * LEN bytes, valid until the transfer ends) of request R. Returns 0, or a negative code
     * when the entry cannot be sent (the spool drops it as unreadable). */
    int (*prepare)(serve_push_request_t *r, const char *base_url, const char *meta,
                   const void *body, size_t len);
    /* The verdict on HTTP status STATUS (100..999). */
    enum serve_push_verdict (*classify)(long status);
} serve_push_backend_t;

/* Pyroscope's HTTP ingest API (push_pyroscope.c). */
extern const serve_push_backend_t serve_push_pyroscope;

#endif
