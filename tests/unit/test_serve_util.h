/* test_serve_util.h - the CHECK macro and small helpers of the serve/ unit tests. */
#ifndef TEST_SERVE_UTIL_H
#define TEST_SERVE_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "scry_time.h"

static inline int test_summary(const char *name)
{
    return check_summary(name);
}

/* Writes TEXT to PATH; returns 0 or -1. */
static inline int test_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f) == 0 ? 0 : -1;
}

#endif
