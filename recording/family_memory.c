/* family_memory.c - record --memory --subprocesses: a ring per process (family_memory.h). */
#include "family_memory.h"

#include "scry_err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fammem_member {
    struct fammem *fm;
    memprof_t *mem;
    pid_t pid;
    int stopped; /* its interpreter began its teardown: the shim stopped itself */
} fammem_member_t;

struct fammem {
    uint64_t sample_bytes; /* the shim's sampling interval (0: its default) */
    int inject;            /* MEMPROF_INJECT_* */
    int quiet;             /* no note for a process that gets no ring */
    FILE *log;             /* the recording's log (NULL: stderr) */
    memprof_t *root_mem;
    fammem_member_t members[FAMILY_MAX_PROCS];
    size_t n;
    size_t recorded, refused;
    uint64_t events, dropped, bad;
};

/* Where a member's drained samples go: named after their thread, then to the family's
 * emitter (which adds the process root). */
typedef struct drain_ctx {
    sampler_t *smp;
    sampler_emit_fn emit;
    void *emit_ctx;
} drain_ctx_t;

static void emit_named(const scry_sample_t *s, void *ctx)
{
    drain_ctx_t *d = ctx;
    scry_sample_t named = *s;
    if (!named.thread_name || !named.thread_name[0])
        named.thread_name = sampler_thread_name(d->smp, named.tid);
    d->emit(&named, d->emit_ctx);
}

int fammem_inject_how(const char *inject, int dflt)
{
    if (!inject)
        return dflt;
    return !strcmp(inject, "ptrace")        ? MEMPROF_INJECT_PTRACE
           : !strcmp(inject, "remote-exec") ? MEMPROF_INJECT_REMOTE_EXEC
                                            : MEMPROF_INJECT_AUTO;
}

/* The launched root takes over the launch ring; any other process gets the shim injected
 * (or, in a fork child that has it already, a ring of its own). */
static void *on_start(void *ctx, pid_t pid, pystate_target_t *t, sampler_t *smp, int is_root)
{
    (void)smp;
    fammem_t *fm = ctx;
    if (fm->n >= FAMILY_MAX_PROCS)
        return NULL;
    memprof_t *mem = NULL;
    if (is_root && fm->root_mem) {
        mem = fm->root_mem;
        fm->root_mem = NULL;
    } else {
        char msg[600] = "";
        mem = memprof_new(fm->sample_bytes, 0);
        if (mem)
            memprof_set_inject(mem, fm->inject);
        int err = mem ? memprof_inject(mem, t, msg, sizeof msg) : SCRY_E_NOMEM;
        if (!err && memprof_start(mem, t) != 0)
            err = SCRY_E_IO, snprintf(msg, sizeof msg, "cannot start memory recording");
        if (err) {
            if (!fm->quiet)
                fprintf(fm->log ? fm->log : stderr, "scry: pid %d: no memory recording: %s\n",
                        (int)pid, msg[0] ? msg : scry_strerror(err));
            memprof_free(mem);
            fm->refused++;
            return NULL;
        }
    }
    fammem_member_t *m = &fm->members[fm->n++];
    *m = (fammem_member_t){fm, mem, pid, 0};
    fm->recorded++;
    return m;
}

static int drain(fammem_member_t *m, pystate_target_t *t, sampler_t *smp, sampler_emit_fn emit,
                 void *emit_ctx)
{
    drain_ctx_t d = {smp, emit, emit_ctx};
    int n = memprof_drain(m->mem, t, emit_named, &d);
    if (n < 0) {
        fprintf(m->fm->log ? m->fm->log : stderr, "scry: pid %d: memory recording stopped: %s\n",
                (int)m->pid, scry_strerror(n));
        m->fm->bad++;
        memprof_free(m->mem);
        m->mem = NULL;
    }
    return n;
}

static void on_round(void *ctx, void *mctx, pystate_target_t *t, sampler_t *smp,
                     sampler_emit_fn emit, void *emit_ctx)
{
    (void)ctx;
    fammem_member_t *m = mctx;
    if (!m->mem || drain(m, t, smp, emit, emit_ctx) < 0)
        return;
    /* recorded until the interpreter starts its teardown (record.c's show_progress) */
    if (!m->stopped && sampler_stats(smp)->finalizing) {
        memprof_stop(m->mem);
        m->stopped = 1;
    }
}

/* The member is let go: what its shim wrote since the last round, its counts, its ring
 * disabled and freed. */
static void on_end(void *ctx, void *mctx, pystate_target_t *t, sampler_t *smp, sampler_emit_fn emit,
                   void *emit_ctx)
{
    fammem_t *fm = ctx;
    fammem_member_t *m = mctx;
    if (!m->mem || drain(m, t, smp, emit, emit_ctx) < 0)
        return;
    uint64_t events = 0, dropped = 0, bad = 0;
    memprof_counts(m->mem, &events, &dropped, &bad);
    fm->events += events;
    fm->dropped += dropped;
    fm->bad += bad;
    memprof_free(m->mem);
    m->mem = NULL;
}

fammem_t *fammem_new(uint64_t sample_bytes, const char *inject, int quiet, FILE *log,
                     memprof_t *root_mem)
{
    fammem_t *fm = calloc(1, sizeof *fm);
    if (!fm) {
        memprof_free(root_mem);
        return NULL;
    }
    fm->sample_bytes = sample_bytes;
    /* by default the ptrace trampoline: PEP 768's remote execution waits for the process's
     * next safe point (a worker asleep in time.sleep or a blocking call has none until it
     * wakes), and the family's loop, which injects as it finds each process, cannot wait
     * for every one of them (docs/injection.md) */
    fm->inject = fammem_inject_how(inject, MEMPROF_INJECT_PTRACE);
    fm->quiet = quiet;
    fm->log = log;
    fm->root_mem = root_mem;
    return fm;
}

void fammem_hooks(fammem_t *fm, family_hooks_t *out)
{
    *out = (family_hooks_t){.start = on_start, .round = on_round, .end = on_end, .ctx = fm};
}

void fammem_counts(const fammem_t *fm, uint64_t *events, uint64_t *dropped, uint64_t *bad)
{
    *events = fm->events;
    *dropped = fm->dropped;
    *bad = fm->bad;
}

void fammem_describe(const fammem_t *fm, char *buf, size_t len)
{
    char refused[48] = "";
    if (fm->refused)
        snprintf(refused, sizeof refused, " (not in %zu more)", fm->refused);
    snprintf(buf, len,
             "memory: recorded in %zu process%s%s; %llu events, %llu dropped by the shims, %llu "
             "bad records",
             fm->recorded, fm->recorded == 1 ? "" : "es", refused, (unsigned long long)fm->events,
             (unsigned long long)fm->dropped, (unsigned long long)fm->bad);
}

void fammem_free(fammem_t *fm)
{
    if (!fm)
        return;
    for (size_t i = 0; i < fm->n; i++)
        memprof_free(fm->members[i].mem);
    memprof_free(fm->root_mem);
    free(fm);
}
