/* formats.c - the one table of output formats: names, file extensions, writers. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "report.h"
#include "report_internal.h"
#include "scry_err.h"

typedef int (*format_writer_fn)(report_profile_t *p, FILE *out, const report_options_t *opt);

static const struct format_entry {
    enum report_format fmt;
    const char *name;      /* the canonical --format name */
    const char *alias;     /* another accepted --format name, or NULL */
    const char *extension; /* of generated output names (no dot) */
    const char *infer[3];  /* output name endings that select it when --format is not given */
    const char *media;     /* what the file is: formats of one media share their endings */
    format_writer_fn write;
} formats[] = {
    {REPORT_FORMAT_FLAMEGRAPH,
     "flamegraph",
     "svg",
     "svg",
     {".svg"},
     "SVG",
     report__write_flamegraph},
    {REPORT_FORMAT_HTML, "html", NULL, "html", {".html", ".htm"}, "HTML", report__write_html},
    {REPORT_FORMAT_TEXT, "text", NULL, "txt", {".txt"}, "text", report__write_text},
    {REPORT_FORMAT_JSON, "json", NULL, "json", {".json"}, "JSON", report__write_json},
    {REPORT_FORMAT_SPEEDSCOPE,
     "speedscope",
     NULL,
     "speedscope.json",
     {".speedscope.json"},
     "JSON",
     report__write_speedscope},
    {REPORT_FORMAT_COLLAPSED,
     "collapsed",
     "folded",
     "txt",
     {".folded", ".collapsed"},
     "text",
     report__write_collapsed},
    {REPORT_FORMAT_PPROF,
     "pprof",
     "pb",
     "pb.gz",
     {".pb.gz", ".pb", ".pprof"},
     "pprof",
     report__write_pprof},
};

#define NFORMATS (sizeof formats / sizeof formats[0])

static const struct format_entry *entry_of(enum report_format fmt)
{
    for (size_t i = 0; i < NFORMATS; i++)
        if (formats[i].fmt == fmt)
            return &formats[i];
    return NULL;
}

int report_format_parse(const char *name)
{
    if (!name)
        return SCRY_E_INVAL;
    for (size_t i = 0; i < NFORMATS; i++)
        if (strcmp(name, formats[i].name) == 0 ||
            (formats[i].alias && strcmp(name, formats[i].alias) == 0))
            return (int)formats[i].fmt;
    return SCRY_E_INVAL;
}

const char *report_format_name(enum report_format fmt)
{
    const struct format_entry *e = entry_of(fmt);
    return e ? e->name : NULL;
}

const char *report_format_extension(enum report_format fmt)
{
    const struct format_entry *e = entry_of(fmt);
    return e ? e->extension : NULL;
}

static int ends_with(const char *s, size_t len, const char *suffix)
{
    size_t n = strlen(suffix);
    return len > n && strcasecmp(s + len - n, suffix) == 0;
}

int report_format_from_path(const char *path)
{
    if (!path)
        return SCRY_E_INVAL;
    size_t len = strlen(path);
    /* The longest matching ending wins (".speedscope.json" over ".json"). */
    const struct format_entry *best = NULL;
    size_t best_len = 0;
    for (size_t i = 0; i < NFORMATS; i++)
        for (size_t k = 0; k < 3 && formats[i].infer[k]; k++) {
            size_t n = strlen(formats[i].infer[k]);
            if (n > best_len && ends_with(path, len, formats[i].infer[k])) {
                best = &formats[i];
                best_len = n;
            }
        }
    return best ? (int)best->fmt : SCRY_E_NOTFOUND;
}

void report_format_names(char *buf, size_t len)
{
    if (!buf || !len)
        return;
    size_t off = 0;
    buf[0] = 0;
    for (size_t i = 0; i < NFORMATS && off < len; i++) {
        int n = snprintf(buf + off, len - off, "%s%s", i ? ", " : "", formats[i].name);
        if (n < 0)
            break;
        off += (size_t)n;
    }
}

/* The names of the formats in ALLOWED, comma separated, into BUF. */
static void names_of(unsigned allowed, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = 0;
    for (size_t i = 0; i < NFORMATS && off < len; i++) {
        if (!(allowed & REPORT_FORMAT_BIT(formats[i].fmt)))
            continue;
        int n = snprintf(buf + off, len - off, "%s%s", off ? ", " : "", formats[i].name);
        if (n < 0)
            break;
        off += (size_t)n;
    }
}

int report_format_choose(const char *cmd, const char *name, const char *path, unsigned allowed,
                         enum report_format dflt, char *msg, size_t msglen)
{
    char names[160];
    names_of(allowed, names, sizeof names);
    int by_path = path && strcmp(path, "-") != 0 ? report_format_from_path(path) : -1;
    if (!name) {
        if (by_path < 0)
            return (int)dflt;
        if (!(allowed & REPORT_FORMAT_BIT((enum report_format)by_path))) {
            scry_errmsg(msg, msglen,
                        "the name %s asks for %s (%s), which %s does not write (it writes %s): "
                        "give the file another name",
                        path, entry_of((enum report_format)by_path)->media,
                        entry_of((enum report_format)by_path)->name, cmd, names);
            return SCRY_E_INVAL;
        }
        return by_path;
    }
    int f = report_format_parse(name);
    if (f < 0 || !(allowed & REPORT_FORMAT_BIT((enum report_format)f))) {
        scry_errmsg(msg, msglen, "%s format '%s' (%s writes %s)", f < 0 ? "unknown" : "no", name,
                    cmd, names);
        return SCRY_E_INVAL;
    }
    const struct format_entry *want = entry_of((enum report_format)f);
    if (by_path >= 0 && strcmp(entry_of((enum report_format)by_path)->media, want->media) != 0) {
        scry_errmsg(msg, msglen,
                    "--format %s writes %s, but the name %s asks for %s: give the file a "
                    "matching name (.%s) or drop --format",
                    want->name, want->media, path, entry_of((enum report_format)by_path)->media,
                    want->extension);
        return SCRY_E_INVAL;
    }
    return f;
}

int report_write(report_profile_t *p, enum report_format fmt, FILE *out,
                 const report_options_t *opt)
{
    static const report_options_t defaults = {.metric = -1};
    if (!p || !out)
        return SCRY_E_INVAL;
    if (!opt)
        opt = &defaults;
    const struct format_entry *e = entry_of(fmt);
    if (!e)
        return SCRY_E_INVAL;
    int rc = e->write(p, out, opt);
    if (rc == 0 && (fflush(out) != 0 || ferror(out)))
        rc = SCRY_E_IO;
    return rc;
}

/* The one table of frame kind names in files (json "kind", the HTML tables, diff input). */
static const char *const kind_names[] = {
    [SCRY_FRAME_PYTHON] = "python",   [SCRY_FRAME_NATIVE] = "native",
    [SCRY_FRAME_THREAD] = "thread",   [SCRY_FRAME_OTHER] = "other",
    [SCRY_FRAME_PROCESS] = "process",
};

const char *report__kind_name(uint8_t kind)
{
    return kind < sizeof kind_names / sizeof kind_names[0] && kind_names[kind] ? kind_names[kind]
                                                                               : "other";
}

int report__kind_of(const char *name)
{
    for (size_t k = 0; k < sizeof kind_names / sizeof kind_names[0]; k++)
        if (kind_names[k] && strcmp(kind_names[k], name) == 0)
            return (int)k;
    return -1;
}
