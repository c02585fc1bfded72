/* fmt_html_cells.c - pieces of the HTML report: percentages, CPU bars, memory cells, the
 * per-line trend sparkline and the program's footprint chart (inline SVG). */
#include "html_internal.h"

#include <math.h>

#define BAR_PX   120.0
#define SPARK_W  80
#define SPARK_H  16
#define CHART_W  1000
#define CHART_H  240
#define CHART_ML 58 /* margins: left, right, top, bottom */
#define CHART_MR 20
#define CHART_MT 18
#define CHART_MB 34

void report__html_pct(report__sb_t *b, double x, int blank_zero)
{
    if (!isfinite(x))
        x = 0;
    if (blank_zero && x == 0)
        return;
    report__sb_printf(b, "%.1f%%", x);
}

void report__html_mb(report__sb_t *b, double mb)
{
    if (!isfinite(mb))
        mb = 0;
    if (mb == 0)
        report__sb_putc(b, '0');
    else if (fabs(mb) >= 10)
        report__sb_printf(b, "%.1f", mb);
    else
        report__sb_printf(b, "%.2f", mb);
}

void report__html_bar(report__sb_t *b, const report__view_t *v, const uint64_t *cpu)
{
    static const char *const cls[REPORT__NCLASS] = {"py", "nat", "sys"};
    static const char *const names[REPORT__NCLASS] = {"Python", "native", "system"};
    double pct[REPORT__NCLASS];
    for (int c = 0; c < REPORT__NCLASS; c++)
        pct[c] = v->cpu_total ? 100.0 * (double)cpu[c] / (double)v->cpu_total : 0.0;
    report__sb_printf(
        b, "<span class=\"sc-bar\" title=\"%s %.1f%% \xc2\xb7 %s %.1f%% \xc2\xb7 %s %.1f%%\">",
        names[0], pct[0], names[1], pct[1], names[2], pct[2]);
    for (int c = 0; c < REPORT__NCLASS; c++) {
        if (!cpu[c])
            continue;
        double w = pct[c] * BAR_PX / 100.0;
        report__sb_printf(b, "<i class=\"%s\" style=\"width:%.1fpx\"></i>", cls[c], w < 1 ? 1 : w);
    }
    report__sb_puts(b, "</span>");
}

static void num_cell(report__sb_t *b, double x, int digits)
{
    if (!isfinite(x))
        x = 0;
    report__sb_printf(b, "<td class=\"n\" data-v=\"%.6g\">", x);
    if (digits < 0)
        report__html_mb(b, x);
    else
        report__sb_printf(b, "%.*f", digits, x);
    report__sb_puts(b, "</td>");
}

void report__html_mem_cells(report__sb_t *b, const report__view_t *v, const report__line_t *l,
                            int blank)
{
    if (blank && !l->allocs && !l->copy_bytes && !l->frees) {
        report__sb_printf(b, "<td colspan=\"%d\"></td>", REPORT__HTML_MEM_COLS);
        return;
    }
    double dur = v->duration_s;
    num_cell(b, (double)l->alloc_bytes / REPORT__MB, -1);
    report__sb_printf(b, "<td class=\"n\" data-v=\"%.3f\">",
                      l->alloc_bytes ? 100.0 * (double)l->alloc_py_bytes / (double)l->alloc_bytes
                                     : 0.0);
    if (l->alloc_bytes)
        report__html_pct(b, 100.0 * (double)l->alloc_py_bytes / (double)l->alloc_bytes, 0);
    report__sb_puts(b, "</td>");
    num_cell(b, (double)l->net / REPORT__MB, -1);
    num_cell(b, (double)l->peak / REPORT__MB, -1);
    num_cell(b, dur > 0 ? (double)l->copy_bytes / REPORT__MB / dur : 0.0, -1);
    int growing;
    double score = report__leak_score(l, &growing);
    report__sb_printf(b, "<td class=\"n\" data-v=\"%.4f\"%s>", score,
                      score >= 0.95 && growing ? " style=\"color:#b2361f;font-weight:600\"" : "");
    if (l->allocs)
        report__sb_printf(b, "%.2f", score);
    report__sb_printf(b, "</td><td data-v=\"%.6g\">", (double)l->net / REPORT__MB);
    report__html_spark(b, l);
    report__sb_puts(b, "</td>");
}

void report__html_spark(report__sb_t *b, const report__line_t *l)
{
    if (!l->ntrend)
        return;
    float lo = 0, hi = 0;
    for (uint32_t i = 0; i < l->ntrend && i < REPORT__TREND_MAX; i++) {
        lo = l->trend[i] < lo ? l->trend[i] : lo;
        hi = l->trend[i] > hi ? l->trend[i] : hi;
    }
    report__sb_printf(b,
                      "<svg class=\"sc-spark\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">"
                      "<title>net MiB over time: %.2f \xe2\x80\xa6 %.2f</title><polyline points=\"",
                      SPARK_W, SPARK_H, SPARK_W, SPARK_H, isfinite(lo) ? lo : 0.0,
                      isfinite(hi) ? hi : 0.0);
    uint32_t n = l->ntrend < REPORT__TREND_MAX ? l->ntrend : REPORT__TREND_MAX;
    for (uint32_t i = 0; i < n; i++) {
        double x = n > 1 ? 1.0 + (SPARK_W - 2.0) * i / (n - 1) : SPARK_W / 2.0;
        double f = hi > lo ? (l->trend[i] - lo) / (hi - lo) : 0.0;
        if (!isfinite(f))
            f = 0;
        double y = SPARK_H - 2.0 - f * (SPARK_H - 4.0);
        report__sb_printf(b, "%s%.1f,%.1f", i ? " " : "", x, y);
        if (n == 1) /* one point: a short flat stroke */
            report__sb_printf(b, " %.1f,%.1f", x + 2, y);
    }
    report__sb_puts(b, "\"/></svg>");
}

/* A "nice" axis step (1, 2 or 5 times a power of ten) giving about N ticks up to MAX. */
static double nice_step(double max, int n)
{
    if (!(max > 0) || !isfinite(max))
        return 1;
    double raw = max / n, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

void report__html_footprint(report__sb_t *b, const report_profile_t *p, double duration_s)
{
    double tmax = duration_s > 0 ? duration_s : 0, ymax = 0, peak_t = 0, peak_mb = 0;
    for (uint32_t i = 0; i < p->nfoot; i++) {
        if (p->foot[i].t_s > tmax)
            tmax = p->foot[i].t_s;
        if (p->foot[i].mb > ymax) {
            ymax = p->foot[i].mb;
            peak_t = p->foot[i].t_s, peak_mb = p->foot[i].mb;
        }
    }
    if (!(tmax > 0))
        tmax = 1;
    double ystep = nice_step(ymax > 0 ? ymax : 1, 4), xstep = nice_step(tmax, 8);
    double ytop = ceil((ymax > 0 ? ymax : 1) / ystep) * ystep;
    double pw = CHART_W - CHART_ML - CHART_MR, ph = CHART_H - CHART_MT - CHART_MB;
    report__sb_printf(b,
                      "<svg class=\"sc-chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                      "role=\"img\"><title>memory footprint over time</title>\n",
                      CHART_W, CHART_H, CHART_W, CHART_H);
    /* grid and axes */
    for (double y = 0; y <= ytop + ystep * 1e-6; y += ystep) {
        double py = CHART_MT + ph - y / ytop * ph;
        report__sb_printf(b,
                          "<line x1=\"%d\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>"
                          "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g MiB</text>\n",
                          CHART_ML, CHART_ML + pw, py, py, CHART_ML - 6, py + 4, y);
    }
    for (double x = 0; x <= tmax + xstep * 1e-6; x += xstep) {
        double px = CHART_ML + x / tmax * pw;
        report__sb_printf(b,
                          "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%.1f\" stroke=\"#ccc\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g s</text>\n",
                          px, px, CHART_MT + (int)ph, CHART_MT + ph + 5, px, CHART_MT + ph + 18, x);
    }
    report__sb_printf(b, "<line x1=\"%d\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#999\"/>\n",
                      CHART_ML, CHART_ML + pw, CHART_MT + ph, CHART_MT + ph);
    if (!p->nfoot) {
        report__sb_printf(b,
                          "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">no memory samples"
                          "</text></svg>\n",
                          CHART_W / 2, CHART_H / 2);
        return;
    }
    /* a step line from (0, 0) through every point, and the area under it */
    report__sb_t pts = {0};
    report__sb_printf(&pts, "%d,%.1f", CHART_ML, CHART_MT + ph);
    double prev_y = CHART_MT + ph;
    for (uint32_t i = 0; i < p->nfoot; i++) {
        double px = CHART_ML + p->foot[i].t_s / tmax * pw;
        double py = CHART_MT + ph - (p->foot[i].mb > 0 ? p->foot[i].mb : 0) / ytop * ph;
        report__sb_printf(&pts, " %.1f,%.1f %.1f,%.1f", px, prev_y, px, py);
        prev_y = py;
    }
    double last_x = CHART_ML + p->foot[p->nfoot - 1].t_s / tmax * pw;
    if (pts.oom) {
        b->oom = 1;
        report__sb_free(&pts);
        return;
    }
    report__sb_printf(b,
                      "<polygon fill=\"rgba(178,54,31,.13)\" points=\"%s %.1f,%.1f\"/>\n"
                      "<polyline fill=\"none\" stroke=\"#b2361f\" stroke-width=\"1.6\" "
                      "points=\"%s\"/>\n",
                      pts.buf, last_x, CHART_MT + ph, pts.buf);
    report__sb_free(&pts);
    double px = CHART_ML + peak_t / tmax * pw, py = CHART_MT + ph - peak_mb / ytop * ph;
    report__sb_printf(b,
                      "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"#b2361f\"/>"
                      "<text class=\"sc-peak\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">"
                      "peak %.1f MiB at %.2f s</text>\n</svg>\n",
                      px, py, px + (px > CHART_W * 0.7 ? -8.0 : 8.0),
                      py < CHART_MT + 14 ? py + 14 : py - 6, px > CHART_W * 0.7 ? "end" : "start",
                      peak_mb, peak_t);
}
