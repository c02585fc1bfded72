/* source.c - source lines for the text and html reports, from the caller's reader (the
 * report never opens a file itself: the names come from the target). */
#include "report_internal.h"

#include <stdlib.h>
#include <string.h>

#include "scry_err.h"

#define SRC_MAX_FILES 256

typedef struct src_file {
    const char *key; /* interned path pointer */
    char *data;      /* NULL when unreadable */
    uint32_t *starts;
    uint32_t nlines;
    int err; /* why data is NULL */
    int cut; /* not read: the budget was spent */
} src_file_t;

struct report__src {
    int (*read)(void *ctx, const char *file, char **data, size_t *len);
    void *ctx;
    src_file_t files[SRC_MAX_FILES];
    uint32_t nfiles;
    uint64_t held; /* bytes of text and line tables held */
    uint32_t ncut; /* files not read because of the budget */
};

report__src_t *report__src_new(const report_options_t *o)
{
    report__src_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (o) {
        c->read = o->read_source;
        c->ctx = o->source_ctx;
    }
    return c;
}

void report__src_free(report__src_t *c)
{
    if (!c)
        return;
    for (uint32_t i = 0; i < c->nfiles; i++) {
        free(c->files[i].data);
        free(c->files[i].starts);
    }
    free(c);
}

uint32_t report__src_split(char *data, size_t len, uint32_t **starts_out)
{
    uint32_t cap = 256, n = 0;
    uint32_t *starts = malloc(cap * sizeof *starts);
    if (!starts)
        return 0;
    starts[n++] = 0;
    for (size_t i = 0; i < len && i < UINT32_MAX && n < REPORT__SRC_MAX_LINES; i++) {
        if (data[i] != '\n')
            continue;
        data[i] = 0;
        uint32_t *ns = report__grow(starts, &cap, sizeof *ns, n + 1, 256);
        if (!ns)
            break;
        starts = ns;
        starts[n++] = (uint32_t)(i + 1);
    }
    *starts_out = starts;
    return n;
}

static void load(report__src_t *c, src_file_t *sf, const char *file)
{
    size_t len = 0;
    char *data = NULL;
    if (!file[0] || file[0] == '<') { /* "<string>", "<frozen importlib._bootstrap>" */
        sf->err = SCRY_E_NOTFOUND;
        return;
    }
    if (!c->read) {
        sf->err = SCRY_E_NOSYS;
        return;
    }
    if (c->held >= REPORT__SRC_BUDGET) { /* one file may overshoot it, never a second */
        sf->err = SCRY_E_TOOBIG;
        sf->cut = 1;
        c->ncut++;
        return;
    }
    int rc = c->read(c->ctx, file, &data, &len);
    if (rc < 0 || !data) {
        sf->err = rc < 0 ? rc : SCRY_E_IO;
        return;
    }
    uint32_t *starts = NULL;
    uint32_t n = report__src_split(data, len, &starts);
    if (!n) {
        free(data);
        sf->err = SCRY_E_NOMEM;
        return;
    }
    sf->data = data;
    sf->starts = starts;
    sf->nlines = n;
    c->held += len + (uint64_t)n * sizeof *starts;
}

static src_file_t *find(report__src_t *c, const char *file)
{
    for (uint32_t i = 0; i < c->nfiles; i++)
        if (c->files[i].key == file)
            return &c->files[i];
    return NULL;
}

const char *report__src_line(report__src_t *c, const char *file, int32_t line, size_t *len)
{
    if (!c || !file || line <= 0)
        return NULL;
    src_file_t *sf = find(c, file);
    if (!sf) {
        if (c->nfiles == SRC_MAX_FILES)
            return NULL;
        sf = &c->files[c->nfiles++];
        sf->key = file;
        load(c, sf, file);
    }
    if (!sf->data || (uint32_t)line > sf->nlines)
        return NULL;
    const char *s = sf->data + sf->starts[line - 1];
    size_t n = strlen(s);
    if (n && s[n - 1] == '\r')
        n--;
    *len = n;
    return s;
}

int report__src_error(report__src_t *c, const char *file)
{
    src_file_t *sf = c && file ? find(c, file) : NULL;
    return sf ? sf->err : 0;
}

const char *report__src_why(report__src_t *c, const char *file)
{
    src_file_t *sf = c && file ? find(c, file) : NULL;
    if (!sf || sf->err >= 0)
        return NULL;
    if (sf->cut)
        return "not read: the report's source budget (" REPORT__SRC_BUDGET_TEXT ") is spent";
    return scry_strerror(sf->err);
}

uint32_t report__src_cut(const report__src_t *c)
{
    return c ? c->ncut : 0;
}
