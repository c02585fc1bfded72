/* report.h - aggregation of samples and every output format.
 *
 * scry creates one profile per run, feeds it every sample (report_profile_add, the
 * hot path: O(stack depth), no allocation once the stack has been seen), records the
 * end-of-run summary (report_profile_set_end) and writes one or more formats
 * (report_write). The report side never touches the target: it only reads the samples
 * and, for the text and html reports, source files from disk. Not thread-safe.
 *
 * Formats are described precisely in docs/output-formats.md.
 */
#ifndef SCRY_REPORT_H
#define SCRY_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "sample.h"

typedef struct report_profile report_profile_t;

enum report_format {
    REPORT_FORMAT_COLLAPSED = 0,  /* "collapsed": flamegraph.pl/inferno folded stacks */
    REPORT_FORMAT_SPEEDSCOPE = 1, /* "speedscope": speedscope.app JSON file format */
    REPORT_FORMAT_JSON = 2,       /* "json": scry's line-level report */
    REPORT_FORMAT_TEXT = 3,       /* "text": the terminal report */
    REPORT_FORMAT_FLAMEGRAPH = 4, /* "flamegraph": self-contained interactive SVG */
    REPORT_FORMAT_HTML = 5,       /* "html": self-contained line-level HTML report */
    REPORT_FORMAT_PPROF = 6,      /* "pprof": gzipped pprof protocol buffer (profile.proto) */
};

/* report_meta_t.flags: how the run was configured. */
#define REPORT_F_THREADS 0x01u /* stacks carry a THREAD root frame (--threads) */
#define REPORT_F_IDLE    0x02u /* off-CPU (idle) samples are included */
#define REPORT_F_NATIVE  0x04u /* native frames are merged in (--native) */
#define REPORT_F_GIL     0x08u /* samples carry a meaningful GIL flag (--gil) */
#define REPORT_F_MEMORY  0x10u /* memory sampling was on (the shim is loaded) */
#define REPORT_F_ALL_LINES                                                                         \
    0x20u /* line views charge the leaf Python line (--all-lines), not                             \
             the innermost line of the user's code */

/* report_options_t.metric values beyond enum scry_metric (memory views of the stacks). */
#define REPORT_METRIC_INUSE 4 /* bytes of sampled blocks still held at the end (leaks view) */
#define REPORT_METRIC_PEAK  5 /* bytes held at the moment of the highest footprint (within 1%) */

/* A target's container (proc_read_container): strings copied by the report. */
typedef struct report_container {
    const char *id;      /* 64 hex digits */
    const char *runtime; /* "docker", "containerd", "cri-o", "podman" or "" */
    const char *cgroup;  /* the cgroup path the id was found in */
} report_container_t;

typedef struct report_meta {
    int32_t pid;    /* target pid */
    int32_t ns_pid; /* its own pid when it differs (a container's PID namespace),
                       else 0 */
    const report_container_t *container; /* NULL: not in a container; copied */
    const char *python_version;          /* "3.12.1"; NULL when unknown */
    const char *command;    /* target command line, arguments joined by spaces; NULL ok */
    double rate_hz;         /* sampling rate */
    int64_t start_unix_ns;  /* wall clock (CLOCK_REALTIME) at start; 0 when unknown */
    uint64_t start_mono_ns; /* CLOCK_MONOTONIC at start (time base of time_ns); 0: first
                               sample's time */
    unsigned flags;         /* REPORT_F_* */
    /* Which files are the user's code (line views charge a sample to its innermost frame in
     * the user's code; docs/usage.md "Whose line"). fnmatch(3) patterns on co_filename, '*'
     * matching '/' too: a file matching an EXCLUDE pattern is not the user's; else one
     * matching an INCLUDE pattern is; else the file's shape decides (report_is_user_file).
     * Arrays of NINCLUDE/NEXCLUDE strings, copied; NULL with a count of 0 is fine. */
    const char *const *include;
    unsigned ninclude;
    const char *const *exclude;
    unsigned nexclude;
} report_meta_t;

/* One process of a --subprocesses recording, as the summary and the JSON header list it. */
typedef struct report_process {
    int32_t pid;
    const char *command;        /* its command line; "" unknown */
    const char *python_version; /* "" when it never ran a Python scry could read */
    const char *note;           /* "" or why it was not sampled */
    uint64_t samples;
    uint64_t cpu_ns; /* the CPU time its samples stand for */
    int exited;      /* it exited while sampled */
} report_process_t;

/* End-of-run summary, given by scry once sampling stopped. */
typedef struct report_end {
    double duration_s;       /* wall time sampled; <= 0: derived from the samples' timestamps */
    uint64_t ticks;          /* sampling rounds attempted; 0 when unknown */
    uint64_t errors;         /* samples lost to errors: the sum of the three kinds below */
    uint64_t err_rounds;     /* ticks whose thread list could not be read at all */
    uint64_t err_torn;       /* thread stacks dropped because they changed while read, every
                                retry (never emitted, docs/architecture.md "Torn stacks") */
    uint64_t err_records;    /* memory ring records that failed validation */
    double rate_achieved_hz; /* ticks per second actually taken; <= 0 unknown */
    uint64_t dropped;        /* samples dropped (memory ring overflow, backpressure) */
    uint64_t late;           /* ticks that fired late */
    double late_mean_ms;     /* mean lateness of the late ticks */
    double late_max_ms;      /* worst lateness */
    int target_exited;       /* 1 when the target exited before the run ended */
    double gil_fraction;     /* [0,1] share of time some thread held the GIL; < 0 unknown
                                (then derived from the samples when REPORT_F_GIL is set) */
    const report_process_t *processes; /* --subprocesses: the program's processes, the root
                                          first (copied); NULL otherwise */
    size_t nprocesses;
} report_end_t;

typedef struct report_options {
    int color;         /* text: use ANSI colours (the caller decides, e.g. by isatty) */
    int metric;        /* collapsed/flamegraph: enum scry_metric or REPORT_METRIC_* to draw, or
                          -1 = automatic (CPU when CPU samples exist, else ALLOC) */
    int top_lines;     /* text: hottest lines shown; 0 = 20 */
    int top_functions; /* text: hottest functions shown; 0 = 10 */
    int width;         /* flamegraph: image width in px; 0 = 1200 */
    int width_text;    /* text: max columns of source text per line; 0 = 72 */
    const char *title; /* flamegraph title; NULL = automatic */
    /* text/html: reads the target's source file FILE (a name from the target: hostile) into
     * *DATA (malloc'd, NUL-terminated, the report frees it), *LEN bytes; returns 0 or a
     * negative scry code, shown per file. NULL: no source. The report never opens files
     * itself (common/srcread.h reads them as the target's user, inside its root). */
    int (*read_source)(void *ctx, const char *file, char **data, size_t *len);
    void *source_ctx;
} report_options_t;

/* Tells whether FILE (a co_filename) is the user's code by its shape alone: not empty, not
 * a pseudo-file ("<frozen ...>", "<string>", "<__array_function__ internals>"), not in a
 * site-packages or dist-packages directory, and not in the standard library (a directory
 * component "lib/pythonX..." or "lib64/pythonX...", as every CPython install lays it out:
 * /usr/lib/python3.11/, ~/.pyenv/versions/3.12.1/lib/python3.12/, python312.zip). Returns 1
 * or 0 (0 for NULL). */
int report_is_user_file(const char *file);

/* Checks PAT as a user's-code pattern (report_meta_t.include/exclude): not NULL or empty, at
 * most REPORT_GLOB_MAX bytes, every '[' closed by a ']', no '\\' at the end (fnmatch(3) would
 * take such a pattern as a literal or match nothing, silently). Returns 0, or SCRY_E_INVAL
 * with *WHY (when WHY is not NULL) a static phrase saying what is wrong. */
#define REPORT_GLOB_MAX 1024
int report_glob_check(const char *pat, const char **why);

/* Creates an empty profile for the run described by META (copied: the caller keeps
 * ownership of its strings). Returns NULL when out of memory or META is NULL. */
report_profile_t *report_profile_new(const report_meta_t *meta);

/* Frees the profile and everything it holds. NULL is a no-op. */
void report_profile_free(report_profile_t *p);

/* Adds one sample. The sample's strings must be interned (pointer-equal when equal) and
 * live as long as the profile; its frames array is only read during the call. Samples
 * should arrive in time order (memory footprints are tracked over time). Cost: O(nframes)
 * and no allocation when the stack was seen before. Returns 0, SCRY_E_INVAL (NULL
 * argument, frames NULL with nframes > 0, unknown metric) or SCRY_E_NOMEM (the sample is
 * then not counted). Stacks deeper than 4096 frames keep their 4096 leaf-most frames.
 * A CPython 3.12 entry frame ("<interpreter trampoline>" in "<shim>") as the innermost
 * Python frame is left out. */
int report_profile_add(report_profile_t *p, const scry_sample_t *s);

/* Records the end-of-run summary (copied). May be called again to replace it. Returns 0
 * or SCRY_E_INVAL when an argument is NULL. */
int report_profile_set_end(report_profile_t *p, const report_end_t *end);

/* Makes the profile's sampling rate (meta.rate_hz) RATE_HZ: a rate changed during the run
 * (scry serve's set-rate, a rule's rate). No-op for NULL. */
void report_profile_set_rate(report_profile_t *p, double rate_hz);

/* Number of samples added so far (every metric). 0 when P is NULL. */
uint64_t report_profile_samples(const report_profile_t *p);

/* Writes the profile to OUT in format FMT. OPT may be NULL (defaults). Deterministic for
 * the same samples. An empty profile gives a valid empty document. Returns 0,
 * SCRY_E_INVAL (bad argument or format), SCRY_E_NOMEM, or SCRY_E_IO when writing to OUT
 * failed (OUT is then left in an unspecified state). OUT is not closed. */
int report_write(report_profile_t *p, enum report_format fmt, FILE *out,
                 const report_options_t *opt);

/* Maps a --format name ("collapsed", "speedscope", "json", "text", "flamegraph", "html",
 * "pprof"; "svg", "folded" and "pb" are accepted aliases) to its enum value. Returns the
 * value (>= 0) or SCRY_E_INVAL for an unknown or NULL name. */
int report_format_parse(const char *name);

/* Returns the canonical name of a format ("collapsed", ...), or NULL when unknown. */
const char *report_format_name(enum report_format fmt);

/* Returns the file extension (no dot: "svg", "speedscope.json", "pb.gz") of generated
 * output names for FMT, or NULL when unknown. */
const char *report_format_extension(enum report_format fmt);

/* The format an output file name asks for by its ending, case-insensitively (".html",
 * ".htm", ".svg", ".txt" text, ".json", ".speedscope.json", ".folded", ".collapsed",
 * ".pb.gz", ".pb", ".pprof"; the longest ending wins). Returns the format (>= 0),
 * SCRY_E_NOTFOUND (no known ending) or SCRY_E_INVAL (NULL). */
int report_format_from_path(const char *path);

/* The one rule for an output's format, for every command that writes one: NAME (a
 * --format word, NULL when not given) decides, and an output name PATH whose ending names
 * another kind of file (report_format_from_path: "x.svg" with --format text) is refused;
 * without NAME, PATH's ending decides, and an ending that names a format outside ALLOWED
 * is refused; with neither (no PATH, "-", or an unknown ending) the format is DFLT. ALLOWED
 * is a mask of REPORT_FORMAT_BIT(f) of what CMD ("record", "diff", ...; used in messages)
 * writes. Returns the format (>= 0), or SCRY_E_INVAL with the reason in MSG. */
#define REPORT_FORMAT_BIT(f) (1u << (unsigned)(f))
#define REPORT_FORMAT_ALL    0x7fu
int report_format_choose(const char *cmd, const char *name, const char *path, unsigned allowed,
                         enum report_format dflt, char *msg, size_t msglen);

/* Writes every format's canonical name, comma separated ("flamegraph, html, ..."), into
 * BUF (always terminated, truncated to LEN). */
void report_format_names(char *buf, size_t len);

/* One thread of a 'scry dump' (a snapshot of every thread's stack, leaf first). */
/* One argument or local variable of a frame (scry dump --locals), as read by pystate/. */
typedef struct report_dump_local {
    const char *name;
    const char *type; /* the value's type name; "" when unreadable */
    const char *repr; /* a short repr, UTF-8 */
    int64_t len;      /* str/bytes/list/tuple/dict/set length, else -1 */
    uint8_t is_arg;   /* a parameter of the function */
    uint8_t kind;     /* 0 local, 1 cell (captured by an inner function), 2 free (closure) */
    uint8_t unbound;  /* no value (not assigned yet, or deleted) */
} report_dump_local_t;

/* The locals of one frame. */
typedef struct report_dump_locals {
    uint8_t read; /* 1: VARS holds them; 0: not read (a native frame, or the thread's stack
                     changed between the stack read and the locals read) */
    uint32_t n;
    const report_dump_local_t *vars;
} report_dump_locals_t;

typedef struct report_dump_thread {
    int32_t tid;
    int32_t ns_tid; /* the target's own id when it differs from tid (a container), else 0 */
    const char *name;
    uint8_t gil;      /* holds the GIL */
    uint8_t running;  /* on a CPU (else idle) */
    uint8_t gil_wait; /* off CPU waiting for the GIL */
    uint8_t truncated;
    uint8_t partial; /* the stack changed while it was read, every reread too: FRAMES is the
                        part read whole, its root frame "<changed while reading>" */
    uint8_t crashed; /* post-mortem: the thread that received the fatal signal */
    uint32_t nframes;
    const scry_frame_t *frames;         /* leaf first */
    const report_dump_locals_t *locals; /* --locals: one per frame; NULL when not asked */
} report_dump_thread_t;

/* What a core file tells of the end of its process (scry dump --core). */
typedef struct report_dump_core {
    const char *file;   /* the core file */
    int32_t signo;      /* the fatal signal; 0: none (a core taken of a running process) */
    const char *signal; /* its name ("SIGSEGV") */
    const char *reason; /* what si_code says ("address not mapped"), "" unknown */
    uint64_t addr;      /* the faulting address (SIGSEGV, SIGBUS, SIGILL, SIGFPE) */
    int has_addr;
    int32_t tid;       /* the thread that received it */
    const char *where; /* the native function at that thread's pc ("strlen (libc.so.6)"),
                          NULL unknown */
} report_dump_core_t;

typedef struct report_dump {
    int32_t pid;
    const char *process;                 /* "NAME (EXE)" */
    const char *version;                 /* Python version */
    const char *interp_path;             /* the interpreter's file */
    const char *how_found;               /* how the runtime was found */
    int32_t ns_pid;                      /* the target's own pid when it differs from pid, else 0 */
    const report_container_t *container; /* NULL: not in a container */
    const report_dump_core_t *core;      /* read from a core file; NULL: a live process */
    const report_dump_thread_t *threads;
    size_t nthreads;
} report_dump_t;

enum report_dump_format {
    REPORT_DUMP_TEXT = 0, /* the terminal text of 'scry dump' */
    REPORT_DUMP_JSON = 1, /* one JSON document (docs/output-formats.md, "scry dump --json") */
};

/* Writes snapshot D to OUT in FMT. NULL strings are written as "". Returns 0, SCRY_E_INVAL
 * (NULL D or OUT, unknown FMT) or SCRY_E_IO (writing failed). OUT is not closed. */
int report_dump_write(const report_dump_t *d, enum report_dump_format fmt, FILE *out);

/* Writes S (NULL as "") to OUT as a JSON string literal with quotes (valid UTF-8, control
 * characters escaped). Returns 0, SCRY_E_INVAL (OUT NULL), SCRY_E_NOMEM or SCRY_E_IO. */
int report_json_fputs(FILE *out, const char *s);

/* --- scry diff: two JSON reports (report_write REPORT_FORMAT_JSON) compared --- */

typedef struct report_diff report_diff_t;

#define REPORT_DIFF_MAX_BYTES (256u << 20) /* largest JSON report accepted */

/* Creates an empty comparison. Returns NULL when out of memory. */
report_diff_t *report_diff_new(void);

/* Frees D and everything it holds. NULL is a no-op. */
void report_diff_free(report_diff_t *d);

/* Parses TEXT (LEN bytes, not necessarily NUL-terminated; untrusted: json-c with a bounded
 * depth, every count, index and string checked) as side WHICH of D: 0 the base, 1 the new
 * recording. It needs the "lines", "stack_frames" and "stacks" of a version-1 report.
 * Returns 0; SCRY_E_INVAL (bad argument, side already loaded); SCRY_E_CORRUPT (not JSON, not
 * a scry report, a field of the wrong type, an index out of range); SCRY_E_UNSUPPORTED
 * (another report version); SCRY_E_TOOBIG (more than REPORT_DIFF_MAX_BYTES, or more than
 * 4 M frames, stacks or lines); SCRY_E_NOMEM. On failure MSG (MSGLEN bytes, may be NULL)
 * says what is wrong and the side stays empty. TEXT is not kept. */
int report_diff_load(report_diff_t *d, int which, const char *text, size_t len, char *msg,
                     size_t msglen);

/* Writes the comparison of D's two sides (both loaded) to OUT: REPORT_FORMAT_FLAMEGRAPH, a
 * differential flame graph (the new recording's stacks, red where a frame's share of its
 * profile's total grew, blue where it shrank), or REPORT_FORMAT_TEXT, the lines whose share
 * changed most (OPT->top_lines, default 20; OPT->color). OPT may be NULL. Returns 0,
 * SCRY_E_INVAL (NULL, a side not loaded, another format), SCRY_E_NOMEM or SCRY_E_IO. */
int report_diff_write(report_diff_t *d, enum report_format fmt, FILE *out,
                      const report_options_t *opt);

#endif
