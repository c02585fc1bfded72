/* cgroup.c - container identity from /proc/PID/cgroup: the cgroup path and the 64-hex id
 * docker, containerd, CRI-O and podman name their cgroups after (cgroup v1 and v2). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "scry_err.h"
#include "scry_proc.h"

#define CGROUP_FILE_MAX 8192 /* a dozen v1 hierarchies of a few hundred bytes each */

int proc_container_id(const char *cg, size_t len, char out[PROC_CONTAINER_ID_LEN + 1])
{
    out[0] = '\0';
    if (!cg)
        return 0;
    size_t run = 0;
    const char *found = NULL;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && isxdigit((unsigned char)cg[i])) {
            run++;
            continue;
        }
        if (run == PROC_CONTAINER_ID_LEN)
            found = cg + i - run;
        run = 0;
    }
    if (!found)
        return 0;
    for (int i = 0; i < PROC_CONTAINER_ID_LEN; i++)
        out[i] = (char)tolower((unsigned char)found[i]);
    out[PROC_CONTAINER_ID_LEN] = '\0';
    return 1;
}

/* The runtime whose naming pattern the cgroup path CG (LEN bytes) follows, or "". */
static const char *runtime_of(const char *cg, size_t len)
{
    static const struct {
        const char *pattern, *runtime;
    } rules[] = {
        {"cri-containerd-", "containerd"},
        {"/containerd/", "containerd"},
        {"crio-", "cri-o"},
        {"libpod-", "podman"},
        {"/libpod_parent/", "podman"},
        {"docker-", "docker"},
        {"/docker/", "docker"},
        {"/actions_job/", "docker"},
    };
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
        size_t pl = strlen(rules[r].pattern);
        for (size_t i = 0; i + pl <= len; i++)
            if (memcmp(cg + i, rules[r].pattern, pl) == 0)
                return rules[r].runtime;
    }
    return "";
}

static void copy_path(char *dst, size_t cap, const char *src, size_t len)
{
    if (len >= cap)
        len = cap - 1;
    memcpy(dst, src, len);
    dst[len] = '\0';
}

int proc_parse_cgroup(const char *text, size_t len, proc_container_t *out)
{
    if (!text || !out)
        return SCRY_E_INVAL;
    memset(out, 0, sizeof *out);
    int have_path = 0, have_v2 = 0;
    const char *end = text + len;
    for (const char *line = text; line < end;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        const char *eol = nl ? nl : end;
        size_t ll = (size_t)(eol - line);
        /* "ID:CONTROLLERS:PATH"; the v2 line is "0::PATH" */
        const char *c1 = memchr(line, ':', ll);
        const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(eol - c1 - 1)) : NULL;
        if (c2) {
            const char *path = c2 + 1;
            size_t plen = (size_t)(eol - path);
            int v2 = ll >= 3 && memcmp(line, "0::", 3) == 0;
            if ((v2 && !have_v2) || !have_path) {
                copy_path(out->cgroup, sizeof out->cgroup, path, plen);
                have_path = 1;
                have_v2 |= v2;
            }
            /* The id: the v2 line's when it has one, else the first v1 line's. */
            char id[PROC_CONTAINER_ID_LEN + 1];
            if ((v2 || !out->id[0]) && proc_container_id(path, plen, id)) {
                memcpy(out->id, id, sizeof id);
                snprintf(out->runtime, sizeof out->runtime, "%s", runtime_of(path, plen));
                copy_path(out->id_cgroup, sizeof out->id_cgroup, path, plen);
            }
        }
        line = eol + 1;
    }
    return have_path ? 0 : SCRY_E_CORRUPT;
}

int proc_read_container(pid_t pid, proc_container_t *out)
{
    if (!out || pid <= 0)
        return SCRY_E_INVAL;
    memset(out, 0, sizeof *out);
    char buf[CGROUP_FILE_MAX + 1];
    long got = proc_read_file(pid, 0, "cgroup", buf, sizeof buf);
    if (got < 0)
        return (int)got;
    if (got == 0)
        return SCRY_E_GONE;
    return proc_parse_cgroup(buf, (size_t)got, out);
}
