/* commands.h - the subcommands of the scry executable. */
#ifndef SCRY_COMMANDS_H
#define SCRY_COMMANDS_H

#include "options.h"
#include "pystate.h"
#include "pyrepr.h"
#include "report.h"
#include "sampler.h"
#include "scry_proc.h"

#include <stdio.h>
#include <stdlib.h>

/* Each returns the process exit code. */
int cmd_record(const scry_config_t *cfg);
int cmd_dump(const scry_config_t *cfg);
/* dump --async of process cfg->pid, written to OUT (dump_async.c). */
int cmd_dump_async(const scry_config_t *cfg, FILE *out);
int cmd_top(const scry_config_t *cfg);
/* The asyncio tasks of the open target T (described as WHAT: "NAME (EXE)") to OUT, as text
 * or JSON. Returns 0 or 1 after a message (dump_async.c). */
int dump_async_target(pystate_target_t *t, const char *what, int json, FILE *out);
/* dump --core: the threads of a core file (dump_core.c). */
int cmd_dump_core(const scry_config_t *cfg);

/* Writes the dump of every thread of the open target T (one sampler tick with every thread,
 * idle ones too, over OPTS otherwise; STRINGS is T's string table) to OUT in FMT, through
 * report_dump_write: what 'scry dump' prints, also answered by scry serve (ctl dump).
 * Returns 0, or a negative code with why in MSG (empty when sampler_new already printed it:
 * a forced perf back end refused). LOCALS: each Python frame's arguments and locals too
 * (--locals; read after the stacks, shown where a thread's stack did not change since).
 * A stack that changes while it is read is read again, up to DUMP_TORN_RETRIES times, then
 * shown with the part read whole (report_dump_thread_t.partial). No thread with a stack to
 * show: SCRY_E_AGAIN, MSG says so (a dump is never empty). */
int dump_target_write(pystate_target_t *t, strtab_t *strings, const sampler_opts_t *opts,
                      int locals, enum report_dump_format fmt, FILE *out, char *msg, size_t msglen);
/* Opens process PID for one dump: a new string table in *STRINGS and the target in *T, read
 * with OPTS (sampler_open_target). Returns 0, or 1 after a message with whatever was made
 * left in *STRINGS and *T for the caller to free (pystate_target_free, strtab_free; both
 * accept NULL). (dump.c) */
int dump_open(pid_t pid, const pystate_open_opts_t *opts, strtab_t **strings, pystate_target_t **t);
/* --locals of one frame: read at ADDR into L (strings interned in STRINGS; BUF holds
 * PYSTATE_LOCALS_MAX entries of scratch). Returns 0, SCRY_E_NOMEM, or a fatal read error
 * (SCRY_E_GONE, SCRY_E_PERM); a torn frame leaves L unread. (dump.c) */
int dump_frame_locals(pystate_target_t *t, strtab_t *strings, raddr_t addr, pystate_local_t *buf,
                      report_dump_locals_t *l);
/* Frees the locals of TH (dump_frame_locals' variables and the array). */
void dump_free_locals(report_dump_thread_t *th);
/* `scry diff BASE.json NEW.json`: reads two JSON reports, writes their comparison. */
int cmd_diff(const scry_config_t *cfg);

/* `scry serve` (serve_cmd.c, over serve/serve.h) and `scry ctl` (ctl_client.c, the control
 * socket's client): ARGV[0] is the first argument after the command name. They parse their
 * own options (serve/config.h's table; ctl_client.c). */
int cmd_serve(int argc, char **argv);
int cmd_ctl(int argc, char **argv);

#endif
