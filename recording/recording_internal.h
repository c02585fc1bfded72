/* recording_internal.h - the state of one recording, shared by the files of recording/. */
#ifndef SCRY_RECORDING_INTERNAL_H
#define SCRY_RECORDING_INTERNAL_H

#include "recording.h"

#include "family.h"
#include "family_memory.h"
#include "memory.h"

struct recording {
    recording_opts_t opts;
    volatile sig_atomic_t *stop; /* opts.stop, or own_stop */
    volatile sig_atomic_t own_stop;
    strtab_t *strings;
    pystate_target_t *t; /* NULL: a launched command not (yet) Python (--subprocesses) */
    sampler_t *smp;
    family_t *fam;           /* --subprocesses */
    fammem_t *fm;            /* --subprocesses --memory: a ring per process */
    report_process_t *procs; /* --subprocesses: what the report lists */
    report_profile_t *prof;
    memprof_t *mem;
    srcread_t *src;
    pid_t child; /* launch mode: the program scry started */
    int child_status, child_reaped;
    int end_child; /* 1: not profilable, 2: --duration elapsed */
    int opened, ran, ended;
    char command[4096];
    proc_container_t ct;
    report_container_t rct;
    int in_container;
    /* sampling */
    uint64_t start_ns, last_ns; /* the progress line's clock */
    int tty;                    /* opts.progress and stderr is a terminal */
    int limit_said;             /* --subprocesses: family_limit_note printed */
    double elapsed_s;
    int stopped_by;       /* the sampler's error that ended sampling, or 0 */
    sampler_emit_fn emit; /* the profile's, or opts.emit */
    void *emit_ctx;
    /* the end */
    report_end_t end;
    char memline[256];
    char error[2048];
};

/* Writes "scry: " FMT "\n" to the recording's log. */
void recording__note(const recording_t *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The sampler's counters, or the family's totals (--subprocesses); torn stacks in *TORN. */
void recording__run_stats(const recording_t *r, sampler_stats_t *st, uint64_t *torn);

/* The sampler's emitter: CTX is the profile. */
void recording__emit(const scry_sample_t *s, void *ctx);
/* The memory drain's emitter: CTX is the recording (names the sample's thread). */
void recording__emit_memory(const scry_sample_t *s, void *ctx);
/* The sampler's and the family's round callbacks (CTX is the recording): drain memory, stop
 * it at the interpreter's teardown, and print the progress line. Return 0. */
int recording__tick(sampler_t *s, void *ctx);
int recording__family_tick(family_t *f, void *ctx);
/* The progress line's start (the clock of elapsed_s) and end (the line cleared). */
void recording__progress_start(recording_t *r);
void recording__progress_end(recording_t *r);

#endif
