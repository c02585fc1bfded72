/* agg.h - one window of one service: the samples of all its processes, aggregated into a
 * report profile that owns its strings (so a target's own string table can be freed when
 * the target goes), with a cap on distinct stacks (the rest counted under one "<other>"
 * frame), rendered into the window's files at the end.
 */
#ifndef SCRY_SERVE_AGG_H
#define SCRY_SERVE_AGG_H

#include "report.h"
#include "sample.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SERVE_AGG_MAX_PIDS 256 /* pids remembered per window (for labels and the index) */

typedef struct serve_agg serve_agg_t;

typedef struct serve_agg_meta {
    const char *service;   /* copied */
    const char *container; /* copied; NULL for none */
    const char *host;      /* copied */
    double rate_hz;
    int64_t start_unix_s;
    uint64_t start_mono_ns;
    uint32_t max_stacks; /* distinct stacks kept; 0: 10000 */
} serve_agg_meta_t;

typedef struct serve_agg_stats {
    uint64_t samples;       /* added */
    uint64_t other_samples; /* folded into "<other>" by the stack cap */
    uint64_t stacks;        /* distinct stacks kept */
    uint64_t weight_ns;     /* CPU time the samples stand for */
    size_t n_pids;
    pid_t pids[SERVE_AGG_MAX_PIDS];
    char python[16]; /* the first Python version seen ("3.12.1"), "" when none */
} serve_agg_stats_t;

/* Creates an empty window. Returns NULL when out of memory. */
serve_agg_t *serve_agg_new(const serve_agg_meta_t *meta);

/* Frees the window, its profile and its strings. NULL is a no-op. */
void serve_agg_free(serve_agg_t *a);

/* Adds sample S of process PID (Python version PYVER, may be NULL). The frames' strings
 * are copied into the window's own table. Returns 0, SCRY_E_INVAL or SCRY_E_NOMEM (the
 * sample is then not counted). */
int serve_agg_add(serve_agg_t *a, const scry_sample_t *s, pid_t pid, const char *pyver);

/* Renders the window in format FMT into a malloc'ed buffer (*OUT, *LEN) that the caller
 * frees. END gives the duration and counters of the window. Returns 0 or a negative code. */
int serve_agg_render(serve_agg_t *a, enum report_format fmt, const report_end_t *end, char **out,
                     size_t *len);

const serve_agg_stats_t *serve_agg_stats(const serve_agg_t *a);

/* Makes the window's sampling rate RATE_HZ (what its renderings say: the pprof's period);
 * its targets' rate, which set-rate and rules change. */
void serve_agg_set_rate(serve_agg_t *a, double rate_hz);

#endif
