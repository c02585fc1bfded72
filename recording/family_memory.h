/* family_memory.h - record --memory --subprocesses: a ring per Python process of the
 * family. The launched root keeps its preloaded shim's ring; every other member (and every
 * member in attach mode) gets the shim injected and a ring of its own as it is found (a
 * fork child's shim lets go of its parent's ring and takes one for itself). Each ring is
 * drained after its process's ticks, stopped at that interpreter's teardown, and summed
 * for the summary.
 */
#ifndef SCRY_FAMILY_MEMORY_H
#define SCRY_FAMILY_MEMORY_H

#include "family.h"
#include "memory.h"

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

typedef struct fammem fammem_t;

/* Memory recording for a family: SAMPLE_BYTES the shim's interval (0: its default),
 * INJECT as --inject ("ptrace", "remote-exec", "auto"; NULL: ptrace), QUIET: no note for a
 * process that gets no ring; notes go to LOG (NULL: stderr). ROOT_MEM, when not NULL, is
 * the launched root's ring (already started), taken over. Returns NULL when out of memory
 * (ROOT_MEM is then freed). */
fammem_t *fammem_new(uint64_t sample_bytes, const char *inject, int quiet, FILE *log,
                     memprof_t *root_mem);

/* MEMPROF_INJECT_* for an --inject word ("ptrace", "remote-exec", anything else: auto),
 * DFLT for NULL. */
int fammem_inject_how(const char *inject, int dflt);

/* The hooks to give family_new (FM is their context). */
void fammem_hooks(fammem_t *fm, family_hooks_t *out);

/* Totals over every process's ring: events, events the shims dropped, records rejected. */
void fammem_counts(const fammem_t *fm, uint64_t *events, uint64_t *dropped, uint64_t *bad);

/* One line for the summary: how many processes were recorded, and how many could not be. */
void fammem_describe(const fammem_t *fm, char *buf, size_t len);

/* Frees FM and every ring still held (disabled: their shims pass through). NULL is a no-op. */
void fammem_free(fammem_t *fm);

#endif
