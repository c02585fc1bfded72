/* sample.h - what the readers hand to the reports.
 *
 * Data flows one way: target -> readers (pystate/, unwind/, shim ring) -> samples ->
 * report/. A sample names its frames by interned strings (common/strtab.h), so the
 * report side compares frames by pointer and never touches the target.
 */
#ifndef SCRY_SAMPLE_H
#define SCRY_SAMPLE_H

#include <stdint.h>

enum scry_frame_kind {
    SCRY_FRAME_PYTHON = 0,  /* a Python function at a line */
    SCRY_FRAME_NATIVE = 1,  /* a native function; file holds the library's base name */
    SCRY_FRAME_THREAD = 2,  /* synthetic root: "thread 1234 (name)" with --threads */
    SCRY_FRAME_OTHER = 3,   /* synthetic: e.g. "<truncated>", "<unknown>" */
    SCRY_FRAME_PROCESS = 4, /* synthetic root: "process 1234 (command)" with --subprocesses,
                               above the thread root */
};

/* What a thread was doing when sampled (issue 3's attribution). */
enum scry_class {
    SCRY_CLASS_PYTHON = 0, /* interpreting bytecode */
    SCRY_CLASS_NATIVE = 1, /* running compiled code on behalf of the current line */
    SCRY_CLASS_SYSTEM = 2, /* off CPU: syscall, sleep, I/O, lock or GIL wait */
};

/* What a sample measures. CPU samples carry time; memory samples carry bytes. */
enum scry_metric {
    SCRY_METRIC_CPU = 0,   /* weight_ns of time */
    SCRY_METRIC_ALLOC = 1, /* bytes allocated (sampled estimate) */
    SCRY_METRIC_FREE = 2,  /* bytes freed that had been sampled as allocated */
    SCRY_METRIC_COPY = 3,  /* bytes copied (memcpy/memmove) */
};

typedef struct scry_frame {
    const char *function; /* interned; never NULL */
    const char *file;     /* interned; never NULL ("" when unknown) */
    int32_t line;         /* 0 when unknown */
    uint8_t kind;         /* enum scry_frame_kind */
} scry_frame_t;

typedef struct scry_sample {
    uint64_t time_ns;        /* CLOCK_MONOTONIC time it was taken */
    uint64_t weight_ns;      /* time it stands for (CPU metric) */
    uint64_t bytes;          /* memory metrics: bytes it stands for */
    uint64_t address;        /* memory metrics: the block's address (alloc/free matching) */
    int32_t tid;             /* OS thread id */
    int32_t ns_tid;          /* the id the target knows the thread by, when it differs
                                from tid (its own PID namespace: a container); else 0 */
    const char *thread_name; /* interned; "" when unknown */
    uint8_t metric;          /* enum scry_metric */
    uint8_t cls;             /* enum scry_class (CPU); for ALLOC 0=python 1=native origin */
    uint8_t gil;             /* thread held the GIL */
    uint8_t running;         /* thread was on a CPU (R state) */
    uint8_t truncated;       /* the stack was cut (depth bound or torn read) */
    uint8_t gil_wait;        /* SYSTEM sample of a thread waiting to take the GIL */
    uint8_t torn;            /* the stack changed while it was read, every reread too: the
                                frames are the part read whole, under "<changed while
                                reading>" (sampler_opts_t.partial) */
    uint32_t nframes;
    const scry_frame_t *frames; /* leaf first; valid only during the callback */
} scry_sample_t;

#endif
