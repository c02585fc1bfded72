/* select.c - target selection rules. */
#include "select.h"

#include <stdio.h>
#include <string.h>

static int cgroup_under(const char *cg, const char *prefix)
{
    size_t n = strlen(prefix);
    while (n > 1 && prefix[n - 1] == '/')
        n--;
    if (strncmp(cg, prefix, n) != 0)
        return 0;
    return cg[n] == '\0' || cg[n] == '/' || n == 1;
}

int serve_select_rule_holds(const serve_rule_t *r, const proc_process_t *p)
{
    if (r->n_pid) {
        size_t i = 0;
        while (i < r->n_pid && r->pid[i] != p->pid)
            i++;
        if (i == r->n_pid)
            return 0;
    }
    if (r->n_uid) {
        size_t i = 0;
        while (i < r->n_uid && r->uid[i] != p->uid)
            i++;
        if (i == r->n_uid)
            return 0;
    }
    if (r->n_container) {
        size_t i = 0;
        while (i < r->n_container && (!p->container[0] || strncmp(p->container, r->container[i],
                                                                  strlen(r->container[i])) != 0))
            i++;
        if (i == r->n_container)
            return 0;
    }
    if (r->n_cgroup) {
        size_t i = 0;
        while (i < r->n_cgroup && !cgroup_under(p->cgroup, r->cgroup[i]))
            i++;
        if (i == r->n_cgroup)
            return 0;
    }
    if (r->n_match) {
        size_t i = 0;
        while (i < r->n_match && regexec(&r->match[i], p->cmdline, 0, NULL, 0) != 0 &&
               (!p->exe[0] || regexec(&r->match[i], p->exe, 0, NULL, 0) != 0))
            i++;
        if (i == r->n_match)
            return 0;
    }
    return 1;
}

int serve_select(const serve_config_t *cfg, const proc_process_t *p, char *name, size_t namelen,
                 double *rate_hz)
{
    *rate_hz = 0;
    for (size_t i = 0; i < cfg->n_rules; i++) {
        const serve_rule_t *r = &cfg->rules[i];
        if (!serve_select_rule_holds(r, p))
            continue;
        if (r->name)
            snprintf(name, namelen, "%s", r->name);
        else
            proc_service_name(p->argv, p->argc, p->comm, name, namelen);
        *rate_hz = r->rate_hz;
        return (int)i;
    }
    if (cfg->all_python > 0 && p->is_python) {
        proc_service_name(p->argv, p->argc, p->comm, name, namelen);
        return SERVE_SELECT_ALL;
    }
    return SERVE_SELECT_NONE;
}

int serve_select_may_hold(const serve_config_t *cfg, const proc_process_t *p)
{
    if (cfg->all_python > 0)
        return 1;
    for (size_t i = 0; i < cfg->n_rules; i++) {
        const serve_rule_t *r = &cfg->rules[i];
        if (r->n_match == 0)
            return 1;
        for (size_t k = 0; k < r->n_match; k++)
            if (regexec(&r->match[k], p->cmdline, 0, NULL, 0) == 0 ||
                (p->exe[0] && regexec(&r->match[k], p->exe, 0, NULL, 0) == 0))
                return 1;
    }
    return 0;
}
