/* source.c - source lines for the text report, read from disk through the target's root. */
#include "report_internal.h"

#include <stdlib.h>
#include <string.h>

#define SRC_MAX_FILES 256
#define SRC_MAX_BYTES (16u << 20) /* larger files are not read */
#define SRC_MAX_LINES 1000000u

typedef struct src_file {
    const char *key; /* interned path pointer */
    char *data;      /* NULL when unreadable */
    uint32_t *starts;
    uint32_t nlines;
} src_file_t;

struct report__src {
    char *root;
    src_file_t files[SRC_MAX_FILES];
    uint32_t nfiles;
};

report__src_t *report__src_new(const char *root)
{
    report__src_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (root && root[0] && !(c->root = strdup(root))) {
        free(c);
        return NULL;
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
    free(c->root);
    free(c);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(SRC_MAX_BYTES + 1);
    size_t n = buf ? fread(buf, 1, SRC_MAX_BYTES + 1, f) : 0;
    fclose(f);
    if (!buf || n > SRC_MAX_BYTES) {
        free(buf);
        return NULL;
    }
    char *shrunk = realloc(buf, n + 1);
    buf = shrunk ? shrunk : buf;
    buf[n] = 0;
    *len = n;
    return buf;
}

static void load(const report__src_t *c, src_file_t *sf, const char *file)
{
    size_t len = 0;
    char *data = NULL;
    if (!file[0] || file[0] == '<') /* "<string>", "<frozen importlib._bootstrap>" */
        return;
    if (c->root && file[0] == '/') {
        size_t n = strlen(c->root) + strlen(file) + 1;
        char *path = malloc(n);
        if (path) {
            snprintf(path, n, "%s%s", c->root, file);
            data = slurp(path, &len);
            free(path);
        }
    }
    if (!data)
        data = slurp(file, &len);
    if (!data)
        return;
    uint32_t cap = 256, n = 0;
    uint32_t *starts = malloc(cap * sizeof *starts);
    if (!starts) {
        free(data);
        return;
    }
    starts[n++] = 0;
    for (size_t i = 0; i < len && n < SRC_MAX_LINES; i++) {
        if (data[i] != '\n')
            continue;
        data[i] = 0;
        if (n == cap) {
            uint32_t *ns = realloc(starts, cap * 2 * sizeof *ns);
            if (!ns)
                break;
            starts = ns;
            cap *= 2;
        }
        starts[n++] = (uint32_t)(i + 1);
    }
    sf->data = data;
    sf->starts = starts;
    sf->nlines = n;
}

const char *report__src_line(report__src_t *c, const char *file, int32_t line, size_t *len)
{
    if (!c || !file || line <= 0)
        return NULL;
    src_file_t *sf = NULL;
    for (uint32_t i = 0; i < c->nfiles; i++) {
        if (c->files[i].key == file) {
            sf = &c->files[i];
            break;
        }
    }
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
