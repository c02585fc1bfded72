/* recording_end.c - a recording's rounds (memory drained, progress shown), its end and its
 * summary (recording.h). */
#include "recording_internal.h"

#include "scry_err.h"
#include "scry_time.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void recording__emit(const scry_sample_t *s, void *ctx)
{
    report_profile_add(ctx, s);
}

/* --memory: a memory sample carries no thread name; the sampler knows it. */
void recording__emit_memory(const scry_sample_t *s, void *ctx)
{
    const recording_t *r = ctx;
    scry_sample_t named = *s;
    if (r->smp && (!named.thread_name || !named.thread_name[0]))
        named.thread_name = sampler_thread_name(r->smp, named.tid);
    r->emit(&named, r->emit_ctx);
}

void recording__progress_start(recording_t *r)
{
    r->tty = r->opts.progress && isatty(2);
    r->start_ns = r->last_ns = scry_now_ns();
}

void recording__progress_end(recording_t *r)
{
    if (r->tty)
        fprintf(stderr, "\r\033[K");
}

/* On a terminal: the counters once a second (NPROCS processes sampled, 0 for one). */
static void progress_round(recording_t *r, const sampler_stats_t *st, size_t nprocs)
{
    if (!r->tty)
        return;
    uint64_t now = scry_now_ns();
    if (now - r->last_ns < 1000000000ull)
        return;
    r->last_ns = now;
    double el = (double)(now - r->start_ns) / 1e9;
    char procs[48] = "";
    if (nprocs)
        snprintf(procs, sizeof procs, " in %zu process%s", nprocs, nprocs > 1 ? "es" : "");
    fprintf(stderr,
            "\rscry: %.0f s, %llu ticks (%.0f/s), %llu samples of %s threads%s, %llu errors   ", el,
            (unsigned long long)st->ticks, el > 0 ? (double)st->ticks / el : 0.0,
            (unsigned long long)st->samples, r->opts.sampler.idle ? "all" : "running", procs,
            (unsigned long long)st->errors);
    fflush(stderr);
}

int recording__tick(sampler_t *s, void *ctx)
{
    recording_t *r = ctx;
    /* Memory is recorded until the interpreter starts its teardown (the frees of
     * Py_Finalize would otherwise bring every line's net to zero): the shim stops itself
     * at that instant; scry drains what came before and then disables the ring. */
    recording_drain(r);
    if (r->mem && sampler_stats(s)->finalizing)
        memprof_stop(r->mem);
    progress_round(r, sampler_stats(s), 0);
    return r->opts.tick ? r->opts.tick(r->opts.tick_ctx) : 0;
}

int recording__family_tick(family_t *f, void *ctx)
{
    recording_t *r = ctx;
    sampler_stats_t st;
    uint64_t torn, overflow;
    family_stats(f, &st, &torn, &overflow);
    const family_proc_info_t *procs;
    size_t n = 0, live = family_procs(f, &procs);
    for (size_t i = 0; i < live; i++)
        n += procs[i].sampled && !procs[i].exited;
    if (!r->limit_said && family_limit_note(f)[0]) { /* at once; the count at the end */
        r->limit_said = 1;
        fprintf(r->opts.log ? r->opts.log : stderr,
                "%sscry: --subprocesses: descriptors run short (RLIMIT_NOFILE): new child "
                "processes are no longer followed; those followed go on (the count at the end)\n",
                r->tty ? "\r\033[K" : "");
    }
    progress_round(r, &st, n);
    return r->opts.tick ? r->opts.tick(r->opts.tick_ctx) : 0;
}

void recording__run_stats(const recording_t *r, sampler_stats_t *st, uint64_t *torn)
{
    uint64_t overflow;
    if (r->fam) {
        family_stats(r->fam, st, torn, &overflow);
        return;
    }
    *st = *sampler_stats(r->smp);
    *torn = pystate_target_stats(sampler_target(r->smp)).dropped;
}

/* --subprocesses: the processes as the report lists them (in R->procs). */
static size_t list_processes(recording_t *r)
{
    const family_proc_info_t *fp;
    size_t n = family_procs(r->fam, &fp);
    free(r->procs);
    r->procs = NULL;
    if (!n || !(r->procs = calloc(n, sizeof *r->procs)))
        return 0;
    for (size_t i = 0; i < n; i++)
        r->procs[i] = (report_process_t){.pid = fp[i].pid,
                                         .command = fp[i].command,
                                         .python_version = fp[i].version,
                                         .note = fp[i].why,
                                         .samples = fp[i].samples,
                                         .cpu_ns = fp[i].weight_ns,
                                         .exited = fp[i].exited};
    return n;
}

int recording_end(recording_t *r)
{
    if (!r->ran || !r->prof)
        return SCRY_E_INVAL;
    sampler_stats_t stats;
    uint64_t dropped;
    recording__run_stats(r, &stats, &dropped);
    const sampler_stats_t *st = &stats;
    double elapsed = r->elapsed_s;
    report_end_t end = {
        .duration_s = elapsed,
        .ticks = st->ticks,
        .errors = st->errors + dropped,
        .err_rounds = st->errors,
        .err_torn = dropped,
        .rate_achieved_hz = elapsed > 0 ? (double)st->ticks / elapsed : 0,
        .late = st->late,
        .late_mean_ms = st->late ? (double)st->late_total_ns / (double)st->late / 1e6 : 0,
        .late_max_ms = (double)st->late_max_ns / 1e6,
        .target_exited = st->target_exited && !r->child,
        .gil_fraction = -1, /* the report's: the share of the samples that held it */
    };
    if (r->fam) {
        end.nprocesses = list_processes(r);
        end.processes = r->procs;
    }
    r->memline[0] = 0;
    uint64_t events = 0, mdropped = 0, bad = 0;
    if (r->fm) {
        fammem_counts(r->fm, &events, &mdropped, &bad);
        fammem_describe(r->fm, r->memline, sizeof r->memline);
    } else if (r->mem) {
        memprof_counts(r->mem, &events, &mdropped, &bad);
        memprof_describe(r->mem, r->memline, sizeof r->memline);
    }
    end.dropped = mdropped;
    end.errors += bad;
    end.err_records = bad;
    r->end = end;
    r->ended = 1;
    report_profile_set_end(r->prof, &r->end);
    return 0;
}

/* --subprocesses: a line per process under the summary. */
static void print_processes(const report_end_t *end, FILE *out)
{
    for (size_t i = 0; i < end->nprocesses; i++) {
        const report_process_t *q = &end->processes[i];
        fprintf(out, "scry:   pid %d%s%s%s: %llu samples, %.2f s of CPU%s%s%s: %.120s\n",
                (int)q->pid, q->python_version[0] ? " (Python " : "", q->python_version,
                q->python_version[0] ? ")" : "", (unsigned long long)q->samples,
                (double)q->cpu_ns / 1e9, q->exited ? ", exited" : "",
                q->note[0] ? ", not sampled: " : "", q->note, q->command);
    }
}

/* The summary's notes after the lateness: records lost, stops not counted, execs followed,
 * how the family was found, how late the BPF records were read. */
static void summary_notes(const recording_t *r, const sampler_stats_t *st, char *buf, size_t len)
{
    const sampler_t *smp = r->fam ? family_root_sampler(r->fam) : r->smp;
    size_t ll = 0;
    buf[0] = 0;
    if (st->lost)
        ll += (size_t)snprintf(buf, len, ", %llu records lost", (unsigned long long)st->lost);
    if (st->syscall_stops && ll < len)
        ll +=
            (size_t)snprintf(buf + ll, len - ll, ", %llu stops at a system call's exit not counted",
                             (unsigned long long)st->syscall_stops);
    if (st->execs && smp && ll < len)
        ll += (size_t)snprintf(buf + ll, len - ll, ", followed %llu exec%s (now Python %s)",
                               (unsigned long long)st->execs, st->execs > 1 ? "s" : "",
                               pystate_target_info(sampler_target(smp))->version);
    if (r->fam && ll < len)
        ll += (size_t)snprintf(buf + ll, len - ll, "; %s", family_discovery_desc(r->fam));
    if (st->read_records && ll < len)
        snprintf(buf + ll, len - ll,
                 ", Python stacks read %.0f us after their record (max %.1f ms)",
                 (double)st->read_delay_ns / (double)st->read_records / 1e3,
                 (double)st->read_delay_max_ns / 1e6);
}

int recording_summary(const recording_t *r, const char *wrote, FILE *out)
{
    if (!r->ended)
        return SCRY_E_INVAL;
    const report_end_t *end = &r->end;
    sampler_stats_t stats;
    uint64_t torn;
    recording__run_stats(r, &stats, &torn);
    const sampler_stats_t *st = &stats;
    const pystate_info_t *info = r->t ? pystate_target_info(r->t) : NULL;
    char lostbuf[256];
    summary_notes(r, st, lostbuf, sizeof lostbuf);
    double busy_us = st->ticks ? (double)st->busy_ns / (double)st->ticks / 1e3 : 0;
    char errs[160] = "";
    if (end->errors)
        snprintf(errs, sizeof errs,
                 " (%llu unreadable ticks, %llu torn stacks dropped, %llu bad memory records)",
                 (unsigned long long)end->err_rounds, (unsigned long long)end->err_torn,
                 (unsigned long long)end->err_records);
    char where[128] = "";
    if (r->in_container)
        snprintf(where, sizeof where, " in container %s%s%.12s", r->ct.runtime,
                 r->ct.runtime[0] ? ":" : "", r->ct.id);
    char from[200];
    size_t nproc = 0;
    for (size_t i = 0; i < end->nprocesses; i++)
        nproc += end->processes[i].samples > 0;
    if (r->fam)
        snprintf(from, sizeof from, "pid %d%s and its children (%zu Python process%s sampled)",
                 (int)recording_pid(r), where, nproc, nproc == 1 ? "" : "es");
    else
        snprintf(from, sizeof from, "pid %d%s (Python %s)", (int)info->pid, where, info->version);
    fprintf(out,
            "scry: %llu samples in %.1f s at %.0f Hz (%.0f Hz achieved) from %s, %llu errors%s, "
            "late %llu of %llu ticks (max %.1f ms), %.1f us per tick; sampler: %s%s%s; wrote %s\n",
            (unsigned long long)st->samples, end->duration_s, r->opts.sampler.rate_hz,
            end->rate_achieved_hz, from, (unsigned long long)end->errors, errs,
            (unsigned long long)st->late, (unsigned long long)st->ticks, end->late_max_ms, busy_us,
            r->fam ? family_backend_desc(r->fam) : sampler_backend_desc(r->smp), lostbuf,
            end->target_exited ? "; the target exited while sampling, kept what was collected" : "",
            strcmp(wrote, "-") == 0 ? "to standard output" : wrote);
    if (r->memline[0])
        fprintf(out, "scry: %s\n", r->memline);
    if (r->fam && family_limit_note(r->fam)[0])
        fprintf(out, "scry: %s\n", family_limit_note(r->fam));
    print_processes(end, out);
    return 0;
}
