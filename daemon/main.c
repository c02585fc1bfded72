/* main.c - the scry command line. */
#include "commands.h"
#include "options.h"
#include "scry_err.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    /* serve and ctl have their own option tables (every serve option is also a key of the
     * config file) */
    if (argc >= 2 && strcmp(argv[1], "serve") == 0)
        return cmd_serve(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "ctl") == 0)
        return cmd_ctl(argc - 2, argv + 2);
    if (argc == 3 && strcmp(argv[1], "help") == 0 &&
        (strcmp(argv[2], "serve") == 0 || strcmp(argv[2], "ctl") == 0)) {
        char *help[] = {(char *)"--help", NULL};
        return argv[2][0] == 's' ? cmd_serve(1, help) : cmd_ctl(1, help);
    }
    scry_config_t cfg;
    if (options_parse(argc, argv, &cfg) != 0)
        return 2;
    switch (cfg.command) {
    case CMD_HELP:
        options_usage(cfg.help_for);
        return 0;
    case CMD_VERSION:
        printf("scry 0.1.0\n");
        return 0;
    case CMD_RECORD:
        return cmd_record(&cfg);
    case CMD_DUMP:
        return cmd_dump(&cfg);
    case CMD_TOP:
        return cmd_top(&cfg);
    case CMD_DIFF:
        return cmd_diff(&cfg);
    default:
        options_usage(CMD_NONE);
        return 2;
    }
}
