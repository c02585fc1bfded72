/* perfev_internal.h - what the perfev sources share; not part of the public API. */
#ifndef PERFEV_INTERNAL_H
#define PERFEV_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "perfev.h"

#define PERFEV_MAX_THREADS 8192u
#define PERFEV_RECORD_MAX  65535u /* perf_event_header.size is 16 bits */

/* One thread's event and ring. */
typedef struct perfev_thread {
    pid_t tid;
    int fd;
    uint8_t *base;      /* the mapping: control page, then the data pages */
    size_t map_len;     /* bytes mapped */
    uint8_t *data;      /* first data byte */
    uint64_t size;      /* data bytes (a power of two) */
    uint8_t mark;       /* scratch for perfev_set_threads */
    int8_t preempted;   /* opts.switches: how it last left its CPU (perfev_thread_preempted), */
    uint64_t switch_ns; /* and when */
    uint64_t in_ns;     /* opts.switches: when it last came onto a CPU (0: not seen) */
} perfev_thread_t;

struct perfev {
    perfev_opts_t opts;
    uint64_t period_ns;
    int rate_changed; /* perfev_set_rate was called: records' own period is stale (the
                         kernel's hrtimer clocks keep reporting the period they were
                         opened with): a record stands for period_ns, or for
                         old_period_ns when it is older than changed_ns */
    uint64_t old_period_ns, changed_ns;
    uint64_t regs_mask;       /* PERF_SAMPLE_REGS_USER mask (0 without registers) */
    uint32_t ring_pages;      /* data pages asked for per ring */
    size_t page;              /* system page size */
    perfev_thread_t *threads; /* sorted by tid */
    size_t nthreads, cap;
    uint8_t *wrap; /* PERFEV_RECORD_MAX bytes: records that wrap are copied here */
    perfev_stats_t st;
    int epfd;          /* opts.wake_each: every ring's descriptor, for perfev_wait; else -1 */
    int tfd;           /* a timer in the epoll set that ends perfev_wait's long waits, or -1 */
    uint64_t armed_ns; /* when the timer fires (CLOCK_MONOTONIC), 0 when disarmed */
};

/* Reads every record of thread T's ring (ring.c). Returns the samples delivered. */
int perfev__drain(struct perfev *p, perfev_thread_t *t, perfev_sample_fn cb, void *ctx);

#endif
