/*
 * The one assertion header of the C unit tests (after libuv's test/task.h).
 *
 * A failed check does not stop the test: it prints where it failed, the expression and, for
 * the comparison check_count, both values, and counts the failure; check_summary() at the end of
 * main() prints the totals and gives the exit status.
 *
 *   CHECK(cond)                        any condition
 *   CHECK(cond, "fmt", ...)            with a message (printf format, checked by the compiler)
 *   CHECK_INT(a, op, b [, "fmt", ...]) signed integers compared with OP (==, !=, <, <=, >, >=)
 *   CHECK_UINT(a, op, b ...)           unsigned integers
 *   CHECK_HEX(a, op, b ...)            unsigned integers printed in hex (addresses)
 *   CHECK_DBL(a, op, b ...)            doubles
 *   CHECK_STR(a, op, b ...)            C strings compared with strcmp (NULL sorts first)
 *
 * Only the first CHECK_MAX_REPORTS failures are printed; all are counted.
 */
#ifndef SCRY_TESTS_CHECK_H
#define SCRY_TESTS_CHECK_H

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#define CHECK_MAX_REPORTS 50

/* The counters of this test executable (each test is one translation unit). */
static long check_count __attribute__((unused));
static long check_failures __attribute__((unused));

/* Counts a failure of EXPR at FILE:LINE and prints it (with the message FMT, which starts
 * with a space) unless too many were printed already. Returns 1 when it printed. */
__attribute__((unused, format(printf, 4, 5))) static int
check__fail(const char *file, int line, const char *expr, const char *fmt, ...)
{
    check_failures++;
    if (check_failures > CHECK_MAX_REPORTS)
        return 0;
    fprintf(stderr, "%s:%d: CHECK(%s) failed:", file, line, expr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

/* strcmp that orders NULL before every string. */
__attribute__((unused)) static int check__strcmp(const char *a, const char *b)
{
    if (!a || !b)
        return (a != NULL) - (b != NULL);
    return strcmp(a, b);
}

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        check_count++;                                                                             \
        if (!(cond))                                                                               \
            check__fail(__FILE__, __LINE__, #cond, " " __VA_ARGS__);                               \
    } while (0)

#define CHECK__CMP(type, pf, a, op, b, ...)                                                        \
    do {                                                                                           \
        type check__a = (type)(a);                                                                 \
        type check__b = (type)(b);                                                                 \
        check_count++;                                                                             \
        if (!(check__a op check__b) &&                                                             \
            check__fail(__FILE__, __LINE__, #a " " #op " " #b, " " __VA_ARGS__))                   \
            fprintf(stderr, "    %s = " pf "\n    %s = " pf "\n", #a, check__a, #b, check__b);     \
    } while (0)

#define CHECK_INT(a, op, b, ...)  CHECK__CMP(long long, "%lld", a, op, b, __VA_ARGS__)
#define CHECK_UINT(a, op, b, ...) CHECK__CMP(unsigned long long, "%llu", a, op, b, __VA_ARGS__)
#define CHECK_HEX(a, op, b, ...)  CHECK__CMP(unsigned long long, "0x%llx", a, op, b, __VA_ARGS__)
#define CHECK_DBL(a, op, b, ...)  CHECK__CMP(double, "%.17g", a, op, b, __VA_ARGS__)

#define CHECK_STR(a, op, b, ...)                                                                   \
    do {                                                                                           \
        const char *check__a = (a);                                                                \
        const char *check__b = (b);                                                                \
        check_count++;                                                                             \
        if (!(check__strcmp(check__a, check__b) op 0) &&                                           \
            check__fail(__FILE__, __LINE__, #a " " #op " " #b, " " __VA_ARGS__))                   \
            fprintf(stderr, "    %s = \"%s\"\n    %s = \"%s\"\n", #a,                              \
                    check__a ? check__a : "(null)", #b, check__b ? check__b : "(null)");           \
    } while (0)

/* Prints "NAME: N checks, M failures" and returns main()'s exit status (0 when none failed).
 */
__attribute__((unused)) static int check_summary(const char *name)
{
    fprintf(stderr, "%s: %ld checks, %ld failures\n", name, check_count, check_failures);
    return check_failures ? 1 : 0;
}

/* Called in a child the test forked, before exec: the child gets SIGKILL when the test
 * process ends, however it ends (a sanitizer abort, a ctest timeout), so no target outlives its
 * test holding ctest's output pipe open (which made ctest wait for its full timeout). */
__attribute__((unused)) static void check_child_dies_with_test(void)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
}

/* The tests' pseudo-random numbers (xorshift64, from the caller's *STATE, never 0): the same
 * sequence on every run, so a failure is reproducible. */
__attribute__((unused)) static unsigned long long check_rand64(unsigned long long *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* Writes TEXT to the file PATH (created or truncated); the open is a check. */
__attribute__((unused)) static void check_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "%s", path);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* Makes DIR/REL a symbolic link to TARGET; checked. */
__attribute__((unused)) static void check_symlink_at(const char *dir, const char *rel,
                                                     const char *target)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    CHECK(symlink(target, p) == 0, "%s -> %s", p, target);
}

/* Removes the tree DIR (the test's own scratch directory) with rm -rf. Returns 0, or -1
 * after saying so on stderr (not counted as a failed check). */
__attribute__((unused)) static int check_rmtree(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) == 0)
        return 0;
    fprintf(stderr, "could not remove %s\n", dir);
    return -1;
}

#endif
