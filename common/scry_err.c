#include "scry_err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

const char *scry_strerror(int err)
{
    if (err == 0)
        return "success";
    switch (err) {
#define SCRY_ERR_MSG(name, code, msg)                                                              \
    case code:                                                                                     \
        return msg;
        SCRY_ERRNO_MAP(SCRY_ERR_MSG)
#undef SCRY_ERR_MSG
    }
    return "unknown error";
}

const char *scry_err_name(int err)
{
    switch (err) {
#define SCRY_ERR_NAME(name, code, msg)                                                             \
    case code:                                                                                     \
        return "SCRY_E_" #name;
        SCRY_ERRNO_MAP(SCRY_ERR_NAME)
#undef SCRY_ERR_NAME
    }
    return "SCRY_E_UNKNOWN";
}

int scry_err_from_errno(int errnum)
{
    switch (errnum) {
    case ESRCH:
        return SCRY_E_GONE;
    case EPERM:
    case EACCES:
        return SCRY_E_PERM;
    case EFAULT:
    case EIO:
        return SCRY_E_FAULT;
    case ENOMEM:
        return SCRY_E_NOMEM;
    case EINVAL:
        return SCRY_E_INVAL;
    default:
        return SCRY_E_IO;
    }
}

void scry_errmsg(char *buf, size_t len, const char *fmt, ...)
{
    if (!buf || !len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}
