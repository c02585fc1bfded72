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

/* `scry diff BASE.json NEW.json`: reads two JSON reports, writes their comparison. */
int cmd_diff(const scry_config_t *cfg);

/* `scry serve` (serve_cmd.c, over serve/serve.h) and `scry ctl` (ctl_client.c, the control
 * socket's client): ARGV[0] is the first argument after the command name. They parse their
 * own options (serve/config.h's table; ctl_client.c). */
int cmd_serve(int argc, char **argv);
int cmd_ctl(int argc, char **argv);

#endif
