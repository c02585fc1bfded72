/* serve.h - `scry serve` as a library: the front end (daemon/serve_cmd.c) parses the
 * configuration (config.h), serve_run runs the service on it. */
#ifndef SCRY_SERVE_H
#define SCRY_SERVE_H

#include "config.h"

/* Runs `scry serve` over CFG until SIGTERM or SIGINT: windows written to the out-dir and
 * pushed, the control socket answered, SIGHUP reloading the configuration from ARGC/ARGV
 * (the arguments CFG was parsed from: they must outlive the call). Blocks SIGHUP, SIGTERM
 * and SIGINT (read from a signalfd) and ignores SIGPIPE for the rest of the process. Takes
 * CFG (freed before it returns, as any configuration a reload made). Returns 0 after a
 * clean stop (the current windows written), or a negative code when the outputs or the
 * signalfd could not be opened or the loop failed (the log says why). */
int serve_run(serve_config_t *cfg, int argc, char **argv);

#endif
