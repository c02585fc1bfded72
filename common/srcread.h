/* srcread.h - reading a target's source files without reading anything the target could not.
 *
 * The file names come from the target (code objects' co_filename): hostile input. A
 * srcread_t pins the target's root directory, its current directory and its credentials
 * while the target lives; every file is then opened by a short-lived helper process that
 * runs with the target's file-system uid, gid and groups (so the kernel does the whole
 * permission check: every directory on the path, ACLs, owner/group/other bits), resolves the
 * name inside the target's root only (openat2 RESOLVE_IN_ROOT, no magic links), accepts only
 * regular files outside procfs/sysfs, never opens anything else (O_PATH first, fstat, then
 * reopen), and reads at most SRCREAD_MAX_BYTES. Every request has a time limit; a helper
 * that overruns it is killed. There is no fallback to scry's own view of the file system.
 * docs/security.md explains the choices.
 */
#ifndef SCRY_SRCREAD_H
#define SCRY_SRCREAD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SRCREAD_MAX_BYTES  (16u << 20) /* larger files are refused */
#define SRCREAD_MAX_GROUPS 256u        /* supplementary groups kept (more: the rest dropped) */
#define SRCREAD_MAX_PATH   4096u       /* longer names are refused */
#define SRCREAD_TIMEOUT_MS 2000        /* one file */
#define SRCREAD_BUDGET_MS  10000       /* all files of one reader together */

/* The credentials files are opened with. */
typedef struct srcread_creds {
    uint32_t uid, gid; /* file-system uid and gid */
    uint32_t ngroups;
    uint32_t groups[SRCREAD_MAX_GROUPS];
} srcread_creds_t;

typedef struct srcread srcread_t;

/* Parses the "Uid:", "Gid:" and "Groups:" lines of a /proc/PID/status text (LEN bytes, need
 * not be NUL-terminated) into OUT: the file-system ids (4th field), at most
 * SRCREAD_MAX_GROUPS groups. Returns 0, or SCRY_E_CORRUPT when a line is missing or
 * malformed (OUT then undefined). */
int srcread_parse_status(const char *text, size_t len, srcread_creds_t *out);

/* Pins live process PID's root and current directory (/proc/PID/root, /proc/PID/cwd) and
 * credentials (/proc/PID/status). Call while the target lives: files stay readable through
 * the pinned root after it exits. Returns NULL and *ERR (SCRY_E_NOPROC, SCRY_E_PERM,
 * SCRY_E_CORRUPT, SCRY_E_NOMEM). */
srcread_t *srcread_new_pid(pid_t pid, int *err);

/* A reader over directory ROOT (as the root) with credentials CREDS (copied), for tests and
 * fuzzing. Relative names are resolved beneath ROOT. Returns NULL and *ERR. */
srcread_t *srcread_new_dir(const char *root, const srcread_creds_t *creds, int *err);

/* Makes R open files with CREDS (copied) instead of the target's: `scry ctl record` reads
 * the source as the user who asked, not as the target. Call before the first
 * srcread_file. */
void srcread_set_creds(srcread_t *r, const srcread_creds_t *creds);

/* Ends the helper process (if any) and closes the pinned directories. NULL is a no-op. */
void srcread_free(srcread_t *r);

/* Reads FILE as the target sees it: an absolute name inside the target's root, a relative
 * one beneath the target's current directory (at pin time; ".." and absolute symlinks that
 * would leave it are refused). On success returns 0 and *DATA (malloc'd, NUL-terminated,
 * owned by the caller), *LEN bytes. Errors: SCRY_E_INVAL (empty, too long or NUL-containing
 * name), SCRY_E_NOTFOUND, SCRY_E_PERM (the target's user could not read it, or it leaves the
 * root), SCRY_E_NOTFILE (not a regular file, or on procfs/sysfs), SCRY_E_TOOBIG (larger
 * than SRCREAD_MAX_BYTES), SCRY_E_TIMEOUT (helper overran its time; also every later call
 * once the budget is spent), SCRY_E_NOSYS (no openat2), SCRY_E_IO, SCRY_E_NOMEM. */
int srcread_file(srcread_t *r, const char *file, char **data, size_t *len);

/* srcread_file with R as void *, the shape of report_options_t.read_source. */
int srcread_file_cb(void *r, const char *file, char **data, size_t *len);

#endif
