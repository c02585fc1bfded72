/* buildid.h - is the file on disk the file that is mapped? The GNU build-id of an object
 * as it is mapped in a process, read from the target's memory (rmem). */
#ifndef SCRY_ELFSYM_BUILDID_H
#define SCRY_ELFSYM_BUILDID_H

#include "elfobj.h"
#include "rmem.h"

#include <stddef.h>
#include <stdint.h>

/* Reads the GNU build-id of the ELF object whose file offset 0 is mapped at BASE in MEM's
 * process (its ELF header, program headers and PT_NOTE segments within the first PT_LOAD,
 * every length bounded) into ID (at least 64 bytes) and *LEN. Returns 0, SCRY_E_NOTFOUND
 * (unreadable, or no build-id note) or SCRY_E_CORRUPT (not an ELF header there). */
int elfsym_mapped_build_id(rmem_t *mem, uint64_t base, uint8_t *id, size_t *len);

/* 1 when OBJ (a file opened from disk) has the build-id of the object mapped at BASE in
 * MEM's process; 0 when they differ or either has none (then the file cannot be trusted to
 * be the mapped one). */
int elfsym_map_matches(rmem_t *mem, uint64_t base, const elfsym_obj_t *obj);

#endif
