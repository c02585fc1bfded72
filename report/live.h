/* live.h - live views ('scry top'): a profile that keeps a rolling history of intervals and
 * gives sorted tables of functions or lines for "since start" or "the last N seconds".
 *
 * scry feeds samples (report_live_add), closes an interval about once a second
 * (report_live_mark) and asks for a table (report_live_snapshot). Tables come from the
 * same aggregation as the reports (report/view.c), over either the whole profile or the
 * per-stack differences of the last intervals. Not thread-safe.
 *
 * Percentages are shares of one CPU over the window's wall time, like top(1): a function
 * running all the time on one thread is 100%, two busy threads can sum to 200%. Times are
 * cumulative since the start (or the last reset).
 */
#ifndef SCRY_REPORT_LIVE_H
#define SCRY_REPORT_LIVE_H

#include <stdint.h>

#include "report.h"
#include "sample.h"

typedef struct report_live report_live_t;

/* Intervals kept for windows; a window longer than this many marks is cut to them. */
#define REPORT_LIVE_HISTORY 128

enum report_live_sort {
    REPORT_LIVE_SORT_OWN = 0,        /* %Own (window) */
    REPORT_LIVE_SORT_TOTAL = 1,      /* %Total (window) */
    REPORT_LIVE_SORT_OWN_TIME = 2,   /* OwnTime (cumulative) */
    REPORT_LIVE_SORT_TOTAL_TIME = 3, /* TotalTime (cumulative) */
};
#define REPORT_LIVE_NSORT 4

typedef struct report_live_row {
    const char *function; /* interned by the sampler (or the profile); never NULL */
    const char *file;     /* "" when unknown; for native frames the library */
    int32_t line;         /* lines view: the line; functions view: first line seen; 0 unknown */
    uint8_t kind;         /* enum scry_frame_kind */
    double own_pct;       /* window: time this is the attributed (innermost Python) frame */
    double total_pct;     /* window: time this is anywhere on the stack */
    double cls_pct[3];    /* window: own_pct split by enum scry_class (python/native/system) */
    double own_s;         /* cumulative seconds, own */
    double total_s;       /* cumulative seconds, total */
    uint64_t own_samples; /* cumulative samples, own */
    uint64_t samples;     /* cumulative samples, total */
} report_live_row_t;

typedef struct report_live_table {
    report_live_row_t *rows; /* sorted; owned, freed by report_live_table_free */
    uint32_t nrows;          /* rows kept (<= the query's max_rows when given) */
    uint32_t nrows_all;      /* rows before the limit */
    int by_lines;            /* the rows are lines (else functions) */
    int sort;                /* enum report_live_sort the rows are in */
    double window_s;         /* wall seconds the percentages cover */
    double elapsed_s;        /* wall seconds since the start or the last reset */
    uint64_t samples;        /* CPU samples in the window */
    uint64_t samples_all;    /* CPU samples since the start or the last reset */
    double cpu_pct;          /* the window's sampled time, % of one CPU */
    double cls_pct[3];       /* cpu_pct split by enum scry_class */
} report_live_table_t;

typedef struct report_live_query {
    int by_lines;      /* 1: lines ("function (file:line)" per line); 0: functions */
    int sort;          /* enum report_live_sort */
    double window_s;   /* percentages over the last WINDOW_S seconds of marks; 0: since start */
    uint32_t max_rows; /* 0: every row */
} report_live_query_t;

/* Creates a live view over a fresh profile described by META (copied, see
 * report_profile_new); NOW_NS (CLOCK_MONOTONIC) is its start. Returns NULL when out of
 * memory or META is NULL. */
report_live_t *report_live_new(const report_meta_t *meta, uint64_t now_ns);

/* Frees L and its profile. NULL is a no-op. */
void report_live_free(report_live_t *l);

/* Adds one sample (same contract as report_profile_add). Returns 0, SCRY_E_INVAL or
 * SCRY_E_NOMEM. */
int report_live_add(report_live_t *l, const scry_sample_t *s);

/* Closes the interval that ends at NOW_NS (call about once a second, before a snapshot).
 * Costs O(stacks). Returns 0, SCRY_E_INVAL (L NULL) or SCRY_E_NOMEM (the interval is then
 * folded into the next one). */
int report_live_mark(report_live_t *l, uint64_t now_ns);

/* Forgets every sample and interval; NOW_NS becomes the start. Returns 0, SCRY_E_INVAL or
 * SCRY_E_NOMEM (L then keeps its previous data). */
int report_live_reset(report_live_t *l, uint64_t now_ns);

/* The profile under L (owned by L; replaced by report_live_reset), e.g. to write a report
 * at the end. NULL when L is NULL. */
report_profile_t *report_live_profile(report_live_t *l);

/* Fills OUT with the table Q asks for, as of the last mark (or the start). OUT is
 * overwritten (free an earlier table first). Returns 0, SCRY_E_INVAL (NULL argument, bad
 * sort) or SCRY_E_NOMEM (OUT is then empty). */
int report_live_snapshot(report_live_t *l, const report_live_query_t *q, report_live_table_t *out);

/* Sorts T's kept rows by SORT (enum report_live_sort), e.g. when the display is paused.
 * Rows cut by max_rows stay cut. Returns 0 or SCRY_E_INVAL. */
int report_live_table_sort(report_live_table_t *t, int sort);

/* Frees T's rows and empties it. NULL is a no-op. */
void report_live_table_free(report_live_table_t *t);

#endif
