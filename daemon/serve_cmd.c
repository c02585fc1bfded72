/* serve_cmd.c - the `scry serve` command: its usage and options; the service is serve/. */
#include "commands.h"
#include "config.h"
#include "serve.h"

#include <stdio.h>
#include <string.h>

static void serve_usage(void)
{
    printf("usage: scry serve [options]\n"
           "Keeps periodic flame graphs of every selected Python process on this host in\n"
           "--out-dir, and pushes them to Pyroscope when --pyroscope-url is set.\n\n");
    serve_config_usage(stdout);
    printf("\nexamples:\n"
           "  scry serve --out-dir /var/lib/scry --interval 60\n"
           "  scry serve --match 'gunicorn|celery' --pyroscope-url http://pyroscope:4040\n"
           "  scry serve --check-config --config /etc/scry/scry.conf\n");
}

int cmd_serve(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            serve_usage();
            return 0;
        }
    }
    char msg[1024] = "";
    serve_config_t *cfg = serve_config_from_args(argc, argv, msg, sizeof msg);
    if (!cfg) {
        fprintf(stderr, "scry serve: %s\n", msg);
        return 2;
    }
    if (cfg->check_only) {
        serve_config_print(cfg, stdout);
        serve_config_free(cfg);
        return 0;
    }
    return serve_run(cfg, argc, argv) == 0 ? 0 : 1;
}
