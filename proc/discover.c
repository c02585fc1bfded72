/* discover.c - process events from the kernel connector, and /proc scans. */
#include "discover.h"
#include "scry_err.h"
#include "scry_proc.h"

#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>

#include <ctype.h>
#include <dirent.h>
#include <stddef.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct proc_discover {
    int fd;
};

static int connector_subscribe(int fd, int on)
{
    struct {
        struct nlmsghdr nl;
        struct cn_msg cn;
        enum proc_cn_mcast_op op;
    } __attribute__((packed)) msg;
    memset(&msg, 0, sizeof msg);
    msg.nl.nlmsg_len = sizeof msg;
    msg.nl.nlmsg_type = NLMSG_DONE;
    msg.nl.nlmsg_pid = 0;
    msg.cn.id.idx = CN_IDX_PROC;
    msg.cn.id.val = CN_VAL_PROC;
    msg.cn.len = sizeof(enum proc_cn_mcast_op);
    msg.op = on ? PROC_CN_MCAST_LISTEN : PROC_CN_MCAST_IGNORE;
    return send(fd, &msg, sizeof msg, 0) == (ssize_t)sizeof msg ? 0 : -1;
}

proc_discover_t *proc_discover_new(int use_connector, char *why, size_t whylen)
{
    proc_discover_t *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->fd = -1;
    if (why && whylen)
        why[0] = '\0';
    if (!use_connector) {
        if (why)
            snprintf(why, whylen, "disabled by the configuration");
        return d;
    }
    int fd = socket(PF_NETLINK, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_CONNECTOR);
    if (fd < 0)
        goto fail;
    struct sockaddr_nl addr = {.nl_family = AF_NETLINK, .nl_groups = CN_IDX_PROC, .nl_pid = 0};
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0)
        goto fail;
    int rcvbuf = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
    if (connector_subscribe(fd, 1) != 0)
        goto fail;
    d->fd = fd;
    return d;
fail:
    if (why)
        snprintf(why, whylen, "process-events connector unavailable (%s)", strerror(errno));
    if (fd >= 0)
        close(fd);
    return d;
}

void proc_discover_free(proc_discover_t *d)
{
    if (!d)
        return;
    if (d->fd >= 0) {
        connector_subscribe(d->fd, 0);
        close(d->fd);
    }
    free(d);
}

int proc_discover_fd(const proc_discover_t *d)
{
    return d ? d->fd : -1;
}

/* Handles one connector payload of LEN bytes. */
static int handle_event(const struct proc_event *ev, size_t len, proc_discover_cb cb, void *ctx)
{
    if (len < offsetof(struct proc_event, event_data))
        return 0;
    switch (ev->what) {
    case PROC_EVENT_FORK:
        if (len < offsetof(struct proc_event, event_data) + sizeof ev->event_data.fork)
            return 0;
        if (ev->event_data.fork.child_pid != ev->event_data.fork.child_tgid)
            return 0; /* a new thread */
        cb(ctx, PROC_DISCOVER_NEW, ev->event_data.fork.child_tgid, ev->event_data.fork.parent_tgid,
           ev->timestamp_ns);
        return 1;
    case PROC_EVENT_EXEC:
        if (len < offsetof(struct proc_event, event_data) + sizeof ev->event_data.exec)
            return 0;
        cb(ctx, PROC_DISCOVER_EXEC, ev->event_data.exec.process_tgid, 0, ev->timestamp_ns);
        return 1;
    case PROC_EVENT_EXIT:
        if (len < offsetof(struct proc_event, event_data) + sizeof ev->event_data.exit)
            return 0;
        if (ev->event_data.exit.process_pid != ev->event_data.exit.process_tgid)
            return 0; /* a thread */
        cb(ctx, PROC_DISCOVER_EXIT, ev->event_data.exit.process_tgid, 0, ev->timestamp_ns);
        return 1;
    default:
        return 0;
    }
}

int proc_discover_read(proc_discover_t *d, proc_discover_cb cb, void *ctx)
{
    if (!d || d->fd < 0)
        return 0;
    int events = 0;
    char buf[8192] __attribute__((aligned(NLMSG_ALIGNTO)));
    for (int round = 0; round < 4096; round++) {
        ssize_t n = recv(d->fd, buf, sizeof buf, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            if (errno == ENOBUFS) {
                cb(ctx, PROC_DISCOVER_LOST, 0, 0, 0);
                events++;
                continue;
            }
            return SCRY_E_IO;
        }
        size_t left = (size_t)n;
        for (struct nlmsghdr *nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, left);
             nh = NLMSG_NEXT(nh, left)) {
            if (nh->nlmsg_type == NLMSG_NOOP || nh->nlmsg_type == NLMSG_ERROR)
                continue;
            size_t plen = NLMSG_PAYLOAD(nh, 0);
            if (plen < sizeof(struct cn_msg))
                continue;
            const struct cn_msg *cn = NLMSG_DATA(nh);
            if (cn->id.idx != CN_IDX_PROC || cn->id.val != CN_VAL_PROC)
                continue;
            size_t clen = cn->len;
            if (clen > plen - sizeof(struct cn_msg))
                continue;
            /* the payload is not 8-byte aligned inside the message: copy it */
            struct proc_event ev;
            memset(&ev, 0, sizeof ev);
            memcpy(&ev, cn->data, clen < sizeof ev ? clen : sizeof ev);
            events += handle_event(&ev, clen, cb, ctx);
        }
    }
    return events;
}

int proc_discover_scan(proc_discover_cb cb, void *ctx)
{
    DIR *dir = opendir("/proc");
    if (!dir)
        return SCRY_E_IO;
    int count = 0;
    struct dirent *de;
    while ((de = readdir(dir)) != NULL && count < 4 * 1024 * 1024) {
        if (!isdigit((unsigned char)de->d_name[0]))
            continue;
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end != '\0' || pid <= 0)
            continue;
        cb(ctx, PROC_DISCOVER_NEW, (pid_t)pid, 0, 0);
        count++;
    }
    closedir(dir);
    return count;
}

typedef struct list_ctx {
    proc_entry_t *out;
    size_t cap, n;
} list_ctx_t;

static void list_one(void *ctx, enum proc_discover_event ev, pid_t pid, pid_t parent,
                     uint64_t when_ns)
{
    (void)ev, (void)parent, (void)when_ns;
    list_ctx_t *c = ctx;
    if (c->n >= c->cap)
        return;
    char buf[1024];
    long len = proc_read_file(pid, 0, "stat", buf, sizeof buf);
    uint64_t ppid = 0, start = 0;
    char state = 0;
    if (len <= 0 || proc_parse_stat_u64(buf, (size_t)len, 4, &ppid) != 0 ||
        proc_parse_stat_u64(buf, (size_t)len, 22, &start) != 0 ||
        proc_parse_stat_state(buf, (size_t)len, &state) != 0 || ppid > INT32_MAX)
        return;
    c->out[c->n++] = (proc_entry_t){pid, (pid_t)ppid, start, state};
}

static int cmp_entry(const void *a, const void *b)
{
    pid_t x = ((const proc_entry_t *)a)->pid, y = ((const proc_entry_t *)b)->pid;
    return (x > y) - (x < y);
}

int proc_list_all(proc_entry_t *out, size_t cap)
{
    list_ctx_t c = {out, cap, 0};
    int err = proc_discover_scan(list_one, &c);
    if (err < 0)
        return err;
    qsort(out, c.n, sizeof *out, cmp_entry);
    return (int)c.n;
}

const proc_entry_t *proc_entry_find(const proc_entry_t *ents, size_t n, pid_t pid)
{
    proc_entry_t key = {.pid = pid};
    return bsearch(&key, ents, n, sizeof *ents, cmp_entry);
}

size_t proc_descendants(const proc_entry_t *ents, size_t n, pid_t root, pid_t *out, size_t cap)
{
    /* breadth first: OUT[k..] are the children of OUT[k] still to visit */
    size_t count = 0;
    for (size_t k = 0; k <= count && count < cap; k++) {
        pid_t parent = k == 0 ? root : out[k - 1];
        for (size_t i = 0; i < n && count < cap; i++)
            if (ents[i].ppid == parent && ents[i].pid != root && ents[i].state != 'Z' &&
                ents[i].state != 'X')
                out[count++] = ents[i].pid;
        if (k == count)
            break;
    }
    return count;
}
