/* target_layout.h - the shim tests' way to the ring layout of a running interpreter, as the
 * daemon gets it (memprof_start): pystate's layout of the opened target, converted by the
 * consumer. Needed where no built-in table exists (3.13+ read _Py_DebugOffsets). */
#ifndef SHIM_TEST_TARGET_LAYOUT_H
#define SHIM_TEST_TARGET_LAYOUT_H

#include "scry_ring.h"

#include <sys/types.h>

/* Opens PID as a Python process and fills *OUT with its ring layout. Returns 0, or a
 * negative code (SCRY_E_NOTPY while PID is not Python yet, e.g. still a chroot wrapper). */
int shim_test_target_layout(pid_t pid, struct scry_ring_layout *out);

#endif
