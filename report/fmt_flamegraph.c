/* fmt_flamegraph.c - a self-contained interactive SVG flame graph (root at the bottom). */
#include "report_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "flamegraph_js.h"
#include "scry_err.h"

#define FG_FRAME_H  16
#define FG_FONT     12
#define FG_XPAD     10
#define FG_YPAD_TOP (FG_FONT * 3 + 10)
#define FG_YPAD_BOT (FG_FONT * 2 + 10)
#define FG_MIN_FRAC 0.001 /* frames below 0.1% of the total are elided */

typedef struct fg_node {
    uint32_t frame; /* frame id; REPORT__NONE for the "all" root */
    uint32_t depth;
    uint64_t start, value, childfill;
    uint64_t cls[REPORT__NCLASS];
} fg_node_t;

typedef struct fg {
    fg_node_t *nodes;
    uint32_t n, cap;
} fg_t;

static uint32_t fg_add(fg_t *g, uint32_t frame, uint32_t depth, uint64_t start)
{
    fg_node_t *n = report__grow(g->nodes, &g->cap, sizeof *n, g->n + 1, 1024);
    if (!n)
        return REPORT__NONE;
    g->nodes = n;
    fg_node_t *nd = &g->nodes[g->n];
    memset(nd, 0, sizeof *nd);
    nd->frame = frame;
    nd->depth = depth;
    nd->start = start;
    return g->n++;
}

/* Merges the sorted stacks into a tree laid out left to right (nodes in DFS order). */
static int fg_build(fg_t *g, const report_profile_t *p, const uint32_t *order, int metric)
{
    uint32_t *path = malloc((REPORT__MAX_DEPTH + 2) * sizeof *path);
    if (!path || fg_add(g, REPORT__NONE, 0, 0) == REPORT__NONE) {
        free(path);
        return SCRY_E_NOMEM;
    }
    path[0] = 0;
    uint32_t plen = 1; /* valid entries of path (the root always) */
    for (uint32_t k = 0; k < p->nstacks; k++) {
        const report__stack_t *st = &p->stacks[order[k]];
        uint64_t v = report__stack_value(st, metric);
        if (!v)
            continue;
        uint64_t cls[REPORT__NCLASS];
        for (int c = 0; c < REPORT__NCLASS; c++)
            cls[c] = report__stack_cls_value(st, metric, c);
        const uint32_t *ids = p->ids + st->off;
        uint32_t depth = st->depth + 1;
        for (uint32_t d = 0; d < depth; d++) {
            uint32_t fid = d ? ids[st->depth - d] : REPORT__NONE;
            uint32_t ni;
            if (d < plen && g->nodes[path[d]].frame == fid) {
                ni = path[d];
            } else {
                fg_node_t *parent = &g->nodes[path[d - 1]];
                uint64_t start = parent->start + parent->childfill;
                if ((ni = fg_add(g, fid, d, start)) == REPORT__NONE) {
                    free(path);
                    return SCRY_E_NOMEM;
                }
                path[d] = ni;
                plen = d + 1;
            }
            fg_node_t *nd = &g->nodes[ni];
            nd->value += v;
            for (int c = 0; c < REPORT__NCLASS; c++)
                nd->cls[c] += cls[c];
            if (d)
                g->nodes[path[d - 1]].childfill += v;
        }
        plen = depth;
    }
    free(path);
    return 0;
}

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; s && *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static void color(report__sb_t *b, const report_profile_t *p, const fg_node_t *nd, int metric)
{
    if (nd->frame == REPORT__NONE) {
        report__sb_puts(b, "rgb(215,215,215)");
        return;
    }
    const report__frame_t *f = &p->frames[nd->frame];
    uint32_t h = name_hash(f->function);
    double a = (double)(h & 0xff) / 255.0, c = (double)((h >> 8) & 0xff) / 255.0,
           e = (double)((h >> 16) & 0xff) / 255.0;
    uint64_t sum = nd->cls[0] + nd->cls[1] + nd->cls[2];
    int system = metric == SCRY_METRIC_CPU && sum && nd->cls[SCRY_CLASS_SYSTEM] * 2 > sum;
    int r, gr, bl;
    if (f->kind == SCRY_FRAME_PROCESS) { /* --subprocesses roots: greens */
        r = 150 + (int)(30 * a), gr = 205 + (int)(25 * a), bl = 160 + (int)(30 * a);
    } else if (f->kind == SCRY_FRAME_THREAD) {
        r = 185 + (int)(25 * a), gr = 170 + (int)(25 * a), bl = 220;
    } else if (f->kind == SCRY_FRAME_OTHER || system) {
        int v = 165 + (int)(45 * a);
        r = v, gr = v, bl = v + 5;
    } else if (f->kind == SCRY_FRAME_NATIVE) {
        r = 40 + (int)(60 * a), gr = 150 + (int)(70 * c), bl = 170 + (int)(70 * e);
    } else { /* Python: warm yellows and oranges */
        r = 225 + (int)(30 * a), gr = 110 + (int)(110 * c), bl = 30 + (int)(40 * e);
    }
    report__sb_printf(b, "rgb(%d,%d,%d)", r, gr, bl);
}

/* A differential drawing (report__write_flamegraph_diff): per node, its share of the base
 * profile and the change of its share (new - base), both fractions of each total. */
typedef struct fg_diff {
    const double *bshare;
    const double *dshare;
    double dmax; /* largest |dshare| of a drawn frame other than the root */
} fg_diff_t;

/* Red for a frame whose share grew, blue for one that shrank, the deeper the larger the
 * change relative to the largest one; near white when unchanged. */
static void diff_color(report__sb_t *b, double d, double dmax)
{
    double k = dmax > 0 ? (d < 0 ? -d : d) / dmax : 0;
    if (k > 1)
        k = 1;
    int lo = 235 - (int)(200 * k);
    if (d > 0)
        report__sb_printf(b, "rgb(255,%d,%d)", lo, lo);
    else if (d < 0)
        report__sb_printf(b, "rgb(%d,%d,255)", lo, lo);
    else
        report__sb_puts(b, "rgb(235,235,235)");
}

static void fmt_value(report__sb_t *b, uint64_t v, int metric)
{
    if (metric == SCRY_METRIC_CPU) {
        report__sb_printf(b, "%" PRIu64 " sample%s", v, v == 1 ? "" : "s");
    } else if (v >= 1024 * 1024) {
        report__sb_printf(b, "%.2f MiB", (double)v / REPORT__MB);
    } else if (v >= 1024) {
        report__sb_printf(b, "%.1f KiB", (double)v / 1024.0);
    } else {
        report__sb_printf(b, "%" PRIu64 " bytes", v);
    }
}

/* The node's text: with the file's full path (BASE 0: the tooltip) or its base name (the
 * label, so that "function (file:line)" fits; the full path is on hover). */
static void node_name(report__sb_t *b, const report_profile_t *p, const fg_node_t *nd, int base)
{
    if (nd->frame == REPORT__NONE)
        report__sb_puts(b, "all");
    else if (base)
        report__sb_frame_short(b, &p->frames[nd->frame]);
    else
        report__sb_frame(b, &p->frames[nd->frame]);
}

static const char *auto_title(int metric)
{
    switch (metric) {
    case SCRY_METRIC_ALLOC:
        return "Memory Flame Graph: bytes allocated";
    case SCRY_METRIC_FREE:
        return "Memory Flame Graph: bytes freed";
    case SCRY_METRIC_COPY:
        return "Memory Flame Graph: bytes copied";
    case REPORT_METRIC_INUSE:
        return "Memory Flame Graph: bytes still held at the end";
    case REPORT_METRIC_PEAK:
        return "Memory Flame Graph: bytes held at the peak footprint";
    default:
        return "CPU Flame Graph";
    }
}

/* Frames below this share of the total are elided: 0.1% or 1 px, whichever is wider. */
static double min_frac(int width)
{
    double f = 1.0 / (width - 2.0 * FG_XPAD);
    return f < FG_MIN_FRAC ? FG_MIN_FRAC : f;
}

/* Depth of the deepest frame drawn. */
static uint32_t visible_depth(const fg_t *g, int width)
{
    double limit = min_frac(width) * (double)g->nodes[0].value;
    uint32_t d = 0;
    for (uint32_t i = 0; i < g->n; i++)
        if ((double)g->nodes[i].value >= limit && g->nodes[i].depth > d)
            d = g->nodes[i].depth;
    return d;
}

static void write_frames(report__sb_t *b, const report_profile_t *p, const fg_t *g, int metric,
                         int width, int height, const fg_diff_t *diff)
{
    double total = (double)g->nodes[0].value;
    double scale = (width - 2.0 * FG_XPAD) / (total > 0 ? total : 1.0);
    double minfrac = min_frac(width);
    report__sb_t name = {0}, label = {0};
    for (uint32_t i = 0; i < g->n; i++) {
        const fg_node_t *nd = &g->nodes[i];
        if ((double)nd->value < minfrac * total)
            continue; /* elided: too narrow to see (its children are narrower) */
        double x = FG_XPAD + (double)nd->start * scale, w = (double)nd->value * scale;
        int y = height - FG_YPAD_BOT - (int)(nd->depth + 1) * FG_FRAME_H;
        name.len = label.len = 0;
        node_name(&name, p, nd, 0);
        node_name(&label, p, nd, 1);
        if (name.oom || label.oom) {
            b->oom = 1;
            break;
        }
        report__sb_printf(b,
                          "<g class=\"f\" data-s=\"%" PRIu64 "\" data-v=\"%" PRIu64
                          "\" data-d=\"%" PRIu32 "\" data-n=\"",
                          nd->start, nd->value, nd->depth);
        report__sb_xml(b, label.buf, 0); /* the label redrawn on zoom */
        report__sb_puts(b, "\"><title>");
        report__sb_xml(b, name.buf, 0);
        report__sb_puts(b, " (");
        fmt_value(b, nd->value, metric);
        report__sb_printf(b, ", %.2f%%", 100.0 * (double)nd->value / total);
        if (diff)
            report__sb_printf(b, "; base %.2f%%, change %+.2f%%", 100.0 * diff->bshare[i],
                              100.0 * diff->dshare[i]);
        report__sb_printf(b,
                          ")</title><rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" "
                          "height=\"%d\" fill=\"",
                          x, y, w, FG_FRAME_H - 1);
        if (diff)
            diff_color(b, diff->dshare[i], diff->dmax);
        else
            color(b, p, nd, metric);
        report__sb_printf(b, "\" rx=\"2\" ry=\"2\"/><text x=\"%.2f\" y=\"%.1f\">", x + 3,
                          y + FG_FRAME_H - 4.5);
        /* label: as many characters as fit, ".." when cut */
        size_t fit = w > 6 ? (size_t)((w - 6) / (FG_FONT * 0.59)) : 0;
        size_t cps = 0;
        for (const char *s = label.buf; *s;) {
            report__utf8_next(&s);
            cps++;
        }
        if (fit >= 3) {
            report__sb_xml(b, label.buf, cps > fit ? fit - 2 : 0);
            if (cps > fit)
                report__sb_puts(b, "..");
        }
        report__sb_puts(b, "</text></g>\n");
    }
    report__sb_free(&name);
    report__sb_free(&label);
}

/* Builds P's tree for METRIC into G (sorted stacks, DFS order). Returns 0 or SCRY_E_NOMEM. */
static int fg_tree(fg_t *g, const report_profile_t *p, int metric)
{
    uint32_t *order = report__sorted_stacks(p, 0);
    if (!order)
        return SCRY_E_NOMEM;
    int rc = fg_build(g, p, order, metric);
    free(order);
    return rc;
}

/* Writes the SVG of tree G (of profile P). */
static int write_svg(const report_profile_t *p, const fg_t *g0, int metric, FILE *out,
                     const report_options_t *o, const fg_diff_t *diff)
{
    int width = o->width >= 200 && o->width <= 100000 ? o->width : 1200;
    const fg_t g = *g0;
    report__sb_t b = {0};
    int rc;
    int height = (int)(visible_depth(&g, width) + 1) * FG_FRAME_H + FG_YPAD_TOP + FG_YPAD_BOT;
    uint64_t total = g.nodes[0].value;

    report__sb_printf(&b,
                      "<?xml version=\"1.0\" standalone=\"no\"?>\n"
                      "<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\" "
                      "\"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd\">\n"
                      "<svg version=\"1.1\" width=\"%d\" height=\"%d\" onload=\"init(evt)\" "
                      "viewBox=\"0 0 %d %d\" xmlns=\"http://www.w3.org/2000/svg\" "
                      "xmlns:xlink=\"http://www.w3.org/1999/xlink\">\n",
                      width, height, width, height);
    report__sb_puts(&b, "<!-- Flame graph written by scry; layout and controls follow "
                        "flamegraph.pl's conventions. -->\n");
    report__sb_printf(
        &b,
        "<defs><linearGradient id=\"background\" y1=\"0\" y2=\"1\" x1=\"0\" x2=\"0\">"
        "<stop stop-color=\"#eeeeee\" offset=\"5%%\"/><stop stop-color=\"#eeeeb0\" "
        "offset=\"95%%\"/></linearGradient></defs>\n"
        "<style type=\"text/css\">\n"
        "text { font-family: Verdana, sans-serif; font-size: %dpx; fill: rgb(0,0,0); }\n"
        "#title { text-anchor: middle; font-size: %dpx; }\n"
        "#subtitle { text-anchor: middle; fill: rgb(90,90,90); }\n"
        "#search, #unzoom { cursor: pointer; }\n"
        "#frames > g:hover > rect { stroke: rgb(0,0,0); stroke-width: 0.5; cursor: pointer; }\n"
        "</style>\n",
        FG_FONT, FG_FONT + 5);
    report__sb_printf(&b,
                      "<script type=\"text/ecmascript\"><![CDATA[\n"
                      "var TOTAL = %" PRIu64 ", W = %d, XPAD = %d, FONT = %d;\n",
                      total, width, FG_XPAD, FG_FONT);
    report__sb_puts(&b, report__flamegraph_js);
    report__sb_puts(&b, "]]></script>\n");
    report__sb_printf(&b,
                      "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" "
                      "fill=\"url(#background)\"/>\n",
                      width, height);
    report__sb_printf(&b, "<text id=\"title\" x=\"%d\" y=\"%d\">", width / 2, FG_FONT * 2);
    report__sb_xml(&b,
                   o->title ? o->title
                   : diff ? "Differential Flame Graph: red grew, blue shrank (share of each total)"
                          : auto_title(metric),
                   0);
    report__sb_puts(&b, "</text>\n");
    report__sb_printf(&b, "<text id=\"subtitle\" x=\"%d\" y=\"%d\">", width / 2, FG_FONT * 3 + 2);
    {
        report__sb_t sub = {0};
        report__sb_target(&sub, p);
        if (p->meta.command && p->meta.command[0])
            report__sb_printf(&sub, "%s%.120s", sub.len ? ": " : "", p->meta.command);
        report__sb_puts(&sub, " \xe2\x80\x94 ");
        fmt_value(&sub, total, metric);
        report__sb_xml(&b, sub.oom ? "" : sub.buf, 0);
        report__sb_free(&sub);
    }
    report__sb_puts(&b, "</text>\n");
    report__sb_printf(&b,
                      "<text id=\"unzoom\" x=\"%d\" y=\"%d\" style=\"opacity:0\">Reset Zoom"
                      "</text>\n"
                      "<text id=\"search\" x=\"%d\" y=\"%d\" text-anchor=\"end\">Search</text>\n"
                      "<text id=\"details\" x=\"%d\" y=\"%d\"> </text>\n"
                      "<text id=\"matched\" x=\"%d\" y=\"%d\" text-anchor=\"end\"> </text>\n",
                      FG_XPAD, FG_FONT * 2, width - FG_XPAD, FG_FONT * 2, FG_XPAD, height - FG_FONT,
                      width - FG_XPAD, height - FG_FONT);
    if (!total)
        report__sb_printf(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">no samples</text>\n",
                          width / 2, height / 2);
    report__sb_puts(&b, "<g id=\"frames\">\n");
    if (total)
        write_frames(&b, p, &g, metric, width, height, diff);
    report__sb_puts(&b, "</g>\n</svg>\n");
    rc = report__sb_flush(&b, out);
    report__sb_free(&b);
    return rc;
}

int report__write_flamegraph(report_profile_t *p, FILE *out, const report_options_t *o)
{
    int metric = report__pick_metric(p, o);
    fg_t g = {0};
    int rc = fg_tree(&g, p, metric);
    if (rc == 0)
        rc = write_svg(p, &g, metric, out, o, NULL);
    free(g.nodes);
    return rc;
}

/* Slot of the child of node PARENT with frame F in an open-addressing table of MASK + 1
 * slots holding node index + 1 (0 = empty) of tree T (frames of profile P). */
static uint32_t child_slot(const uint32_t *slots, uint32_t mask, const fg_t *t,
                           const uint32_t *tparent, const report_profile_t *p, uint32_t parent,
                           const report__frame_t *f)
{
    uint64_t h = (uint64_t)parent * 0x9E3779B97F4A7C15ULL;
    h = (h ^ (uint64_t)(uintptr_t)f->function) * 0xff51afd7ed558ccdULL;
    h = (h ^ (uint64_t)(uintptr_t)f->file) * 0xc4ceb9fe1a85ec53ULL;
    h = (h ^ ((uint64_t)(uint32_t)f->line << 8 | f->kind)) * 0x9E3779B97F4A7C15ULL;
    uint32_t j = (uint32_t)(h >> 32) & mask;
    for (uint32_t s; (s = slots[j]) != 0; j = (j + 1) & mask) {
        const report__frame_t *e = &p->frames[t->nodes[s - 1].frame];
        if (tparent[s - 1] == parent && e->function == f->function && e->file == f->file &&
            e->line == f->line && e->kind == f->kind)
            break;
    }
    return j;
}

/* Parent of every node of T (DFS order; the root's is REPORT__NONE) into PARENT. */
static int fg_parents(const fg_t *t, uint32_t *parent)
{
    uint32_t *last = malloc((REPORT__MAX_DEPTH + 2) * sizeof *last);
    if (!last)
        return SCRY_E_NOMEM;
    for (uint32_t i = 0; i < t->n; i++) {
        uint32_t d = t->nodes[i].depth;
        parent[i] = d ? last[d - 1] : REPORT__NONE;
        last[d] = i;
    }
    free(last);
    return 0;
}

int report__write_flamegraph_diff(report_profile_t *newp, report_profile_t *basep, FILE *out,
                                  const report_options_t *o)
{
    fg_t g = {0}, gb = {0};
    uint32_t *slots = NULL, *bparent = NULL, *nparent = NULL, *map = NULL;
    double *shares = NULL;
    int rc;
    if ((rc = fg_tree(&g, newp, SCRY_METRIC_CPU)) < 0 ||
        (rc = fg_tree(&gb, basep, SCRY_METRIC_CPU)) < 0)
        goto out;
    uint32_t cap = 64;
    while (cap < gb.n * 2u && cap < (1u << 31))
        cap *= 2;
    rc = SCRY_E_NOMEM;
    slots = calloc(cap, sizeof *slots);
    bparent = malloc((size_t)gb.n * sizeof *bparent);
    nparent = malloc((size_t)g.n * sizeof *nparent);
    map = malloc((size_t)g.n * sizeof *map);
    shares = malloc((size_t)g.n * 2 * sizeof *shares);
    if (!slots || !bparent || !nparent || !map || !shares || fg_parents(&gb, bparent) < 0 ||
        fg_parents(&g, nparent) < 0)
        goto out;
    for (uint32_t i = 1; i < gb.n; i++) {
        const report__frame_t *f = &basep->frames[gb.nodes[i].frame];
        slots[child_slot(slots, cap - 1, &gb, bparent, basep, bparent[i], f)] = i + 1;
    }
    double ntotal = (double)g.nodes[0].value, btotal = (double)gb.nodes[0].value;
    fg_diff_t diff = {shares, shares + g.n, 0};
    double minfrac = min_frac(o->width >= 200 && o->width <= 100000 ? o->width : 1200);
    for (uint32_t i = 0; i < g.n; i++) {
        map[i] = 0;
        if (i) {
            uint32_t bp = map[nparent[i]];
            const report__frame_t *f = &newp->frames[g.nodes[i].frame];
            map[i] = bp == REPORT__NONE
                         ? REPORT__NONE
                         : slots[child_slot(slots, cap - 1, &gb, bparent, basep, bp, f)] - 1;
        }
        double b =
            map[i] != REPORT__NONE && btotal > 0 ? (double)gb.nodes[map[i]].value / btotal : 0;
        double n = ntotal > 0 ? (double)g.nodes[i].value / ntotal : 0;
        shares[i] = b;
        shares[g.n + i] = n - b;
        double a = n - b < 0 ? b - n : n - b;
        if (i && n >= minfrac && a > diff.dmax)
            diff.dmax = a;
    }
    rc = write_svg(newp, &g, SCRY_METRIC_CPU, out, o, &diff);
out:
    free(g.nodes);
    free(gb.nodes);
    free(slots);
    free(bparent);
    free(nparent);
    free(map);
    free(shares);
    return rc;
}
