/* ctl_requests.c - the control requests of `scry serve` (protocol and authorisation rules in
 * serve/ctl.h): root sees and does everything; another user sees and acts on their own
 * processes only. */
#include "log.h"
#include "state.h"

#include "recording.h"
#include "scry_err.h"
#include "srcread.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define RECORD_DEFAULT_S 10.0 /* ctl record without --duration */

static void fail(json_object *reply, const char *why)
{
    json_object_object_add(reply, "ok", json_object_new_boolean(0));
    json_object_object_add(reply, "error", json_object_new_string(why));
}

static serve_target_t *visible_target(serve_state_t *st, pid_t pid, const serve_ctl_peer_t *peer,
                                      json_object *reply)
{
    for (size_t i = 0; i < st->n_targets; i++) {
        serve_target_t *t = st->targets[i];
        if (t->pid != pid)
            continue;
        unsigned char ok = 0;
        if (serve_ctl_may_read(peer, &pid, 1, &ok) != 0 || !ok) {
            fail(reply, "permission denied: you may not read that process (it must be "
                        "yours by every uid and gid, and dumpable)");
            return NULL;
        }
        return t;
    }
    fail(reply, "not a target of this daemon");
    return NULL;
}

static void do_list(serve_state_t *st, const serve_ctl_peer_t *peer, json_object *reply)
{
    json_object *arr = json_object_new_array();
    pid_t pids[SERVE_MAX_TARGETS];
    unsigned char ok[SERVE_MAX_TARGETS];
    for (size_t i = 0; i < st->n_targets; i++)
        pids[i] = st->targets[i]->pid;
    serve_ctl_may_read(peer, pids, st->n_targets, ok); /* on failure: all 0 */
    for (size_t i = 0; i < st->n_targets; i++) {
        serve_target_t *t = st->targets[i];
        if (!ok[i])
            continue;
        json_object *o = json_object_new_object();
        json_object_object_add(o, "pid", json_object_new_int(t->pid));
        json_object_object_add(o, "uid", json_object_new_int((int)t->uid));
        json_object_object_add(o, "service", json_object_new_string(t->service));
        json_object_object_add(o, "container", json_object_new_string(t->container));
        json_object_object_add(o, "python",
                               json_object_new_string(pystate_target_info(t->py)->version));
        json_object_object_add(o, "rate", json_object_new_double(serve_target_rate(st, t)));
        json_object_object_add(o, "cpu_pct", json_object_new_double(t->cpu_pct));
        json_object_object_add(o, "busy", json_object_new_boolean(t->busy));
        int be = sampler_backend(t->sampler);
        json_object_object_add(o, "sampler",
                               json_object_new_string(be == SAMPLER_BPF    ? "bpf"
                                                      : be == SAMPLER_PERF ? "perf"
                                                                           : "ptrace"));
        json_object_object_add(o, "samples", json_object_new_int64((int64_t)t->samples));
        json_object_object_add(o, "errors", json_object_new_int64((int64_t)t->errors));
        json_object_array_add(arr, o);
    }
    json_object_object_add(reply, "targets", arr);
    if (peer->uid != 0)
        return;
    json_object *d = json_object_new_object();
    json_object_object_add(d, "cpu_pct", json_object_new_double(st->self_cpu_pct));
    json_object_object_add(d, "rate_factor", json_object_new_double(st->rate_factor));
    json_object_object_add(d, "pending", json_object_new_int((int)st->n_pending));
    json_object_object_add(d, "windows_written",
                           json_object_new_int64((int64_t)st->windows_written));
    json_object_object_add(d, "bad_requests",
                           json_object_new_int64((int64_t)serve_ctl_stats(st->ctl)->bad_requests));
    json_object_object_add(d, "refused_connections",
                           json_object_new_int64((int64_t)serve_ctl_stats(st->ctl)->refused));
    /* how idle targets are watched: the per-CPU clock ("perf") or /proc every second */
    json_object_object_add(d, "idle_watch", json_object_new_string(st->whoran ? "perf" : "proc"));
    json_object_object_add(d, "whoran_records", json_object_new_int64((int64_t)st->whoran_records));
    json_object_object_add(d, "idle_checks_skipped",
                           json_object_new_int64((int64_t)st->idle_checks_skipped));
    if (st->push) {
        serve_push_stats_t ps;
        serve_push_stats(st->push, &ps);
        json_object_object_add(d, "pushed", json_object_new_int64((int64_t)ps.pushed));
        json_object_object_add(d, "spooled", json_object_new_int64((int64_t)ps.spooled));
        json_object_object_add(d, "push_dropped", json_object_new_int64((int64_t)ps.dropped));
        json_object_object_add(d, "push_rejected", json_object_new_int64((int64_t)ps.rejected));
    }
    json_object_object_add(reply, "daemon", d);
}

/* Writes target T's dump in FMT into a new string (*OUT, malloc'ed). Returns 0, or a
 * negative code with why in MSG. */
static int dump_string(serve_target_t *t, int native, enum report_dump_format fmt, char **out,
                       char *msg, size_t len)
{
    size_t n = 0;
    FILE *f = open_memstream(out, &n);
    if (!f) {
        snprintf(msg, len, "out of memory");
        return SCRY_E_NOMEM;
    }
    /* scry serve's warm reader (the target opened once, its code cache), ptrace back end */
    sampler_opts_t so = {.backend = "ptrace", .native = native};
    int err = recording_dump_write(t->py, t->strings, &so, 0, fmt, f, msg, len);
    if (fclose(f) != 0 && !err) {
        snprintf(msg, len, "out of memory");
        err = SCRY_E_NOMEM;
    }
    if (err && !msg[0])
        snprintf(msg, len, "%s", scry_strerror(err));
    if (err) {
        free(*out);
        *out = NULL;
    }
    return err;
}

/* ctl dump: what `scry dump --pid` prints, in "text", and its JSON document in "dump". */
static void do_dump(serve_target_t *t, const serve_ctl_req_t *req, const serve_ctl_peer_t *peer,
                    json_object *reply)
{
    char msg[512], *text = NULL, *json = NULL;
    json_object *doc = NULL;
    if (dump_string(t, req->native, REPORT_DUMP_TEXT, &text, msg, sizeof msg) != 0 ||
        dump_string(t, req->native, REPORT_DUMP_JSON, &json, msg, sizeof msg) != 0) {
        fail(reply, msg);
        goto out;
    }
    if (!(doc = json_tokener_parse(json))) {
        fail(reply, "the dump's JSON did not parse");
        goto out;
    }
    json_object_object_add(reply, "text", json_object_new_string(text));
    json_object_object_add(reply, "dump", doc);
    serve_log("control: dump of target %d by pid %d", (int)t->pid, (int)peer->pid);
out:
    free(text);
    free(json);
}

static volatile sig_atomic_t record_stop;

/* Records PID as REQ asks (the source read as PEER), the notes and the summary going to
 * LOG. Returns 0 with the profile in *TEXT (malloc'ed; NULL when out of memory), or a
 * negative code with why in MSG. */
static int record_to_text(const serve_ctl_req_t *req, pid_t pid, const serve_ctl_peer_t *peer,
                          FILE *log, char **text, char *msg, size_t msglen)
{
    /* the source is read as the client, not as the target */
    srcread_creds_t creds = {.uid = peer->uid, .gid = peer->gid};
    creds.ngroups = peer->ngroups < SRCREAD_MAX_GROUPS ? peer->ngroups : SRCREAD_MAX_GROUPS;
    for (uint32_t i = 0; i < creds.ngroups; i++)
        creds.groups[i] = peer->groups[i];
    recording_opts_t o = {
        .pid = pid,
        .duration_s = req->duration_s > 0 ? req->duration_s : RECORD_DEFAULT_S,
        .memory = req->memory,
        /* the request's own rate bounds (serve/ctl.c); scry record's default without one */
        .sampler = {.rate_hz = req->rate_hz > 0 ? req->rate_hz : 100, .native = req->native},
        .source_creds = &creds,
        .stop = &record_stop,
        .log = log,
    };
    /* the format name was checked with the request (serve/ctl.c) */
    int fmt = req->format[0] ? report_format_parse(req->format) : REPORT_FORMAT_TEXT;
    size_t len = 0;
    FILE *out = NULL;
    int err = SCRY_E_NOMEM;
    recording_t *r = recording_new(&o);
    *text = NULL;
    snprintf(msg, msglen, "out of memory");
    if (!r)
        goto out;
    if ((err = recording_open(r)) != 0 || (err = recording_run(r)) != 0) {
        snprintf(msg, msglen, "%s", recording_error(r));
        goto out;
    }
    if (recording_stopped_by(r)) /* what was collected is answered */
        fprintf(log, "scry: sampling stopped: %s\n", scry_strerror(recording_stopped_by(r)));
    if ((err = recording_end(r)) != 0) {
        snprintf(msg, msglen, "%s", scry_strerror(err));
        goto out;
    }
    err = SCRY_E_NOMEM;
    if (fmt < 0 || !(out = open_memstream(text, &len)))
        goto out;
    err = recording_write(r, (enum report_format)fmt, out, NULL);
    if (fclose(out) != 0 && !err)
        err = SCRY_E_NOMEM;
    if (err) {
        snprintf(msg, msglen, "writing the profile failed: %s", scry_strerror(err));
        goto out;
    }
    recording_summary(r, "-", log);
out:
    if (err) {
        free(*text);
        *text = NULL;
    }
    recording_free(r);
    return err;
}

/* The child process of a ctl record: records PID (recording.h, as `scry record --pid`
 * would: with --memory the shim is injected, its ring drained, and the ring disabled at
 * the end), then answers the client on its descriptor itself, the profile in "text" and
 * the notes and summary in "log". Never returns. */
static void record_child(serve_state_t *st, const serve_ctl_req_t *req, pid_t pid,
                         const serve_ctl_peer_t *peer, volatile int *answered)
{
    int fd = peer->fd;
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL); /* scry serve's signalfd signals: the child's */
    signal(SIGCHLD, SIG_DFL);
    recording_stop_on_signals(&record_stop, 0);
    serve_ctl_close_in_child(st->ctl, fd);
    close(st->sigfd);
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* scry serve gone: end now, answer with what is there */
    double dur = req->duration_s > 0 ? req->duration_s : RECORD_DEFAULT_S;
    alarm((unsigned)dur + 120); /* a last resort: never outlive the request for long */
    char *logtext = NULL, *text = NULL, msg[2048];
    size_t loglen = 0;
    FILE *log = open_memstream(&logtext, &loglen);
    int err = log ? record_to_text(req, pid, peer, log, &text, msg, sizeof msg) : SCRY_E_NOMEM;
    if (!log)
        snprintf(msg, sizeof msg, "out of memory");
    if (log && fclose(log) != 0) {
        free(logtext);
        logtext = NULL;
    }
    if (logtext && loglen > (1u << 20))
        logtext[1u << 20] = 0; /* the notes are short; a reply stays within its bound */
    json_object *reply = json_object_new_object();
    int fits = text && strlen(text) <= SERVE_CTL_MAX_REPLY - (1u << 20);
    if (!err && fits) {
        json_object_object_add(reply, "text", json_object_new_string(text));
        json_object_object_add(reply, "format",
                               json_object_new_string(req->format[0] ? req->format : "text"));
    }
    json_object_object_add(reply, "log", json_object_new_string(logtext ? logtext : ""));
    if (err || !fits)
        fail(reply, err ? msg : "the profile is too large for a reply (use scry record --pid)");
    serve_ctl_reply(fd, reply, 10);
    *answered = 1;
    _exit(!err && fits ? 0 : 1);
}

/* ctl record: forks a child that records target T and answers the client; scry serve
 * goes on. Returns 1 (answered by the child), or 0 with an error in REPLY. */
static int do_record(serve_state_t *st, serve_target_t *t, const serve_ctl_req_t *req,
                     const serve_ctl_peer_t *peer, json_object *reply)
{
    /* A recording whose child has answered is over, reaped or not (the child only has
     * _exit left): its client may ask again at once. Its slot is waited for only when
     * every slot is taken. */
    serve_records_reap(st,
                       st->n_records >= SERVE_MAX_RECORDS ? SERVE_REAP_ANSWERED : SERVE_REAP_ENDED);
    if (st->n_records >= SERVE_MAX_RECORDS) {
        fail(reply, "too many recordings under way (at most 4): try again later");
        return 0;
    }
    for (size_t i = 0; i < st->n_records; i++)
        if (st->records[i].target == t->pid && !*st->records[i].answered) {
            fail(reply, "a recording of that process is already under way");
            return 0;
        }
    volatile int *answered =
        mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (answered == MAP_FAILED) {
        fail(reply, strerror(errno));
        return 0;
    }
    fflush(stderr);
    pid_t c = fork();
    if (c < 0) {
        fail(reply, strerror(errno));
        munmap((void *)answered, sizeof(int));
        return 0;
    }
    if (c == 0)
        record_child(st, req, t->pid, peer, answered);
    st->records[st->n_records++] = (serve_record_t){c, t->pid, answered};
    serve_log("control: %srecording of target %d for %g s by pid %d (child %d)",
              req->memory ? "memory " : "", (int)t->pid,
              req->duration_s > 0 ? req->duration_s : RECORD_DEFAULT_S, (int)peer->pid, (int)c);
    return 1;
}

void serve_records_reap(serve_state_t *st, int how)
{
    for (size_t i = 0; how == SERVE_REAP_STOP && i < st->n_records; i++)
        kill(st->records[i].child, SIGTERM);
    for (size_t i = 0; i < st->n_records;) {
        int status = 0;
        /* a child that has answered only has _exit left: waiting for it is brief */
        int wait =
            how == SERVE_REAP_STOP || (how == SERVE_REAP_ANSWERED && *st->records[i].answered);
        pid_t r = waitpid(st->records[i].child, &status, wait ? 0 : WNOHANG);
        if (r == 0 || (r < 0 && errno == EINTR)) {
            i++;
            continue;
        }
        serve_log("control: recording of target %d ended (%s %d)", (int)st->records[i].target,
                  r > 0 && WIFSIGNALED(status) ? "signal" : "exit",
                  r > 0 ? (WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status)) : -1);
        munmap((void *)st->records[i].answered, sizeof(int));
        st->records[i] = st->records[--st->n_records];
    }
}

int serve_ctl_handle(void *ctx, const serve_ctl_req_t *req, const serve_ctl_peer_t *peer,
                     json_object *reply)
{
    serve_state_t *st = ctx;
    serve_target_t *t;
    switch (req->cmd) {
    case SERVE_CTL_LIST:
        do_list(st, peer, reply);
        return 0;
    case SERVE_CTL_DUMP:
        if (!(t = visible_target(st, req->pid, peer, reply)))
            return 0;
        do_dump(t, req, peer, reply);
        return 0;
    case SERVE_CTL_RECORD:
        if (!(t = visible_target(st, req->pid, peer, reply)))
            return 0;
        return do_record(st, t, req, peer, reply);
    case SERVE_CTL_FLUSH:
    case SERVE_CTL_RELOAD:
        if (peer->uid != 0) {
            fail(reply, "permission denied: only root may flush or reload the daemon");
            return 0;
        }
        if (req->cmd == SERVE_CTL_FLUSH)
            st->flush_requested = 1;
        else
            st->reload_requested = 1;
        serve_log("control: %s requested by pid %d",
                  req->cmd == SERVE_CTL_FLUSH ? "flush" : "reload", (int)peer->pid);
        json_object_object_add(reply, "message",
                               json_object_new_string(req->cmd == SERVE_CTL_FLUSH
                                                          ? "the current windows are written now"
                                                          : "the configuration is read again"));
        return 0;
    case SERVE_CTL_SET_RATE:
        if (req->pid) {
            if (!(t = visible_target(st, req->pid, peer, reply)))
                return 0;
            t->set_rate_hz = req->rate_hz;
            serve_log("control: target %d rate set to %g Hz by pid %d", (int)t->pid, req->rate_hz,
                      (int)peer->pid);
        } else {
            if (peer->uid != 0) {
                fail(reply, "permission denied: only root may set the rate of every target");
                return 0;
            }
            st->cfg->rate_hz = req->rate_hz;
            serve_log("control: rate set to %g Hz by pid %d (until the next reload)", req->rate_hz,
                      (int)peer->pid);
        }
        char m[64];
        snprintf(m, sizeof m, "rate set to %g Hz", req->rate_hz);
        json_object_object_add(reply, "message", json_object_new_string(m));
        return 0;
    }
    fail(reply, "unknown command");
    return 0;
}
