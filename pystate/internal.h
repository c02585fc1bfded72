/* internal.h - state shared by the pystate/ files; not part of the public API. */
#ifndef SCRY_PYSTATE_INTERNAL_H
#define SCRY_PYSTATE_INTERNAL_H

#include "prefetch.h"
#include "pystate.h"
#include "scry_proc.h"

#include <string.h>
#include "threadnames.h"

#define PYSTATE_STR_MAX           1024        /* bytes of UTF-8 kept of a name or file name */
#define PYSTATE_TABLE_MAX         (1u << 20)  /* bytes of a line table or bytecode kept */
#define PYSTATE_CODE_CACHE        8192        /* code objects cached (power of two) */
#define PYSTATE_CODE_CACHE_BYTES  (32u << 20) /* line tables and bytecode held by the cache */
#define PYSTATE_CODE_MEMO         1024  /* (code, offset) -> line, opclass memo (power of 2) */
#define PYSTATE_CODE_KEY_MAX      64    /* bytes of a code object compared to validate */
#define PYSTATE_BYTECODE_READ_MAX 65536 /* bytes of 3.11+ bytecode read to find the leaf op */

typedef struct pystate_code {
    raddr_t addr;                      /* 0 = empty slot */
    uint8_t key[PYSTATE_CODE_KEY_MAX]; /* the window compared on each use */
    const char *function;              /* interned (qualified name where the version has one) */
    const char *file;                  /* interned */
    int firstlineno;
    uint8_t *linetable; /* owned */
    uint32_t linetable_len;
    uint8_t *bytecode; /* <= 3.10: co_code (owned); NULL on 3.11+ */
    uint32_t bytecode_len;
    uint32_t ncodeunits;     /* 3.11+: Py_SIZE(code) */
    uint32_t gen;            /* when it was loaded (pystate_codecache_t.gen): a memo entry of an
                                older load is another object's */
    uint64_t checked_sample; /* the sample (stats.samples) in which its key last matched the
                                object: within that sample it is not read again */
} pystate_code_t;

/* What an offset of a code object was found to be: its line, its instruction's opclass and
 * whether its family may push a frame (a busy leaf cycles through a few dozen offsets). */
typedef struct pystate_code_memo {
    raddr_t code;    /* 0: empty */
    uint32_t gen;    /* the code's pystate_code_t.gen */
    uint32_t offset; /* byte offset */
    int32_t line;    /* INT32_MIN: not looked up */
    int16_t opclass; /* -1: not looked up */
    int8_t pushes;   /* pystate_opcode_pushes_frame, with opclass */
} pystate_code_memo_t;

typedef struct pystate_codecache {
    pystate_code_t *slots;
    pystate_code_memo_t *memo; /* PYSTATE_CODE_MEMO entries, by (code, offset) */
    uint32_t gen;              /* loads so far */
    /* one bit per slot ever loaded: fini frees those only (a dump touches a few dozen of
     * the 8192 slots; visiting all of them was ~7% of a dump) */
    uint64_t filled[PYSTATE_CODE_CACHE / 64];
    /* bytes of line tables and bytecode the slots hold: a target whose code objects claim
     * megabyte tables (or a fuzzer's image) empties the cache past PYSTATE_CODE_CACHE_BYTES
     * rather than hold 8192 x 2 MiB */
    size_t bytes;
    uint64_t flushes;
} pystate_codecache_t;

struct pystate_target {
    pid_t pid;
    int discovery;                   /* enum pystate_discovery */
    int function_lines;              /* pystate_open_opts_t.function_lines */
    pystate_thread_filter_fn filter; /* pystate_set_thread_filter */
    void *filter_ctx;
    uint32_t torn_retries; /* pystate_set_torn_retries; 0: PYSTATE_TORN_RETRIES */
    rmem_t *mem;
    strtab_t *strings;
    pystate_layout_t layout;
    pystate_info_t info;
    raddr_t runtime;             /* _PyRuntime (3.7+) */
    raddr_t interp_head_addr;    /* 3.6: &interp_head */
    raddr_t tstate_current_addr; /* 3.6: &_PyThreadState_Current */
    raddr_t finalizing_addr;     /* the word that is non-NULL once Py_Finalize runs; 0 unknown */
    int64_t code_key_start;      /* window of a code object compared to validate a cache hit */
    int64_t code_key_len;
    raddr_t code_type;          /* address of the code type, once checked by name */
    int64_t pthread_tid_offset; /* offset of the tid in glibc's struct pthread; -1 unknown */
    pystate_codecache_t codes;
    pystate_prefetch_t *prefetch;
    uint8_t bytecode_buf[PYSTATE_BYTECODE_READ_MAX];
    pystate_stats_t stats;
    const char *s_unknown; /* interned "<unknown>" */
    const char *s_empty;
    proc_tidmap_t *tidmap; /* the process's own thread ids to host ids (containers) */
    pystate_names_t names; /* Python thread names (threadnames.h; sample.c refreshes) */
};

/* Bounded little-endian field reads from a local copy of a remote object: a field that
 * does not lie wholly inside the LEN bytes at BUF (or whose offset is -1, "absent") reads
 * as 0. */
static inline uint64_t pystate__u64_at(const uint8_t *buf, size_t len, int64_t off)
{
    uint64_t v = 0;
    if (off >= 0 && (uint64_t)off + 8 <= len)
        memcpy(&v, buf + off, 8);
    return v;
}

static inline uint32_t pystate__u32_at(const uint8_t *buf, size_t len, int64_t off)
{
    uint32_t v = 0;
    if (off >= 0 && (uint64_t)off + 4 <= len)
        memcpy(&v, buf + off, 4);
    return v;
}

static inline uint8_t pystate__u8_at(const uint8_t *buf, size_t len, int64_t off)
{
    return off >= 0 && (uint64_t)off < len ? buf[off] : 0;
}

/* Reads a str object at ADDR as UTF-8 into BUF (at most MAX-1 bytes, NUL-terminated).
 * Returns the length or a negative code; SCRY_E_CORRUPT when it is not a sane str. */
int pystate__read_str(pystate_target_t *t, raddr_t addr, char *buf, size_t max);

/* Reads a bytes object's payload (at most MAX bytes) into a new buffer *OUT (caller frees).
 * Returns 0 or a negative code. */
int pystate__read_bytes(pystate_target_t *t, raddr_t addr, size_t max, uint8_t **out,
                        uint32_t *len);

/* Whether P may be an object's address: 8-aligned, above the first page, in user space. */
static inline int pystate__ptr_ok(raddr_t p)
{
    return p >= 4096 && p % 8 == 0 && p < (1ull << 56);
}

#define PYSTATE_DICT_HDR_MAX   256          /* bytes of a dict keys header */
#define PYSTATE_DICT_INDEX_MAX (1ull << 26) /* index slots of a dict keys object */

/* A dict's entry table (pystate__dict_keys_open). */
typedef struct pystate_dict {
    raddr_t entries; /* entry 0 */
    raddr_t values;  /* values[0] of a split table, else 0 */
    uint32_t n;      /* dk_nentries: entries used, deleted ones (NULL key or value) too */
    uint32_t esize, ekey, evalue; /* an entry's size, its key's and value's offsets */
} pystate_dict_t;

/* Locates the entry table of the PyDictKeysObject at KEYS into *D; VALUES is values[0] of a
 * split table (else 0). At most PYSTATE_NAMES_DICT_MAX entries. Returns 0, SCRY_E_CORRUPT
 * (not a keys object as the layout has it), SCRY_E_UNSUPPORTED (a layout without dicts) or
 * a read error. */
int pystate__dict_keys_open(pystate_target_t *t, raddr_t keys, raddr_t values, pystate_dict_t *d);

/* Sets up the cache. Returns 0 or SCRY_E_NOMEM. */
int pystate__codecache_init(pystate_codecache_t *c);
void pystate__codecache_fini(pystate_codecache_t *c);

/* Returns the cached code object at ADDR when KEY (code_key_len bytes read from the
 * code object at code_key_start) matches the cached copy; otherwise reads it anew.
 * KEY may be NULL to skip validation. Returns NULL when it cannot be read. */
const pystate_code_t *pystate__code_get(pystate_target_t *t, raddr_t addr, const uint8_t *key);

/* The cached code object at ADDR when its key was already checked against the target in
 * the current sample (a live frame holds its code object: a second thread with frames of
 * the same function need not read it again; a one-shot dump of 100 threads read it 100
 * times), else NULL. */
const pystate_code_t *pystate__code_checked(pystate_target_t *t, raddr_t addr);

/* Line of byte offset OFFSET in CODE (0 when unknown). */
int pystate__code_line(const pystate_target_t *t, pystate_code_t *code, uint32_t offset);

/* The opclass of the instruction at byte offset OFFSET of CODE when it was remembered
 * (pystate__code_remember_opclass) and not forgotten since (the memo is small), else -1;
 * then *PUSHES is what was remembered with it. 3.11+ rewrite instructions in place only
 * within their family (specialisation, instrumentation), whose opclass and pushes are the
 * same. */
int pystate__code_opclass(const pystate_target_t *t, const pystate_code_t *code, uint32_t offset,
                          int *pushes);

/* Remembers OPCLASS and PUSHES (pystate_opcode_pushes_frame) for the instruction at byte
 * offset OFFSET of CODE. */
void pystate__code_remember_opclass(const pystate_target_t *t, const pystate_code_t *code,
                                    uint32_t offset, int opclass, int pushes);

/* Sets T's code-object key window (the fields compared to validate a code cache hit) from
 * T->layout. */
void pystate__choose_code_key(pystate_target_t *t);

/* Finds the OS thread id of a pthread id (3.6/3.7 have no native_thread_id). 0 if unknown. */
int32_t pystate__tid_from_pthread(pystate_target_t *t, uint64_t pthread_id);
/* The offset in 'buf' (glibc's struct pthread) of the first 4-aligned field holding one of
 * 'tids', skipping the upper halves of pointers; -1 when none does. */
int64_t pystate__tid_offset_learn(const uint8_t *buf, size_t len, const pid_t *tids, size_t ntids);

#endif
