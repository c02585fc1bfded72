/* tidmap.c - thread ids across PID namespaces: the ids a containerised interpreter stores
 * (its own namespace's, NSpid's last column) mapped to the ids /proc and ptrace use (the
 * first column), from /proc/PID/task/TID/status. */
#include <stdlib.h>
#include <string.h>

#include "scry_err.h"
#include "scry_proc.h"
#include "scry_time.h"

#define TIDMAP_MAX        8192        /* threads remembered */
#define TIDMAP_REFRESH_NS 10000000ull /* a miss rereads the list at most every 10 ms */

typedef struct tid_pair {
    pid_t host; /* /proc and ptrace id */
    pid_t ns;   /* the target's own id */
} tid_pair_t;

struct proc_tidmap {
    pid_t pid;
    pid_t ns_pid;
    int nested;
    int fixed; /* proc_tidmap_new_fixed: PAIRS is the thread list, never reread */
    size_t n;
    uint64_t refreshed_ns;        /* CLOCK_MONOTONIC of the last reread, 0 = never */
    tid_pair_t pairs[TIDMAP_MAX]; /* sorted by host id */
    tid_pair_t by_ns[TIDMAP_MAX]; /* the same, sorted by the target's id */
    pid_t tids[TIDMAP_MAX];       /* scratch for the listing */
};

proc_tidmap_t *proc_tidmap_new(pid_t pid)
{
    if (pid <= 0)
        return NULL;
    proc_tidmap_t *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->pid = pid;
    m->ns_pid = pid;
    pid_t ids[PROC_NSPID_MAX];
    size_t n = 0;
    if (proc_read_task_nspid(pid, pid, ids, PROC_NSPID_MAX, &n) == 0 && n > 1) {
        m->nested = 1;
        m->ns_pid = ids[n - 1];
    }
    return m;
}

proc_tidmap_t *proc_tidmap_new_fixed(pid_t pid, const pid_t *tids, size_t n)
{
    if (pid <= 0 || (!tids && n))
        return NULL;
    proc_tidmap_t *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->pid = m->ns_pid = pid;
    m->fixed = 1;
    for (size_t i = 0; i < n && m->n < TIDMAP_MAX; i++)
        m->pairs[m->n++] = (tid_pair_t){.host = tids[i], .ns = tids[i]};
    return m;
}

void proc_tidmap_free(proc_tidmap_t *m)
{
    free(m);
}

int proc_tidmap_nested(const proc_tidmap_t *m)
{
    return m && m->nested;
}

pid_t proc_tidmap_ns_pid(const proc_tidmap_t *m)
{
    return m ? m->ns_pid : 0;
}

static int cmp_host(const void *a, const void *b)
{
    pid_t x = ((const tid_pair_t *)a)->host, y = ((const tid_pair_t *)b)->host;
    return x < y ? -1 : x > y;
}

static int cmp_ns(const void *a, const void *b)
{
    pid_t x = ((const tid_pair_t *)a)->ns, y = ((const tid_pair_t *)b)->ns;
    return x < y ? -1 : x > y;
}

/* The pair of TID in the table sorted BY_NS or by host id, or NULL. */
static const tid_pair_t *find(const proc_tidmap_t *m, pid_t tid, int by_ns)
{
    tid_pair_t key = {.host = tid, .ns = tid};
    return by_ns ? bsearch(&key, m->by_ns, m->n, sizeof key, cmp_ns)
                 : bsearch(&key, m->pairs, m->n, sizeof key, cmp_host);
}

/* A miss rereads the thread list, at most every TIDMAP_REFRESH_NS. */
static pid_t lookup(proc_tidmap_t *m, pid_t tid, int by_ns)
{
    for (int pass = 0; pass < 2; pass++) {
        const tid_pair_t *p = find(m, tid, by_ns);
        if (p)
            return by_ns ? p->host : p->ns;
        if (pass == 0 && m->refreshed_ns && scry_now_ns() - m->refreshed_ns < TIDMAP_REFRESH_NS)
            break;
        if (pass == 0 && proc_tidmap_refresh(m) != 0)
            break;
    }
    return 0;
}

int proc_tidmap_refresh(proc_tidmap_t *m)
{
    if (!m)
        return SCRY_E_INVAL;
    m->refreshed_ns = scry_now_ns();
    if (!m->nested || m->fixed)
        return 0;
    int got = proc_list_tasks(m->pid, m->tids, TIDMAP_MAX);
    if (got < 0)
        return got;
    /* Keep the pairs of threads still listed (a live thread's ids never change); read the
     * status of new ones. Both lists are sorted by host id. */
    tid_pair_t *old = malloc(m->n * sizeof *old + 1);
    if (!old)
        return SCRY_E_NOMEM;
    size_t nold = m->n, j = 0, out = 0;
    memcpy(old, m->pairs, nold * sizeof *old);
    for (int i = 0; i < got; i++) {
        pid_t host = m->tids[i];
        while (j < nold && old[j].host < host)
            j++;
        if (j < nold && old[j].host == host) {
            m->pairs[out++] = old[j];
            continue;
        }
        pid_t ids[PROC_NSPID_MAX];
        size_t n = 0;
        if (proc_read_task_nspid(m->pid, host, ids, PROC_NSPID_MAX, &n) != 0 || n < 1 ||
            ids[0] != host)
            continue; /* gone meanwhile, or not ours to read */
        m->pairs[out].host = host;
        m->pairs[out].ns = ids[n - 1];
        out++;
    }
    free(old);
    m->n = out;
    memcpy(m->by_ns, m->pairs, out * sizeof *old);
    qsort(m->by_ns, out, sizeof *old, cmp_ns);
    return 0;
}

pid_t proc_tidmap_to_host(proc_tidmap_t *m, pid_t ns_tid)
{
    if (!m || ns_tid <= 0)
        return 0;
    return m->nested ? lookup(m, ns_tid, 1) : ns_tid;
}

pid_t proc_tidmap_to_ns(proc_tidmap_t *m, pid_t host_tid)
{
    if (!m || host_tid <= 0)
        return 0;
    return m->nested ? lookup(m, host_tid, 0) : host_tid;
}

size_t proc_tidmap_ns_tids(proc_tidmap_t *m, pid_t *out, size_t cap)
{
    if (!m || !out)
        return 0;
    if (m->fixed) {
        size_t n = m->n < cap ? m->n : cap;
        for (size_t i = 0; i < n; i++)
            out[i] = m->pairs[i].ns;
        return n;
    }
    if (!m->nested) {
        int got = proc_list_tasks(m->pid, out, cap);
        return got > 0 ? (size_t)got : 0;
    }
    if (proc_tidmap_refresh(m) != 0)
        return 0;
    size_t n = m->n < cap ? m->n : cap;
    for (size_t i = 0; i < n; i++)
        out[i] = m->pairs[i].ns;
    return n;
}
