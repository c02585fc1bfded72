/* process.h - what scry serve needs to know about a process to select it: identity (pid and
 * start time, so PID reuse is noticed), owner, executable, command line, cgroup and
 * container id. Read through the proc/ layer (proc_read_identity etc.); every field is
 * bounded.
 */
#ifndef SCRY_PROC_PROCESS_H
#define SCRY_PROC_PROCESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PROC_CMDLINE_MAX 4096
#define PROC_ARGS_MAX    64

typedef struct proc_process {
    pid_t pid;
    uint64_t start_time; /* clock ticks after boot (field 22 of /proc/PID/stat) */
    uid_t uid;           /* real uid */
    char comm[32];
    char exe[1024]; /* readlink of /proc/PID/exe ("" for kernel threads or when denied) */
    char cmdline[PROC_CMDLINE_MAX];  /* arguments joined by spaces */
    const char *argv[PROC_ARGS_MAX]; /* into argbuf */
    size_t argc;
    char argbuf[PROC_CMDLINE_MAX];
    char cgroup[1024];  /* the cgroup v2 path ("0::" line), else the first hierarchy's */
    char container[65]; /* the 64-hex container id (proc_read_container), or "" */
    int is_python;      /* the executable is python* or libpython is mapped */
} proc_process_t;

/* Fills P with everything above for PID. With MAPS, is_python also looks for a mapped
 * libpython (embedded interpreters: uwsgi, ...; the costly part: /proc/PID/maps); without,
 * only the executable's and comm's names count. Returns 0, SCRY_E_NOPROC when the process
 * is gone (or is a kernel thread, which has no command line). */
int proc_process_read(pid_t pid, proc_process_t *p, int maps);

/* Fills only pid, cmdline, argv, argc and exe of P (two reads): enough for match rules.
 * Returns 0 or SCRY_E_NOPROC. */
int proc_process_read_command(pid_t pid, proc_process_t *p);

/* Derives a service name from a command line: "python3 -m pkg.mod" gives "pkg.mod",
 * "python3 /srv/app/web.py" gives "web", "/usr/bin/python3 /usr/bin/gunicorn app" gives
 * "gunicorn", "python3 -c ..." gives "python-c"; the result is limited to letters, digits,
 * '.', '_' and '-' (others become '_'), at most OUTLEN-1 bytes, never empty. */
void proc_service_name(const char *const *argv, size_t argc, const char *comm, char *out,
                       size_t outlen);

#endif
