#include "procinfo.h"
#include "scry_proc.h"

#include "scry_err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int proc_exists(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d", (int)pid);
    return access(path, F_OK) == 0 ? 0 : SCRY_E_NOPROC;
}

void proc_why_unreadable(pid_t pid, char *buf, size_t len)
{
    char state = 0, target[16];
    if (proc_read_task_state(pid, pid, &state) != 0) {
        snprintf(buf, len, "no such process: %d", (int)pid);
        return;
    }
    if (state == 'Z' || state == 'X') {
        snprintf(buf, len,
                 "process %d is a zombie: it has exited and its parent has not reaped it yet",
                 (int)pid);
        return;
    }
    if (proc_read_exe(pid, target, sizeof target) == SCRY_E_NOTFOUND) {
        snprintf(buf, len, "process %d is a kernel thread, not a program scry can profile",
                 (int)pid);
        return;
    }
    snprintf(buf, len, "process %d could not be read as a process (it may have exited or exec'd)",
             (int)pid);
}

void proc_describe(pid_t pid, char *buf, size_t len)
{
    char comm[64], exe[512];
    proc_read_comm(pid, 0, comm, sizeof comm);
    if (!comm[0])
        snprintf(comm, sizeof comm, "?");
    if (proc_read_exe(pid, exe, sizeof exe) <= 0)
        snprintf(exe, sizeof exe, "executable not readable");
    snprintf(buf, len, "%s (%s)", comm, exe);
}

void proc_cmdline(pid_t pid, char *buf, size_t len)
{
    long n = len > 1 ? proc_read_file(pid, 0, "cmdline", buf, len) : -1;
    if (n <= 0) {
        if (len)
            buf[0] = 0;
        return;
    }
    for (long i = 0; i + 1 < n; i++)
        if (buf[i] == 0)
            buf[i] = ' ';
}

void proc_join_argv(char **argv, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = 0;
    for (size_t i = 0; argv && argv[i] && off + 1 < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? " " : "", argv[i]);
}

void proc_permission_hint(pid_t pid, char *buf, size_t len)
{
    char scope[16] = "";
    int has = proc_read_file(0, 0, "sys/kernel/yama/ptrace_scope", scope, sizeof scope) > 0;
    if (!has)
        scope[0] = 0;
    scope[strcspn(scope, "\n")] = 0;
    snprintf(buf, len,
             "reading process %d needs root or the CAP_SYS_PTRACE capability%s%s%s "
             "(in Docker: --cap-add SYS_PTRACE)",
             (int)pid, has ? "; kernel.yama.ptrace_scope is " : "", has ? scope : "",
             has ? (scope[0] == '0' ? "" : ", so a non-root user may only trace its own children")
                 : "");
    uid_t uid;
    size_t used = strlen(buf);
    if (proc_other_userns(pid) == 1 && proc_read_uid(pid, &uid) == 0 && used < len)
        snprintf(buf + used, len - used,
                 "; it runs in another user namespace (a rootless container) as host uid %u: "
                 "run scry as uid %u, or with CAP_SYS_PTRACE in that user namespace or an "
                 "ancestor of it",
                 (unsigned)uid, (unsigned)uid);
}

void proc_read_comm(pid_t pid, pid_t tid, char *buf, size_t len)
{
    if (len < 2 || proc_read_file(pid, tid, "comm", buf, len) <= 0) {
        if (len)
            buf[0] = 0;
        return;
    }
    buf[strcspn(buf, "\n")] = 0;
}
