/* proc.c - process facts for target selection, from /proc. */
#include "proc.h"
#include "scry_err.h"
#include "scry_proc.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Reads at most LEN-1 bytes of a small /proc file into BUF (NUL-terminated). Returns the
 * byte count or -1. */
static ssize_t read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t got = 0;
    while (got + 1 < len) {
        ssize_t n = read(fd, buf + got, len - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    return (ssize_t)got;
}

int serve_proc_identity(pid_t pid, uint64_t *start_time, char *comm, size_t commlen)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (read_small(path, buf, sizeof buf) <= 0)
        return SCRY_E_NOPROC;
    char *open_paren = strchr(buf, '(');
    char *close_paren = strrchr(buf, ')');
    if (!open_paren || !close_paren || close_paren < open_paren)
        return SCRY_E_NOPROC;
    if (comm && commlen) {
        size_t n = (size_t)(close_paren - open_paren - 1);
        if (n >= commlen)
            n = commlen - 1;
        memcpy(comm, open_paren + 1, n);
        comm[n] = '\0';
    }
    /* after ") " come fields 3..; start time is field 22 */
    char *s = close_paren + 1;
    for (int field = 3; field < 22; field++) {
        s = strchr(s + 1, ' ');
        if (!s)
            return SCRY_E_NOPROC;
    }
    *start_time = strtoull(s + 1, NULL, 10);
    return 0;
}

int serve_proc_uid(pid_t pid, uid_t *uid)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (read_small(path, buf, sizeof buf) <= 0)
        return SCRY_E_NOPROC;
    const char *u = strstr(buf, "\nUid:");
    if (!u)
        return SCRY_E_NOPROC;
    *uid = (uid_t)strtoul(u + 5, NULL, 10);
    return 0;
}

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

int serve_proc_read_command(pid_t pid, serve_proc_t *p)
{
    char path[64];
    p->pid = pid;
    p->argc = 0;
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    ssize_t n = read_small(path, p->argbuf, sizeof p->argbuf);
    if (n <= 0)
        return SCRY_E_NOPROC; /* kernel thread or gone */
    for (ssize_t i = 0; i < n && p->argc < SERVE_PROC_ARGS_MAX;) {
        p->argv[p->argc++] = p->argbuf + i;
        i += (ssize_t)strlen(p->argbuf + i) + 1;
    }
    size_t off = 0;
    for (size_t i = 0; i < p->argc && off + 1 < sizeof p->cmdline; i++) {
        int w =
            snprintf(p->cmdline + off, sizeof p->cmdline - off, "%s%s", i ? " " : "", p->argv[i]);
        if (w < 0)
            break;
        off += (size_t)w;
    }
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    ssize_t l = readlink(path, p->exe, sizeof p->exe - 1);
    p->exe[l > 0 ? l : 0] = '\0';
    return 0;
}

int serve_proc_read(pid_t pid, serve_proc_t *p, int maps)
{
    memset(p, 0, sizeof *p);
    p->pid = pid;
    if (serve_proc_identity(pid, &p->start_time, p->comm, sizeof p->comm) != 0)
        return SCRY_E_NOPROC;
    if (serve_proc_uid(pid, &p->uid) != 0)
        return SCRY_E_NOPROC;
    if (serve_proc_read_command(pid, p) != 0)
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

void serve_proc_service_name(const char *const *argv, size_t argc, const char *comm, char *out,
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
