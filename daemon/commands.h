/* commands.h - the subcommands of the scry executable. */
#ifndef SCRY_COMMANDS_H
#define SCRY_COMMANDS_H

#include "options.h"
#include "pystate.h"

#include <stdlib.h>

/* Each returns the process exit code. */
int cmd_record(const scry_config_t *cfg);
int cmd_dump(const scry_config_t *cfg);
int cmd_dump_async(const scry_config_t *cfg); /* dump --async (dump_async.c) */
int cmd_top(const scry_config_t *cfg);
/* `scry diff BASE.json NEW.json`: reads two JSON reports, writes their comparison. */
int cmd_diff(const scry_config_t *cfg);

/* `scry serve` and `scry ctl`: ARGV[0] is the first argument after the command name.
 * They parse their own options (serve/config.h's table, serve/ctl.h). */
int cmd_serve(int argc, char **argv);
int cmd_ctl(int argc, char **argv);

#endif
