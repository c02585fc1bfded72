/* parse.c - the parsers of /proc files (scry_proc.h): pure functions over the file's content,
 * one per kind of fact, so every reader (task.c, pidfile.c, discover.c, tasks.c) and the
 * fuzzer share them. Content is untrusted: every field is bounded.
 *
 * /proc/PID[/task/TID]/stat: "pid (comm) S f4 f5 ...": comm may hold spaces and ')', so the
 * fields are counted from the LAST ')'. /proc/PID[/task/TID]/status: "Key:\tvalue" lines.
 */
#include <stdint.h>
#include <string.h>

#include "scry_err.h"
#include "scry_proc.h"

/* Parses a decimal (optionally negative) or 0x-hex number at *P; advances past spaces.
 * Returns 0, or -1 when there is no digit or the number does not fit 64 bits. */
static int parse_num(const char **p, const char *end, int64_t *out, int *neg_seen)
{
    while (*p < end && (**p == ' ' || **p == '\t'))
        (*p)++;
    int neg = 0;
    if (*p < end && **p == '-') {
        neg = 1;
        (*p)++;
    }
    uint64_t v = 0;
    int digits = 0, base = 10;
    if (end - *p >= 2 && (*p)[0] == '0' && ((*p)[1] == 'x' || (*p)[1] == 'X')) {
        base = 16;
        *p += 2;
    }
    for (;; digits++) {
        char c = *p < end ? **p : 0;
        int d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (base == 16 && c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (base == 16 && c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            break;
        if (__builtin_mul_overflow(v, (uint64_t)base, &v) ||
            __builtin_add_overflow(v, (uint64_t)d, &v))
            return -1; /* more than 64 bits: never a value of the kernel's */
        (*p)++;
    }
    if (!digits)
        return -1;
    /* Negate in unsigned arithmetic: "-9223372036854775808" and wrapped values stay defined. */
    *out = (int64_t)(neg ? (uint64_t)0 - v : v);
    if (neg_seen)
        *neg_seen = neg;
    return 0;
}

/* ---- stat ------------------------------------------------------------------------------ */

/* The last ')' of stat content (the end of comm), or NULL. */
static const char *stat_comm_end(const char *buf, size_t len)
{
    for (const char *p = buf + len; p > buf; p--)
        if (p[-1] == ')')
            return p - 1;
    return NULL;
}

int proc_parse_stat_state(const char *buf, size_t len, char *state)
{
    if (!buf || !state)
        return SCRY_E_INVAL;
    const char *close_paren = stat_comm_end(buf, len);
    if (!close_paren || buf + len - close_paren <= 2 || close_paren[1] != ' ')
        return SCRY_E_CORRUPT;
    char c = close_paren[2];
    if (c < 'A' || c > 'z')
        return SCRY_E_CORRUPT;
    *state = c;
    return 0;
}

int proc_parse_stat_u64(const char *buf, size_t len, int field, uint64_t *out)
{
    if (!buf || !out || field < 3 || field > 52)
        return SCRY_E_INVAL;
    const char *end = buf + len;
    const char *close_paren = stat_comm_end(buf, len);
    if (!close_paren)
        return SCRY_E_CORRUPT;
    /* after ") " come fields 3, 4, ... */
    const char *p = close_paren + 1;
    for (int f = 3; f <= field; f++) {
        while (p < end && *p == ' ')
            p++;
        if (p >= end)
            return SCRY_E_CORRUPT;
        if (f == field) {
            uint64_t v = 0;
            int digits = 0;
            for (; p < end && *p >= '0' && *p <= '9' && digits < 20; p++, digits++)
                v = v * 10 + (uint64_t)(*p - '0');
            if (!digits)
                return SCRY_E_CORRUPT;
            *out = v;
            return 0;
        }
        while (p < end && *p != ' ')
            p++;
    }
    return SCRY_E_CORRUPT;
}

int proc_parse_stat_identity(const char *buf, size_t len, uint64_t *start_time, char *comm,
                             size_t commlen)
{
    if (!buf || !start_time || (commlen && !comm))
        return SCRY_E_INVAL;
    const char *open_paren = memchr(buf, '(', len);
    const char *close_paren = stat_comm_end(buf, len);
    if (!open_paren || !close_paren || close_paren < open_paren)
        return SCRY_E_CORRUPT;
    if (commlen) {
        size_t n = (size_t)(close_paren - open_paren - 1);
        if (n >= commlen)
            n = commlen - 1;
        memcpy(comm, open_paren + 1, n);
        comm[n] = '\0';
    }
    return proc_parse_stat_u64(buf, len, 22, start_time); /* the start time */
}

/* ---- status ---------------------------------------------------------------------------- */

/* Finds the line of status content that starts with KEY (e.g. "Uid:"): *VAL receives the
 * first byte after the key, *EOL the line's end. Returns 0 or SCRY_E_NOTFOUND. */
static int status_line(const char *buf, size_t len, const char *key, const char **val,
                       const char **eol)
{
    size_t klen = strlen(key);
    const char *end = buf + len;
    for (const char *line = buf; line < end;) {
        const char *e = memchr(line, '\n', (size_t)(end - line));
        if (!e)
            e = end;
        if ((size_t)(e - line) >= klen && memcmp(line, key, klen) == 0) {
            *val = line + klen;
            *eol = e;
            return 0;
        }
        line = e + 1;
    }
    return SCRY_E_NOTFOUND;
}

/* Parses the first number of status line KEY, a count or id (0 <= value <= MAX). Returns 0,
 * SCRY_E_NOTFOUND or SCRY_E_CORRUPT. */
static int status_u64(const char *buf, size_t len, const char *key, uint64_t max, uint64_t *out)
{
    const char *p, *eol;
    int err = status_line(buf, len, key, &p, &eol);
    if (err)
        return err;
    int64_t v;
    int neg = 0;
    if (parse_num(&p, eol, &v, &neg) != 0 || neg || (uint64_t)v > max)
        return SCRY_E_CORRUPT;
    *out = (uint64_t)v;
    return 0;
}

int proc_parse_status_uid(const char *buf, size_t len, uid_t *uid)
{
    if (!buf || !uid)
        return SCRY_E_INVAL;
    uint64_t v;
    int err = status_u64(buf, len, "Uid:", UINT32_MAX, &v);
    if (err)
        return err;
    *uid = (uid_t)v;
    return 0;
}

int proc_parse_status_nspid(const char *buf, size_t len, pid_t *ids, size_t cap, size_t *n)
{
    if (!buf || !ids || !n)
        return SCRY_E_INVAL;
    *n = 0;
    const char *p, *eol;
    int err = status_line(buf, len, "NSpid:", &p, &eol);
    if (err)
        return err;
    size_t count = 0;
    int64_t v;
    while (parse_num(&p, eol, &v, NULL) == 0) {
        if (v <= 0 || v > INT32_MAX || count >= cap || count >= PROC_NSPID_MAX)
            return SCRY_E_CORRUPT;
        ids[count++] = (pid_t)v;
    }
    while (p < eol && (*p == ' ' || *p == '\t'))
        p++;
    if (count == 0 || p != eol)
        return SCRY_E_CORRUPT;
    *n = count;
    return 0;
}

int proc_parse_status_switches(const char *buf, size_t len, uint64_t *vol, uint64_t *nonvol)
{
    if (!buf || !vol || !nonvol)
        return SCRY_E_INVAL;
    uint64_t v, nv;
    int err = status_u64(buf, len, "voluntary_ctxt_switches:", INT64_MAX, &v);
    if (!err)
        err = status_u64(buf, len, "nonvoluntary_ctxt_switches:", INT64_MAX, &nv);
    if (err)
        return err;
    *vol = v;
    *nonvol = nv;
    return 0;
}

/* ---- syscall, schedstat ------------------------------------------------------------------ */

int proc_parse_syscall(const char *buf, size_t len, proc_syscall_t *out)
{
    if (!buf || !out)
        return SCRY_E_INVAL;
    memset(out, 0, sizeof *out);
    out->nr = PROC_SYSCALL_UNKNOWN;
    if (len >= 7 && memcmp(buf, "running", 7) == 0) {
        out->nr = PROC_SYSCALL_RUNNING;
        return 0;
    }
    const char *p = buf, *end = buf + len;
    int64_t v[9];
    size_t n = 0;
    while (n < 9 && parse_num(&p, end, &v[n], NULL) == 0)
        n++;
    if (n == 3 && v[0] == -1) { /* "-1 sp pc": in the kernel, not in a syscall */
        out->nr = PROC_SYSCALL_NONE;
        out->sp = (uint64_t)v[1];
        out->pc = (uint64_t)v[2];
        return 0;
    }
    if (n == 9 && v[0] >= 0 && v[0] < 4096) {
        out->nr = (long)v[0];
        for (int i = 0; i < 6; i++)
            out->args[i] = (uint64_t)v[1 + i];
        out->sp = (uint64_t)v[7];
        out->pc = (uint64_t)v[8];
        return 0;
    }
    if (n == 1 && v[0] == -1) { /* older kernels: "-1" alone */
        out->nr = PROC_SYSCALL_NONE;
        return 0;
    }
    return SCRY_E_CORRUPT;
}

int proc_parse_schedstat(const char *buf, size_t len, uint64_t *run_ns, uint64_t *wait_ns,
                         uint64_t *slices)
{
    if (!buf)
        return SCRY_E_INVAL;
    const char *p = buf, *end = buf + len;
    int64_t v[3];
    int neg[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++)
        if (parse_num(&p, end, &v[i], &neg[i]) != 0 || neg[i])
            return SCRY_E_CORRUPT;
    if (run_ns)
        *run_ns = (uint64_t)v[0];
    if (wait_ns)
        *wait_ns = (uint64_t)v[1];
    if (slices)
        *slices = (uint64_t)v[2];
    return 0;
}
