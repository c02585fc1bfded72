/* elfsym.h - everything about ELF objects and process mappings (one include for all).
 *
 *   maps.h        /proc/PID/maps snapshots
 *   elfobj.h      ELF objects: symbols, sections, segments, build-id, debug files (cached)
 *   interp.h      open paths, load bias, finding libpython / the executable in a process
 *   symbolizer.h  native address -> symbol + library, per process
 *   pyversion.h   CPython version from a file name or its read-only data
 *   disasm.h      addresses referenced by a function's code; syscall check
 */
#ifndef ELFSYM_H
#define ELFSYM_H

#include "disasm.h"
#include "elfobj.h"
#include "interp.h"
#include "maps.h"
#include "pyversion.h"
#include "symbolizer.h"

#endif
