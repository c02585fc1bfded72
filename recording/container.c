/* container.c - the container a target runs in, as the report shows it (recording.h). */
#include "recording.h"

int recording_container(pid_t pid, proc_container_t *ct, report_container_t *out)
{
    if (proc_read_container(pid, ct) != 0 || !ct->id[0])
        return 0;
    out->id = ct->id;
    out->runtime = ct->runtime;
    out->cgroup = ct->id_cgroup;
    return 1;
}
