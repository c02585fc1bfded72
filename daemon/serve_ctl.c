/* serve_ctl.c - the control requests of `scry serve` (protocol and authorisation rules in
 * serve/ctl.h): root sees and does everything; another user sees and acts on their own
 * processes only. */
#include "commands.h"
#include "log.h"
#include "serve_state.h"

#include "scry_err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        if (!serve_ctl_authorized(peer, t->uid)) {
            fail(reply, "permission denied: that process belongs to another user");
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
    for (size_t i = 0; i < st->n_targets; i++) {
        serve_target_t *t = st->targets[i];
        if (!serve_ctl_authorized(peer, t->uid))
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
    /* the daemon's warm reader (the target opened once, its code cache), ptrace back end */
    sampler_opts_t so = {.backend = "ptrace", .native = native};
    int err = dump_target_write(t->py, t->strings, &so, 0, fmt, f, msg, len);
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

void serve_ctl_handle(void *ctx, const serve_ctl_req_t *req, const serve_ctl_peer_t *peer,
                      json_object *reply)
{
    serve_state_t *st = ctx;
    serve_target_t *t;
    switch (req->cmd) {
    case SERVE_CTL_LIST:
        do_list(st, peer, reply);
        return;
    case SERVE_CTL_DUMP:
        if (!(t = visible_target(st, req->pid, peer, reply)))
            return;
        do_dump(t, req, peer, reply);
        return;
    case SERVE_CTL_RECORD:
        if (!(t = visible_target(st, req->pid, peer, reply)))
            return;
        fail(reply, "record through the daemon is not implemented yet (use scry record --pid)");
        return;
    case SERVE_CTL_FLUSH:
    case SERVE_CTL_RELOAD:
        if (peer->uid != 0) {
            fail(reply, "permission denied: only root may flush or reload the daemon");
            return;
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
        return;
    case SERVE_CTL_SET_RATE:
        if (req->pid) {
            if (!(t = visible_target(st, req->pid, peer, reply)))
                return;
            t->set_rate_hz = req->rate_hz;
            serve_log("control: target %d rate set to %g Hz by pid %d", (int)t->pid, req->rate_hz,
                      (int)peer->pid);
        } else {
            if (peer->uid != 0) {
                fail(reply, "permission denied: only root may set the rate of every target");
                return;
            }
            st->cfg->rate_hz = req->rate_hz;
            serve_log("control: rate set to %g Hz by pid %d (until the next reload)", req->rate_hz,
                      (int)peer->pid);
        }
        char m[64];
        snprintf(m, sizeof m, "rate set to %g Hz", req->rate_hz);
        json_object_object_add(reply, "message", json_object_new_string(m));
        return;
    }
    fail(reply, "unknown command");
}
