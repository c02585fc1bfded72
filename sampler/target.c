/* target.c - opening a target for sampling, with the messages every command prints. */
#include "sampler.h"

#include "procinfo.h"
#include "scry_err.h"

#include <stdio.h>

int sampler_open_target(pid_t pid, strtab_t *strings, const pystate_open_opts_t *opts,
                        pystate_target_t **out)
{
    char msg[1024] = "";
    if (proc_exists(pid) != 0) {
        fprintf(stderr, "scry: no such process: %d\n", (int)pid);
        return SCRY_E_NOPROC;
    }
    int err = pystate_target_open_opts(pid, strings, opts, out, msg, sizeof msg);
    if (err == 0)
        return 0;
    switch (err) {
    case SCRY_E_PERM: {
        char hint[512];
        proc_permission_hint(pid, hint, sizeof hint);
        fprintf(stderr, "scry: permission denied: %s%s%s\n", hint, msg[0] ? "; " : "", msg);
        break;
    }
    case SCRY_E_NOPROC:
    case SCRY_E_GONE: {
        char what[256];
        proc_why_unreadable(pid, what, sizeof what);
        fprintf(stderr, "scry: %s\n", what);
        break;
    }
    default:
        fprintf(stderr, "scry: %s\n", msg[0] ? msg : scry_strerror(err));
        break;
    }
    return err;
}
