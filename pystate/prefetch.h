/* prefetch.h - one batched read per sample, planned from the previous sample.
 *
 * Every read the walker makes during a sample goes through pystate__pf_read. Each read is
 * recorded into a plan; at the start of the next sample the whole plan is read with one
 * process_vm_readv (a few when it has more than IOV_MAX regions), and reads that fall
 * inside a planned region are served from that copy. In a steady state (the same
 * threads, mostly the same frames and code objects) a sample costs one system call; what
 * changed costs one call per new object. The regions are copied in an order that matters
 * to torn-stack detection (pystate__pf_begin), except loose ones (PF_LOOSE). Everything is
 * still validated by the walker exactly as if it had been read directly.
 */
#ifndef SCRY_PYSTATE_PREFETCH_H
#define SCRY_PYSTATE_PREFETCH_H

#include "rmem.h"

#include <stddef.h>
#include <stdint.h>

#define PF_MAX_REGIONS 8192         /* regions planned per sample */
#define PF_MAX_BYTES   (8u << 20)   /* bytes planned per sample */
#define PF_RANGE_MAX   (256u << 10) /* largest single region */

typedef struct pystate_prefetch pystate_prefetch_t;

/* Creates an empty prefetcher. NULL when out of memory. */
pystate_prefetch_t *pystate__pf_new(void);
void pystate__pf_free(pystate_prefetch_t *pf);

/* Starts a sample: reads every region planned by the previous sample in one batch and
 * starts an empty plan. Returns 0, or SCRY_E_GONE/SCRY_E_PERM from the read (faulting
 * regions are just left out). */
int pystate__pf_begin(pystate_prefetch_t *pf, rmem_t *m);

/* RANGE values: 0, an exact region; 1, a range others may fall inside; PF_RANGE_TWICE, a
 * range read twice in a row (pystate__pf_read_twice). Either of the first two may add
 * PF_LOOSE: a region whose moment in the batch does not matter (a field that does not
 * change, or whose staleness against the stacks is harmless: a code object's key or
 * bytecode, a list head, the GIL's holder).
 * Loose regions lying within PF_MERGE_GAP bytes of each other are read as one piece, ahead
 * of the ordered ones: the kernel pins and looks up pages per piece, and that, not the
 * copy, is most of what a small read costs (a cold one more than the bytes). */
#define PF_RANGE_TWICE 2
#define PF_LOOSE       4
#define PF_MERGE_GAP   1024        /* < a page: a gap touches only its neighbours' pages */
#define PF_RUN_MAX     (16u << 10) /* the largest merged piece */

/* Reads LEN bytes at ADDR: from the batch when a region covers it, else from the target.
 * Records the region for the next sample (RANGE: a region others may fall inside, e.g. a
 * data-stack chunk; otherwise keyed by its exact address). Returns 0 or an rmem code. A
 * region read twice serves its second copy. */
int pystate__pf_read(pystate_prefetch_t *pf, rmem_t *m, raddr_t addr, void *buf, size_t len,
                     int range);

/* Two copies of LEN bytes at ADDR taken one right after the other (FIRST, then SECOND), in
 * the same batch (or one process_vm_readv of two regions when no planned region read twice
 * covers them, or in direct mode): what changed between them changed while they were
 * read. Plans the range, read twice, for the next sample. Returns 0 or an rmem code. */
int pystate__pf_read_twice(pystate_prefetch_t *pf, rmem_t *m, raddr_t addr, void *first,
                           void *second, size_t len);

/* While ON is non-zero, pystate__pf_read ignores the batch and reads the target directly
 * (still planning what it reads): a retry after a torn read must see the target as it is
 * now, not the batch it was torn against. pystate__pf_begin turns it off. */
void pystate__pf_direct(pystate_prefetch_t *pf, int on);

/* Records a region for the next sample without reading it now. */
void pystate__pf_plan(pystate_prefetch_t *pf, raddr_t addr, size_t len, int range);

/* Hits and misses since creation. */
void pystate__pf_counts(const pystate_prefetch_t *pf, uint64_t *hits, uint64_t *misses);

#endif
