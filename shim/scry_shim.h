/* scry_shim.h - the entry points libscry-shim.so exports besides the interposed
 * allocator and copy functions.
 *
 * Launch mode: LD_PRELOAD=libscry-shim.so SCRY_RING=/dev/shm/<name> python ...
 * (the constructor calls scry_shim_attach(getenv("SCRY_RING"))).
 * Attach mode: an injector dlopen()s libscry-shim.so in a live process and calls
 * scry_shim_attach() (resolve it with dlsym). Native code already loaded is made to call the
 * shim's malloc/memcpy hooks by rewriting its relocation slots (GOT entries), and objects
 * loaded later are patched when dlopen returns (shim_got.c, docs/memory.md).
 */
#ifndef SCRY_SHIM_H
#define SCRY_SHIM_H

/* Maps the ring file RING_PATH (created by scry, see scry_ring.h), checks its header,
 * claims it for this process (header.owner_pid: CAS from 0, or already this pid; and
 * target_pid must be 0 or this pid), makes it the active ring and, when the interpreter
 * is initialised, schedules the PyMem hook installation with Py_AddPendingCall (run by
 * the main thread at its next eval-breaker check, GIL held). When not preloaded, it also
 * redirects the GOT slots of malloc & co., memcpy & co., dlopen and dlmopen in every loaded
 * object but libc, ld.so, the vDSO and itself (a few ms; mprotect for RELRO pages; objects
 * that cannot be patched are skipped and counted in header.got_failed).
 *
 * Callable from any thread, at any time after the library's constructor ran; idempotent
 * (attaching again to the active path returns 0 and only retries the Python hook
 * scheduling); a different path replaces the active ring (the old one is unmapped once no
 * thread is inside it). Never blocks: a concurrent attach returns SCRY_E_AGAIN.
 * Never calls into the interpreter except Py_IsInitialized/Py_AddPendingCall and the
 * lookups of Python's symbols (dlsym: needs the loader lock, like the dlopen before it).
 * Threads start sampling within 64 KiB of their next allocations (SHIM_IDLE_STRIDE).
 *
 * Returns 0, or SCRY_E_INVAL (bad path), SCRY_E_NOTFOUND (cannot open), SCRY_E_CORRUPT
 * (not a valid ring), SCRY_E_IO (mmap failed), SCRY_E_PERM (ring claimed by another
 * process, or a fork child), SCRY_E_AGAIN (attach in progress, or the earlier rings are
 * all still in use by a thread). */
int scry_shim_attach(const char *ring_path);

/* Attach mode without any file: makes the ring itself, in memory only (memfd_create,
 * sealed against shrinking and growing), fills its header from SPEC
 * "NRECORDS:ALLOC_MEAN:COPY_MEAN" (decimal; NRECORDS a power of two) with target_pid and
 * owner_pid = this process, heartbeat now, disabled, no layout yet; makes it the active
 * ring and patches the GOTs as scry_shim_attach does. Returns the ring's file descriptor
 * (>= 0) for scry to take a copy of (pidfd_getfd); the shim keeps it until the ring
 * is unmapped (end of the session, or 10 s without heartbeat: docs/memory.md). Scry
 * must publish the layout before it enables the ring. In a fork child (whose shim
 * stopped writing at the fork, never to write into its parent's ring) the parent's rings
 * are let go first and the child gets its own (--subprocesses). Errors (negative):
 * SCRY_E_INVAL (SPEC), SCRY_E_IO (memfd/mmap), SCRY_E_AGAIN (attach in progress, or
 * earlier rings still in use). */
int scry_shim_attach_new(const char *spec);

/* Ends the session as if scry had disabled the ring: the ring is retired, and the
 * shim lets go of it and of its hooks (docs/memory.md, "Ring lifetime"). Returns 0. */
int scry_shim_detach(void);

#endif
