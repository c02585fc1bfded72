/* loop.c - the loop of `scry serve` (serve.h), the always-on service: one loop for every
 * target, periodic windows per service (files in --out-dir, pushes to Pyroscope), the
 * control socket, SIGHUP reload, SIGTERM flush and exit.
 *
 * One thread does everything but the HTTP push (push.c's thread): it waits in poll() on the
 * control socket and a signalfd, with a timeout that ends at the next due target check,
 * pending open, scan or window end, and at most 200 ms later, when it drains the
 * process-events connector. Nothing here stops a target (no --blocking, no --native), so a
 * SIGKILL of scry serve leaves them running.
 */
#include "log.h"
#include "serve.h"
#include "state.h"

#include "scry_err.h"
#include "scry_time.h"

#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#define SERVE_EVENT_CADENCE_MS 200

static uint64_t cpu_self_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

serve_win_t *serve_window_get(serve_state_t *st, const char *service, const char *container)
{
    for (size_t i = 0; i < st->n_wins; i++) {
        serve_win_t *w = st->wins[i];
        if (strcmp(w->service, service) == 0 &&
            strcmp(w->container, container ? container : "") == 0)
            return w;
    }
    if (st->n_wins >= SERVE_MAX_WINDOWS)
        return NULL;
    serve_win_t *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    snprintf(w->service, sizeof w->service, "%s", service);
    snprintf(w->container, sizeof w->container, "%s", container ? container : "");
    serve_agg_meta_t m = {.service = service,
                          .container = container,
                          .host = st->cfg->host,
                          .rate_hz = st->cfg->rate_hz,
                          .start_unix_s = st->win_from,
                          .start_mono_ns = scry_now_ns(),
                          .max_stacks = st->cfg->max_stacks};
    if (!(w->agg = serve_agg_new(&m))) {
        free(w);
        return NULL;
    }
    st->wins[st->n_wins++] = w;
    return w;
}

static void labels_json(json_object *o, const serve_state_t *st, const serve_agg_stats_t *as,
                        double rate_hz)
{
    json_object *pids = json_object_new_array();
    for (size_t i = 0; i < as->n_pids; i++)
        json_object_array_add(pids, json_object_new_int(as->pids[i]));
    json_object_object_add(o, "host", json_object_new_string(st->cfg->host));
    json_object_object_add(o, "pids", pids);
    json_object_object_add(o, "python", json_object_new_string(as->python));
    json_object_object_add(o, "samples", json_object_new_int64((int64_t)as->samples));
    json_object_object_add(o, "other_samples", json_object_new_int64((int64_t)as->other_samples));
    json_object_object_add(o, "cpu_s", json_object_new_double((double)as->weight_ns / 1e9));
    json_object_object_add(o, "rate_hz", json_object_new_double(rate_hz));
}

/* Writes and pushes window W (FROM..UNTIL). */
static void window_finish(serve_state_t *st, serve_win_t *w, int64_t from, int64_t until)
{
    const serve_agg_stats_t *as = serve_agg_stats(w->agg);
    report_end_t end = {.duration_s = (double)(until - from), .gil_fraction = -1};
    const struct {
        int store;
        enum report_format fmt;
        const char *ext;
    } fmts[3] = {{st->cfg->fmt_collapsed, REPORT_FORMAT_COLLAPSED, "collapsed"},
                 {st->cfg->fmt_flamegraph, REPORT_FORMAT_FLAMEGRAPH, "svg"},
                 {st->cfg->fmt_pprof, REPORT_FORMAT_PPROF, "pb.gz"}};
    serve_store_file_t files[3];
    char *bufs[3] = {NULL, NULL, NULL};
    size_t lens[3] = {0, 0, 0}, nf = 0;
    for (size_t k = 0; k < 3; k++) {
        if (!fmts[k].store && !(k == 2 && st->push))
            continue;
        int err = serve_agg_render(w->agg, fmts[k].fmt, &end, &bufs[k], &lens[k]);
        if (err) {
            serve_log("window %s: cannot render %s: %s", w->service, fmts[k].ext,
                      scry_strerror(err));
            continue;
        }
        if (fmts[k].store)
            files[nf++] = (serve_store_file_t){fmts[k].ext, bufs[k], lens[k]};
    }
    json_object *labels = json_object_new_object();
    double rate = w->rate_hz > 0 ? w->rate_hz : st->cfg->rate_hz;
    labels_json(labels, st, as, rate);
    serve_window_t win = {
        w->service, w->container[0] ? w->container : NULL, from, until, labels, files, nf};
    int err = serve_store_put(st->store, &win, (int64_t)time(NULL));
    if (err)
        serve_log("window %s %lld-%lld: cannot write: %s", w->service, (long long)from,
                  (long long)until, scry_strerror(err));
    else
        st->windows_written++;
    json_object_put(labels);
    if (st->push && bufs[2]) {
        char pid[32], procs[16];
        if (as->n_pids == 1)
            snprintf(pid, sizeof pid, "%d", (int)as->pids[0]);
        else
            snprintf(pid, sizeof pid, "%s", as->n_pids ? "several" : "none");
        snprintf(procs, sizeof procs, "%zu", as->n_pids);
        serve_push_label_t pl[6] = {{"service_name", w->service},
                                    {"host", st->cfg->host},
                                    {"pid", pid},
                                    {"processes", procs},
                                    {"python_version", as->python[0] ? as->python : "unknown"},
                                    {"container", w->container}};
        size_t npl = w->container[0] ? 6 : 5;
        err =
            serve_push_enqueue(st->push, w->service, pl, npl, from, until, rate, bufs[2], lens[2]);
        if (err)
            serve_log("window %s: cannot spool for the push: %s", w->service, scry_strerror(err));
    }
    for (size_t k = 0; k < 3; k++)
        free(bufs[k]);
}

static uint64_t real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Starts a window at FROM (Unix seconds; 0: now); it ends on the next multiple of the interval
 * (wall clock, so hosts line up), or the one after when that is less than half an interval away. */
static void window_schedule(serve_state_t *st, int64_t from)
{
    uint64_t now = real_ns();
    uint64_t iv = (uint64_t)(st->cfg->interval_s * 1e9);
    uint64_t end = (now / iv + 1) * iv;
    if (end - now < iv / 2)
        end += iv;
    st->win_from = from ? from : (int64_t)(now / 1000000000ull);
    st->win_end_real_ns = end;
}

/* Ends the current windows: writes every window that has samples or live targets, frees
 * them all, and starts the next interval at NOW_UNIX. */
static void windows_flush(serve_state_t *st, int64_t now_unix)
{
    int64_t from = st->win_from, until = now_unix > from ? now_unix : from + 1;
    uint64_t grid_end = st->win_end_real_ns;
    int on_grid = grid_end && real_ns() + 500000000ull >= grid_end;
    if (on_grid)
        until = (int64_t)((grid_end + 500000000ull) / 1000000000ull);
    for (size_t i = 0; i < st->n_targets; i++) {
        serve_target_t *t = st->targets[i];
        double secs = (double)(until - from);
        t->cpu_pct = secs > 0 ? (double)(t->cpu_ticks - t->cpu_ticks_w0) * 100.0 /
                                    ((double)st->clk_tck * secs)
                              : 0;
        t->cpu_ticks_w0 = t->cpu_ticks;
        t->win = NULL;
    }
    for (size_t i = 0; i < st->n_wins; i++) {
        serve_win_t *w = st->wins[i];
        if (serve_agg_stats(w->agg)->samples > 0 || w->live_targets > 0)
            window_finish(st, w, from, until);
        serve_agg_free(w->agg);
        free(w);
    }
    st->n_wins = 0;
    window_schedule(st, until);
    /* The next window ends one interval after this one: a flush that came late (the loop
     * held up) never makes a longer window; if that end has passed too, the next turn of
     * the loop writes it. */
    uint64_t iv = (uint64_t)(st->cfg->interval_s * 1e9);
    if (on_grid && grid_end % iv == 0) /* else the interval changed (reload): a new grid */
        st->win_end_real_ns = grid_end + iv;
    /* the targets' windows are found again on their next sample; live counts restart */
    for (size_t i = 0; i < st->n_targets; i++) {
        serve_target_t *t = st->targets[i];
        t->win = serve_window_get(st, t->service, t->container[0] ? t->container : NULL);
        if (t->win)
            t->win->live_targets++;
    }
}

static int open_outputs(serve_state_t *st, serve_config_t *cfg, int first)
{
    char msg[512];
    serve_store_t *store = serve_store_new(cfg->out_dir, cfg->retention_age_s, cfg->retention_bytes,
                                           cfg->out_gid, msg, sizeof msg);
    if (!store) {
        serve_log("%s", msg);
        return SCRY_E_IO;
    }
    serve_push_t *push = NULL;
    if (cfg->pyroscope_url) {
        serve_push_opts_t po = {.url = cfg->pyroscope_url,
                                .user = cfg->pyroscope_user,
                                .password_file = cfg->pyroscope_password_file,
                                .token_file = cfg->pyroscope_token_file,
                                .tenant = cfg->pyroscope_tenant,
                                .timeout_s = cfg->push_timeout_s,
                                .spool_dir = cfg->spool_dir,
                                .spool_max_bytes = cfg->spool_max_bytes};
        if (!first && st->push)
            serve_push_free(st->push); /* the spool stays on disk for the new one */
        st->push = NULL;
        push = serve_push_new(&po, msg, sizeof msg);
        if (!push) {
            serve_log("%s", msg);
            serve_store_free(store);
            return SCRY_E_IO;
        }
    } else if (st->push) {
        serve_push_free(st->push);
        st->push = NULL;
    }
    serve_ctl_t *ctl = st->ctl;
    if (first || strcmp(cfg->socket_path, st->cfg->socket_path) != 0) {
        serve_ctl_free(st->ctl);
        st->ctl = NULL;
        ctl = serve_ctl_new(cfg->socket_path, msg, sizeof msg);
        if (!ctl) {
            serve_log("%s", msg);
            serve_store_free(store);
            serve_push_free(push);
            return SCRY_E_IO;
        }
    }
    serve_store_free(st->store);
    st->store = store;
    st->push = push;
    st->ctl = ctl;
    return 0;
}

static void reload(serve_state_t *st)
{
    char msg[1024];
    serve_config_t *cfg = serve_config_from_args(st->argc, st->argv, msg, sizeof msg);
    if (!cfg) {
        serve_log("reload refused, the running configuration stays: %s", msg);
        return;
    }
    /* the current windows belong to the old configuration */
    windows_flush(st, (int64_t)time(NULL));
    if (open_outputs(st, cfg, 0) != 0) {
        serve_log("reload refused, the running configuration stays");
        serve_config_free(cfg);
        return;
    }
    serve_config_free(st->cfg);
    st->cfg = cfg;
    st->rate_factor = 1;
    serve_targets_reselect(st);
    serve_log("configuration reloaded%s%s", cfg->config_path ? " from " : "",
              cfg->config_path ? cfg->config_path : "");
}

/* Keeps scry serve's own CPU under --max-cpu by scaling every rate, and says so. */
static void budget_check(serve_state_t *st, uint64_t now)
{
    if (now - st->budget_t0_ns < 5000000000ull)
        return;
    uint64_t cpu = cpu_self_ns();
    st->self_cpu_pct =
        (double)(cpu - st->budget_cpu0_ns) * 100.0 / (double)(now - st->budget_t0_ns);
    st->budget_t0_ns = now;
    st->budget_cpu0_ns = cpu;
    double max = st->cfg->max_cpu_pct;
    if (max <= 0)
        return;
    double old = st->rate_factor;
    if (st->self_cpu_pct > max) {
        double f = st->rate_factor * max / st->self_cpu_pct * 0.9;
        st->rate_factor = f < 0.005 ? 0.005 : f;
    } else if (st->self_cpu_pct < max * 0.6 && st->rate_factor < 1) {
        st->rate_factor = st->rate_factor * 1.25 > 1 ? 1 : st->rate_factor * 1.25;
    }
    if (st->rate_factor != old)
        serve_log("CPU %.2f%% of a core, budget %.2f%%: rates %s to %.3g Hz (x%.3f)",
                  st->self_cpu_pct, max, st->rate_factor < old ? "lowered" : "raised",
                  st->cfg->rate_hz * st->rate_factor, st->rate_factor);
}

/* Gives the memory of targets that went back to the kernel soon after they go (at most
 * once a second), not only at the next window flush: a burst of hundreds of short-lived
 * forks of a target leaves their tables' small blocks freed across the heap, and with
 * bursts closer together than the interval RSS ratcheted (24 MB fresh, 92, 146, 180 MB
 * after three bursts of 450 forks with a 60-s interval). */
static void trim_after_exits(serve_state_t *st, uint64_t now)
{
    if (st->n_targets > st->trim_mark)
        st->trim_mark = st->n_targets;
    if (st->n_targets < st->trim_mark && now - st->trim_last_ns >= 1000000000ull) {
        malloc_trim(0);
        st->trim_mark = st->n_targets;
        st->trim_last_ns = now;
    }
}

static void on_event(void *ctx, enum proc_discover_event ev, pid_t pid, pid_t parent,
                     uint64_t when_ns)
{
    serve_state_t *st = ctx;
    switch (ev) {
    case PROC_DISCOVER_NEW:
        serve_targets_notice(st, pid, 0, parent, scry_now_ns(), 0);
        break;
    case PROC_DISCOVER_EXEC:
        serve_targets_notice(st, pid, 1, 0, scry_now_ns(), when_ns);
        break;
    case PROC_DISCOVER_EXIT:
        serve_targets_exited(st, pid);
        break;
    case PROC_DISCOVER_LOST:
        st->scan_requested = 1;
        break;
    }
}

static void handle_signals(serve_state_t *st)
{
    struct signalfd_siginfo si;
    while (read(st->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGHUP)
            st->reload_requested = 1;
        else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
            st->stop = 1;
    }
}

static int run(serve_state_t *st)
{
    char why[256];
    st->disc = proc_discover_new(st->cfg->proc_connector, why, sizeof why);
    if (!st->disc)
        return SCRY_E_NOMEM;
    if (proc_discover_fd(st->disc) < 0) {
        serve_log("no process-events connector (%s): scanning /proc every %g s", why,
                  st->cfg->scan_interval_s < 0.5 ? st->cfg->scan_interval_s : 0.5);
    }
    serve_whoran_open(st);
    serve_log("started: out-dir %s, interval %g s, rate %g Hz, sampler %s, socket %s%s%s",
              st->cfg->out_dir, st->cfg->interval_s, st->cfg->rate_hz,
              st->cfg->sampler ? st->cfg->sampler : "auto", st->cfg->socket_path,
              st->cfg->pyroscope_url ? ", pushing to " : "",
              st->cfg->pyroscope_url ? st->cfg->pyroscope_url : "");
    window_schedule(st, 0);
    st->budget_t0_ns = scry_now_ns();
    st->budget_cpu0_ns = cpu_self_ns();
    st->scan_requested = 1;
    while (!st->stop) {
        uint64_t now = scry_now_ns();
        double scan_s = proc_discover_fd(st->disc) >= 0  ? st->cfg->scan_interval_s
                        : st->cfg->scan_interval_s < 0.5 ? st->cfg->scan_interval_s
                                                         : 0.5;
        if (st->scan_requested || now >= st->next_scan_ns) {
            serve_targets_scan(st);
            st->scan_requested = 0;
            st->next_scan_ns = now + (uint64_t)(scan_s * 1e9);
        }
        uint64_t next_fresh = serve_targets_fresh(st, now);
        serve_targets_open_pending(st, now);
        uint64_t next = serve_targets_tick(st, now);
        if (next_fresh < next)
            next = next_fresh;
        now = scry_now_ns();
        if (real_ns() >= st->win_end_real_ns || st->flush_requested) {
            st->flush_requested = 0;
            windows_flush(st, (int64_t)time(NULL));
            /* The windows just freed and the targets gone since the last flush leave free
             * chunks between live ones, which glibc keeps: give their pages back, so that
             * scry serve's RSS follows what it holds (it grew ~0.4 MB a minute over a churn
             * of short-lived services while the heap in use stayed flat). */
            malloc_trim(0);
        }
        trim_after_exits(st, now);
        budget_check(st, now);
        if (st->reload_requested) {
            st->reload_requested = 0;
            reload(st);
        }
        if (st->next_scan_ns < next)
            next = st->next_scan_ns;
        uint64_t rnow = real_ns();
        uint64_t win_left = st->win_end_real_ns > rnow ? st->win_end_real_ns - rnow : 0;
        if (now + win_left < next)
            next = now + win_left;
        for (size_t i = 0; i < st->n_pending; i++)
            if (st->pending[i].next_ns < next)
                next = st->pending[i].next_ns;
        uint64_t ctl_due = serve_ctl_deadline_ns(st->ctl);
        if (ctl_due < next)
            next = ctl_due;
        now = scry_now_ns();
        int timeout = next <= now ? 0 : (int)((next - now + 999999) / 1000000);
        /* The connector is drained on a 200 ms cadence rather than woken up for: on a busy
         * host it reports hundreds of short-lived processes a second, and a wake-up each
         * would cost more than the rest of scry serve (its socket buffer holds 4 MiB). */
        if (timeout > SERVE_EVENT_CADENCE_MS)
            timeout = SERVE_EVENT_CADENCE_MS;
        /* the control socket never blocks the loop: its connections are polled with the
         * rest and served as far as they can be without waiting */
        struct pollfd fds[SERVE_CTL_MAX_CONNS + 2] = {{.fd = st->sigfd, .events = POLLIN}};
        size_t nctl = serve_ctl_pollfds(st->ctl, fds + 1, SERVE_CTL_MAX_CONNS + 1);
        int n = poll(fds, 1 + nctl, timeout);
        if (n < 0 && errno != EINTR) {
            serve_log("poll: %s", strerror(errno));
            return SCRY_E_IO;
        }
        if (n > 0 && fds[0].revents)
            handle_signals(st);
        serve_ctl_serve(st->ctl, fds + 1, n > 0 ? nctl : 0, serve_ctl_handle, st);
        if (st->n_records)
            serve_records_reap(st, SERVE_REAP_ENDED);
        if (proc_discover_fd(st->disc) >= 0) {
            if (proc_discover_read(st->disc, on_event, st) < 0) {
                serve_log("process-events connector failed: scanning /proc instead");
                proc_discover_free(st->disc);
                st->disc = proc_discover_new(0, why, sizeof why);
                if (!st->disc)
                    return SCRY_E_NOMEM;
            }
        }
    }
    if (st->n_records)
        serve_records_reap(st,
                           SERVE_REAP_STOP); /* they answer their clients with what they recorded */
    serve_log("stopping: writing the current windows");
    windows_flush(st, (int64_t)time(NULL));
    if (st->push && serve_push_drain(st->push, 5) != 0) {
        serve_push_stats_t ps;
        serve_push_stats(st->push, &ps);
        serve_log("%llu windows stay in the spool for the next start",
                  (unsigned long long)ps.spooled);
    }
    perfev_free(st->whoran);
    st->whoran = NULL;
    return 0;
}

int serve_run(serve_config_t *cfg, int argc, char **argv)
{
    /* A fixed mmap threshold: each target's tables (code cache, prefetch plan, thread
     * slots: about 4 MB, mostly never touched) are mapped pages that cost RSS only where
     * used and go back to the kernel when the target goes. With glibc's default, the
     * threshold rises to the size of the first such block freed, after which they come
     * from the heap, are zeroed (made resident) by calloc and fragment it as services
     * come and go: 3 MB of RSS per idle target, growing over churn. */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    serve_state_t *st = calloc(1, sizeof *st);
    if (!st) {
        serve_config_free(cfg);
        return SCRY_E_NOMEM;
    }
    st->cfg = cfg;
    st->argc = argc;
    st->argv = argv;
    st->rate_factor = 1;
    st->clk_tck = sysconf(_SC_CLK_TCK) > 0 ? sysconf(_SC_CLK_TCK) : 100;
    st->sigfd = -1;
    int err = SCRY_E_IO;
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    signal(SIGPIPE, SIG_IGN);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) != 0 ||
        (st->sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
        serve_log("signalfd: %s", strerror(errno));
        goto out;
    }
    if ((err = open_outputs(st, cfg, 1)) != 0)
        goto out;
    err = run(st);
out:
    for (size_t i = 0; i < st->n_targets; i++)
        serve_target_free(st->targets[i]);
    sampler_bpf_share_free(st->bpf_share);
    for (size_t i = 0; i < st->n_wins; i++) {
        serve_agg_free(st->wins[i]->agg);
        free(st->wins[i]);
    }
    free(st->rejected);
    serve_ctl_free(st->ctl);
    serve_push_free(st->push);
    serve_store_free(st->store);
    proc_discover_free(st->disc);
    if (st->sigfd >= 0)
        close(st->sigfd);
    serve_log("stopped");
    serve_config_free(st->cfg);
    free(st);
    return err;
}
