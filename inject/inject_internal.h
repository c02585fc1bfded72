/* inject_internal.h - shared between the files of the inject module (not public). */
#ifndef INJECT_INTERNAL_H
#define INJECT_INTERNAL_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "inject.h"
#include "maps.h"
#include "ptrace_util.h"

/* Where a session is. */
enum inject__state {
    INJECT__IDLE = 0, /* no thread borrowed yet */
    INJECT__PARKED,   /* thread stopped, ours, not running foreign code */
    INJECT__RELEASED, /* thread given back (restored and detached, or left to self-restore) */
};

struct inject_session {
    pid_t pid;
    pid_t tid;
    int state;
    int memfd; /* /proc/PID/mem, read-write (writes go through FOLL_FORCE) */
    int timeout_ms;
    elfsym_maps_t *maps;
    inject_report_t *rep;
    inject_report_t own_rep;
    ptr_sigq_t sigq;
    uint64_t sigmask;   /* the borrowed thread's own blocked-signal mask */
    int sigmask_saved;  /* sigmask is valid */
    int sigmask_taken;  /* we blocked every signal in the thread (restore before release) */
    uint64_t t_stopped; /* when the thread was stopped */
    /* The code cave: [cave, cave + cave_size) in an executable mapping, all zeros when found. */
    raddr_t cave;
    size_t cave_size;
    size_t cave_used; /* bytes written (erased on close) */
    raddr_t data;     /* the stub's data block */
    uint64_t fpu_size;
    int use_xsave;
    raddr_t fn_dlopen;  /* resolved before the thread is stopped; 0 when absent */
    raddr_t fn_dlerror; /* 0 when absent */
    uint64_t dlopen_mode;
    ptr_regs_t orig;                /* registers as stopped */
    struct user_regs_struct resume; /* where to resume: restart applied, orig_rax = -1 */
};

/* 1 for the C library family (libc, libpthread, libdl), 2 for the dynamic loader (ld.so, musl
 * loader), 0 otherwise; by file name. */
int inject__runtime_kind(const char *path);

/* True when PATH (a mapping's path as scry reads it) is the object named OBJECT (see
 * inject_find_symbol; a path as the target sees it). ROOT (may be NULL or "") is the
 * target's root directory as scry sees it when not scry's own: a chroot'ed target's files
 * show in its maps with ROOT in front. */
int inject__object_matches(const char *path, const char *object, const char *root);

/* inject_find_symbol on a maps snapshot; with ALT (may be NULL) as inject_find_symbol_as. */
int inject__lookup(pid_t pid, const elfsym_maps_t *maps, const char *object, const char *symbol,
                   const char *alt, raddr_t *addr);

/* Finds the largest all-zero unused tail of an executable segment (at least MIN bytes) in
 * a private file mapping, preferring objects that are never unloaded (the executable, libc,
 * ld.so, libpython). Reads target memory through MEMFD. Returns 0 with *ADDR and *SIZE (ADDR
 * 16-aligned), or SCRY_E_NOTFOUND. */
int inject__find_cave(pid_t pid, const elfsym_maps_t *maps, int memfd, size_t min, raddr_t *addr,
                      size_t *size);

/* 1 when ADDR lies inside a sized global (exported) function of the object mapped there (or
 * when that cannot be told), 0 when it is in a local or unnamed stretch of code: in the C
 * library, the implementations that IFUNCs resolve to (__memset_avx2_unaligned_erms, ...). */
int inject__exported_function_at(pid_t pid, const elfsym_maps_t *maps, raddr_t addr);

/* Reads/writes LEN bytes of target memory through /proc/PID/mem. Returns 0 or SCRY_E_FAULT /
 * SCRY_E_GONE / SCRY_E_IO. */
int inject__mem_read(int memfd, raddr_t addr, void *buf, size_t len);
int inject__mem_write(int memfd, raddr_t addr, const void *buf, size_t len);

/* Chooses, stops and accepts a thread (inject_thread.c). On success S->tid, S->orig,
 * S->resume and S->state = PARKED are set. */
int inject__borrow_thread(inject_session_t *s, const inject_opts_t *opts);

/* True once inject_abort_all was called. */
int inject__aborting(void);

/* Formats into the session's report error. */
void inject__set_error(inject_session_t *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
