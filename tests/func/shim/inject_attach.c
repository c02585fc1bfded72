/* inject_attach.c - attach mode of libscry-shim.so through the real injector, without the
 * daemon: creates a ring with the daemon's consumer, injects the shim into a running
 * process (inject_load_and_call -> dlopen + scry_shim_attach(ring)), drains the ring while
 * beating the heartbeat, and prints totals as one JSON object (run_shim_tests.py checks
 * them against known answers).
 *
 * usage: inject_attach --pid PID --shim PATH --pyver 3.X [--seconds S] [--stop-after S]
 *                      [--go-file PATH] [--mean N] [--copy-mean N] [--ring-bytes N]
 *                      [--ring-dir DIR --ring-as TDIR]
 *
 * --pyver picks the built-in layout table; versions without one (3.14+) take the layout
 * from the target itself (its _Py_DebugOffsets), as the daemon does.
 * --ring-dir/--ring-as: the ring is a file in DIR (a host path) that the target sees as
 * TDIR (a target in another root; default /dev/shm for both).
 * --go-file: created once the shim is attached (the target waits for it).
 * --seconds: drain at most this long (default 120); ends earlier when the target exits.
 * --stop-after: stop draining and beating after S seconds, then exit at once (daemon gone:
 *               the shim must become a pass-through; the target keeps running).
 *
 * JSON: inject {rc, ret, tid, stopped_ms, error}, shim {state, got_objects, got_slots,
 * got_failed}, totals {alloc|free|copy: {python|native: [count, weight]}}, net {python,
 * native}, codes {hexaddr: {alloc_python, alloc_native, free_python, ..., net_python,
 * net_native, copy_native}} (weight of events with that code object anywhere in the
 * stack; net = allocated there minus freed since), stats {...}.
 */
#include "inject.h"
#include "layout.h"
#include "target_layout.h"
#include "ring_consumer.h"
#include "tally.h"
#include "scry_err.h"
#include "scry_proc.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "scry_time.h"

static tally_t tally;
static uint64_t tot_n[4][2], tot_w[4][2];
static uint64_t events, tids_seen[64];

static void account(const ringc_event_t *e)
{
    int k = e->kind, o = e->origin;
    events++;
    tot_n[k][o]++;
    tot_w[k][o] += e->weight;
    tally_event(&tally, e);
    for (int i = 0; i < 64; i++) {
        if (tids_seen[i] == (uint64_t)e->tid)
            break;
        if (tids_seen[i] == 0) {
            tids_seen[i] = (uint64_t)e->tid;
            break;
        }
    }
}

/* Nonzero while PID exists and is not a zombie. */
static int alive(pid_t pid)
{
    char state;
    return proc_read_task_state(pid, 0, &state) == 0 && state != 'Z' && state != 'X';
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

int main(int argc, char **argv)
{
    const char *shim = NULL, *pyver = NULL, *go_file = NULL;
    const char *ring_dir = "/dev/shm", *ring_as = "/dev/shm";
    pid_t pid = 0;
    double seconds = 120, stop_after = -1;
    ringc_params_t p = {0};
    p.alloc_mean = SCRY_RING_DEFAULT_ALLOC_MEAN;
    p.copy_mean = SCRY_RING_DEFAULT_COPY_MEAN;
    p.uid = -1;
    p.enabled = 1;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(argv[i], "--pid"))
            pid = atoi(v), i++;
        else if (!strcmp(argv[i], "--shim"))
            shim = v, i++;
        else if (!strcmp(argv[i], "--pyver"))
            pyver = v, i++;
        else if (!strcmp(argv[i], "--seconds"))
            seconds = atof(v), i++;
        else if (!strcmp(argv[i], "--stop-after"))
            stop_after = atof(v), i++;
        else if (!strcmp(argv[i], "--go-file"))
            go_file = v, i++;
        else if (!strcmp(argv[i], "--mean"))
            p.alloc_mean = strtoull(v, NULL, 0), i++;
        else if (!strcmp(argv[i], "--copy-mean"))
            p.copy_mean = strtoull(v, NULL, 0), i++;
        else if (!strcmp(argv[i], "--ring-bytes"))
            p.ring_bytes = strtoull(v, NULL, 0), i++;
        else if (!strcmp(argv[i], "--ring-dir"))
            ring_dir = v, i++;
        else if (!strcmp(argv[i], "--ring-as"))
            ring_as = v, i++;
        else {
            fprintf(stderr, "inject_attach: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    int minor = 0;
    if (pid <= 0 || !shim || !pyver || sscanf(pyver, "3.%d", &minor) != 1) {
        fprintf(stderr, "usage: inject_attach --pid PID --shim PATH --pyver 3.X [options]\n");
        return 2;
    }
    const pystate_layout_t *pl = pystate_layout_for(3, minor);
    if (pl ? ringc_layout_from_pystate(pl, &p.layout) != 0
           : shim_test_target_layout(pid, &p.layout) != 0) {
        fprintf(stderr, "inject_attach: no layout for %s\n", pyver);
        return 2;
    }
    char path[512], tpath[512];
    snprintf(path, sizeof path, "%s/scry-inject-%d", ring_dir, (int)getpid());
    snprintf(tpath, sizeof tpath, "%s/scry-inject-%d", ring_as, (int)getpid());
    p.path = path;
    p.target_pid = pid;
    int err = 0;
    ringc_t *r = ringc_create(&p, &err);
    if (!r) {
        fprintf(stderr, "inject_attach: ringc_create: %s\n", scry_strerror(err));
        return 1;
    }
    size_t cap = 4096;
    ringc_event_t *buf = calloc(cap, sizeof *buf);
    if (tally_init(&tally) != 0 || !buf)
        return 1;

    inject_report_t rep;
    memset(&rep, 0, sizeof rep);
    uint64_t handle = 0, ret = 0;
    double t0 = ((double)scry_now_ns() / 1e9);
    int rc = inject_load_and_call(pid, shim, "scry_shim_attach", tpath, NULL, &handle, &ret, &rep);
    double inject_s = ((double)scry_now_ns() / 1e9) - t0;
    if (go_file) {
        int fd = open(go_file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0)
            close(fd);
    }
    double last_beat = 0, start = ((double)scry_now_ns() / 1e9), max_gap = inject_s;
    int stopped = 0;
    ringc_stats_t at_stop = {0};
    for (;;) {
        double t = ((double)scry_now_ns() / 1e9) - start;
        if (stop_after >= 0 && t >= stop_after) {
            tally_drain(r, buf, cap, account);
            ringc_stats(r, &at_stop);
            stopped = 1;
            break;
        }
        if (t - last_beat >= 0.1) {
            max_gap = t - last_beat > max_gap ? t - last_beat : max_gap;
            ringc_heartbeat(r);
            last_beat = t;
        }
        tally_drain(r, buf, cap, account);
        if (rc != 0 || !alive(pid) || t >= seconds)
            break;
        usleep(5000);
    }
    if (!stopped)
        tally_drain(r, buf, cap, account);
    ringc_stats_t st;
    ringc_stats(r, &st);
    size_t maplen = 0;
    const struct scry_ring_header *h = ringc_mapping(r, &maplen);

    static const char *kn[4] = {"net", "alloc", "free", "copy"}, *on[2] = {"python", "native"};
    printf("{\"inject\": {\"rc\": %d, \"rc_name\": \"%s\", \"ret\": %lld, \"tid\": %d, "
           "\"attempts\": %d, \"stopped_ms\": %.3f, \"call_ms\": %.3f, \"wall_ms\": %.3f, "
           "\"error\": ",
           rc, scry_strerror(rc), (long long)(int32_t)ret, (int)rep.tid, rep.attempts,
           (double)rep.stopped_ns / 1e6, (double)rep.call_ns / 1e6, inject_s * 1e3);
    json_string(rep.error);
    printf("},\n \"shim\": {\"state\": %u, \"got_objects\": %u, \"got_slots\": %u, "
           "\"got_failed\": %u, \"owner_pid\": %d, \"attach_count\": %llu},\n",
           st.shim_state, h ? h->got_objects : 0, h ? h->got_slots : 0, h ? h->got_failed : 0,
           st.owner_pid, (unsigned long long)st.attach_count);
    printf(" \"totals\": {");
    for (int k = 1; k < 4; k++) {
        printf("%s\"%s\": {", k > 1 ? ", " : "", kn[k]);
        for (int o = 0; o < 2; o++)
            printf("%s\"%s\": [%llu, %llu]", o ? ", " : "", on[o], (unsigned long long)tot_n[k][o],
                   (unsigned long long)tot_w[k][o]);
        printf("}");
    }
    printf("},\n \"net\": {\"python\": %lld, \"native\": %lld},\n", (long long)tally.net_origin[0],
           (long long)tally.net_origin[1]);
    printf(" \"codes\": {");
    int first = 1;
    for (unsigned c = 0; c < TALLY_NCODES; c++) {
        if (!tally.codes[c].code)
            continue;
        printf("%s\n  \"%llx\": {", first ? "" : ",", (unsigned long long)tally.codes[c].code);
        first = 0;
        int f2 = 1;
        for (int k = 0; k < 4; k++)
            for (int o = 0; o < 2; o++)
                if (tally.codes[c].w[k][o]) {
                    printf("%s\"%s_%s\": %lld", f2 ? "" : ", ", kn[k], on[o],
                           (long long)tally.codes[c].w[k][o]);
                    f2 = 0;
                }
        printf("}");
    }
    printf("},\n \"tids\": [");
    for (int i = 0; i < 64 && tids_seen[i]; i++)
        printf("%s%llu", i ? ", " : "", (unsigned long long)tids_seen[i]);
    uint64_t sampled = 0, sampled_stop = 0, dropped = 0;
    for (int k = 1; k < 4; k++) {
        sampled += st.sampled_events[k];
        sampled_stop += at_stop.sampled_events[k];
        dropped += st.dropped_events[k];
    }
    printf("],\n \"stats\": {\"events\": %llu, \"consumed\": %llu, \"bad_records\": %llu, "
           "\"bad_seq\": %llu, \"stalled\": %llu, \"sampled\": %llu, \"sampled_at_stop\": %llu, "
           "\"dropped\": %llu, \"untracked\": %llu, \"target_alive\": %d, \"stopped\": %d, "
           "\"max_beat_gap_ms\": %.1f}}\n",
           (unsigned long long)events, (unsigned long long)st.consumed,
           (unsigned long long)st.bad_records, (unsigned long long)st.bad_seq,
           (unsigned long long)st.stalled, (unsigned long long)sampled,
           (unsigned long long)sampled_stop, (unsigned long long)dropped,
           (unsigned long long)st.untracked, alive(pid), stopped, max_gap * 1e3);
    fflush(stdout);
    if (stopped) { /* like a daemon that died: the heartbeat just stops ('enabled' stays 1) */
        ringc_unlink(r);
        _exit(rc == 0 && (int32_t)ret == 0 ? 0 : 3);
    }
    free(buf);
    tally_free(&tally);
    ringc_free(r);
    return rc == 0 && (int32_t)ret == 0 ? 0 : 3;
}
