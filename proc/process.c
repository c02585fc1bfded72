/* process.c - process facts for target selection (process.h), read through pidfile.c. */
#include "process.h"
#include "scry_err.h"
#include "scry_proc.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *base_name(const char *s)
{
    const char *b = strrchr(s, '/');
    return b ? b + 1 : s;
}

static int is_python_name(const char *name)
{
    if (strncmp(name, "python", 6) != 0)
        return 0;
    for (const char *p = name + 6; *p; p++)
        if (!isdigit((unsigned char)*p) && *p != '.' && *p != 'd' && *p != 'm' && *p != '-' &&
            *p != 'b' && *p != 'g')
            return 0;
    return 1;
}

static int maps_have_libpython(pid_t pid)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    int found = 0;
    for (int i = 0; i < 100000 && fgets(line, sizeof line, f); i++) {
        if (strstr(line, "/libpython")) {
            found = 1;
            break;
        }
    }
    fclose(f);
    return found;
}

int proc_process_read_command(pid_t pid, proc_process_t *p)
{
    p->pid = pid;
    p->argc = 0;
    long n = proc_read_file(pid, 0, "cmdline", p->argbuf, sizeof p->argbuf);
    if (n <= 0)
        return SCRY_E_NOPROC; /* kernel thread or gone */
    for (long i = 0; i < n && p->argc < PROC_ARGS_MAX;) {
        p->argv[p->argc++] = p->argbuf + i;
        i += (long)strlen(p->argbuf + i) + 1;
    }
    size_t off = 0;
    for (size_t i = 0; i < p->argc && off + 1 < sizeof p->cmdline; i++) {
        int w =
            snprintf(p->cmdline + off, sizeof p->cmdline - off, "%s%s", i ? " " : "", p->argv[i]);
        if (w < 0)
            break;
        off += (size_t)w;
    }
    proc_read_exe(pid, p->exe, sizeof p->exe);
    return 0;
}

int proc_process_read(pid_t pid, proc_process_t *p, int maps)
{
    memset(p, 0, sizeof *p);
    p->pid = pid;
    if (proc_read_identity(pid, &p->start_time, p->comm, sizeof p->comm) != 0)
        return SCRY_E_NOPROC;
    if (proc_read_uid(pid, &p->uid) != 0)
        return SCRY_E_NOPROC;
    if (proc_process_read_command(pid, p) != 0)
        return SCRY_E_NOPROC;
    proc_container_t ct;
    if (proc_read_container(pid, &ct) == 0) {
        snprintf(p->cgroup, sizeof p->cgroup, "%s", ct.cgroup);
        memcpy(p->container, ct.id, sizeof p->container);
    }
    p->is_python = is_python_name(base_name(p->exe[0] ? p->exe : p->comm)) ||
                   is_python_name(p->comm) || (maps && maps_have_libpython(pid));
    return 0;
}

static int takes_value(const char *opt)
{
    /* interpreter options followed by a separate value */
    return strcmp(opt, "-W") == 0 || strcmp(opt, "-X") == 0 ||
           strcmp(opt, "--check-hash-based-pycs") == 0;
}

void proc_service_name(const char *const *argv, size_t argc, const char *comm, char *out,
                       size_t outlen)
{
    char raw[256] = "";
    size_t i = 0;
    if (argc > 0 && is_python_name(base_name(argv[0]))) {
        for (i = 1; i < argc; i++) {
            const char *a = argv[i];
            if (strcmp(a, "-m") == 0 && i + 1 < argc) {
                snprintf(raw, sizeof raw, "%s", argv[i + 1]);
                break;
            }
            if (strncmp(a, "-m", 2) == 0 && a[2]) {
                snprintf(raw, sizeof raw, "%s", a + 2);
                break;
            }
            if (strcmp(a, "-c") == 0 ||
                (a[0] == '-' && a[1] != '-' && a[1] != 'W' && a[1] != 'X' && strchr(a, 'c'))) {
                snprintf(raw, sizeof raw, "python-c");
                break;
            }
            if (a[0] == '-') {
                if (takes_value(a))
                    i++;
                continue;
            }
            snprintf(raw, sizeof raw, "%s", base_name(a));
            break;
        }
    } else if (argc > 0) {
        snprintf(raw, sizeof raw, "%s", base_name(argv[0]));
    }
    if (!raw[0])
        snprintf(raw, sizeof raw, "%s", comm && comm[0] ? comm : "python");
    size_t n = strlen(raw);
    if (n > 3 && strcmp(raw + n - 3, ".py") == 0)
        raw[n - 3] = '\0';
    size_t o = 0;
    for (const char *s = raw; *s && o + 1 < outlen && o < 64; s++)
        out[o++] = (isalnum((unsigned char)*s) || strchr("._-", *s)) ? *s : '_';
    if (o == 0 || out[0] == '.') {
        o = 0;
        for (const char *s = "python"; *s && o + 1 < outlen; s++)
            out[o++] = *s;
    }
    if (outlen)
        out[o] = '\0';
}
