/* html_internal.h - shared by the files of the HTML report (fmt_html*.c).
 *
 * Every string that comes from the target (file names, function names, source text, the
 * command line) is written through report__sb_xml, which escapes & < > " ' and replaces
 * invalid UTF-8 and characters not allowed in XML: safe in HTML text and in quoted
 * attributes. No target string is ever written inside <script> or <style>.
 */
#ifndef SCRY_REPORT_HTML_INTERNAL_H
#define SCRY_REPORT_HTML_INTERNAL_H

#include "report_internal.h"

#define REPORT__HTML_MAX_FILES 100  /* files in the source view */
#define REPORT__HTML_MAX_ROWS  500  /* rows of the hot-line and function tables */
#define REPORT__HTML_SRC_MAXCP 400  /* code points of one source line shown */
#define REPORT__HTML_WHOLE_MAX 5000 /* longer files only show the lines around activity */
#define REPORT__HTML_CONTEXT   3    /* context lines around each active line */

typedef struct report__html {
    report__sb_t b;
    FILE *out;
    const report_profile_t *p;
    const report__view_t *v;
    const report_options_t *o;
    report__src_t *src;
    const char *files[REPORT__HTML_MAX_FILES]; /* files of the source view, in order */
    uint32_t nfiles;
    int mem; /* memory columns shown */
} report__html_t;

/* Number of memory columns written by report__html_mem_cells. */
#define REPORT__HTML_MEM_COLS 7

/* Appends "12.3%" (one decimal); "" when BLANK_ZERO and X is 0. */
void report__html_pct(report__sb_t *b, double x, int blank_zero);
/* Appends a number of MB with 1-2 decimals. */
void report__html_mb(report__sb_t *b, double mb);
/* Appends a stacked CPU bar (python, native, system) for a line's CPU values in the view's
 * unit; 120 px stand for 100% of the profile. */
void report__html_bar(report__sb_t *b, const report__view_t *v, const uint64_t *cpu);
/* Appends the memory cells of line L (alloc MB, python share, net MB, peak MB, copy MB/s,
 * leak score, trend sparkline), each <td class="n" data-v>. With BLANK and a line without
 * memory activity, empty cells. */
void report__html_mem_cells(report__sb_t *b, const report__view_t *v, const report__line_t *l,
                            int blank);
/* Appends an inline SVG sparkline of L's trend. */
void report__html_spark(report__sb_t *b, const report__line_t *l);
/* Appends the program's memory footprint over time as an inline SVG chart. */
void report__html_footprint(report__sb_t *b, const report_profile_t *p, double duration_s);

/* Writes the source view's section (files with >= 1% of time or memory, their active
 * lines with context). Fills h->files. Returns 0, SCRY_E_NOMEM or SCRY_E_IO. */
int report__html_source(report__html_t *h);
/* Index of FILE in h->files, or -1. */
int report__html_file_index(const report__html_t *h, const char *file);

#endif
