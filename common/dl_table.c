/* dl_table.c - see dl_table.h. */
#include "dl_table.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int scry_dl_load(const char *const *sonames, size_t nsonames, const scry_dl_fn_t *fns, size_t nfns,
                 char *msg, size_t msglen)
{
    void *lib = NULL;
    for (size_t i = 0; i < nsonames && !lib; i++)
        lib = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        if (msg && msglen)
            snprintf(msg, msglen, "cannot load %s: %s", nsonames ? sonames[0] : "(nothing)",
                     dlerror());
        return -1;
    }
    for (size_t i = 0; i < nfns; i++) {
        void *f = dlsym(lib, fns[i].name);
        if (!f) {
            if (msg && msglen)
                snprintf(msg, msglen, "%s has no %s", sonames[0], fns[i].name);
            return -1;
        }
        memcpy(fns[i].slot, &f, sizeof f);
    }
    return 0;
}
