/* select.h - which processes scry serve profiles, and under which service name. */
#ifndef SCRY_SERVE_SELECT_H
#define SCRY_SERVE_SELECT_H

#include "config.h"
#include "process.h"

#define SERVE_SELECT_NONE (-1) /* no rule holds: not a target */
#define SERVE_SELECT_ALL  (-2) /* only all-python holds */

/* Decides whether process P is a target under CFG. Rules are tried in order; the first
 * that holds wins; all-python is tried last (Python processes only). A rule selects any
 * process (a PID rule may name a Python process whose executable is not called python),
 * but the sampler later refuses what is not Python. Writes the service name (the rule's
 * name, else derived from the command line) to NAME and the rule's rate (0: global) to
 * RATE_HZ. Returns the rule index, SERVE_SELECT_ALL, or SERVE_SELECT_NONE. */
int serve_select(const serve_config_t *cfg, const proc_process_t *p, char *name, size_t namelen,
                 double *rate_hz);

/* A cheap first look for a process P of which only the command (proc_process_read_command)
 * is known: returns 0 when no rule can hold (all-python is off and every rule has match
 * selectors, none of which matches), else 1 (read the rest and call serve_select). */
int serve_select_may_hold(const serve_config_t *cfg, const proc_process_t *p);

/* Returns 1 when rule R holds for P, else 0. */
int serve_select_rule_holds(const serve_rule_t *r, const proc_process_t *p);

#endif
