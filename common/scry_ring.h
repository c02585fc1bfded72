/* scry_ring.h - the shared-memory protocol (the ring's wire format) between libscry-shim.so
 * (producer, in the target: shim/) and scry (consumer: memprof/ring_consumer.c).
 * The only definition of the format: both sides include this header, nothing else.
 *
 * One file in /dev/shm, created and sized by scry, mmap'd MAP_SHARED by both:
 *
 *   [ struct scry_ring_header, padded to SCRY_RING_HEADER_SIZE ]
 *   [ nrecords x struct scry_ring_record ]            (nrecords a power of two, >= 4)
 *
 * Records form a bounded multi-producer / single-consumer queue (Vyukov style): record i
 * of lap L is free for position p = L*nrecords + i when its 'seq' word equals p; a
 * producer claims p by a CAS of header.head from p to p+1, fills the record, and commits
 * it with a CAS of seq from p to p+1 (release). The consumer reads the record whose seq is
 * tail+1, copies it, and frees it for the next lap by storing seq = tail + nrecords. A
 * producer that finds seq < p (ring full) or loses the CAS too often drops the event and
 * counts it: it never blocks. A claimed record that stays uncommitted too long (producer
 * killed or stopped) is skipped by the consumer with a CAS of seq from p to p+nrecords; the
 * late producer's commit CAS then fails and it counts a drop.
 *
 * Everything here is plain data. Both sides treat the other side's writes as hostile:
 * the shim validates the header before it writes, the consumer validates every record.
 * All multi-byte fields are native-endian (x86_64). Shared words are accessed with
 * __atomic builtins.
 */
#ifndef SCRY_RING_H
#define SCRY_RING_H

#include <stddef.h>
#include <stdint.h>

#define SCRY_RING_MAGIC       0x474e495259524353ULL /* "SCRYRING" little-endian */
#define SCRY_RING_VERSION     1u
#define SCRY_RING_HEADER_SIZE 4096u /* records start at this file offset */
#define SCRY_RING_MAX_FRAMES  32u
#define SCRY_RING_MIN_RECORDS 4u
#define SCRY_RING_MAX_RECORDS (1u << 22)

/* The shim stops writing when the heartbeat is older than this (scry gone). Scry
 * must call ringc_heartbeat() at least every SCRY_RING_HEARTBEAT_PERIOD_NS. */
#define SCRY_RING_HEARTBEAT_STALE_NS  1000000000ull
#define SCRY_RING_HEARTBEAT_PERIOD_NS 250000000ull
/* The shim lets go of a ring (unmaps it, and restores what it redirected when no other ring
 * is active) once scry disabled it after having enabled it (end of a session), or
 * when the heartbeat is older than this (scry dead; a stopped scry that comes back
 * within this time finds its ring still there). See docs/memory.md, "Lifetime". */
#define SCRY_RING_RETIRE_NS 10000000000ull
/* Launch mode: how long a preloaded Python process waits before main() for scry to enable
 * the ring (scry publishes the layout as soon as the program is mapped). */
#define SCRY_RING_LAUNCH_WAIT_NS 3000000000ull

/* Defaults (bytes); see docs/memory.md for how they were chosen. */
#define SCRY_RING_DEFAULT_ALLOC_MEAN (128u * 1024u)
#define SCRY_RING_DEFAULT_COPY_MEAN  (1024u * 1024u)
#define SCRY_RING_DEFAULT_BYTES      (8u * 1024u * 1024u)

/* Record kinds. 0 is never valid. */
enum scry_ring_kind {
    SCRY_RING_ALLOC = 1,
    SCRY_RING_FREE = 2, /* a block that had been sampled as an ALLOC was freed */
    SCRY_RING_COPY = 3, /* memcpy/memmove (and their _chk forms) */
};
#define SCRY_RING_NKINDS 4 /* counter arrays are indexed by kind; [0] unused */

/* Where an allocation came from. */
enum scry_ring_origin {
    SCRY_RING_ORIGIN_PYTHON = 0, /* PyMem_Malloc/PyObject_Malloc (domains MEM and OBJ) */
    SCRY_RING_ORIGIN_NATIVE = 1, /* malloc & co. called by anything else; all copies */
};

/* Record flags. */
#define SCRY_RING_REC_TRUNCATED 0x01u /* more than SCRY_RING_MAX_FRAMES frames: cut */
#define SCRY_RING_REC_UNTRACKED 0x02u /* ALLOC not kept in the live set: no FREE will come */
#define SCRY_RING_REC_NOGIL                                                                        \
    0x04u /* thread did not hold the GIL (frames are its own, still valid) */
#define SCRY_RING_REC_REALLOC 0x08u /* ALLOC/FREE half of a realloc */

/* header.shim_state bits, set by the shim (informational, for scry's summary). */
#define SCRY_RING_SHIM_ATTACHED         0x001u /* a shim mapped the ring and owns it */
#define SCRY_RING_SHIM_PRELOADED        0x002u /* malloc/memcpy are interposed (launch mode) */
#define SCRY_RING_SHIM_PY_SCHEDULED     0x004u /* Py_AddPendingCall done */
#define SCRY_RING_SHIM_PY_HOOKS         0x008u /* PyMem MEM+OBJ hooks installed */
#define SCRY_RING_SHIM_STACKS_OK        0x010u /* frame layout validated in-process */
#define SCRY_RING_SHIM_STACKS_BAD       0x020u /* layout failed validation: no frames sent */
#define SCRY_RING_SHIM_VERSION_MISMATCH 0x040u /* header py version != running interpreter */
#define SCRY_RING_SHIM_NOPYTHON         0x080u /* no Python API found in the process */
#define SCRY_RING_SHIM_PASSTHROUGH      0x100u /* shim saw disabled/stale ring and stopped */
#define SCRY_RING_SHIM_FINALIZING       0x400u /* interpreter tearing down: recording ended */
#define SCRY_RING_SHIM_GOT_PATCHED                                                                 \
    0x200u /* attach mode: relocation slots of loaded objects redirected to the shim */

/* Frame layout, copied by scry from pystate_layout_t (pystate/layout.h) for the
 * target's version. -1 means "no such field". The shim treats these as untrusted data:
 * it validates them once with process_vm_readv on itself before following pointers. */
struct scry_ring_layout {
    int32_t py_major; /* must equal the running interpreter's, or no frames are sent */
    int32_t py_minor;
    int32_t frame_style; /* enum pystate_frame_style: 0 objects, 1 3.11, 2 3.12, 3 3.13+ */
    int32_t reserved;
    int64_t tstate_frame;         /* <=3.10 frame; 3.11/3.12 cframe; 3.13 current_frame */
    int64_t cframe_current_frame; /* 3.11/3.12 */
    int64_t frame_back;           /* <=3.10 PyFrameObject */
    int64_t frame_code;
    int64_t frame_lasti;
    int64_t iframe_code; /* 3.11+ _PyInterpreterFrame: f_code / f_executable */
    int64_t iframe_previous;
    int64_t iframe_instr; /* prev_instr (3.11/3.12) or instr_ptr (3.13+) */
    int64_t iframe_owner;
    int64_t iframe_is_entry; /* 3.11 only */
    int64_t code_adaptive;   /* offsetof(PyCodeObject, co_code_adaptive), 3.11+ */
    int64_t reserved2[5];
};

struct scry_ring_header {
    /* -- written once by scry before the target can see the file ------------- */
    uint64_t magic;       /* SCRY_RING_MAGIC */
    uint32_t version;     /* SCRY_RING_VERSION */
    uint32_t header_size; /* SCRY_RING_HEADER_SIZE */
    uint32_t record_size; /* sizeof(struct scry_ring_record) */
    uint32_t reserved0;
    uint64_t nrecords;   /* power of two, SCRY_RING_MIN_RECORDS..SCRY_RING_MAX_RECORDS */
    uint64_t file_size;  /* header_size + nrecords * record_size */
    uint64_t alloc_mean; /* mean bytes between allocation samples; 0 = allocations off */
    uint64_t copy_mean;  /* mean bytes between copy samples; 0 = copies off */
    int32_t target_pid;  /* pid allowed to claim the ring; 0 = the first shim to map it */
    uint32_t reserved1;
    struct scry_ring_layout layout;

    /* -- scry's control, updated while recording ------------------------------------ */
    _Alignas(64) uint64_t heartbeat_ns; /* CLOCK_MONOTONIC of scry's last beat */
    uint32_t enabled;                   /* 1 while recording; 0 = shim goes pass-through */
    uint32_t reserved2;
    uint64_t consumer_tail; /* informational: next position the consumer will read */

    /* -- shim status and counters (shim writes, atomically) ------------------------- */
    _Alignas(64) int32_t owner_pid;            /* pid that claimed the ring (CAS from 0) */
    uint32_t shim_state;                       /* SCRY_RING_SHIM_* bits */
    uint64_t sampled_events[SCRY_RING_NKINDS]; /* events produced (pushed or dropped) */
    uint64_t sampled_weight[SCRY_RING_NKINDS]; /* sum of their weights (bytes) */
    uint64_t dropped_events[SCRY_RING_NKINDS]; /* ring full / lost the race / skipped */
    uint64_t dropped_weight[SCRY_RING_NKINDS];
    uint64_t untracked;    /* sampled allocs the live set could not hold */
    uint64_t live_entries; /* sampled blocks currently tracked */
    uint64_t attach_count; /* scry_shim_attach successes on this ring */
    /* attach mode (SCRY_RING_SHIM_GOT_PATCHED): process-wide totals, informational */
    uint32_t got_objects; /* loaded objects with at least one slot redirected */
    uint32_t got_slots;   /* relocation slots (GOT entries) redirected to the shim */
    uint32_t got_failed;  /* objects skipped: a slot could not be made writable */
    uint32_t reserved3;

    /* -- producer reservation counter, alone on its cache line ---------------------- */
    _Alignas(64) uint64_t head;
};

/* One event. 448 bytes: 7 cache lines. */
struct scry_ring_record {
    uint64_t seq;     /* commit word, see above */
    uint64_t pos;     /* the position this record was written for (== consumer tail) */
    uint64_t addr;    /* block address (ALLOC/FREE), destination (COPY) */
    uint64_t size;    /* bytes requested / copied */
    uint64_t weight;  /* bytes this sample stands for (unbiased estimate, see memory.md) */
    uint64_t time_ns; /* CLOCK_MONOTONIC */
    int32_t tid;      /* gettid() */
    uint8_t kind;     /* enum scry_ring_kind */
    uint8_t origin;   /* enum scry_ring_origin */
    uint8_t nframes;  /* 0..SCRY_RING_MAX_FRAMES; 0 = location unknown */
    uint8_t flags;    /* SCRY_RING_REC_* */
    uint64_t reserved;
    /* Python stack of the calling thread, leaf first. code[i] is the code object address
     * (for 3.13+ f_executable, which may be a non-code object: scry checks);
     * instr[i] the byte offset of the current instruction in the code's bytecode
     * (<=3.9 f_lasti; 3.10 2*f_lasti; 3.11+ instruction pointer - co_code_adaptive),
     * negative when the frame has not started yet. */
    uint64_t code[SCRY_RING_MAX_FRAMES];
    int32_t instr[SCRY_RING_MAX_FRAMES];
};

_Static_assert(sizeof(struct scry_ring_header) <= SCRY_RING_HEADER_SIZE, "header too big");
_Static_assert(sizeof(struct scry_ring_record) == 448, "record layout changed");
_Static_assert(sizeof(struct scry_ring_layout) == 144, "layout changed");
_Static_assert(offsetof(struct scry_ring_header, head) == 512, "header layout changed");

/* Fills a new ring of NRECORDS records (a power of two, SCRY_RING_MIN_RECORDS..
 * SCRY_RING_MAX_RECORDS) in the zeroed LEN bytes at MEM: header (geometry, means,
 * TARGET_PID, LAYOUT, heartbeat NOW_NS, ENABLED), every record's seq word, and the magic
 * last (release). Used by scry (ringc_create) and by the shim when it makes the ring
 * itself (scry_shim_attach_new); inline because the shim links nothing of scry's.
 * Returns 0, or -1 when LEN is too small or NRECORDS bad. */
static inline int scry_ring_init(void *mem, uint64_t len, uint64_t nrecords, uint64_t alloc_mean,
                                 uint64_t copy_mean, int32_t target_pid,
                                 const struct scry_ring_layout *layout, uint64_t now_ns,
                                 int enabled)
{
    uint64_t need = SCRY_RING_HEADER_SIZE + nrecords * sizeof(struct scry_ring_record);
    if (!mem || nrecords < SCRY_RING_MIN_RECORDS || nrecords > SCRY_RING_MAX_RECORDS ||
        (nrecords & (nrecords - 1)) != 0 || need > len)
        return -1;
    struct scry_ring_header *h = mem;
    struct scry_ring_record *recs =
        (struct scry_ring_record *)((char *)mem + SCRY_RING_HEADER_SIZE);
    h->version = SCRY_RING_VERSION;
    h->header_size = SCRY_RING_HEADER_SIZE;
    h->record_size = sizeof(struct scry_ring_record);
    h->nrecords = nrecords;
    h->file_size = need;
    h->alloc_mean = alloc_mean;
    h->copy_mean = copy_mean;
    h->target_pid = target_pid;
    h->layout = *layout;
    h->heartbeat_ns = now_ns;
    h->enabled = enabled ? 1 : 0;
    for (uint64_t i = 0; i < nrecords; i++)
        recs[i].seq = i;
    __atomic_store_n(&h->magic, SCRY_RING_MAGIC, __ATOMIC_RELEASE);
    return 0;
}

#endif
