/* top.c - 'scry top': a live view (issue 5). */
#include "commands.h"

#include <stdio.h>

int cmd_top(const scry_config_t *cfg)
{
    (void)cfg;
    fprintf(stderr, "scry: 'top' is not implemented yet\n");
    return 2;
}
