/* shim_harness.c - runs a command under LD_PRELOAD=libscry-shim.so with a ring made by
 * memprof/ring_consumer.c, drains it like the daemon would, and prints totals that
 * run_shim_tests.py checks against known answers.
 *
 * usage: shim_harness --shim PATH [--pyver 3.11] [--ring-bytes N] [--mean N]
 *                     [--copy-mean N] [--stop-after S] [--disable-after S] [--no-drain]
 *                     [--stall-ms N] [--attach] [--ring-dir DIR --ring-as TDIR]
 *                     -- command args...
 *
 * --ring-dir/--ring-as: the ring is a file in DIR (a host path) that the target sees as
 * TDIR (a target running in another root: DIR is inside it; default /dev/shm for both).
 * --pyver of a version without a table below (3.14+): the layout is read from the target
 * (its _Py_DebugOffsets) once it runs Python, and the ring enabled then; until then the
 * preloaded shim holds the interpreter before main(), as with scry.
 * --attach: no LD_PRELOAD; SCRY_TEST_SHIM and SCRY_TEST_RING tell the target (workloads.py
 * attach) to dlopen the shim and call scry_shim_attach itself, as the injector would; the
 * file $SCRY_TEST_GO appears once the ring has its layout (the target waits for it, as
 * scry publishes the layout before it injects).
 *
 * Output lines (all numbers decimal; addresses hex):
 *   total KIND ORIGIN COUNT WEIGHT        per kind (alloc/free/copy) and origin
 *   total net ORIGIN 0 BYTES              sampled allocations minus their frees
 *   code ADDR KIND ORIGIN WEIGHT          weight of events with ADDR anywhere in the stack;
 *                                         KIND net: allocated there minus freed since
 *   nostack KIND ORIGIN COUNT WEIGHT      events without frames
 *   instr ADDR OFFSET COUNT               frames seen at (code, instruction byte offset)
 *   tid TID COUNT
 *   stat NAME VALUE
 */
#include "layout.h"
#include "target_layout.h"
#include "ring_consumer.h"
#include "tally.h"
#include "scry_err.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "scry_time.h"

/* Frame offsets of the versions the functional tests run (x86_64, release builds),
 * computed with offsetof() against each version's internal headers. Test-only: the
 * daemon takes them from pystate_layout_for() / _Py_DebugOffsets. */
static int test_layout(const char *ver, struct scry_ring_layout *L)
{
    memset(L, 0xff, sizeof *L); /* -1 everywhere */
    L->reserved = 0;
    int minor = 0;
    if (sscanf(ver, "3.%d", &minor) != 1)
        return -1;
    L->py_major = 3;
    L->py_minor = minor;
    if (minor >= 8 && minor <= 10) {
        L->frame_style = 0;
        L->tstate_frame = 24;
        L->frame_back = 24;
        L->frame_code = 32;
        L->frame_lasti = minor == 10 ? 96 : 104;
    } else if (minor == 11) {
        L->frame_style = 1;
        L->tstate_frame = 56;
        L->cframe_current_frame = 8;
        L->iframe_code = 32;
        L->iframe_previous = 48;
        L->iframe_instr = 56;
        L->iframe_owner = 69;
        L->iframe_is_entry = 68;
        L->code_adaptive = 184;
    } else if (minor == 12) {
        L->frame_style = 2;
        L->tstate_frame = 56;
        L->cframe_current_frame = 0;
        L->iframe_code = 0;
        L->iframe_previous = 8;
        L->iframe_instr = 56;
        L->iframe_owner = 70;
        L->code_adaptive = 192;
    } else if (minor == 13) {
        L->frame_style = 3;
        L->tstate_frame = 72;
        L->iframe_code = 0;
        L->iframe_previous = 8;
        L->iframe_instr = 56;
        L->iframe_owner = 70;
        L->code_adaptive = 200;
    } else {
        return -1;
    }
    return 0;
}

static tally_t tally;
static uint64_t tot_n[4][2], tot_w[4][2], nost_n[4][2], nost_w[4][2];
static struct {
    int32_t tid;
    uint64_t n;
} tids[256];

/* (code, instruction offset) pairs seen, for the line checks of run_shim_tests.py */
#define NINSTR (1u << 15)
static struct {
    uint64_t code;
    int32_t instr;
    uint64_t n;
} instrs[NINSTR];

static void add_instr(uint64_t code, int32_t instr)
{
    uint32_t i =
        (uint32_t)(((code >> 3) ^ (uint64_t)(uint32_t)instr * 0x9e37u) * 0x9e3779b97f4a7c15ull >>
                   49);
    for (unsigned p = 0; p < NINSTR; p++, i = (i + 1) & (NINSTR - 1)) {
        if (instrs[i].n == 0 || (instrs[i].code == code && instrs[i].instr == instr)) {
            instrs[i].code = code;
            instrs[i].instr = instr;
            instrs[i].n++;
            return;
        }
    }
}

static void account(const ringc_event_t *e)
{
    for (uint32_t i = 0; i < e->nframes; i++)
        add_instr(e->frames[i].code, e->frames[i].instr_offset);
    tally_event(&tally, e);
    int k = e->kind, o = e->origin;
    tot_n[k][o]++;
    tot_w[k][o] += e->weight;
    if (e->nframes == 0) {
        nost_n[k][o]++;
        nost_w[k][o] += e->weight;
    }
    for (int i = 0; i < 256; i++) {
        if (tids[i].tid == e->tid || tids[i].tid == 0) {
            tids[i].tid = e->tid;
            tids[i].n++;
            break;
        }
    }
}

static void touch(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0)
        close(fd);
}

int main(int argc, char **argv)
{
    const char *shim = NULL, *pyver = NULL;
    ringc_params_t p = {0};
    p.alloc_mean = SCRY_RING_DEFAULT_ALLOC_MEAN;
    p.copy_mean = SCRY_RING_DEFAULT_COPY_MEAN;
    p.uid = -1;
    p.enabled = 1;
    double stop_after = -1, disable_after = -1;
    int no_drain = 0, attach = 0, i;
    const char *ring_dir = "/dev/shm", *ring_as = "/dev/shm";
    for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(argv[i], "--shim"))
            shim = v, i++;
        else if (!strcmp(argv[i], "--pyver"))
            pyver = v, i++;
        else if (!strcmp(argv[i], "--ring-bytes"))
            p.ring_bytes = strtoull(v, NULL, 0), i++;
        else if (!strcmp(argv[i], "--mean"))
            p.alloc_mean = strtoull(v, NULL, 0), i++;
        else if (!strcmp(argv[i], "--copy-mean"))
            p.copy_mean = strtoull(v, NULL, 0), i++;
        else if (!strcmp(argv[i], "--stop-after"))
            stop_after = atof(v), i++;
        else if (!strcmp(argv[i], "--disable-after"))
            disable_after = atof(v), i++;
        else if (!strcmp(argv[i], "--stall-ms"))
            p.stall_ns = strtoull(v, NULL, 0) * 1000000ull, i++;
        else if (!strcmp(argv[i], "--no-drain"))
            no_drain = 1;
        else if (!strcmp(argv[i], "--attach"))
            attach = 1;
        else if (!strcmp(argv[i], "--ring-dir"))
            ring_dir = v, i++;
        else if (!strcmp(argv[i], "--ring-as"))
            ring_as = v, i++;
        else {
            fprintf(stderr, "shim_harness: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (i >= argc - 1 || !shim) {
        fprintf(stderr, "usage: shim_harness --shim PATH [options] -- command...\n");
        return 2;
    }
    char **cmd = argv + i + 1;
    /* The daemon's way: pystate's layout, converted by the consumer. Cross-checked with
     * the table above (stat layout_matches_table 1). Versions without a table (3.14+) take
     * it from the running target (stat layout_matches_table 2). */
    int layout_ok = -1, layout_later = 0;
    if (pyver) {
        struct scry_ring_layout want;
        int minor = 0;
        if (sscanf(pyver, "3.%d", &minor) != 1) {
            fprintf(stderr, "shim_harness: bad --pyver %s\n", pyver);
            return 2;
        }
        const pystate_layout_t *pl = pystate_layout_for(3, minor);
        if (pl && test_layout(pyver, &want) == 0 && ringc_layout_from_pystate(pl, &p.layout) == 0) {
            layout_ok = memcmp(&want, &p.layout, sizeof want) == 0;
        } else if (minor >= 14) {
            layout_later = 1;
            p.enabled = 0;
        } else {
            fprintf(stderr, "shim_harness: no layout for %s\n", pyver);
            return 2;
        }
    }
    if (!pyver || layout_later)
        memset(&p.layout, 0xff, sizeof p.layout);
    char path[512], tpath[512];
    snprintf(path, sizeof path, "%s/scry-harness-%d", ring_dir, (int)getpid());
    snprintf(tpath, sizeof tpath, "%s/scry-harness-%d", ring_as, (int)getpid());
    p.path = path;
    int err = 0;
    ringc_t *r = ringc_create(&p, &err);
    if (!r) {
        fprintf(stderr, "shim_harness: ringc_create: %s\n", scry_strerror(err));
        return 1;
    }
    if (tally_init(&tally) != 0) {
        fprintf(stderr, "shim_harness: out of memory\n");
        return 1;
    }
    size_t cap = 4096;
    ringc_event_t *buf = calloc(cap, sizeof *buf);
    double t0 = ((double)scry_now_ns() / 1e9);
    char go[520], tgo[520];
    snprintf(go, sizeof go, "%s.go", path);
    snprintf(tgo, sizeof tgo, "%s.go", tpath);
    if (attach && !layout_later)
        touch(go);
    pid_t pid = fork();
    if (pid == 0) {
        if (attach) { /* the target dlopens the shim and attaches itself */
            setenv("SCRY_TEST_SHIM", shim, 1);
            setenv("SCRY_TEST_RING", tpath, 1);
            setenv("SCRY_TEST_GO", tgo, 1);
        } else {
            setenv("LD_PRELOAD", shim, 1);
            setenv("SCRY_RING", tpath, 1);
        }
        execvp(cmd[0], cmd);
        _exit(127);
    }
    int status = 0, stopped = 0, unlinked = 0, disabled = 0;
    struct rusage ru = {0};
    ringc_stats_t at_stop = {0};
    double last_beat = 0, last_open = -1;
    for (;;) {
        pid_t w = wait4(pid, &status, WNOHANG, &ru);
        double t = ((double)scry_now_ns() / 1e9) - t0;
        if (layout_later && w != pid && t - last_open >= 0.01 && t < 20) {
            last_open = t;
            struct scry_ring_layout L;
            if (shim_test_target_layout(pid, &L) == 0 && ringc_set_layout(r, &L) == 0) {
                layout_later = 0;
                layout_ok = 2;
                if (disable_after < 0 || t < disable_after)
                    ringc_set_enabled(r, 1);
                if (attach)
                    touch(go);
            }
        }
        if (!stopped && stop_after >= 0 && t >= stop_after) {
            stopped = 1;
            tally_drain(r, buf, cap, account);
            ringc_stats(r, &at_stop);
        }
        if (disable_after >= 0 && t >= disable_after) {
            if (!disabled) { /* what the ring held when disabled: later events are late */
                disabled = 1;
                ringc_set_enabled(r, 0);
                tally_drain(r, buf, cap, account);
                ringc_stats(r, &at_stop);
            }
            ringc_set_enabled(r, 0);
        }
        if (!stopped && t - last_beat >= 0.1) {
            ringc_heartbeat(r);
            last_beat = t;
        }
        if (!stopped && !no_drain)
            tally_drain(r, buf, cap, account);
        if (!unlinked) { /* claimed: the name is no longer needed (nothing left if killed) */
            ringc_stats_t cs;
            if (ringc_stats(r, &cs) == 0 && cs.owner_pid != 0) {
                ringc_unlink(r);
                unlinked = 1;
            }
        }
        if (w == pid)
            break;
        usleep(5000);
    }
    if (attach)
        unlink(go);
    double elapsed = ((double)scry_now_ns() / 1e9) - t0;
    if (!stopped)
        tally_drain(r, buf, cap, account);
    ringc_stats_t st;
    ringc_stats(r, &st);
    static const char *kn[4] = {"net", "alloc", "free", "copy"}, *on[2] = {"python", "native"};
    for (int k = 1; k < 4; k++)
        for (int o = 0; o < 2; o++) {
            printf("total %s %s %llu %llu\n", kn[k], on[o], (unsigned long long)tot_n[k][o],
                   (unsigned long long)tot_w[k][o]);
            printf("nostack %s %s %llu %llu\n", kn[k], on[o], (unsigned long long)nost_n[k][o],
                   (unsigned long long)nost_w[k][o]);
        }
    for (int o = 0; o < 2; o++)
        printf("total net %s 0 %lld\n", on[o], (long long)tally.net_origin[o]);
    for (unsigned c = 0; c < TALLY_NCODES; c++)
        for (int k = 0; k < 4 && tally.codes[c].code; k++)
            for (int o = 0; o < 2; o++)
                if (tally.codes[c].w[k][o])
                    printf("code %llx %s %s %lld\n", (unsigned long long)tally.codes[c].code, kn[k],
                           on[o], (long long)tally.codes[c].w[k][o]);
    for (unsigned c = 0; c < NINSTR; c++)
        if (instrs[c].n)
            printf("instr %llx %d %llu\n", (unsigned long long)instrs[c].code, instrs[c].instr,
                   (unsigned long long)instrs[c].n);
    for (int t = 0; t < 256 && tids[t].tid; t++)
        printf("tid %d %llu\n", tids[t].tid, (unsigned long long)tids[t].n);
    uint64_t sampled = 0, sampled_stop = 0, dropped = 0;
    for (int k = 1; k < 4; k++) {
        sampled += st.sampled_events[k];
        sampled_stop += at_stop.sampled_events[k];
        dropped += st.dropped_events[k];
    }
#define STAT(name, val) printf("stat %s %llu\n", name, (unsigned long long)(val))
    STAT("child_pid", pid);
    STAT("child_status", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    printf("stat elapsed %.3f\n", elapsed);
    printf("stat child_user %.3f\n", ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6);
    printf("stat child_cpu %.3f\n", ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
                                        ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6);
    STAT("consumed", st.consumed);
    STAT("bad_records", st.bad_records);
    STAT("bad_seq", st.bad_seq);
    STAT("stalled", st.stalled);
    STAT("frames_trimmed", st.frames_trimmed);
    STAT("sampled", sampled);
    STAT("sampled_at_stop", sampled_stop);
    STAT("dropped", dropped);
    STAT("untracked", st.untracked);
    STAT("attach_count", st.attach_count);
    STAT("owner_pid", (uint32_t)st.owner_pid);
    STAT("shim_state", st.shim_state);
    STAT("nrecords", st.nrecords);
    STAT("layout_matches_table", layout_ok);
    free(buf);
    tally_free(&tally);
    ringc_free(r);
    return 0;
}
