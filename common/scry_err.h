/* scry_err.h - the project-wide error list.
 *
 * Every function that can fail returns 0 or one of these negative codes.
 * The list is one X-macro so that names and messages never drift apart.
 */
#ifndef SCRY_ERR_H
#define SCRY_ERR_H

#include <stddef.h>

#define SCRY_ERRNO_MAP(X)                                                                          \
    X(NOMEM, -1, "out of memory")                                                                  \
    X(INVAL, -2, "invalid argument")                                                               \
    X(NOPROC, -3, "no such process")                                                               \
    X(PERM, -4, "permission denied")                                                               \
    X(GONE, -5, "the target process exited")                                                       \
    X(FAULT, -6, "remote address not readable")                                                    \
    X(NOTPY, -7, "not a Python process")                                                           \
    X(UNSUPPORTED, -8, "unsupported Python version")                                               \
    X(CORRUPT, -9, "inconsistent data read from the target")                                       \
    X(NOTFOUND, -10, "not found")                                                                  \
    X(IO, -11, "input/output error")                                                               \
    X(TRUNC, -12, "result truncated")                                                              \
    X(AGAIN, -13, "try again")                                                                     \
    X(ELF, -14, "malformed ELF object")                                                            \
    X(NOSYS, -15, "not supported on this system")                                                  \
    X(TIMEOUT, -16, "timed out")                                                                   \
    X(NOTFILE, -17, "not a regular file")                                                          \
    X(TOOBIG, -18, "file too large")

enum scry_err {
#define SCRY_ERR_ENUM(name, code, msg) SCRY_E_##name = (code),
    SCRY_ERRNO_MAP(SCRY_ERR_ENUM)
#undef SCRY_ERR_ENUM
};

/* Returns a static, human-readable message for a scry error code (0 gives "success").
 * Unknown codes give "unknown error". Never returns NULL. */
const char *scry_strerror(int err);

/* Returns the symbolic name ("SCRY_E_FAULT") for a code; "SCRY_E_UNKNOWN" when unknown. */
const char *scry_err_name(int err);

/* Maps an errno value from a failed system call on a target to a scry code:
 * ESRCH -> GONE, EPERM/EACCES -> PERM, EFAULT/EIO -> FAULT, ENOMEM -> NOMEM, else IO. */
int scry_err_from_errno(int errnum);

/* Writes a message for the caller (printf FMT) into BUF of LEN bytes, cut to fit; does
 * nothing when BUF is NULL or LEN 0 (the callers' "char *msg, size_t msglen" arguments). */
void scry_errmsg(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
