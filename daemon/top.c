/* top.c - 'scry top': a live view of the hottest functions or lines (issue 5).
 *
 * One thread: the sampler runs at the configured rate and calls back after every round;
 * the callback polls the keyboard (non-blocking, at most 20 times a second) and, once a
 * second, closes an interval of the live profile and redraws. With stdout not a terminal
 * (or --once) it prints plain-text tables instead. The terminal is restored on every way
 * out: normal return, errors, SIGINT/SIGTERM/SIGHUP/SIGQUIT, crashes and exit().
 */
#include "commands.h"

#include "family.h"
#include "live.h"
#include "procinfo.h"
#include "recording.h"
#include "sampler.h"
#include "scry_err.h"
#include "top.h"
#include "scry_time.h"

#include <curses.h>
#include <dirent.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TOP_REFRESH_NS  1000000000ull /* one interval, one redraw */
#define TOP_KEY_POLL_NS 50000000ull   /* keyboard polls at most every 50 ms */
#define TOP_MESSAGE_NS  3000000000ull /* transient notes stay 3 s */
#define TOP_TIDS        256           /* running threads counted per interval */
#define TOP_PLAIN_ROWS  30            /* rows of a plain-text table */
#define TOP_SCREEN_ROWS 500           /* rows kept for the screen */
#define TOP_TASKS_MAX   100000        /* bound on /proc/PID/task entries read */

static volatile sig_atomic_t top_stop;
static volatile sig_atomic_t top_curses_on;

/* The GIL share: of the CPU samples taken (the threads seen, running or with --idle not),
 * how many held the GIL. Counted per sample, not per sampling round: a round in which the
 * program did not run (a busy machine) says nothing about the GIL. */
typedef struct gil_mark {
    uint64_t t, samples, gil_samples;
} gil_mark_t;

typedef struct top {
    const scry_config_t *cfg;
    top_state_t st;
    report_live_t *live;
    recording_t *rec; /* its samples go to live */
    SCREEN *screen;
    int curses; /* the curses screen is up */
    int keys;   /* stdin is a terminal: keys are read */
    int quit;   /* 'q' pressed, or stdout broke */
    uint64_t last_mark_ns, last_key_ns, message_ns;
    int32_t tids[TOP_TIDS];
    int ntids;
    uint64_t samples, gil_samples; /* CPU samples so far, those that held the GIL */
    gil_mark_t base;               /* at the start or the last reset */
    gil_mark_t marks[REPORT_LIVE_HISTORY];
    uint32_t mhead, mcount;
    int oom;
} top_t;

/* --- the terminal, whatever happens --- */

static void restore_terminal(void)
{
    if (top_curses_on) {
        top_curses_on = 0;
        endwin();
    }
}

/* Ctrl-Z: the sampler suspends between rounds (no thread held); the screen is given back
 * to the shell meanwhile and redrawn on fg. */
static void screen_suspend(void)
{
    if (top_curses_on)
        endwin();
}

static void screen_resume(void)
{
    if (top_curses_on) {
        clearok(curscr, TRUE);
        refresh();
    }
}

static void on_crash_signal(int sig)
{
    /* Last resort: endwin is not async-signal-safe, but a broken terminal is worse. The
     * handler was reset to the default action, so re-raising ends the process. */
    restore_terminal();
    raise(sig);
}

static void install_signals(void)
{
    recording_stop_on_signals(&top_stop, 1);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_crash_signal;
    sa.sa_flags = (int)SA_RESETHAND;
    static const int crash[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof crash / sizeof crash[0]; i++)
        sigaction(crash[i], &sa, NULL);
    atexit(restore_terminal);
    sampler_handle_job_control(screen_suspend, screen_resume);
}

static int screen_start(top_t *t)
{
    const char *term = getenv("TERM");
    if (!term || !term[0] || !strcmp(term, "dumb"))
        return -1;
    t->screen = newterm(NULL, stdout, stdin);
    if (!t->screen)
        return -1;
    top_curses_on = 1;
    t->curses = 1;
    t->keys = isatty(0);
    cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    nodelay(stdscr, TRUE);
    curs_set(0);
    return 0;
}

static void screen_end(top_t *t)
{
    if (!t->curses)
        return;
    restore_terminal();
    delscreen(t->screen);
    t->screen = NULL;
    t->curses = 0;
}

/* --- numbers for the header --- */

static int count_threads(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while (n < TOP_TASKS_MAX && (e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* The sampler's counters, or the family's totals (--subprocesses). */
static sampler_stats_t top_stats(const top_t *t)
{
    sampler_stats_t st = {0};
    recording_stats(t->rec, &st);
    return st;
}

/* The threads of every process sampled now (--subprocesses), else of PID. */
static int count_all_threads(const top_t *t, pid_t pid)
{
    family_t *fam = recording_family(t->rec);
    if (!fam)
        return count_threads(pid);
    const family_proc_info_t *procs;
    size_t n = family_procs(fam, &procs);
    int total = 0;
    for (size_t i = 0; i < n; i++) {
        int k = procs[i].sampled && !procs[i].exited ? count_threads(procs[i].pid) : 0;
        total += k > 0 ? k : 0;
    }
    return total;
}

static gil_mark_t gil_now(const top_t *t, uint64_t now)
{
    return (gil_mark_t){now, t->samples, t->gil_samples};
}

/* The share of the samples over the shown window that held the GIL (one interpreter's:
 * -1 for several processes, or when there is no sample). */
static double gil_pct(const top_t *t)
{
    if (!t->mcount)
        return -1;
    const gil_mark_t *now = &t->marks[(t->mhead + REPORT_LIVE_HISTORY - 1) % REPORT_LIVE_HISTORY];
    const gil_mark_t *from = &t->base;
    if (t->st.use_window) {
        uint64_t win = (uint64_t)(t->st.window_s * 1e9);
        /* the same intervals as report_live's window: the newest, and older ones that
         * start no more than 10% before the window or while under half of it is covered */
        for (uint32_t k = 1; k <= t->mcount; k++) {
            const gil_mark_t *m =
                k < t->mcount
                    ? &t->marks[(t->mhead + 2 * REPORT_LIVE_HISTORY - 1 - k) % REPORT_LIVE_HISTORY]
                    : &t->base;
            if (k > 1 && now->t - from->t >= win / 2 && now->t - m->t > win + win / 10)
                break;
            from = m;
        }
    }
    uint64_t n = now->samples - from->samples;
    if (recording_family(t->rec))
        return -1;
    return n ? 100.0 * (double)(now->gil_samples - from->gil_samples) / (double)n : -1;
}

/* --- the data --- */

static void note(top_t *t, const char *msg)
{
    snprintf(t->st.message, sizeof t->st.message, "%s", msg);
    t->message_ns = scry_now_ns();
}

static void take_snapshot(top_t *t)
{
    report_live_query_t q = {
        .by_lines = t->st.by_lines,
        .sort = t->st.sort,
        .window_s = t->st.use_window ? t->st.window_s : 0,
        .max_rows = t->curses ? TOP_SCREEN_ROWS : TOP_PLAIN_ROWS,
    };
    report_live_table_t nt;
    if (report_live_snapshot(t->live, &q, &nt) != 0) {
        note(t, "out of memory: showing the previous table");
        return;
    }
    report_live_table_free(&t->st.table);
    t->st.table = nt;
    t->st.gil_pct = gil_pct(t);
}

static void mark(top_t *t, uint64_t now)
{
    if (report_live_mark(t->live, now) != 0 && !t->oom) {
        t->oom = 1;
        note(t, "out of memory: an interval was merged into the next");
    }
    t->marks[t->mhead] = gil_now(t, now);
    t->mhead = (t->mhead + 1) % REPORT_LIVE_HISTORY;
    if (t->mcount < REPORT_LIVE_HISTORY)
        t->mcount++;
    uint64_t span = now - t->last_mark_ns;
    t->last_mark_ns = now;
    if (!t->st.paused) {
        if (t->ntids || span >= TOP_REFRESH_NS / 2) /* a short last interval says little */
            t->st.threads_active = t->ntids;
        sampler_stats_t ss = top_stats(t);
        t->st.threads_total = count_all_threads(t, (pid_t)t->st.pid);
        t->st.errors = ss.errors;
        t->st.late = ss.late;
    }
    t->ntids = 0;
    if (t->st.message[0] && now - t->message_ns > TOP_MESSAGE_NS)
        t->st.message[0] = 0;
}

static void reset(top_t *t)
{
    uint64_t now = scry_now_ns();
    if (report_live_reset(t->live, now) != 0) {
        note(t, "out of memory: could not reset");
        return;
    }
    t->base = gil_now(t, now);
    t->mhead = t->mcount = 0;
    t->last_mark_ns = now;
    t->ntids = 0;
    take_snapshot(t);
    note(t, "counts reset");
}

static void on_sample(const scry_sample_t *s, void *ctx)
{
    top_t *t = ctx;
    if (report_live_add(t->live, s) == SCRY_E_NOMEM && !t->oom) {
        t->oom = 1;
        note(t, "out of memory: some samples were not counted");
    }
    if (s->metric == SCRY_METRIC_CPU) {
        t->samples++;
        t->gil_samples += s->gil != 0;
    }
    if (!s->running)
        return;
    for (int i = 0; i < t->ntids; i++)
        if (t->tids[i] == s->tid)
            return;
    if (t->ntids < TOP_TIDS)
        t->tids[t->ntids++] = s->tid;
}

/* --- keys --- */

/* Applies key CH. Returns 1 when the screen must be redrawn. */
static int handle_key(top_t *t, int ch)
{
    top_state_t *s = &t->st;
    if (ch == KEY_RESIZE)
        return 1;
    if (s->help) { /* any key closes the help */
        s->help = 0;
        if (ch != 'q' && ch != 'Q')
            return 1;
    }
    int sort = -1;
    switch (ch) {
    case 'q':
    case 'Q':
        t->quit = 1;
        return 0;
    case '1':
    case '2':
    case '3':
    case '4':
        sort = ch - '1';
        break;
    case KEY_LEFT:
    case '<':
    case ',':
        sort = (s->sort + REPORT_LIVE_NSORT - 1) % REPORT_LIVE_NSORT;
        break;
    case KEY_RIGHT:
    case '>':
    case '.':
        sort = (s->sort + 1) % REPORT_LIVE_NSORT;
        break;
    case 'l':
    case 'L':
        s->by_lines = !s->by_lines;
        take_snapshot(t);
        return 1;
    case 'w':
    case 'W':
        s->use_window = !s->use_window;
        take_snapshot(t);
        return 1;
    case 'p':
    case 'P':
    case ' ':
        s->paused = !s->paused;
        if (!s->paused)
            take_snapshot(t);
        return 1;
    case 'r':
    case 'R':
        if (s->exited || s->stopped) /* no sampling any more: the final data stays */
            note(t, "sampling has ended: the final data is kept (q quits)");
        else
            reset(t);
        return 1;
    case '?':
    case 'h':
    case 'H':
        s->help = 1;
        return 1;
    case 12: /* Ctrl-L */
        clearok(curscr, TRUE);
        return 1;
    default:
        return 0;
    }
    s->sort = sort;
    if (s->paused || s->exited)
        report_live_table_sort(&s->table, sort); /* frozen rows, new order */
    else
        take_snapshot(t);
    return 1;
}

static int poll_keys(top_t *t)
{
    int dirty = 0;
    for (int i = 0; i < 64 && !t->quit; i++) { /* bounded: a paste cannot stall sampling */
        int ch = getch();
        if (ch == ERR)
            break;
        dirty |= handle_key(t, ch);
    }
    return dirty;
}

/* --- the loop --- */

static void print_plain(top_t *t)
{
    top_screen_print(&t->st, stdout, TOP_PLAIN_ROWS);
    if (fputc('\n', stdout) == EOF || fflush(stdout) != 0 || ferror(stdout))
        t->quit = 1; /* e.g. 'scry top | head' */
}

static int on_round(top_t *t)
{
    uint64_t now = scry_now_ns();
    int dirty = 0;
    if (t->keys && now - t->last_key_ns >= TOP_KEY_POLL_NS) {
        t->last_key_ns = now;
        dirty = poll_keys(t);
    }
    if (now - t->last_mark_ns >= TOP_REFRESH_NS) {
        mark(t, now);
        if (t->curses) {
            if (!t->st.paused)
                take_snapshot(t);
            dirty = 1;
        } else if (!t->cfg->once) {
            take_snapshot(t);
            print_plain(t);
        }
    }
    if (t->curses && dirty && !t->quit)
        top_screen_draw(&t->st);
    return t->quit;
}

static int on_tick(void *ctx)
{
    return on_round(ctx);
}

/* After the target exited or sampling failed: keep the final data on screen until 'q'. */
static void linger(top_t *t)
{
    timeout(250);
    top_screen_draw(&t->st);
    while (!top_stop && !t->quit) {
        int ch = getch();
        if (ch == ERR)
            continue;
        if (handle_key(t, ch) && !t->quit)
            top_screen_draw(&t->st);
    }
}

/* The recording under the live view of CFG's target: samples to T's on_sample, T's
 * on_round after each round. */
static recording_opts_t top_recording(const scry_config_t *cfg, top_t *t)
{
    recording_opts_t o = {
        .pid = cfg->pid,
        .argv = cfg->argv,
        .subprocesses = cfg->subprocesses,
        .duration_s = cfg->once && cfg->duration_s <= 0 ? 2 : cfg->duration_s,
        .quiet = 1,
        .stop = &top_stop,
        .emit = on_sample,
        .emit_ctx = t,
        .tick = on_tick,
        .tick_ctx = t,
    };
    options_sampler(cfg, &o.sampler);
    o.sampler.partial = 1; /* a live view shows a stack that never read whole by what was read */
    return o;
}

int cmd_top(const scry_config_t *cfg)
{
    install_signals();
    setlocale(LC_ALL, "");
    int rc = 1;
    top_t t;
    memset(&t, 0, sizeof t);
    t.cfg = cfg;
    recording_opts_t opts = top_recording(cfg, &t);
    if (!(t.rec = recording_new(&opts))) {
        fprintf(stderr, "scry: out of memory\n");
        goto out;
    }
    if (recording_open(t.rec) != 0) /* it said why */
        goto out;
    const pystate_info_t *info = recording_info(t.rec);
    const char *command = recording_command(t.rec);
    pid_t pid = recording_pid(t.rec);
    uint64_t start = scry_now_ns();
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    report_meta_t meta = {
        .pid = pid,
        .python_version = info ? info->version : NULL,
        .command = command,
        .rate_hz = cfg->rate_hz,
        .start_unix_ns = (int64_t)wall.tv_sec * 1000000000ll + wall.tv_nsec,
        .start_mono_ns = start,
        .flags = (cfg->idle ? REPORT_F_IDLE : 0) | (cfg->native ? REPORT_F_NATIVE : 0) |
                 (cfg->gil ? REPORT_F_GIL : 0) | (cfg->all_lines ? REPORT_F_ALL_LINES : 0),
        /* the lines view charges each sample to its innermost frame in the user's code */
        .include = cfg->include.pat,
        .ninclude = cfg->include.n,
        .exclude = cfg->exclude.pat,
        .nexclude = cfg->exclude.n,
    };
    if (!(t.live = report_live_new(&meta, start))) {
        fprintf(stderr, "scry: out of memory\n");
        goto out;
    }
    proc_container_t ct;
    report_container_t rct;
    char where[96] = "";
    if (recording_container(pid, &ct, &rct))
        snprintf(where, sizeof where, "%s%s%.12s", ct.runtime, ct.runtime[0] ? ":" : "", ct.id);
    t.st.container = where;
    t.st.pid = pid;
    t.st.command = command;
    t.st.python_version = info ? info->version : "?";
    t.st.rate_hz = cfg->rate_hz;
    t.st.window_s = cfg->window_s > 0 ? cfg->window_s : 1;
    t.st.use_window = !cfg->once;
    t.st.gil_pct = -1;
    t.st.threads_total = count_all_threads(&t, pid);
    t.base = gil_now(&t, start);
    t.last_mark_ns = t.last_key_ns = start;
    if (isatty(1) && !cfg->once && screen_start(&t) == 0) {
        take_snapshot(&t);
        top_screen_draw(&t.st);
    }

    recording_run(t.rec);
    int err = recording_stopped_by(t.rec);
    sampler_stats_t ss = top_stats(&t);
    mark(&t, scry_now_ns());
    family_t *fam = recording_family(t.rec);
    t.st.exited = fam ? family_done(fam) : ss.target_exited;
    t.st.errors = ss.errors;
    if (err)
        t.st.stopped = scry_strerror(err);
    if (t.curses) {
        if ((t.st.exited || err) && !top_stop && !t.quit) {
            t.st.paused = 0;
            take_snapshot(&t);
            if (t.keys)
                linger(&t);
            else
                top_screen_draw(&t.st);
        }
        screen_end(&t);
        if ((t.st.exited || err) && !t.keys) {
            /* nobody can press q: leave the final table in the scrollback */
            t.st.use_window = 0;
            take_snapshot(&t);
            top_screen_print(&t.st, stdout, TOP_PLAIN_ROWS);
        }
    } else if (!t.quit) {
        t.st.use_window = 0; /* the final table covers the whole run */
        take_snapshot(&t);
        top_screen_print(&t.st, stdout, TOP_PLAIN_ROWS);
    }
    if (err)
        fprintf(stderr, "scry: sampling stopped: %s\n", scry_strerror(err));
    rc = err ? 1 : 0;
out:
    screen_end(&t);
    report_live_table_free(&t.st.table);
    recording_free(t.rec); /* a launched program still running is left be */
    report_live_free(t.live);
    return rc;
}
