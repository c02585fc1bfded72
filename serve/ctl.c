/* ctl.c - the control socket: request parser, server, authorisation. */
#include "ctl.h"
#include "config.h"
#include "json_in.h"
#include "log.h"
#include "report.h"
#include "scry_err.h"
#include "scry_parse.h"
#include "scry_time.h"
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/kcmp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define SERVE_CTL_READ_MS   1000 /* a request must arrive within 1 s of the connection */
#define SERVE_CTL_WRITE_MS  5000 /* and its reply be taken within 5 s */
#define SERVE_CTL_BUDGET_MS 20   /* time serve_ctl_serve starts new work in, per call */
#define SERVE_CTL_CHECK_MS                                                                         \
    500 /* an access check's child answers within this, or is killed:                              \
           the user may stop it (it is theirs), not hold the loop */

typedef struct ctl_conn ctl_conn_t;

struct serve_ctl {
    int fd;
    char *path;
    serve_ctl_stats_t stats;
    ctl_conn_t *conns[SERVE_CTL_MAX_CONNS];
    size_t n_conns;
};

static void conn_close(serve_ctl_t *c, size_t i);
static uint64_t now_ms(void);

/* The request words, in enum serve_ctl_cmd's order. */
static const char *const cmd_names[] = {"list", "dump", "flush", "record", "set-rate", "reload"};

static int get_number(json_object *v, double lo, double hi, double *out)
{
    if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double))
        return -1;
    double d = json_object_get_double(v);
    if (!scry_in_range(d, lo, hi))
        return -1;
    *out = d;
    return 0;
}

/* Whether the LEN bytes of JSON text at BUF hold a string escape of NUL (\u0000). json-c
 * keeps such a string whole but hands keys out as C strings: {"cmd\u0000x": ...} would
 * read as "cmd". No request needs a NUL, so none is taken. */
static int has_escaped_nul(const char *buf, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (buf[i] != '\\')
            continue;
        if (buf[i + 1] == 'u' && i + 5 < len && strncmp(buf + i + 2, "0000", 4) == 0)
            return 1;
        i++; /* the escaped character: "\\u0000" is a backslash and text */
    }
    return 0;
}

int serve_ctl_parse(const char *buf, size_t len, serve_ctl_req_t *req, char *msg, size_t msglen)
{
    memset(req, 0, sizeof *req);
    if (len > SERVE_CTL_MAX_REQUEST) {
        snprintf(msg, msglen, "request larger than %d bytes", SERVE_CTL_MAX_REQUEST);
        return SCRY_E_INVAL;
    }
    while (len > 0 && strchr(" \t\r\n", buf[len - 1]) && buf[len - 1])
        len--;
    if (len == 0) {
        snprintf(msg, msglen, "empty request");
        return SCRY_E_INVAL;
    }
    if (memchr(buf, '\0', len) || has_escaped_nul(buf, len)) {
        snprintf(msg, msglen, "request contains a NUL byte");
        return SCRY_E_INVAL;
    }
    json_object *o;
    enum json_tokener_error jerr;
    size_t used;
    if (report_json_parse(buf, len, 3, &o, &jerr, &used) != 0) {
        snprintf(msg, msglen, "out of memory");
        return SCRY_E_NOMEM;
    }
    int err = SCRY_E_INVAL;
    if (!o || jerr != json_tokener_success) {
        snprintf(msg, msglen, "malformed JSON: %s",
                 jerr == json_tokener_continue ? "incomplete" : json_tokener_error_desc(jerr));
        goto out;
    }
    if (used != len) {
        snprintf(msg, msglen, "trailing data after the request object");
        goto out;
    }
    if (!json_object_is_type(o, json_type_object)) {
        snprintf(msg, msglen, "a request is a JSON object");
        goto out;
    }
    int have_cmd = 0;
    json_object_object_foreach(o, key, val)
    {
        double d;
        if (strcmp(key, "cmd") == 0) {
            /* the string's own length: a "reload\u0000" is not "reload" */
            int i = json_object_is_type(val, json_type_string)
                        ? scry_parse_word(json_object_get_string(val),
                                          (size_t)json_object_get_string_len(val), cmd_names,
                                          sizeof cmd_names / sizeof cmd_names[0])
                        : SCRY_E_INVAL;
            if (i < 0) {
                snprintf(msg, msglen, "unknown cmd (list, dump, flush, record, set-rate, reload)");
                goto out;
            }
            req->cmd = (enum serve_ctl_cmd)i;
            have_cmd = 1;
        } else if (strcmp(key, "pid") == 0) {
            if (!json_object_is_type(val, json_type_int) || get_number(val, 1, 0x3fffffff, &d)) {
                snprintf(msg, msglen, "pid must be an integer between 1 and 2^30");
                goto out;
            }
            req->pid = (pid_t)d;
        } else if (strcmp(key, "rate") == 0) {
            if (get_number(val, SERVE_RATE_MIN_HZ, SERVE_RATE_MAX_HZ, &d)) {
                snprintf(msg, msglen, "rate must be a number of Hz from %g to %g",
                         SERVE_RATE_MIN_HZ, SERVE_RATE_MAX_HZ);
                goto out;
            }
            req->rate_hz = d;
        } else if (strcmp(key, "duration") == 0) {
            if (get_number(val, 0.1, 3600, &d)) {
                snprintf(msg, msglen, "duration must be between 0.1 and 3600 seconds");
                goto out;
            }
            req->duration_s = d;
        } else if (strcmp(key, "memory") == 0 || strcmp(key, "native") == 0) {
            if (!json_object_is_type(val, json_type_boolean)) {
                snprintf(msg, msglen, "%s must be true or false", key);
                goto out;
            }
            *(key[0] == 'm' ? &req->memory : &req->native) = json_object_get_boolean(val);
        } else if (strcmp(key, "format") == 0) {
            const char *f =
                json_object_is_type(val, json_type_string) ? json_object_get_string(val) : NULL;
            size_t fl = f ? (size_t)json_object_get_string_len(val) : 0;
            int fmt = f && scry_parse_name(f, fl, sizeof req->format - 1) == 0
                          ? report_format_parse(f)
                          : SCRY_E_INVAL;
            if (fmt < 0 || fmt == REPORT_FORMAT_PPROF) {
                /* a reply is JSON text: pprof's gzip bytes do not travel in it */
                snprintf(msg, msglen, "format must be a format name of scry record but pprof");
                goto out;
            }
            memcpy(req->format, f, fl + 1);
        } else {
            snprintf(msg, msglen, "unknown key in request");
            goto out;
        }
    }
    if (!have_cmd) {
        snprintf(msg, msglen, "request without cmd");
        goto out;
    }
    if ((req->cmd == SERVE_CTL_DUMP || req->cmd == SERVE_CTL_RECORD) && req->pid == 0) {
        snprintf(msg, msglen, "%s needs a pid", req->cmd == SERVE_CTL_DUMP ? "dump" : "record");
        goto out;
    }
    if (req->cmd == SERVE_CTL_SET_RATE && req->rate_hz == 0) {
        snprintf(msg, msglen, "set-rate needs a rate");
        goto out;
    }
    err = 0;
out:
    json_object_put(o);
    return err;
}

/* The child of serve_ctl_may_read: PEER's ids, then one byte per pid on FD. */
static void may_read_child(const serve_ctl_peer_t *peer, const pid_t *pids, size_t n, int fd)
{
    unsigned char buf[4096];
    /* the user may signal this process once it is theirs, but not read it: not dumpable */
    if (setgroups(0, NULL) != 0 || setresgid(peer->gid, peer->gid, peer->gid) != 0 ||
        setresuid(peer->uid, peer->uid, peer->uid) != 0 || geteuid() != peer->uid ||
        prctl(PR_SET_DUMPABLE, 0) != 0)
        _exit(1);
    for (size_t i = 0; i < n;) {
        size_t k = 0;
        for (; k < sizeof buf && i < n; k++, i++)
            buf[k] = syscall(SYS_kcmp, pids[i], pids[i], KCMP_VM, 0, 0) == 0;
        for (size_t off = 0; off < k;) {
            ssize_t w = write(fd, buf + off, k - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                _exit(1);
            off += (size_t)w;
        }
    }
    _exit(0);
}

int serve_ctl_may_read(const serve_ctl_peer_t *peer, const pid_t *pids, size_t n, unsigned char *ok)
{
    memset(ok, 0, n);
    if (n > SERVE_CTL_MAX_PIDS)
        return SCRY_E_INVAL;
    if (peer->uid == 0) {
        memset(ok, 1, n);
        return 0;
    }
    if (n == 0)
        return 0;
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return SCRY_E_IO;
    pid_t c = fork();
    if (c == 0) {
        close(p[0]);
        may_read_child(peer, pids, n, p[1]);
    }
    close(p[1]);
    int err = c < 0 ? SCRY_E_IO : 0;
    size_t got = 0;
    uint64_t deadline = now_ms() + SERVE_CTL_CHECK_MS;
    while (c > 0 && got < n) {
        uint64_t t = now_ms();
        struct pollfd pf = {.fd = p[0], .events = POLLIN};
        if (t >= deadline || poll(&pf, 1, (int)(deadline - t)) == 0) {
            err = SCRY_E_TIMEOUT;
            break;
        }
        ssize_t r = read(p[0], ok + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            err = SCRY_E_IO;
            break;
        }
        got += (size_t)r;
    }
    close(p[0]);
    if (c > 0) {
        kill(c, SIGKILL);
        waitpid(c, NULL, 0);
    }
    if (err)
        memset(ok, 0, n);
    return err;
}

serve_ctl_t *serve_ctl_new(const char *path, char *msg, size_t msglen)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        snprintf(msg, msglen, "%s: socket path too long", path);
        return NULL;
    }
    strcpy(sa.sun_path, path);
    char dir[sizeof sa.sun_path];
    strcpy(dir, path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        int dfd = serve_dir_open(dir, 0755, (gid_t)-1, msg, msglen);
        if (dfd < 0)
            return NULL;
        close(dfd);
    }
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            snprintf(msg, msglen, "%s exists and is not a socket", path);
            return NULL;
        }
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof sa) == 0) {
            close(probe);
            snprintf(msg, msglen, "%s: another scry serve is listening there", path);
            return NULL;
        }
        if (probe >= 0)
            close(probe);
        unlink(path); /* stale */
    }
    /* mode 0666 from the start (authorisation is per request): no chmod by name, which
     * would follow a link put in the socket's place */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    mode_t old_umask = umask(0111);
    int bound = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    umask(old_umask);
    if (!bound || listen(fd, 64) != 0) {
        snprintf(msg, msglen, "%s: cannot listen: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    serve_ctl_t *c = calloc(1, sizeof *c);
    if (!c || !(c->path = strdup(path))) {
        free(c);
        close(fd);
        unlink(path);
        snprintf(msg, msglen, "out of memory");
        return NULL;
    }
    c->fd = fd;
    return c;
}

void serve_ctl_free(serve_ctl_t *c)
{
    if (!c)
        return;
    while (c->n_conns)
        conn_close(c, 0);
    close(c->fd);
    unlink(c->path);
    free(c->path);
    free(c);
}

const serve_ctl_stats_t *serve_ctl_stats(const serve_ctl_t *c)
{
    return &c->stats;
}

/* One client connection: its request being read, then its reply being written. */
typedef struct ctl_conn {
    int fd;
    serve_ctl_peer_t peer;
    uint64_t deadline_ms; /* reading, then writing, ends then */
    size_t got;
    char *out; /* the reply being sent (NULL: still reading) */
    size_t out_len, out_off;
    char in[SERVE_CTL_MAX_REQUEST + 2];
} ctl_conn_t;

static uint64_t now_ms(void)
{
    return scry_now_ns() / 1000000u;
}

/* Writes all of BUF within the deadline. Returns 0 or -1. */
static int write_all(int fd, const char *buf, size_t len, uint64_t deadline_ms)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return -1;
        uint64_t t = now_ms();
        if (t >= deadline_ms)
            return -1;
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        poll(&p, 1, (int)(deadline_ms - t));
    }
    return 0;
}

/* REPLY as one line of text (malloc'ed, "ok": true added when it has no "ok"), or NULL. */
static char *reply_line(json_object *reply, size_t *len)
{
    json_object *ok;
    if (!json_object_object_get_ex(reply, "ok", &ok))
        json_object_object_add(reply, "ok", json_object_new_boolean(1));
    const char *t = json_object_to_json_string_ext(reply, JSON_C_TO_STRING_PLAIN);
    size_t n = t ? strlen(t) : 0;
    char *line = t ? malloc(n + 2) : NULL;
    if (!line)
        return NULL;
    memcpy(line, t, n);
    line[n] = '\n';
    line[n + 1] = '\0';
    *len = n + 1;
    return line;
}

int serve_ctl_reply(int fd, json_object *reply, double timeout_s)
{
    size_t len = 0;
    char *line = reply_line(reply, &len);
    int err = line && write_all(fd, line, len, now_ms() + (uint64_t)(timeout_s * 1000)) == 0
                  ? 0
                  : SCRY_E_IO;
    free(line);
    return err;
}

static void conn_close(serve_ctl_t *c, size_t i)
{
    ctl_conn_t *k = c->conns[i];
    close(k->fd);
    free(k->out);
    free(k);
    c->conns[i] = c->conns[--c->n_conns];
}

/* Queues REPLY on connection K and sends what the socket takes now; the rest goes out as
 * the client reads (within SERVE_CTL_WRITE_MS). */
static void conn_answer(ctl_conn_t *k, json_object *reply)
{
    k->out = reply_line(reply, &k->out_len);
    if (!k->out) {
        k->out = strdup("");
        k->out_len = 0;
    }
    k->out_off = 0;
    k->deadline_ms = now_ms() + SERVE_CTL_WRITE_MS;
}

static void conn_error(ctl_conn_t *k, const char *why)
{
    json_object *r = json_object_new_object();
    json_object_object_add(r, "ok", json_object_new_boolean(0));
    json_object_object_add(r, "error", json_object_new_string(why));
    conn_answer(k, r);
    json_object_put(r);
}

/* Sends what the socket takes of K's reply. Returns 1 when the connection is done (all
 * sent, or the client gone), 0 to keep it. */
static int conn_flush(ctl_conn_t *k)
{
    while (k->out_off < k->out_len) {
        ssize_t n =
            send(k->fd, k->out + k->out_off, k->out_len - k->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            k->out_off += (size_t)n;
            continue;
        }
        return n < 0 && (errno == EAGAIN || errno == EINTR) ? 0 : 1;
    }
    return 1;
}

/* Reads what K's client sent; when the request is complete, answers it through HANDLER.
 * Returns 1 when the connection is done, 0 to keep it. */
static int conn_read(serve_ctl_t *c, ctl_conn_t *k, serve_ctl_handler handler, void *ctx)
{
    int complete = 0;
    while (!complete && k->got < sizeof k->in) {
        ssize_t n = recv(k->fd, k->in + k->got, sizeof k->in - k->got, MSG_DONTWAIT);
        if (n > 0) {
            complete = memchr(k->in + k->got, '\n', (size_t)n) != NULL;
            k->got += (size_t)n;
        } else if (n == 0) {
            complete = 1;
        } else if (errno == EAGAIN || errno == EINTR) {
            return 0;
        } else {
            return 1;
        }
    }
    c->stats.requests++;
    if (k->got > SERVE_CTL_MAX_REQUEST) {
        c->stats.bad_requests++;
        conn_error(k, "request too large (at most 4096 bytes)");
        return conn_flush(k);
    }
    char *nl = memchr(k->in, '\n', k->got);
    size_t len = nl ? (size_t)(nl - k->in) : k->got;
    char why[256];
    serve_ctl_req_t req;
    if (serve_ctl_parse(k->in, len, &req, why, sizeof why) != 0) {
        c->stats.bad_requests++;
        serve_log("control: bad request from pid %d uid %u: %s", (int)k->peer.pid,
                  (unsigned)k->peer.uid, why);
        conn_error(k, why);
        return conn_flush(k);
    }
    json_object *reply = json_object_new_object();
    if (!reply)
        return 1;
    int later = handler(ctx, &req, &k->peer, reply);
    if (!later)
        conn_answer(k, reply);
    json_object_put(reply);
    return later ? 1 : conn_flush(k); /* answered later: the handler's process holds a copy */
}

/* Connections of UID now. */
static size_t conns_of(const serve_ctl_t *c, uid_t uid)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n_conns; i++)
        n += c->conns[i]->peer.uid == uid;
    return n;
}

/* Accepts the pending connections (at most 16 a call) and reads what each sent already;
 * one over the limits is answered with an error (without waiting) and closed. */
static void accept_new(serve_ctl_t *c, serve_ctl_handler handler, void *ctx)
{
    for (int i = 0; i < 16; i++) {
        int fd = accept4(c->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;
        struct ucred cred;
        socklen_t cl = sizeof cred;
        ctl_conn_t *k = NULL;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 ||
            !(k = calloc(1, sizeof *k))) {
            c->stats.bad_requests++;
            close(fd);
            continue;
        }
        k->fd = fd;
        k->peer.pid = cred.pid;
        k->peer.uid = cred.uid;
        k->peer.gid = cred.gid;
        k->peer.fd = fd;
        socklen_t gl = sizeof k->peer.groups;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, k->peer.groups, &gl) == 0)
            k->peer.ngroups = gl / sizeof k->peer.groups[0];
        k->deadline_ms = now_ms() + SERVE_CTL_READ_MS;
        if (c->n_conns >= SERVE_CTL_MAX_CONNS ||
            conns_of(c, cred.uid) >= SERVE_CTL_MAX_CONNS_PER_UID) {
            c->stats.refused++;
            conn_error(k, "too many connections (at most 8 per user): try again later");
            conn_flush(k);
            close(fd);
            free(k->out);
            free(k);
            continue;
        }
        c->conns[c->n_conns++] = k;
        /* a quick client's request is often there already: served now, its slot freed */
        if (conn_read(c, k, handler, ctx))
            conn_close(c, c->n_conns - 1);
    }
}

size_t serve_ctl_pollfds(const serve_ctl_t *c, struct pollfd *fds, size_t max)
{
    size_t n = 0;
    if (max > 0)
        fds[n++] = (struct pollfd){.fd = c->fd, .events = POLLIN};
    for (size_t i = 0; i < c->n_conns && n < max; i++)
        fds[n++] =
            (struct pollfd){.fd = c->conns[i]->fd, .events = c->conns[i]->out ? POLLOUT : POLLIN};
    return n;
}

uint64_t serve_ctl_deadline_ns(const serve_ctl_t *c)
{
    uint64_t d = UINT64_MAX;
    for (size_t i = 0; i < c->n_conns; i++)
        if (c->conns[i]->deadline_ms * 1000000u < d)
            d = c->conns[i]->deadline_ms * 1000000u;
    return d;
}

int serve_ctl_serve(serve_ctl_t *c, const struct pollfd *fds, size_t nfds,
                    serve_ctl_handler handler, void *ctx)
{
    uint64_t req0 = c->stats.requests;
    uint64_t t0 = now_ms();
    for (size_t f = 1; f < nfds; f++) {
        if (!fds[f].revents)
            continue;
        /* requests answered in the loop (a dump) take time: past the budget the rest wait
         * for the next call, after the loop's due work */
        if (now_ms() - t0 >= SERVE_CTL_BUDGET_MS)
            break;
        for (size_t i = 0; i < c->n_conns; i++) {
            ctl_conn_t *k = c->conns[i];
            if (k->fd != fds[f].fd)
                continue;
            int done = k->out ? conn_flush(k) : conn_read(c, k, handler, ctx);
            if (done)
                conn_close(c, i);
            break;
        }
    }
    /* overdue: a request not complete in time gets an error, a reply not taken is dropped */
    uint64_t t = now_ms();
    for (size_t i = 0; i < c->n_conns;) {
        ctl_conn_t *k = c->conns[i];
        if (t < k->deadline_ms) {
            i++;
            continue;
        }
        if (!k->out) {
            c->stats.bad_requests++;
            conn_error(k, "incomplete request (end it with a newline)");
            conn_flush(k);
        }
        conn_close(c, i);
    }
    if (nfds > 0 && fds[0].revents && now_ms() - t0 < SERVE_CTL_BUDGET_MS)
        accept_new(c, handler, ctx);
    return (int)(c->stats.requests - req0);
}

void serve_ctl_close_in_child(serve_ctl_t *c, int keep_fd)
{
    close(c->fd);
    for (size_t i = 0; i < c->n_conns; i++)
        if (c->conns[i]->fd != keep_fd)
            close(c->conns[i]->fd);
}

int serve_ctl_call(const char *path, const char *request, double timeout_s, char **reply)
{
    *reply = NULL;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return SCRY_E_INVAL;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return SCRY_E_IO;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        int e = errno;
        close(fd);
        return e == EACCES || e == EPERM          ? SCRY_E_PERM
               : e == ENOENT || e == ECONNREFUSED ? SCRY_E_NOTFOUND
                                                  : SCRY_E_IO;
    }
    uint64_t deadline = now_ms() + (uint64_t)(timeout_s * 1000);
    int err = SCRY_E_IO;
    size_t cap = 65536, got = 0;
    char *buf = malloc(cap);
    if (!buf)
        goto out;
    if (write_all(fd, request, strlen(request), deadline) != 0 ||
        write_all(fd, "\n", 1, deadline) != 0)
        goto out;
    shutdown(fd, SHUT_WR);
    for (;;) {
        if (got + 1 == cap) {
            if (cap >= SERVE_CTL_MAX_REPLY)
                goto out;
            char *nb = realloc(buf, cap * 2);
            if (!nb)
                goto out;
            buf = nb, cap *= 2;
        }
        uint64_t t = now_ms();
        if (t >= deadline) {
            err = SCRY_E_TIMEOUT;
            goto out;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)(deadline - t)) <= 0)
            continue;
        ssize_t n = recv(fd, buf + got, cap - 1 - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            goto out;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    *reply = buf;
    buf = NULL;
    err = got ? 0 : SCRY_E_IO;
    if (err) {
        free(*reply);
        *reply = NULL;
    }
out:
    free(buf);
    close(fd);
    return err;
}
