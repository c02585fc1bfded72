/* fuzz_serve_ctl.c - the control-socket request parser of scry serve (serve/ctl.c): any
 * bytes a local user sends give 0 with a request whose fields are in range, or
 * SCRY_E_INVAL with a message; never a read past the input, never a crash. */
#include "ctl.h"
#include "fuzz.h"
#include "scry_err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size copy, so ASan sees any read past the end */
    char *buf = fuzz_copy(data, size);
    if (!buf)
        return 0;
    serve_ctl_req_t r;
    char msg[256];
    msg[0] = '\0';
    int rc = serve_ctl_parse(buf, size, &r, msg, sizeof msg);
    FUZZ_ASSERT(rc == 0 || rc == SCRY_E_INVAL || rc == SCRY_E_NOMEM);
    if (rc == 0) {
        FUZZ_ASSERT(r.cmd >= SERVE_CTL_LIST && r.cmd <= SERVE_CTL_RELOAD);
        FUZZ_ASSERT(r.pid >= 0 && r.pid <= 0x3fffffff);
        FUZZ_ASSERT(r.rate_hz == 0 || (r.rate_hz >= 0.1 && r.rate_hz <= 1000));
        FUZZ_ASSERT(r.duration_s == 0 || (r.duration_s >= 0.1 && r.duration_s <= 3600));
        FUZZ_ASSERT((r.cmd != SERVE_CTL_DUMP && r.cmd != SERVE_CTL_RECORD) || r.pid > 0);
        FUZZ_ASSERT(size <= SERVE_CTL_MAX_REQUEST);
    } else {
        FUZZ_ASSERT(msg[0] != '\0' && memchr(msg, '\0', sizeof msg));
    }
    free(buf);
    return 0;
}
