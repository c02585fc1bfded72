/* fuzz_proc_task.c - /proc/PID/task/TID/stat (state, identity), syscall, schedstat, status
 * (NSpid, Uid), any numeric stat field and /proc/PID/cgroup parsers. Input:
 * one selector byte, then the file content. */
#include "fuzz.h"
#include "scry_err.h"
#include "scry_proc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t which;
    fuzz_take(&data, &size, &which, 1);
    char *text = fuzz_copy(data, size);
    if (!text)
        return 0;
    int rc;
    switch (which % 8) {
    case 0: {
        char state = 0;
        rc = proc_parse_stat_state(text, size, &state);
        break;
    }
    case 1: {
        proc_syscall_t sc;
        rc = proc_parse_syscall(text, size, &sc);
        break;
    }
    case 3: {
        pid_t ids[PROC_NSPID_MAX];
        size_t n = 0;
        rc = proc_parse_status_nspid(text, size, ids, PROC_NSPID_MAX, &n);
        FUZZ_ASSERT(rc != 0 || (n >= 1 && n <= PROC_NSPID_MAX));
        if (rc == SCRY_E_NOTFOUND)
            rc = 0;
        break;
    }
    case 4: {
        proc_container_t ct;
        rc = proc_parse_cgroup(text, size, &ct);
        FUZZ_ASSERT(strlen(ct.cgroup) < sizeof ct.cgroup && strlen(ct.id) <= 64);
        break;
    }
    case 5: {
        uint64_t start = 0;
        char comm[16];
        rc = proc_parse_stat_identity(text, size, &start, comm, sizeof comm);
        FUZZ_ASSERT(rc != 0 || strlen(comm) < sizeof comm);
        break;
    }
    case 7: {
        uint64_t v = 0;
        rc = proc_parse_stat_u64(text, size, 3 + (int)((which / 8) % 50), &v);
        break;
    }
    case 6: {
        uid_t uid;
        rc = proc_parse_status_uid(text, size, &uid);
        if (rc == SCRY_E_NOTFOUND)
            rc = 0;
        break;
    }
    default: {
        uint64_t run, wait, slices;
        rc = proc_parse_schedstat(text, size, &run, &wait, &slices);
        break;
    }
    }
    FUZZ_ASSERT(rc == 0 || rc == SCRY_E_CORRUPT);
    free(text);
    return 0;
}
