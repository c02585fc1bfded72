#include "remoteexec.h"

#include "pystate.h"
#include "scry_err.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REXEC_PLEASE_STOP_BIT (1u << 5) /* _PY_EVAL_PLEASE_STOP_BIT, pycore_ceval.h */

struct rexec {
    rmem_t *m;
    raddr_t tstate; /* the main thread's state */
    pystate_dbg_remote_t o;
};

int rexec_open(pid_t pid, raddr_t runtime_addr, rexec_t **out, char *why, size_t whylen)
{
    rexec_t *r = calloc(1, sizeof *r);
    int err = SCRY_E_NOMEM;
    if (!r || !(r->m = rmem_open_pid(pid)))
        goto fail;
    err = pystate_debug_offsets_read_remote(r->m, runtime_addr, 0, &r->o);
    if (err == SCRY_E_UNSUPPORTED) {
        snprintf(why, whylen, "its Python has no remote debugging support (PEP 768 is 3.14+)");
        goto fail;
    }
    if (err) {
        snprintf(why, whylen, "cannot read its _Py_DebugOffsets: %s", scry_strerror(err));
        goto fail;
    }
    uint64_t interp = 0;
    int32_t enabled = 0;
    err = rmem_read_u64(r->m, runtime_addr + (uint64_t)r->o.runtime_interpreters_head, &interp);
    if (!err && interp)
        err = rmem_read(r->m, interp + (uint64_t)r->o.interp_remote_enabled, &enabled,
                        sizeof enabled);
    if (!err && interp)
        err = rmem_read_u64(r->m, interp + (uint64_t)r->o.interp_threads_main, &r->tstate);
    if (err) {
        snprintf(why, whylen, "cannot read its interpreter state: %s", scry_strerror(err));
        goto fail;
    }
    err = SCRY_E_UNSUPPORTED;
    if (!interp || !r->tstate) {
        snprintf(why, whylen, "it has no interpreter or main thread yet");
        goto fail;
    }
    if (enabled != 1) {
        snprintf(why, whylen,
                 "remote debugging is disabled in it (PYTHON_DISABLE_REMOTE_DEBUG, "
                 "-X disable_remote_debug, or a build --without-remote-debug)");
        goto fail;
    }
    *out = r;
    return 0;
fail:
    rexec_free(r);
    return err;
}

static raddr_t support(const rexec_t *r, int64_t field)
{
    return r->tstate + (uint64_t)r->o.tstate_support + (uint64_t)field;
}

int rexec_request(rexec_t *r, const char *script)
{
    size_t n = strlen(script);
    if (n >= (size_t)r->o.script_path_size)
        return SCRY_E_TRUNC;
    int32_t one = 1;
    uint64_t breaker = 0;
    int err = rmem_write(r->m, support(r, r->o.support_script_path), script, n + 1);
    if (!err)
        err = rmem_write(r->m, support(r, r->o.support_pending_call), &one, sizeof one);
    /* as sys.remote_exec: read, or the bit, write back (the target may set another bit
     * in between; a lost one is set again by whoever needs it at its next check) */
    raddr_t eb = r->tstate + (uint64_t)r->o.tstate_eval_breaker;
    if (!err)
        err = rmem_read_u64(r->m, eb, &breaker);
    breaker |= REXEC_PLEASE_STOP_BIT;
    if (!err)
        err = rmem_write(r->m, eb, &breaker, sizeof breaker);
    return err;
}

int rexec_pending(rexec_t *r)
{
    int32_t v = 0;
    int err = rmem_read(r->m, support(r, r->o.support_pending_call), &v, sizeof v);
    return err ? err : v != 0;
}

int rexec_cancel(rexec_t *r)
{
    /* The interpreter clears the pending flag, then copies the path: with the path emptied
     * first, a request taken from now on runs nothing, and one taken before shows as a
     * cleared flag (the path may or may not have been copied in time: taken, to be safe). */
    char nul = 0;
    int32_t zero = 0;
    int err = rmem_write(r->m, support(r, r->o.support_script_path), &nul, 1);
    int pending = err ? err : rexec_pending(r);
    if (pending != 1)
        return pending < 0 ? pending : 1;
    err = rmem_write(r->m, support(r, r->o.support_pending_call), &zero, sizeof zero);
    return err;
}

void rexec_free(rexec_t *r)
{
    if (!r)
        return;
    rmem_free(r->m);
    free(r);
}
