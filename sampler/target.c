/* target.c - opening a target for sampling, with the messages every command prints. */
#include "sampler.h"

#include "procinfo.h"
#include "scry_err.h"

#include <stdio.h>

int sampler_open_target_msg(pid_t pid, strtab_t *strings, const pystate_open_opts_t *opts,
                            pystate_target_t **out, char *why, size_t whylen)
{
    char msg[1024] = "";
    if (proc_exists(pid) != 0) {
        snprintf(why, whylen, "no such process: %d", (int)pid);
        return SCRY_E_NOPROC;
    }
    int err = pystate_target_open_opts(pid, strings, opts, out, msg, sizeof msg);
    if (err == 0)
        return 0;
    switch (err) {
    case SCRY_E_PERM: {
        char hint[512];
        proc_permission_hint(pid, hint, sizeof hint);
        snprintf(why, whylen, "permission denied: %s%s%s", hint, msg[0] ? "; " : "", msg);
        break;
    }
    case SCRY_E_NOPROC:
    case SCRY_E_GONE:
        proc_why_unreadable(pid, why, whylen);
        break;
    default:
        snprintf(why, whylen, "%s", msg[0] ? msg : scry_strerror(err));
        break;
    }
    return err;
}

int sampler_open_target(pid_t pid, strtab_t *strings, const pystate_open_opts_t *opts,
                        pystate_target_t **out)
{
    char why[2048];
    int err = sampler_open_target_msg(pid, strings, opts, out, why, sizeof why);
    if (err)
        fprintf(stderr, "scry: %s\n", why);
    return err;
}
