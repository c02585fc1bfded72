#include "memory.h"

#include "inject.h"
#include "remoteexec.h"
#include "ring_consumer.h"
#include "scry_err.h"
#include "scry_proc.h"
#include "scry_time.h"
#include "shimstage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MEMPROF_BATCH 256

struct memprof {
    ringc_t *ring;
    uint64_t alloc_mean, copy_mean;
    char shim[PATH_MAX];
    char preload[PATH_MAX + 64];
    char ringvar[160];
    char *env[3];
    ringc_event_t events[MEMPROF_BATCH];
    scry_frame_t frames[SCRY_RING_MAX_FRAMES + 1];
    uint64_t nevents;
    int adopted; /* the ring is the target's own (memprof_inject) */
    const char *s_unknown, *s_empty;
    proc_tidmap_t *tids; /* the target's own thread ids -> host ids (a container) */
    pid_t tids_pid;
    int inject_how;          /* MEMPROF_INJECT_* */
    const char *injected_by; /* "remote-exec", "ptrace", or NULL */
};

static int file_ok(const char *p)
{
    return access(p, R_OK) == 0;
}

#ifndef SCRY_SHIM_FROM_BINDIR
#define SCRY_SHIM_FROM_BINDIR "../lib/scry"
#endif

/* The places of libscry-shim.so relative to the folder of the scry executable: the build
 * tree (build/daemon/scry, build/shim/), the installed layout (PREFIX/bin/scry,
 * PREFIX/lib/scry/: CMakeLists.txt's install rules), or the same folder. */
static const char *const shim_rel[] = {
    "/../shim/libscry-shim.so", "/" SCRY_SHIM_FROM_BINDIR "/libscry-shim.so", "/libscry-shim.so"};

/* Finds libscry-shim.so: $SCRY_SHIM, else beside the executable (shim_rel). Writes the real
 * path into OUT (PATH_MAX bytes), or on failure what was tried into TRIED (LEN bytes). */
static int find_shim(char *out, char *tried, size_t len)
{
    const char *env = getenv("SCRY_SHIM");
    tried[0] = 0;
    if (env && *env) {
        snprintf(tried, len, "SCRY_SHIM=%s", env);
        if (!realpath(env, out) || !file_ok(out))
            return SCRY_E_NOTFOUND;
        return 0;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return SCRY_E_NOTFOUND;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash)
        return SCRY_E_NOTFOUND;
    *slash = 0;
    size_t used = 0;
    for (size_t i = 0; i < sizeof shim_rel / sizeof *shim_rel; i++) {
        char cand[PATH_MAX + 64];
        snprintf(cand, sizeof cand, "%s%s", exe, shim_rel[i]);
        if (file_ok(cand) && realpath(cand, out))
            return 0;
        if (used < len) {
            int w = snprintf(tried + used, len - used, "%s%s", used ? ", " : "", cand);
            used += w > 0 ? (size_t)w : 0;
        }
    }
    return SCRY_E_NOTFOUND;
}

memprof_t *memprof_new(uint64_t alloc_mean, uint64_t copy_mean)
{
    memprof_t *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    char tried[1024];
    if (find_shim(m->shim, tried, sizeof tried) != 0) {
        fprintf(stderr,
                "scry: --memory needs libscry-shim.so, not found (tried %s): install scry with "
                "cmake --install (PREFIX/lib/scry/), or set SCRY_SHIM to its path\n",
                tried[0] ? tried : "nothing: /proc/self/exe unreadable");
        free(m);
        return NULL;
    }
    m->alloc_mean = alloc_mean ? alloc_mean : SCRY_RING_DEFAULT_ALLOC_MEAN;
    m->copy_mean = copy_mean ? copy_mean : SCRY_RING_DEFAULT_COPY_MEAN;
    return m;
}

void memprof_free(memprof_t *m)
{
    if (!m)
        return;
    ringc_free(m->ring); /* disables, unmaps, unlinks */
    proc_tidmap_free(m->tids);
    free(m);
}

int memprof_create_ring(memprof_t *m, const pystate_layout_t *layout)
{
    ringc_params_t p = {
        .path = NULL, /* a memfd: nothing named anywhere, whenever scry dies */
        .alloc_mean = m->alloc_mean,
        .copy_mean = m->copy_mean,
        .target_pid = 0, /* set by memprof_set_target before the child execs */
        .uid = -1,
        .gid = -1,
        .enabled = 0,
    };
    if (layout)
        ringc_layout_from_pystate(layout, &p.layout);
    else
        memset(&p.layout, 0xff, sizeof p.layout); /* unknown until the target runs */
    if (!layout) {
        p.layout.py_major = 0;
        p.layout.py_minor = 0;
    }
    int err = 0;
    m->ring = ringc_create(&p, &err);
    return m->ring ? 0 : (err ? err : SCRY_E_IO);
}

int memprof_set_target(memprof_t *m, pid_t pid)
{
    return m->ring ? ringc_set_target_pid(m->ring, (int32_t)pid) : SCRY_E_INVAL;
}

int memprof_ring_fd(const memprof_t *m)
{
    return ringc_fd(m->ring);
}

char **memprof_launch_env(memprof_t *m)
{
    const char *old = getenv("LD_PRELOAD");
    if (old && *old)
        snprintf(m->preload, sizeof m->preload, "LD_PRELOAD=%s:%s", m->shim, old);
    else
        snprintf(m->preload, sizeof m->preload, "LD_PRELOAD=%s", m->shim);
    snprintf(m->ringvar, sizeof m->ringvar, "SCRY_RING=fd:%d", ringc_fd(m->ring));
    m->env[0] = m->preload;
    m->env[1] = m->ringvar;
    m->env[2] = NULL;
    return m->env;
}

/* Our own descriptor for the target's descriptor TFD: pidfd_getfd (Linux 5.6+), else
 * /proc/PID/fd/TFD. Returns it, or -1. */
static int take_fd(pid_t pid, int tfd)
{
    int fd = -1;
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd >= 0) {
        fd = (int)syscall(SYS_pidfd_getfd, pidfd, tfd, 0);
        close(pidfd);
    }
    if (fd < 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, tfd);
        fd = open(path, O_RDWR | O_CLOEXEC);
    }
    return fd;
}

/* In one borrowing of one thread of PID: dlopen(LIB) when LIB is not NULL, then
 * scry_shim_attach_new(SPEC) at FN, or when FN is 0 of the libscry-shim.so mapped in PID,
 * found by its file name (the target's maps show the path relative to scry's root, not the
 * path the target opened). Returns 0 (*RET set) or an injection error (SCRY_E_NOTFOUND: no
 * shim). */
static int shim_call(pid_t pid, const char *lib, raddr_t fn, const char *spec, uint64_t *ret,
                     inject_report_t *rep)
{
    inject_session_t *s = NULL;
    int err = inject_session_open(pid, NULL, rep, &s);
    if (err)
        return err;
    uint64_t arg = 0;
    if (lib)
        err = inject_session_dlopen(s, lib, NULL);
    if (!err && !fn)
        err = inject_session_symbol(s, "libscry-shim.so", "scry_shim_attach_new", &fn);
    if (!err)
        err = inject_session_string(s, spec, &arg);
    if (!err)
        err = inject_session_call(s, fn, &arg, 1, ret);
    int err2 = inject_session_close(s);
    return err ? err : err2;
}

/* scry_shim_attach_new of the libscry-shim.so PID has loaded already (an earlier session),
 * into *FN. A private copy in the target's root is deleted once loaded, and only
 * CAP_SYS_ADMIN opens a deleted mapping (map_files): without it (a container's owner) the
 * mapping is read as scry's own shim when that is the same build (build-id). Returns 0,
 * SCRY_E_NOTFOUND (no shim loaded), or SCRY_E_PERM with MSG filled (a shim scry cannot
 * read is loaded: loading a second one would interpose twice). */
static int loaded_shim(const memprof_t *m, pid_t pid, raddr_t *fn, char *msg, size_t len)
{
    int err = inject_find_symbol_as(pid, "libscry-shim.so", "scry_shim_attach_new", m->shim, fn);
    if (err == SCRY_E_PERM)
        snprintf(msg, len,
                 "process %d has a libscry-shim.so loaded (an earlier session's) that scry "
                 "cannot read: another scry build's, deleted (reading it needs CAP_SYS_ADMIN); "
                 "a second shim is not loaded",
                 (int)pid);
    return err == 0 || err == SCRY_E_PERM ? err : SCRY_E_NOTFOUND;
}

/* Loads the shim into PID and calls scry_shim_attach_new(SPEC). A shim PID has loaded
 * already (an earlier session) is used as it is: when it came from a copy in the target's
 * root, that copy is gone, and loading a second copy would interpose twice. Otherwise the
 * target loads scry's own file, or a copy in its root when it cannot see scry's
 * (shimstage), removed right after the dlopen. */
static int load_shim(memprof_t *m, pid_t pid, const char *spec, uint64_t *ret, inject_report_t *rep,
                     char *msg, size_t len)
{
    raddr_t fn = 0;
    int err = loaded_shim(m, pid, &fn, msg, len);
    if (err != SCRY_E_NOTFOUND)
        return err ? err : shim_call(pid, NULL, fn, spec, ret, rep);
    err = 0;
    shimstage_t *st = shimstage_new(pid, m->shim, &err, msg, len);
    if (!st)
        return err;
    err = shim_call(pid, shimstage_path(st), 0, spec, ret, rep);
    shimstage_free(st); /* the target keeps its mapping (the shim is -z nodelete) */
    return err;
}

#define RING_FDS_MAX 64

/* A ring descriptor of the target: its number and its memfd's inode. A descriptor number
 * alone does not tell rings apart: the shim closes an ended session's ring when the next
 * session's script asks for one, and memfd_create then hands out the same number. */
typedef struct ring_fd {
    int fd;
    ino_t ino;
} ring_fd_t;

/* The descriptors of PID that are a shim's ring (memfd "scry-ring"), at most MAX (of the
 * first 65536 entries of /proc/PID/fd). Returns how many, or a negative code. */
static int ring_fds(pid_t pid, ring_fd_t *fds, int max)
{
    char path[64], link[64], name[96];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return scry_err_from_errno(errno);
    int n = 0;
    struct dirent *e;
    for (int seen = 0; n < max && seen < 65536 && (e = readdir(d)); seen++) {
        char *end = NULL;
        long fd = strtol(e->d_name, &end, 10);
        if (e->d_name[0] < '0' || e->d_name[0] > '9' || *end || fd < 0 || fd > INT32_MAX)
            continue;
        snprintf(name, sizeof name, "%s/%ld", path, fd);
        ssize_t k = readlink(name, link, sizeof link - 1);
        struct stat st;
        if (k <= 0)
            continue;
        link[k] = 0;
        if (strncmp(link, "/memfd:scry-ring", 16) == 0 && stat(name, &st) == 0)
            fds[n++] = (ring_fd_t){(int)fd, st.st_ino};
    }
    closedir(d);
    return n;
}

/* A ring descriptor of PID not among the N in BEFORE (another number or another ring at
 * the same number), or -1. */
static int new_ring_fd(pid_t pid, const ring_fd_t *before, int n)
{
    ring_fd_t now[RING_FDS_MAX];
    int k = ring_fds(pid, now, RING_FDS_MAX);
    for (int i = 0; i < k; i++) {
        int old = 0;
        for (int j = 0; j < n && !old; j++)
            old = now[i].fd == before[j].fd && now[i].ino == before[j].ino;
        if (!old)
            return now[i].fd;
    }
    return -1;
}

/* 1 when the ring PID holds as descriptor TFD is made (the shim sets ATTACHED last, after
 * its size, seals and header): the descriptor shows up at memfd_create already. */
static int ring_ready(pid_t pid, int tfd)
{
    int fd = take_fd(pid, tfd), ready = 0;
    struct stat st;
    if (fd < 0)
        return 0;
    if (fstat(fd, &st) == 0 && st.st_size >= (off_t)SCRY_RING_HEADER_SIZE) {
        void *p = mmap(NULL, SCRY_RING_HEADER_SIZE, PROT_READ, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
            const struct scry_ring_header *h = p;
            ready =
                (__atomic_load_n(&h->shim_state, __ATOMIC_ACQUIRE) & SCRY_RING_SHIM_ATTACHED) != 0;
            munmap(p, SCRY_RING_HEADER_SIZE);
        }
    }
    close(fd);
    return ready;
}

/* S as a Python bytes literal of \x escapes (any path is safe in it) into OUT. */
static void py_bytes(const char *s, char *out, size_t len)
{
    size_t n = (size_t)snprintf(out, len, "b'");
    for (; *s && n + 8 < len; s++)
        n += (size_t)snprintf(out + n, len - n, "\\x%02x", (unsigned char)*s);
    snprintf(out + n, len - n, "'");
}

/* The script the target runs: loads the shim SHIM with ctypes, or when SHIM is NULL uses
 * the shim it has loaded already (an earlier session's, whose copy is gone: no path to
 * load) by the address FN of its scry_shim_attach_new, and asks it for a ring as its last
 * act. Nothing it does is recorded: no ring exists before that call (scry never loads the
 * shim another way while the script may run: rexec_wait), and after it the script
 * allocates nothing (restype None: no int object made; deleting a name frees). It runs in
 * a namespace of its own (PEP 768), so no name is left in __main__. */
static int rexec_script(const char *shim, raddr_t fn, const char *spec, char *out, size_t len)
{
    char lib[PATH_MAX * 4 + 8], arg[96 * 4 + 8], call[PATH_MAX * 4 + 256];
    int c;
    py_bytes(spec, arg, sizeof arg);
    if (shim) {
        py_bytes(shim, lib, sizeof lib);
        c = snprintf(call, sizeof call,
                     "    f = ctypes.CDLL(%s.decode('latin-1')).scry_shim_attach_new\n"
                     "    f.restype = None\n"
                     "    f.argtypes = [ctypes.c_char_p]\n",
                     lib);
    } else {
        c = snprintf(call, sizeof call, "    f = ctypes.CFUNCTYPE(None, ctypes.c_char_p)(0x%llx)\n",
                     (unsigned long long)fn);
    }
    if (c <= 0 || (size_t)c >= sizeof call)
        return SCRY_E_TRUNC;
    int n = snprintf(out, len,
                     "def _scry_shim_load():\n"
                     "    import ctypes\n"
                     "%s"
                     "    f(%s)\n"
                     "try:\n"
                     "    _scry_shim_load()\n"
                     "finally:\n"
                     "    del _scry_shim_load\n",
                     call, arg);
    return n > 0 && (size_t)n < len ? 0 : SCRY_E_TRUNC;
}

/* How long a script taken by the target may run before scry gives up on it, in units of
 * the wait for the safe point (SCRY_REMOTE_EXEC_WAIT_MS). */
#define REXEC_RUN_FACTOR 5

/* SCRY_REMOTE_EXEC_WAIT_MS (10..60000), else 2000: how long scry waits for a safe point. */
static long rexec_wait_ms(void)
{
    const char *env = getenv("SCRY_REMOTE_EXEC_WAIT_MS");
    long ms = env && *env ? strtol(env, NULL, 10) : 2000;
    return ms < 10 || ms > 60000 ? 2000 : ms;
}

/* Waits for PID to take request R and for a ring not among BEFORE (N) to appear; *RET gets
 * its descriptor. A request not taken within SCRY_REMOTE_EXEC_WAIT_MS (default 2000) is
 * withdrawn: SCRY_E_TIMEOUT with *RAN = 0, and the caller may load the shim another way.
 * Once the target took it (*RAN = 1) the script runs, and may still be running on a loaded
 * machine: a shim loaded by ptrace now would record the script's own work (its imports,
 * its traceback) and then lose its ring to the script's; so it gets REXEC_RUN_FACTOR times
 * that wait to make its ring, and SCRY_E_TIMEOUT with *RAN = 1 after that. MSG says why. */
static int rexec_wait(rexec_t *r, pid_t pid, const ring_fd_t *before, int n, uint64_t *ret,
                      int *ran, char *msg, size_t len)
{
    long ms = rexec_wait_ms(), limit = ms, t = 0;
    *ran = 0;
    for (;;) {
        int fd = new_ring_fd(pid, before, n);
        if (fd >= 0 && ring_ready(pid, fd)) {
            *ret = (uint64_t)fd;
            *ran = 1;
            return 0;
        }
        if (!*ran && rexec_pending(r) == 0) {
            *ran = 1;
            limit = t + REXEC_RUN_FACTOR * ms;
        }
        if (t >= limit) {
            if (*ran || rexec_cancel(r) != 1)
                break;
            *ran = 1; /* taken just before the withdrawal */
            limit = t + REXEC_RUN_FACTOR * ms;
        }
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
        t += 5;
    }
    if (!*ran)
        snprintf(msg, len,
                 "process %d did not reach a safe point to run scry's script within %ld ms "
                 "(its main thread blocked in a C call, e.g. a sleep or a read?)",
                 (int)pid, ms);
    else
        snprintf(msg, len,
                 "process %d took scry's script but no memory ring appeared within %ld ms (no "
                 "ctypes? its stderr may say why); the shim is not loaded another way while "
                 "that script may still run",
                 (int)pid, limit);
    return SCRY_E_TIMEOUT;
}

/* PEP 768: the target loads the shim itself at its next safe point (its main thread runs
 * a script scry puts in its root). Returns 0 (*RET: the ring's descriptor in PID),
 * SCRY_E_UNSUPPORTED (MSG says why), or another error; *RAN is 1 when the target took the
 * script (then nothing else may load the shim: rexec_wait). */
static int load_shim_remote(memprof_t *m, pid_t pid, raddr_t runtime, const char *spec,
                            uint64_t *ret, int *ran, char *msg, size_t len)
{
    rexec_t *r = NULL;
    char why[200] = "", script[PATH_MAX * 5];
    shimstage_t *lib = NULL, *py = NULL;
    raddr_t fn = 0;
    ring_fd_t before[RING_FDS_MAX];
    *ran = 0;
    int err = rexec_open(pid, runtime, &r, why, sizeof why);
    int loaded = err ? 0 : loaded_shim(m, pid, &fn, why, sizeof why);
    if (loaded == SCRY_E_PERM)
        err = SCRY_E_UNSUPPORTED;
    if (err) {
        snprintf(msg, len, "cannot use remote execution (PEP 768) in process %d: %s", (int)pid,
                 why);
        goto cleanup;
    }
    int n = ring_fds(pid, before, RING_FDS_MAX);
    err = n < 0 ? n : 0;
    /* a shim loaded already is called where it is (a second one would interpose twice) */
    if (!err && loaded == SCRY_E_NOTFOUND && !(lib = shimstage_new(pid, m->shim, &err, msg, len)))
        goto cleanup;
    if (!err)
        err = rexec_script(lib ? shimstage_path(lib) : NULL, fn, spec, script, sizeof script);
    if (!err && !(py = shimstage_new_data(pid, "load.py", script, strlen(script), &err, msg, len)))
        goto cleanup;
    if (!err)
        err = rexec_request(r, shimstage_path(py));
    if (!err)
        err = rexec_wait(r, pid, before, n, ret, ran, msg, len);
cleanup:
    shimstage_free(py); /* the script and its directory, and the shim's copy */
    shimstage_free(lib);
    rexec_free(r);
    return err;
}

/* The way MEMPROF_INJECT_AUTO, _PTRACE or _REMOTE_EXEC asks for: remote execution where
 * the target allows it, else (auto) ptrace. Sets m->injected_by. */
static int load_shim_how(memprof_t *m, pid_t pid, raddr_t runtime, const char *spec, uint64_t *ret,
                         inject_report_t *rep, char *msg, size_t len)
{
    if (m->inject_how != MEMPROF_INJECT_PTRACE && runtime) {
        int ran = 0;
        int err = load_shim_remote(m, pid, runtime, spec, ret, &ran, msg, len);
        if (!err)
            m->injected_by = "remote-exec";
        if (!err || ran || m->inject_how == MEMPROF_INJECT_REMOTE_EXEC)
            return err;
        msg[0] = 0; /* auto: ptrace instead */
    }
    m->injected_by = "ptrace";
    return load_shim(m, pid, spec, ret, rep, msg, len);
}

void memprof_set_inject(memprof_t *m, int how)
{
    m->inject_how = how;
}

int memprof_inject(memprof_t *m, pystate_target_t *t, char *msg, size_t len)
{
    const pystate_info_t *info = pystate_target_info(t);
    pid_t pid = info->pid;
    raddr_t runtime = info->runtime_addr;
    const pystate_layout_t *layout = pystate_target_layout(t);
    uint64_t ret = 0;
    inject_report_t rep;
    memset(&rep, 0, sizeof rep);
    char spec[96];
    snprintf(spec, sizeof spec, "%llu:%llu:%llu",
             (unsigned long long)ringc_records_for(SCRY_RING_DEFAULT_BYTES),
             (unsigned long long)m->alloc_mean, (unsigned long long)m->copy_mean);
    msg[0] = 0;
    int err = load_shim_how(m, pid, runtime, spec, &ret, &rep, msg, len);
    /* SCRY_E_AGAIN: the shim was busy (a thread letting go of an earlier session's ring
     * holds it for a moment): ask again, a few times. */
    for (int i = 0; i < 5 && !err && (int32_t)ret == SCRY_E_AGAIN; i++) {
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
        memset(&rep, 0, sizeof rep);
        err = load_shim_how(m, pid, runtime, spec, &ret, &rep, msg, len);
    }
    if (err) {
        if (!msg[0])
            snprintf(msg, len, "could not load the memory shim into process %d: %s%s%s", (int)pid,
                     scry_strerror(err), rep.error[0] ? ": " : "", rep.error);
        return err;
    }
    int32_t tfd = (int32_t)ret;
    if (tfd < 0) {
        snprintf(msg, len, "the memory shim in process %d could not make its ring: %s", (int)pid,
                 scry_strerror(tfd));
        return tfd;
    }
    /* The ring lives only in memory (a sealed memfd of the target): nothing in /dev/shm,
     * whenever we die. If anything fails from here, the shim lets go of it by itself once
     * the heartbeat has been silent for SCRY_RING_RETIRE_NS. */
    int fd = take_fd(pid, tfd);
    if (fd < 0) {
        snprintf(msg, len, "cannot take the memory ring from process %d: %s", (int)pid,
                 strerror(errno));
        return SCRY_E_PERM;
    }
    m->ring = ringc_adopt(fd, &err);
    if (!m->ring) {
        snprintf(msg, len, "the memory ring of process %d is not usable: %s", (int)pid,
                 scry_strerror(err));
        return err ? err : SCRY_E_CORRUPT;
    }
    m->adopted = 1;
    ringc_heartbeat(m->ring);
    struct scry_ring_layout L;
    if (layout && ringc_layout_from_pystate(layout, &L) == 0)
        ringc_set_layout(m->ring, &L);
    return 0;
}

int memprof_launch_fallback(memprof_t *m, pystate_target_t *t, char *msg, size_t len)
{
    raddr_t fn = 0;
    pid_t pid = pystate_target_info(t)->pid;
    if (!m->ring || m->adopted ||
        inject_find_symbol_as(pid, "libscry-shim.so", "scry_shim_attach", m->shim, &fn) == 0)
        return 0;
    /* The Python program has no shim: it could not be preloaded (the program runs in
     * another root, where scry's path of the shim does not exist; a wrapper such as chroot
     * or unshare, still in scry's root, may have claimed the ring before it exec'd). Load
     * it as attach mode does; the launch ring is dropped. */
    ringc_free(m->ring);
    m->ring = NULL;
    /* the ptrace trampoline here: the interpreter may not be initialised yet (no thread
     * state to ask), and the retries below are made for it */
    int how = m->inject_how;
    m->inject_how = MEMPROF_INJECT_PTRACE;
    int err = memprof_inject(m, t, msg, len);
    /* Injected this early, the interpreter may not be initialised yet: the shim then
     * schedules its PyMem hooks at its next slow path, but without GOT patching (a root
     * without /proc) nothing ever takes one. Inject again until it could (bounded: 1 s). */
    for (int i = 0; !err && i < 10; i++) {
        ringc_stats_t st;
        if (ringc_stats(m->ring, &st) != 0 ||
            (st.shim_state & (SCRY_RING_SHIM_PY_SCHEDULED | SCRY_RING_SHIM_PY_HOOKS |
                              SCRY_RING_SHIM_GOT_PATCHED | SCRY_RING_SHIM_NOPYTHON)))
            break;
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
        ringc_free(m->ring); /* disabled: the shim lets go of it */
        m->ring = NULL;
        m->adopted = 0;
        err = memprof_inject(m, t, msg, len);
    }
    m->inject_how = how;
    if (!err)
        err = memprof_start(m, t);
    return err;
}

int memprof_start(memprof_t *m, pystate_target_t *t)
{
    struct scry_ring_layout L;
    int err = ringc_layout_from_pystate(pystate_target_layout(t), &L);
    if (!err)
        err = ringc_set_layout(m->ring, &L);
    if (err && err != SCRY_E_AGAIN)
        return err;
    ringc_heartbeat(m->ring);
    return ringc_set_enabled(m->ring, 1);
}

static void emit_event(memprof_t *m, pystate_target_t *t, const ringc_event_t *e,
                       memprof_emit_fn emit, void *ctx)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < e->nframes && i < SCRY_RING_MAX_FRAMES; i++) {
        if (e->frames[i].instr_offset < 0)
            continue;
        if (pystate_resolve_code(t, e->frames[i].code, (uint32_t)e->frames[i].instr_offset,
                                 &m->frames[n]) == 0)
            n++;
    }
    if (n == 0)
        m->frames[n++] = (scry_frame_t){m->s_unknown, m->s_empty, 0, SCRY_FRAME_OTHER};
    /* The shim records gettid() as its PID namespace numbers threads: the host's id, as
     * CPU samples use it, and the target's own where they differ. */
    const pystate_info_t *info = pystate_target_info(t);
    if (info && info->pid > 0 && info->pid != m->tids_pid) {
        proc_tidmap_free(m->tids);
        m->tids = proc_tidmap_new(info->pid);
        m->tids_pid = m->tids ? info->pid : 0;
    }
    pid_t tid = e->tid, ns_tid = 0;
    if (proc_tidmap_nested(m->tids)) {
        pid_t host = proc_tidmap_to_host(m->tids, e->tid);
        if (host > 0 && host != e->tid) {
            ns_tid = e->tid;
            tid = host;
        }
    }
    uint8_t metric = e->kind == SCRY_RING_ALLOC  ? SCRY_METRIC_ALLOC
                     : e->kind == SCRY_RING_FREE ? SCRY_METRIC_FREE
                                                 : SCRY_METRIC_COPY;
    scry_sample_t s = {
        .time_ns = e->time_ns,
        .bytes = e->weight,
        .address = e->addr,
        .tid = tid,
        .ns_tid = ns_tid,
        .thread_name = m->s_empty,
        .metric = metric,
        .cls = e->origin == SCRY_RING_ORIGIN_PYTHON ? 0 : 1,
        .truncated = (e->flags & SCRY_RING_REC_TRUNCATED) != 0,
        .nframes = n,
        .frames = m->frames,
    };
    emit(&s, ctx);
}

int memprof_drain(memprof_t *m, pystate_target_t *t, memprof_emit_fn emit, void *ctx)
{
    if (!m->ring)
        return 0;
    if (!m->s_unknown) {
        strtab_t *strings = pystate_target_strings(t);
        m->s_unknown = strtab_intern(strings, "<unknown>");
        m->s_empty = strtab_intern(strings, "");
        if (!m->s_unknown || !m->s_empty)
            return SCRY_E_NOMEM;
    }
    ringc_heartbeat(m->ring);
    int total = 0;
    for (int round = 0; round < 1024; round++) { /* bounded: the shim may keep writing */
        size_t n = 0;
        int err = ringc_poll(m->ring, m->events, MEMPROF_BATCH, &n);
        if (err)
            return err;
        for (size_t i = 0; i < n; i++)
            emit_event(m, t, &m->events[i], emit, ctx);
        total += (int)n;
        if (n < MEMPROF_BATCH)
            break;
    }
    m->nevents += (uint64_t)total;
    return total;
}

void memprof_stop(memprof_t *m)
{
    if (m->ring)
        ringc_set_enabled(m->ring, 0);
}

void memprof_counts(const memprof_t *m, uint64_t *events, uint64_t *dropped, uint64_t *bad)
{
    ringc_stats_t st;
    memset(&st, 0, sizeof st);
    if (m->ring)
        ringc_stats(m->ring, &st);
    *events = m->nevents;
    *dropped = 0;
    for (int k = 0; k < SCRY_RING_NKINDS; k++)
        *dropped += st.dropped_events[k];
    *bad = st.bad_records + st.stalled;
}

void memprof_describe(const memprof_t *m, char *buf, size_t len)
{
    ringc_stats_t st;
    memset(&st, 0, sizeof st);
    uint32_t got_slots = 0, got_objects = 0, got_failed = 0;
    if (m->ring) {
        ringc_stats(m->ring, &st);
        size_t maplen = 0;
        const struct scry_ring_header *h = ringc_mapping(m->ring, &maplen);
        if (h && maplen >= sizeof *h) { /* informational, written by the target */
            got_slots = __atomic_load_n(&h->got_slots, __ATOMIC_RELAXED);
            got_objects = __atomic_load_n(&h->got_objects, __ATOMIC_RELAXED);
            got_failed = __atomic_load_n(&h->got_failed, __ATOMIC_RELAXED);
        }
    }
    uint64_t dropped = 0;
    for (int k = 0; k < SCRY_RING_NKINDS; k++)
        dropped += st.dropped_events[k];
    char got[224] = "";
    if (st.shim_state & SCRY_RING_SHIM_GOT_PATCHED)
        snprintf(got, sizeof got, ", malloc/memcpy redirected in %u objects (%u slots)",
                 got_objects, got_slots);
    if (got_failed) /* their allocations and copies are not seen: say so */
        snprintf(got + strlen(got), sizeof got - strlen(got),
                 ", %u libraries not hooked (their pages could not be made writable)",
                 got_failed > 100000 ? 100000 : got_failed);
    if (st.shim_state & (SCRY_RING_SHIM_STACKS_BAD | SCRY_RING_SHIM_VERSION_MISMATCH))
        snprintf(got + strlen(got), sizeof got - strlen(got),
                 ", Python stacks not read (every event on <unknown>)");
    char by[48] = "";
    if (m->injected_by)
        snprintf(by, sizeof by, " by %s", m->injected_by);
    snprintf(buf, len, "memory: %llu events (%s%s%s%s%s), %llu dropped, %llu rejected",
             (unsigned long long)m->nevents,
             (st.shim_state & SCRY_RING_SHIM_ATTACHED) ? "shim attached" : "shim never attached",
             by, (st.shim_state & SCRY_RING_SHIM_PY_HOOKS) ? ", Python hooks" : "",
             (st.shim_state & SCRY_RING_SHIM_PRELOADED) ? ", malloc/memcpy interposed" : "", got,
             (unsigned long long)dropped, (unsigned long long)(st.bad_records + st.stalled));
}
