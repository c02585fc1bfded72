/* report_internal.h - the profile's tables, shared by the aggregation and the formats.
 *
 * Aggregation (profile.c, memtrack.c) fills four tables while samples arrive:
 *   frames  - every distinct (function, file, line, kind), interned once;
 *   stacks  - every distinct (tid, frame ids leaf first), with counts and values per
 *             metric and class;
 *   lines   - attribution targets (innermost Python frame of a stack), carrying the
 *             memory accounting that needs time order (net, peak, trend);
 *   threads - per OS thread totals.
 * The formats (fmt_*.c) read them through a view (view.c) computed at write time.
 */
#ifndef SCRY_REPORT_INTERNAL_H
#define SCRY_REPORT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "report.h"
#include "strtab.h"

#define REPORT__MAX_DEPTH 4096u
#define REPORT__NMETRIC   4
#define REPORT__NCLASS    3
#define REPORT__TREND_MAX 27         /* Scalene's sparkline length */
#define REPORT__FOOT_MAX  256        /* program footprint points kept */
#define REPORT__ADDR_MAX  (1u << 21) /* live sampled blocks tracked for free matching */
#define REPORT__NONE      UINT32_MAX
#define REPORT__MB        (1024.0 * 1024.0) /* a MiB: every "MB" figure (JSON *_mb keys too) */

typedef struct report__frame {
    const char *function;
    const char *file;
    int32_t line;
    uint8_t kind;
} report__frame_t;

typedef struct report__stack {
    uint64_t hash;
    uint32_t off;   /* first frame id in profile->ids (leaf first) */
    uint32_t depth; /* frame count */
    int32_t tid;
    uint32_t line;  /* attribution line id */
    uint32_t attr;  /* index (leaf first) of the innermost Python frame (functions' self);
                       the leaf when no Python frame; REPORT__NONE if the stack is empty */
    uint32_t uattr; /* index of the line views' attribution frame: the innermost frame in
                       the user's code, else ATTR (equal to ATTR with REPORT_F_ALL_LINES) */
    uint64_t count[REPORT__NMETRIC][REPORT__NCLASS]; /* samples */
    uint64_t value[REPORT__NMETRIC][REPORT__NCLASS]; /* weight_ns (CPU) or bytes */
    int64_t inuse;      /* bytes of its sampled blocks not freed (yet) */
    int64_t peak_inuse; /* INUSE at the footprint's peak snapshot */
} report__stack_t;

typedef struct report__line {
    const char *file;
    const char *function;
    int32_t line;
    uint8_t kind;
    uint8_t user; /* the file is the user's code (report__user_file) */
    /* memory, in time order */
    uint64_t alloc_bytes;
    uint64_t alloc_py_bytes; /* ALLOC bytes with cls == 0 (allocated by Python) */
    uint64_t free_bytes;     /* matched FREE bytes of blocks this line allocated */
    uint64_t copy_bytes;
    uint64_t allocs; /* sampled allocations */
    uint64_t frees;  /* of which a FREE was seen */
    int64_t net;     /* bytes still live */
    int64_t peak;    /* max of net over time */
    uint32_t ntrend;
    float trend[REPORT__TREND_MAX]; /* net MB at the end of each time slice of width
                                       profile->trend_bucket_ns, from trend_t0 */
} report__line_t;

typedef struct report__thread {
    int32_t tid;
    const char *name;
    uint64_t samples; /* CPU samples */
    uint64_t weight;  /* CPU weight_ns */
    uint64_t gil;     /* CPU samples holding the GIL */
    uint64_t running; /* CPU samples on a CPU */
    uint64_t mem_samples;
    uint32_t root; /* frame id of its --threads root frame (REPORT__NONE until one came):
                      one frame per thread, labelled with the latest name it had */
} report__thread_t;

typedef struct report__addr {
    uint64_t addr; /* 0 = empty slot */
    uint64_t bytes;
    uint32_t stack; /* the allocating stack (its line: stacks[stack].line) */
} report__addr_t;

typedef struct report__point {
    double t_s;
    double mb;
} report__point_t;

struct report_profile {
    report_meta_t meta;           /* strings owned (duplicated) */
    report_container_t container; /* meta.container points here; strings in strs */
    report_end_t end;
    int have_end;
    strtab_t *strs;            /* synthetic strings ("<unknown>") */
    char **include, **exclude; /* user's-code patterns (scope.c) */
    unsigned ninclude, nexclude;

    scry_frame_t *fold; /* REPORT__MAX_DEPTH frames: a sample with "??" runs folded */
    report__frame_t *frames;
    uint32_t nframes, frames_cap;
    uint32_t *frame_slots; /* id + 1; 0 = empty */
    uint32_t frame_slots_cap;

    report__stack_t *stacks;
    uint32_t nstacks, stacks_cap;
    uint32_t *stack_slots; /* id + 1; 0 = empty */
    uint32_t stack_slots_cap;
    uint32_t *ids; /* frame ids of every stack, leaf first */
    size_t nids, ids_cap;

    report__line_t *lines;
    uint32_t nlines, lines_cap;
    uint32_t *line_slots;
    uint32_t line_slots_cap;

    report__thread_t *threads;
    uint32_t nthreads, threads_cap;
    uint32_t *thread_slots; /* id + 1; 0 = empty */
    uint32_t thread_slots_cap;
    uint32_t last_thread; /* cache */

    report__addr_t *amap;
    uint32_t amap_cap, amap_count;

    /* totals */
    uint64_t nsamples;
    uint64_t metric_count[REPORT__NMETRIC];
    uint64_t metric_value[REPORT__NMETRIC];
    uint64_t truncated;
    uint64_t gil_count, gil_weight;
    uint64_t first_ns, last_ns;
    uint64_t unmatched_frees, untracked_allocs;

    /* program memory footprint */
    int64_t mem_net, mem_peak;
    int64_t peak_snap;        /* footprint when stacks' peak_inuse was last copied */
    uint64_t trend_t0;        /* time of the first memory event (trend slice 0 starts) */
    uint64_t trend_bucket_ns; /* width of one trend slice; 0 before the first event */
    uint64_t foot_bucket_ns;  /* width of one footprint point */
    uint32_t nfoot;
    report__point_t foot[REPORT__FOOT_MAX];
};

/* profile.c: ARR (of *CAP elements of ELEM bytes; NULL with *CAP 0) with room for NEED
 * elements: ARR itself, or reallocated to a capacity doubled from *CAP (FIRST when 0) and
 * *CAP updated. NULL without memory or past UINT32_MAX / 2 elements (ARR kept as it was). */
void *report__grow(void *arr, uint32_t *cap, size_t elem, uint32_t need, uint32_t first);

/* profile.c: rebuilds the open-addressing table *SLOTS (id + 1 per slot, 0 empty) for the
 * N entries 0..N-1 whose hashes HASH_OF(CTX, id) gives, at twice *CAP slots (FIRST when
 * 0) or more, a power of two at least 2 N. Returns 0, or SCRY_E_NOMEM (table unchanged). */
typedef uint64_t (*report__hash_of_fn)(const void *ctx, uint32_t id);
int report__rehash(const void *ctx, uint32_t **slots, uint32_t *cap, uint32_t n, uint32_t first,
                   report__hash_of_fn hash_of);

/* profile.c: adds COUNT CPU samples of stack S (its frames, interned; tid, class python)
 * weighing VALUE in all, without thread or time accounting (profiles rebuilt from a JSON
 * report, diff.c). Returns 0, SCRY_E_INVAL (NULL, COUNT 0), SCRY_E_TOOBIG (totals would
 * overflow) or SCRY_E_NOMEM. */
int report__profile_add_cpu(report_profile_t *p, const scry_sample_t *s, uint64_t count,
                            uint64_t value);
/* The name P holds for thread TID ("" when it has none, or no such thread). */
const char *report__thread_name(const report_profile_t *p, int32_t tid);

/* scope.c: whether FILE is the user's code under P's include/exclude patterns. */
int report__user_file(const report_profile_t *p, const char *file);
/* Copies the include/exclude arrays of META into P (strings duplicated). Returns 0 or
 * SCRY_E_NOMEM. */
int report__scope_copy(report_profile_t *p, const report_meta_t *meta);
void report__scope_free(report_profile_t *p);

/* memtrack.c: memory accounting of one ALLOC/FREE/COPY sample of stack STACK. */
int report__mem_add(report_profile_t *p, const scry_sample_t *s, uint32_t stack);
/* Records line L's net at time T_NS in its trend: one point per time slice (the value at
 * the slice's end); when the run outgrows REPORT__TREND_MAX slices, every line's slices
 * double in width together. */
void report__trend_push(report_profile_t *p, report__line_t *l, uint64_t t_ns);
/* A likely leak: the line still holds memory at the end, near its peak (>= 75%), and its
 * net at the end is above its net at the middle of the run (time): whatever share of its
 * allocations were freed (a line that makes many short-lived objects and keeps a few
 * still leaks). Ranked by the bytes still held. */
int report__likely_leak(const report_profile_t *p, const report__line_t *l);
/* Value of a stack in class C for METRIC (enum scry_metric or REPORT_METRIC_*). */
uint64_t report__stack_cls_value(const report__stack_t *s, int metric, int c);
/* Leak score of a line in [0,1] (rule of succession); *GROWING tells whether its net is
 * still near its peak. */
double report__leak_score(const report__line_t *l, int *growing);
/* Seconds since the run's time base. */
double report__rel_s(const report_profile_t *p, uint64_t t_ns);

/* --- write-time view (view.c) --- */

typedef struct report__func {
    const char *function;
    const char *file;
    int32_t first_line;
    uint8_t kind;
    uint64_t self_count[REPORT__NCLASS];
    uint64_t self_value[REPORT__NCLASS];
    uint64_t total_count, total_value;
    uint32_t stamp; /* last stack counted in total */
} report__func_t;

typedef struct report__view {
    const report_profile_t *p;
    int use_weight;       /* CPU shares computed from weight_ns (else sample counts) */
    uint64_t cpu_count;   /* CPU samples */
    uint64_t cpu_total;   /* CPU total in the chosen unit */
    uint64_t *line_cpu;   /* nlines x NCLASS, chosen unit */
    uint64_t *line_count; /* nlines: CPU samples */
    uint32_t *line_order; /* lines with CPU or memory, hottest first */
    uint32_t nline_order;
    report__func_t *funcs;
    uint32_t nfuncs;
    uint32_t *func_order; /* hottest (total) first */
    int has_memory;
    double duration_s;
    /* NULL, or per stack {count[NCLASS], value[NCLASS]} used instead of the stacks' own
     * CPU figures (live windows, report/live.c); set by report__view_build_over. */
    const uint64_t *stack_cpu;
    /* per frame id, filled by report__view_build_frames (NULL before): */
    uint64_t *frame_self;        /* nframes x NCLASS, chosen unit, frame is the attribution */
    uint64_t *frame_self_count;  /* nframes: CPU samples */
    uint64_t *frame_total;       /* nframes, chosen unit, counted once per stack */
    uint64_t *frame_total_count; /* nframes: CPU samples, once per stack */
} report__view_t;

int report__view_build(report__view_t *v, const report_profile_t *p);
/* Like report__view_build, with the stacks' CPU figures replaced by STACK_CPU (NULL: the
 * stacks' own; else p->nstacks entries of {count[NCLASS], value[NCLASS]}, read during the
 * call and by report__view_build_frames, so it must outlive the view). The unit (weight or
 * count) stays the profile's. Returns 0 or SCRY_E_NOMEM (V is then empty). */
int report__view_build_over(report__view_t *v, const report_profile_t *p,
                            const uint64_t *stack_cpu);
/* Fills V's per-frame self/total arrays (a Python frame is a line; a stack counts once per
 * frame it holds; non-Python frames only as attribution). Returns 0 or SCRY_E_NOMEM. */
int report__view_build_frames(report__view_t *v);
void report__view_free(report__view_t *v);
/* CPU samples (*COUNT) and figure in the view's unit (*VALUE) of stack SI, every class. */
void report__view_stack_cpu(const report__view_t *v, uint32_t si, uint64_t *count, uint64_t *value);
/* GIL share in percent (scry's figure, else derived with REPORT_F_GIL); < 0 unknown. */
double report__gil_pct(const report__view_t *v);
/* What report__gil_pct is a share of: "of the samples", or with --gil "of the time". */
const char *report__gil_unit(const report__view_t *v);
/* Picks the metric drawn by collapsed/flamegraph (OPT->metric or automatic). */
int report__pick_metric(const report_profile_t *p, const report_options_t *opt);
/* Value of a stack for METRIC: sample count for CPU, bytes for memory metrics. */
uint64_t report__stack_value(const report__stack_t *s, int metric);
/* Total of a line in the view's unit (all classes). */
uint64_t report__line_total(const report__view_t *v, uint32_t line);
/* Stack ids sorted root-first by frame text (then tid): deterministic order. Caller frees. */
uint32_t *report__sorted_stacks(const report_profile_t *p, int by_tid);

/* --- strings (escape.c) --- */

typedef struct report__sb {
    char *buf;
    size_t len, cap;
    int oom;
} report__sb_t;

void report__sb_free(report__sb_t *b);
/* profile.c: appends who was profiled to B: "pid N" for one process (meta.pid, else the one
 * process of end.processes), "N processes: pids A, B, ..." (at most 8 listed) for several,
 * nothing when none is known. */
void report__sb_target(report__sb_t *b, const report_profile_t *p);
void report__sb_putn(report__sb_t *b, const char *s, size_t n);
void report__sb_puts(report__sb_t *b, const char *s);
void report__sb_putc(report__sb_t *b, char c);
void report__sb_printf(report__sb_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Decodes one UTF-8 code point at *S (advancing it); invalid bytes decode as U+FFFD. */
uint32_t report__utf8_next(const char **s);
/* Appends code point CP as UTF-8. */
void report__sb_put_cp(report__sb_t *b, uint32_t cp);
/* Appends S as a JSON string with quotes (valid UTF-8, control chars escaped). */
void report__sb_json(report__sb_t *b, const char *s);
/* Appends S escaped for XML text/attributes (valid UTF-8, &<>"' escaped, characters not
 * allowed in XML 1.0 replaced by U+FFFD). At most MAXCP code points (0 = no limit). */
void report__sb_xml(report__sb_t *b, const char *s, size_t maxcp);
/* Appends a frame's text ("function (file:line)", "symbol (library)", or the function
 * text for THREAD/OTHER) with ';' and control characters replaced (collapsed-safe). */
void report__sb_frame(report__sb_t *b, const report__frame_t *f);
/* Like report__sb_frame with the file's base name only ("run (app.py:12)"): labels. */
void report__sb_frame_short(report__sb_t *b, const report__frame_t *f);
/* The part of PATH after its last '/' (PATH itself without one; "" for NULL). */
const char *report__base_name(const char *path);

/* The name of frame kind KIND in files ("python", "native", "thread", "other", "process");
 * "other" for a kind it does not know. */
const char *report__kind_name(uint8_t kind);

/* The frame kind named NAME (as report__kind_name writes it), or -1. */
int report__kind_of(const char *name);
/* Appends a JSON number (finite; non-finite as 0) with up to DIGITS decimals, trimmed. */
void report__sb_num(report__sb_t *b, double x, int digits);
/* Writes the buffer to OUT and empties it. Returns 0, SCRY_E_NOMEM (buffer overflowed
 * memory earlier) or SCRY_E_IO. */
int report__sb_flush(report__sb_t *b, FILE *out);

/* --- source lines (source.c) --- */

typedef struct report__src report__src_t;
/* A cache of source files read through O->read_source (none when it is NULL). Returns NULL
 * when out of memory. */
report__src_t *report__src_new(const report_options_t *o);
void report__src_free(report__src_t *c);
/* Returns line LINE (1-based) of FILE without its newline, length in *LEN; NULL when the
 * file or line is unavailable. Valid until report__src_free. */
const char *report__src_line(report__src_t *c, const char *file, int32_t line, size_t *len);
/* Why FILE's source is unavailable (after report__src_line asked for it): a negative scry
 * code, SCRY_E_NOSYS when no reader was given, 0 when the source is there or unknown. */
int report__src_error(report__src_t *c, const char *file);
/* The text and line tables one cache holds are bounded: once REPORT__SRC_BUDGET bytes are
 * held (one file may overshoot it, at most by the reader's own limit), later files are not
 * read (a target naming hundreds of code objects after links of one big file cannot make
 * scry read gigabytes). */
#define REPORT__SRC_BUDGET      (32u << 20)
#define REPORT__SRC_BUDGET_TEXT "32 MiB"
/* Why FILE's source is unavailable, for the reader of a report (static text): the budget,
 * or scry_strerror of report__src_error. NULL when it is there, unknown, or the error is
 * not negative. */
const char *report__src_why(report__src_t *c, const char *file);
/* How many files were not read because the budget was spent. */
uint32_t report__src_cut(const report__src_t *c);
/* Splits DATA (LEN bytes, NUL-terminated, modified: newlines become NULs) into at most
 * REPORT__SRC_MAX_LINES lines; *STARTS (malloc'd) receives each line's offset. Returns
 * the line count (>= 1), or 0 when out of memory. */
uint32_t report__src_split(char *data, size_t len, uint32_t **starts);
#define REPORT__SRC_MAX_LINES 1000000u

/* --- formats --- */
int report__write_collapsed(report_profile_t *p, FILE *out, const report_options_t *o);
int report__write_speedscope(report_profile_t *p, FILE *out, const report_options_t *o);
int report__write_json(report_profile_t *p, FILE *out, const report_options_t *o);
int report__write_text(report_profile_t *p, FILE *out, const report_options_t *o);
int report__write_flamegraph(report_profile_t *p, FILE *out, const report_options_t *o);
int report__write_html(report_profile_t *p, FILE *out, const report_options_t *o);
int report__write_pprof(report_profile_t *p, FILE *out, const report_options_t *o);
/* fmt_flamegraph.c: the differential flame graph of NEWP against BASEP (CPU metric): widths
 * are NEWP's, each frame red when its share of NEWP's total grew over its share of BASEP's,
 * blue when it shrank. The two profiles' strings must come from one string table (frames
 * are matched by pointer). Returns 0, SCRY_E_NOMEM or SCRY_E_IO. */
int report__write_flamegraph_diff(report_profile_t *newp, report_profile_t *basep, FILE *out,
                                  const report_options_t *o);

#endif
