/* scope.c - which files are the user's code (the line views' attribution target).
 *
 * A sample is charged, in every line view, to its innermost frame in the user's code, so
 * that time and memory spent in csv.py, numpy's numeric.py or "<__array_function__
 * internals>" land on the user's line that called them (Scalene's rule). The standard
 * library is recognised from outside by the shape of co_filename alone: every CPython
 * install keeps it under a directory "lib/pythonX.Y" (or lib64, or a pythonXY.zip there),
 * third-party code under site-packages or dist-packages. Nothing is read from the target.
 */
#include "report_internal.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "scry_err.h"

/* 1 when S contains "/lib/python" or "/lib64/python" followed by a digit. */
static int in_python_lib(const char *s)
{
    static const char *const dirs[] = {"/lib/python", "/lib64/python"};
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
        size_t n = strlen(dirs[d]);
        for (const char *q = strstr(s, dirs[d]); q; q = strstr(q + 1, dirs[d]))
            if (q[n] >= '0' && q[n] <= '9')
                return 1;
    }
    return 0;
}

int report_is_user_file(const char *file)
{
    if (!file || !file[0] || file[0] == '<')
        return 0;
    if (strstr(file, "/site-packages/") || strstr(file, "/dist-packages/"))
        return 0;
    /* relative paths are the user's (a script run from its directory) */
    if (in_python_lib(file))
        return 0;
    return 1;
}

/* Index just past the bracket expression opening at P[0] == '[', or 0 when it never closes. */
static size_t bracket_end(const char *p)
{
    size_t j = 1;
    if (p[j] == '!' || p[j] == '^')
        j++;
    if (p[j] == ']') /* a ']' first is a member */
        j++;
    for (; p[j]; j++) {
        if (p[j] == ']')
            return j + 1;
        if (p[j] == '[' && (p[j + 1] == ':' || p[j + 1] == '.' || p[j + 1] == '=')) {
            const char *close = p[j + 1] == ':' ? ":]" : p[j + 1] == '.' ? ".]" : "=]";
            const char *e = strstr(p + j + 2, close);
            if (!e)
                return 0;
            j = (size_t)(e - p) + 1;
        } else if (p[j] == '\\' && p[j + 1]) {
            j++;
        }
    }
    return 0;
}

int report_glob_check(const char *pat, const char **why)
{
    const char *w = NULL;
    size_t n = pat ? strnlen(pat, REPORT_GLOB_MAX + 1) : 0;
    if (!n)
        w = "the pattern is empty";
    else if (n > REPORT_GLOB_MAX)
        w = "the pattern is longer than 1024 bytes";
    for (size_t i = 0; !w && i < n; i++) {
        if (pat[i] == '\\') {
            if (!pat[i + 1])
                w = "the pattern ends with a lone '\\'";
            i++;
        } else if (pat[i] == '[') {
            size_t e = bracket_end(pat + i);
            if (!e)
                w = "a '[' is never closed by ']'";
            i += e ? e - 1 : 0;
        }
    }
    if (why)
        *why = w;
    return w ? SCRY_E_INVAL : 0;
}

static int matches(char *const *pats, unsigned n, const char *file)
{
    for (unsigned i = 0; i < n; i++)
        if (fnmatch(pats[i], file, 0) == 0)
            return 1;
    return 0;
}

int report__user_file(const report_profile_t *p, const char *file)
{
    if (!file)
        return 0;
    if (matches(p->exclude, p->nexclude, file))
        return 0;
    if (matches(p->include, p->ninclude, file))
        return 1;
    return report_is_user_file(file);
}

static char **dup_list(const char *const *src, unsigned n, int *oom)
{
    if (!n || !src)
        return NULL;
    char **d = calloc(n, sizeof *d);
    if (!d) {
        *oom = 1;
        return NULL;
    }
    for (unsigned i = 0; i < n; i++)
        if (!(d[i] = strdup(src[i] ? src[i] : "")))
            *oom = 1;
    return d;
}

static void free_list(char **l, unsigned n)
{
    for (unsigned i = 0; l && i < n; i++)
        free(l[i]);
    free(l);
}

int report__scope_copy(report_profile_t *p, const report_meta_t *meta)
{
    int oom = 0;
    p->include = dup_list(meta->include, meta->ninclude, &oom);
    p->ninclude = p->include ? meta->ninclude : 0;
    p->exclude = dup_list(meta->exclude, meta->nexclude, &oom);
    p->nexclude = p->exclude ? meta->nexclude : 0;
    p->meta.include = p->meta.exclude = NULL;
    p->meta.ninclude = p->meta.nexclude = 0;
    return oom ? SCRY_E_NOMEM : 0;
}

void report__scope_free(report_profile_t *p)
{
    free_list(p->include, p->ninclude);
    free_list(p->exclude, p->nexclude);
    p->include = p->exclude = NULL;
    p->ninclude = p->nexclude = 0;
}
