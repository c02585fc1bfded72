/* test_serve_util.h - the CHECK macro and small helpers of the serve/ unit tests. */
#ifndef TEST_SERVE_UTIL_H
#define TEST_SERVE_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failures;
static long checks;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        checks++;                                                                                  \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

static inline int test_summary(const char *name)
{
    printf("%s: %ld checks, %d failed\n", name, checks, failures);
    return failures ? 1 : 0;
}

static inline double test_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
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
