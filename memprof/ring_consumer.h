/* ring_consumer.h - scry's side of the shim ring (protocol: common/scry_ring.h).
 *
 * scry creates the ring file, fills its header (sampling means and the frame
 * offsets of the target's Python version), beats the heartbeat while recording, and
 * drains records into validated events. Every record is hostile input: anything out of
 * range is counted and skipped; a poll does bounded work and never waits for a producer.
 *
 * Not thread-safe: one thread owns a ringc_t.
 */
#ifndef SCRY_RING_CONSUMER_H
#define SCRY_RING_CONSUMER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "scry_ring.h"

typedef struct ringc ringc_t;

typedef struct ringc_params {
    const char *path;    /* file to create (O_EXCL), normally /dev/shm/scry-<pid>-<n> */
    uint64_t ring_bytes; /* file size wanted; 0 = SCRY_RING_DEFAULT_BYTES. The record count is
                          * the largest power of two that fits (at least SCRY_RING_MIN_RECORDS) */
    uint64_t alloc_mean; /* mean bytes between allocation samples; 0 = allocations off */
    uint64_t copy_mean;  /* mean bytes between copy samples; 0 = copies off */
    int32_t target_pid;  /* only this pid may claim the ring; 0 = the first shim to map it */
    int32_t uid;         /* >= 0: chown the file to uid/gid (a target of another user) */
    int32_t gid;
    int enabled;       /* initial value of header.enabled (1 = record as soon as mapped) */
    uint64_t stall_ns; /* a claimed record uncommitted this long is skipped; 0 = 1 s */
    struct scry_ring_layout layout; /* frame offsets for the target's version (-1 = none) */
} ringc_params_t;

typedef struct ringc_frame {
    uint64_t code;        /* code object address in the target (3.13+: f_executable) */
    int32_t instr_offset; /* byte offset of the current instruction; < 0: not started */
} ringc_frame_t;

/* One validated event. */
typedef struct ringc_event {
    uint8_t kind;     /* enum scry_ring_kind: ALLOC, FREE, COPY */
    uint8_t origin;   /* enum scry_ring_origin: PYTHON, NATIVE */
    uint8_t flags;    /* SCRY_RING_REC_* */
    uint32_t nframes; /* 0..SCRY_RING_MAX_FRAMES; 0 = location unknown ('<unknown>') */
    uint64_t size;    /* bytes requested / copied (FREE: of the original allocation) */
    uint64_t weight;  /* bytes this event stands for: add it to the ALLOC/FREE/COPY totals */
    uint64_t addr;    /* block address (ALLOC/FREE match by it), COPY destination */
    uint64_t time_ns; /* CLOCK_MONOTONIC */
    int32_t tid;
    ringc_frame_t frames[SCRY_RING_MAX_FRAMES]; /* leaf first */
} ringc_event_t;

typedef struct ringc_stats {
    /* consumer side */
    uint64_t consumed;       /* valid events returned */
    uint64_t bad_records;    /* committed records that failed validation (skipped) */
    uint64_t bad_seq;        /* records with an impossible commit word (repaired) */
    uint64_t stalled;        /* claimed records never committed in time (skipped) */
    uint64_t frames_trimmed; /* events whose stack was cut at an implausible frame */
    /* copied from the shim's counters in the header (untrusted, informational) */
    uint64_t sampled_events[SCRY_RING_NKINDS];
    uint64_t sampled_weight[SCRY_RING_NKINDS];
    uint64_t dropped_events[SCRY_RING_NKINDS];
    uint64_t dropped_weight[SCRY_RING_NKINDS];
    uint64_t untracked;
    uint64_t attach_count;
    int32_t owner_pid;   /* 0 until a shim claimed the ring */
    uint32_t shim_state; /* SCRY_RING_SHIM_* */
    uint64_t nrecords;
} ringc_stats_t;

struct pystate_layout;

/* Copies the frame offsets the shim needs from a pystate layout (pystate/layout.h) into
 * *OUT (fields it lacks are -1). Returns 0, or SCRY_E_INVAL when an argument is NULL. */
int ringc_layout_from_pystate(const struct pystate_layout *pl, struct scry_ring_layout *out);

/* Creates the ring file P->path (mode 0600, O_EXCL: fails if it exists), sizes and maps
 * it, fills the header (heartbeat = now) and publishes the magic last. With P->path NULL
 * the ring is a memfd instead (close-on-exec, sealed against shrinking and growing; no
 * name in any file system; P->uid/gid unused): ringc_fd gives its descriptor, which a
 * launched program inherits (launch mode). Returns NULL on
 * failure with *ERR (may be NULL) set to SCRY_E_INVAL (bad params), SCRY_E_IO or
 * SCRY_E_PERM (file), SCRY_E_NOMEM. The caller owns the result (ringc_free). */
ringc_t *ringc_create(const ringc_params_t *p, int *err);

/* Maps an existing ring file read-write to consume it (tests, post-mortem). The header
 * is validated; the file is not unlinked by ringc_free. Returns NULL with *ERR =
 * SCRY_E_NOTFOUND, SCRY_E_CORRUPT (not a valid ring), SCRY_E_IO or SCRY_E_NOMEM. */
ringc_t *ringc_open(const char *path, int *err);

/* The record count of a ring of BYTES bytes (0 = SCRY_RING_DEFAULT_BYTES): the largest
 * power of two that fits, at least SCRY_RING_MIN_RECORDS. */
uint64_t ringc_records_for(uint64_t bytes);

/* Takes over a ring the target's shim made (scry_shim_attach_new), from FD, our copy of the
 * shim's descriptor (FD is consumed, also on failure). FD must be a memfd sealed against
 * shrinking (F_SEAL_SHRINK | F_SEAL_SEAL: the target cannot pull pages from under our
 * mapping); the header is validated as by ringc_open. Nothing to unlink; ringc_free
 * disables it (the shim then lets go of it). Returns NULL with *ERR = SCRY_E_INVAL,
 * SCRY_E_CORRUPT (not a sealed memfd, or not a valid ring), SCRY_E_IO or SCRY_E_NOMEM. */
ringc_t *ringc_adopt(int fd, int *err);

/* Unmaps; for a ring it created or adopted, also clears 'enabled' (and unlinks the file
 * of a created one if ringc_unlink was not called). NULL is a no-op. */
void ringc_free(ringc_t *r);

/* Moves up to MAX valid events into OUT, *N set to their count (0 when the ring is
 * empty or the oldest record is still being written). Bounded: looks at no more than
 * MAX + nrecords records. Returns 0, SCRY_E_INVAL (bad arguments), or SCRY_E_CORRUPT
 * when the header's magic/version no longer match (the ring is unusable; *N = 0). */
int ringc_poll(ringc_t *r, ringc_event_t *out, size_t max, size_t *n);

/* Stamps the heartbeat with CLOCK_MONOTONIC now and publishes the consumer position.
 * Call at least every SCRY_RING_HEARTBEAT_PERIOD_NS while recording. Returns 0. */
int ringc_heartbeat(ringc_t *r);

/* Sets header.enabled: 0 makes every shim a pass-through at its next slow path (end of
 * recording). Returns 0. */
int ringc_set_enabled(ringc_t *r, int enabled);

/* Changes the sampling means (bytes; 0 = off). Threads pick them up at their next sample.
 * Returns 0. */
int ringc_set_means(ringc_t *r, uint64_t alloc_mean, uint64_t copy_mean);

/* Publishes the frame layout after creation, for launch mode where the target's Python
 * version is known only once it runs. Only while the ring is disabled (the shim reads the
 * layout after it sees 'enabled' set, with acquire order); enable it afterwards. Returns 0,
 * SCRY_E_INVAL (NULL argument) or SCRY_E_AGAIN (the ring is enabled). */
int ringc_set_layout(ringc_t *r, const struct scry_ring_layout *layout);

/* The descriptor of a memfd ring made by ringc_create (owned by R: closed by ringc_free),
 * or -1 for any other ring. */
int ringc_fd(const ringc_t *r);

/* Sets the header's target_pid (only PID may claim the ring) of a ring R created, while it
 * is disabled and unclaimed (launch mode: the ring exists before the child's pid is known).
 * Returns 0, SCRY_E_INVAL, or SCRY_E_AGAIN (enabled or claimed already). */
int ringc_set_target_pid(ringc_t *r, int32_t pid);

/* Removes the file name (mappings stay valid). Returns 0 or SCRY_E_IO. */
int ringc_unlink(ringc_t *r);

/* Fills *S. Returns 0 or SCRY_E_INVAL. */
int ringc_stats(const ringc_t *r, ringc_stats_t *s);

/* The file's path (owned by R). */
const char *ringc_path(const ringc_t *r);

/* The mapping itself (tests and diagnostics: writing to it simulates a hostile shim). */
void *ringc_mapping(ringc_t *r, size_t *len);

#endif
