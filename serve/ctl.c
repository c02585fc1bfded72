/* ctl.c - the control socket: request parser, server, authorisation. */
#include "ctl.h"
#include "config.h"
#include "log.h"
#include "report.h"
#include "scry_err.h"
#include "scry_parse.h"
#include "scry_time.h"
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct serve_ctl {
    int fd;
    char *path;
    serve_ctl_stats_t stats;
};

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
    json_tokener *tok = json_tokener_new_ex(3);
    if (!tok) {
        snprintf(msg, msglen, "out of memory");
        return SCRY_E_NOMEM;
    }
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    json_object *o = json_tokener_parse_ex(tok, buf, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t used = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
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
            const char *f = json_object_is_type(val, json_type_string)
                                ? json_object_get_string(val) : NULL;
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

int serve_ctl_authorized(const serve_ctl_peer_t *peer, uid_t owner)
{
    return peer->uid == 0 || peer->uid == owner;
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
        if (serve_mkdirs(dir) != 0) {
            snprintf(msg, msglen, "%s: cannot create the directory: %s", dir, strerror(errno));
            return NULL;
        }
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
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || chmod(path, 0666) != 0 ||
        listen(fd, 64) != 0) {
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
    close(c->fd);
    unlink(c->path);
    free(c->path);
    free(c);
}

int serve_ctl_fd(const serve_ctl_t *c)
{
    return c->fd;
}

const serve_ctl_stats_t *serve_ctl_stats(const serve_ctl_t *c)
{
    return &c->stats;
}

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

static void reply_error(int fd, const char *why, uint64_t deadline_ms)
{
    json_object *r = json_object_new_object();
    json_object_object_add(r, "ok", json_object_new_boolean(0));
    json_object_object_add(r, "error", json_object_new_string(why));
    const char *t = json_object_to_json_string_ext(r, JSON_C_TO_STRING_PLAIN);
    write_all(fd, t, strlen(t), deadline_ms);
    write_all(fd, "\n", 1, deadline_ms);
    json_object_put(r);
}

/* Serves one connection. */
static void serve_one(serve_ctl_t *c, int fd, serve_ctl_handler handler, void *ctx)
{
    char buf[SERVE_CTL_MAX_REQUEST + 2];
    size_t got = 0;
    uint64_t deadline = now_ms() + 1000;
    struct ucred cred;
    socklen_t cl = sizeof cred;
    c->stats.requests++;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0) {
        c->stats.bad_requests++;
        return;
    }
    serve_ctl_peer_t peer = {cred.pid, cred.uid, cred.gid, fd};
    int complete = 0;
    while (!complete && got < sizeof buf) {
        ssize_t n = recv(fd, buf + got, sizeof buf - got, MSG_DONTWAIT);
        if (n > 0) {
            if (memchr(buf + got, '\n', (size_t)n))
                complete = 1;
            got += (size_t)n;
            continue;
        }
        if (n == 0) {
            complete = 1;
            break;
        }
        if (errno != EAGAIN && errno != EINTR)
            break;
        uint64_t t = now_ms();
        if (t >= deadline)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        poll(&p, 1, (int)(deadline - t));
    }
    if (got > SERVE_CTL_MAX_REQUEST) {
        c->stats.bad_requests++;
        reply_error(fd, "request too large (at most 4096 bytes)", deadline + 1000);
        return;
    }
    if (!complete) {
        c->stats.bad_requests++;
        reply_error(fd, "incomplete request (end it with a newline)", deadline + 1000);
        return;
    }
    char *nl = memchr(buf, '\n', got);
    size_t len = nl ? (size_t)(nl - buf) : got;
    char why[256];
    serve_ctl_req_t req;
    if (serve_ctl_parse(buf, len, &req, why, sizeof why) != 0) {
        c->stats.bad_requests++;
        serve_log("control: bad request from pid %d uid %u: %s", (int)peer.pid, (unsigned)peer.uid,
                  why);
        reply_error(fd, why, deadline + 1000);
        return;
    }
    json_object *reply = json_object_new_object();
    if (!reply)
        return;
    /* a reply (a large dump) may take longer than the request: 5 s */
    if (handler(ctx, &req, &peer, reply) == 0)
        serve_ctl_reply(fd, reply, 5);
    json_object_put(reply);
}

int serve_ctl_reply(int fd, json_object *reply, double timeout_s)
{
    json_object *ok;
    if (!json_object_object_get_ex(reply, "ok", &ok))
        json_object_object_add(reply, "ok", json_object_new_boolean(1));
    const char *t = json_object_to_json_string_ext(reply, JSON_C_TO_STRING_PLAIN);
    uint64_t wdl = now_ms() + (uint64_t)(timeout_s * 1000);
    if (write_all(fd, t, strlen(t), wdl) != 0 || write_all(fd, "\n", 1, wdl) != 0)
        return SCRY_E_IO;
    return 0;
}

int serve_ctl_serve(serve_ctl_t *c, serve_ctl_handler handler, void *ctx)
{
    int served = 0;
    for (int i = 0; i < 16; i++) {
        int fd = accept4(c->fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            break;
        serve_one(c, fd, handler, ctx);
        close(fd);
        served++;
    }
    return served;
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
