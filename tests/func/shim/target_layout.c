/* target_layout.c - see target_layout.h. */
#include "target_layout.h"

#include "pystate.h"
#include "ring_consumer.h"
#include "scry_err.h"
#include "strtab.h"

int shim_test_target_layout(pid_t pid, struct scry_ring_layout *out)
{
    strtab_t *strings = strtab_new();
    if (!strings)
        return SCRY_E_NOMEM;
    pystate_target_t *t = NULL;
    char msg[256];
    int err = pystate_target_open(pid, strings, &t, msg, sizeof msg);
    if (!err)
        err = ringc_layout_from_pystate(pystate_target_layout(t), out);
    pystate_target_free(t);
    strtab_free(strings);
    return err;
}
