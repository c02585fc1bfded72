/* top_screen.c - how 'scry top' looks: the curses screen and the plain-text table. */
#include "top.h"

#include <curses.h>
#include <langinfo.h>
#include <stdio.h>
#include <string.h>
#include <wchar.h>

#define FIT_MAX_CP 1024 /* code points of one text considered */

enum { PAIR_HOT = 1, PAIR_WARM, PAIR_LOC, PAIR_ALERT, PAIR_TITLE };

static const char *const sort_names[REPORT_LIVE_NSORT] = {"%Own", "%Total", "OwnTime", "TotalTime"};

const char *top_sort_name(int sort)
{
    return sort >= 0 && sort < REPORT_LIVE_NSORT ? sort_names[sort] : "?";
}

static int utf8_locale(void)
{
    static int known = -1;
    if (known < 0) {
        const char *cs = nl_langinfo(CODESET);
        known = cs && (strcmp(cs, "UTF-8") == 0 || strcmp(cs, "utf8") == 0);
    }
    return known;
}

/* Decodes one UTF-8 code point at *S (advancing); invalid bytes give U+FFFD. */
static uint32_t utf8_next(const char **s)
{
    const unsigned char *p = (const unsigned char *)*s;
    uint32_t c = p[0];
    int n = c < 0x80             ? 0
            : (c & 0xE0) == 0xC0 ? 1
            : (c & 0xF0) == 0xE0 ? 2
            : (c & 0xF8) == 0xF0 ? 3
                                 : -1;
    if (n < 0) {
        *s += 1;
        return 0xFFFD;
    }
    c &= n == 0 ? 0x7F : (0x3F >> n);
    for (int i = 1; i <= n; i++) {
        if ((p[i] & 0xC0) != 0x80) {
            *s += i;
            return 0xFFFD;
        }
        c = (c << 6) | (p[i] & 0x3F);
    }
    *s += n + 1;
    return c;
}

/* The code point as shown: control and (outside UTF-8 locales) non-ASCII ones as '?'. */
static uint32_t shown_cp(uint32_t c, int *width)
{
    if (c == '\t')
        c = ' ';
    if (c < 0x20 || c == 0x7F || (c >= 0x80 && c < 0xA0) || (c >= 0x80 && !utf8_locale()))
        c = '?';
    int w = c < 0x80 ? 1 : wcwidth((wchar_t)c);
    if (w < 0) {
        c = '?';
        w = 1;
    }
    *width = w;
    return c;
}

static size_t put_cp(char *out, size_t len, size_t off, uint32_t c)
{
    char b[4];
    size_t n;
    if (c < 0x80) {
        b[0] = (char)c;
        n = 1;
    } else if (c < 0x800) {
        b[0] = (char)(0xC0 | (c >> 6));
        b[1] = (char)(0x80 | (c & 0x3F));
        n = 2;
    } else if (c < 0x10000) {
        b[0] = (char)(0xE0 | (c >> 12));
        b[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        b[2] = (char)(0x80 | (c & 0x3F));
        n = 3;
    } else {
        b[0] = (char)(0xF0 | (c >> 18));
        b[1] = (char)(0x80 | ((c >> 12) & 0x3F));
        b[2] = (char)(0x80 | ((c >> 6) & 0x3F));
        b[3] = (char)(0x80 | (c & 0x3F));
        n = 4;
    }
    if (off + n >= len)
        return off;
    memcpy(out + off, b, n);
    return off + n;
}

/* Copies S into OUT (LEN bytes, always terminated) as printable text of at most MAXCOLS
 * columns (MAXCOLS < 0: no limit). A wider text keeps its end (KEEP_END) or its start, the
 * cut marked by an ellipsis. Returns the columns used. */
static int fit(const char *s, char *out, size_t len, int maxcols, int keep_end)
{
    uint32_t cps[FIT_MAX_CP];
    unsigned char wid[FIT_MAX_CP];
    int n = 0, total = 0;
    out[0] = 0;
    if (!s || len < 2 || maxcols == 0)
        return 0;
    while (*s && n < FIT_MAX_CP) {
        int w;
        cps[n] = shown_cp(utf8_next(&s), &w);
        wid[n] = (unsigned char)w;
        total += w;
        n++;
    }
    int from = 0, to = n, cut = 0;
    if (maxcols > 0 && total > maxcols) {
        cut = 1;
        int budget = maxcols - 1, used = 0; /* one column for the ellipsis */
        if (keep_end) {
            from = n;
            while (from > 0 && used + wid[from - 1] <= budget)
                used += wid[--from];
        } else {
            to = 0;
            while (to < n && used + wid[to] <= budget)
                used += wid[to++];
        }
        total = used + 1;
    }
    uint32_t ell = utf8_locale() ? 0x2026 : '~';
    size_t off = 0;
    if (cut && keep_end)
        off = put_cp(out, len, off, ell);
    for (int i = from; i < to; i++)
        off = put_cp(out, len, off, cps[i]);
    if (cut && !keep_end)
        off = put_cp(out, len, off, ell);
    out[off] = 0;
    return total;
}

static int text_cols(const char *s)
{
    int cols = 0;
    for (int n = 0; s && *s && n < FIT_MAX_CP; n++) {
        int w;
        shown_cp(utf8_next(&s), &w);
        cols += w;
    }
    return cols;
}

static void fmt_time(double s, char *buf, size_t len)
{
    if (s < 0)
        s = 0;
    if (s < 100)
        snprintf(buf, len, "%.2fs", s);
    else if (s < 3600)
        snprintf(buf, len, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else
        snprintf(buf, len, "%dh%02dm", (int)(s / 3600), ((int)s / 60) % 60);
}

static void fmt_elapsed(double s, char *buf, size_t len)
{
    long t = s > 0 ? (long)s : 0;
    snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
}

/* "function (file:line)" for a row, fitted to MAXCOLS (< 0: no limit). */
static void row_name(const report_live_row_t *r, char *out, size_t len, int maxcols)
{
    char loc[1024] = "";
    if (r->kind == SCRY_FRAME_PYTHON) {
        if (r->line > 0)
            snprintf(loc, sizeof loc, "%s:%d", r->file[0] ? r->file : "?", (int)r->line);
        else
            snprintf(loc, sizeof loc, "%s", r->file[0] ? r->file : "?");
    } else if (r->kind == SCRY_FRAME_NATIVE && r->file[0]) {
        snprintf(loc, sizeof loc, "%s", r->file);
    }
    int fw = text_cols(r->function), lw = loc[0] ? text_cols(loc) : -3;
    char fpart[512], lpart[512];
    if (maxcols < 0 || fw + 3 + lw <= maxcols) {
        fit(r->function, fpart, sizeof fpart, -1, 0);
        fit(loc, lpart, sizeof lpart, -1, 1);
    } else if (!loc[0]) {
        fit(r->function, fpart, sizeof fpart, maxcols, 0);
        lpart[0] = 0;
    } else {
        /* the location keeps at least a short tail (file name and line), cut from the left */
        int lbud = maxcols - 3 - fw;
        int lmin = maxcols / 2 - 3 < 14 ? maxcols / 2 - 3 : 14;
        if (lbud < lmin)
            lbud = lmin < lw ? lmin : lw;
        int fbud = maxcols - 3 - lbud;
        if (fbud < (fw < 4 ? fw : 4) || lbud < 4) {
            fit(r->function, fpart, sizeof fpart, maxcols, 0);
            lpart[0] = 0;
        } else {
            fit(r->function, fpart, sizeof fpart, fbud, 0);
            fit(loc, lpart, sizeof lpart, lbud, 1);
        }
    }
    if (lpart[0])
        snprintf(out, len, "%s (%s)", fpart, lpart);
    else
        snprintf(out, len, "%s", fpart);
}

/* --- curses --- */

typedef struct column {
    const char *title;
    int width;
    int sort; /* the sort key it shows, or -1 */
} column_t;

static const column_t all_columns[] = {
    {"%Own", 7, REPORT_LIVE_SORT_OWN},
    {"%Total", 8, REPORT_LIVE_SORT_TOTAL},
    {"OwnTime", 9, REPORT_LIVE_SORT_OWN_TIME},
    {"TotalTime", 10, REPORT_LIVE_SORT_TOTAL_TIME},
    {"%Py", 6, -1},
    {"%Nat", 6, -1},
    {"%Sys", 6, -1},
};
#define NCOLUMNS ((int)(sizeof all_columns / sizeof all_columns[0]))
#define NAME_MIN 24

/* Which columns fit in COLS with a name column of at least NAME_MIN: the class split goes
 * first, then the times, then %Total. */
static int visible_columns(int cols, int *show)
{
    int width = 0;
    for (int i = 0; i < NCOLUMNS; i++) {
        show[i] = 1;
        width += all_columns[i].width;
    }
    static const int drop[] = {6, 5, 4, 3, 2, 1};
    for (size_t k = 0; k < sizeof drop / sizeof drop[0] && cols - width - 2 < NAME_MIN; k++) {
        show[drop[k]] = 0;
        width -= all_columns[drop[k]].width;
    }
    return width;
}

static void line_clear(int y)
{
    move(y, 0);
    clrtoeol();
}

/* Writes S at (Y, X), fitted to the columns left on the line (one less on the last line,
 * whose last cell must stay empty). Returns the columns written. */
static int put_at(int y, int x, const char *s)
{
    int room = COLS - x - (y == LINES - 1 ? 1 : 0);
    if (room <= 0 || y < 0 || y >= LINES)
        return 0;
    char buf[2048];
    int w = fit(s, buf, sizeof buf, room, 0);
    mvaddstr(y, x, buf);
    return w;
}

static void pct_attr_on(double x, int on)
{
    if (!has_colors())
        return;
    attr_t a = x >= 20    ? (A_BOLD | COLOR_PAIR(PAIR_HOT))
               : x >= 5   ? COLOR_PAIR(PAIR_WARM)
               : x < 0.05 ? A_DIM
                          : 0;
    if (on)
        attron(a);
    else
        attroff(a);
}

static void init_colors_once(void)
{
    static int done;
    if (done || !has_colors())
        return;
    done = 1;
    start_color();
    use_default_colors();
    init_pair(PAIR_HOT, COLOR_RED, -1);
    init_pair(PAIR_WARM, COLOR_YELLOW, -1);
    init_pair(PAIR_LOC, COLOR_CYAN, -1);
    init_pair(PAIR_ALERT, COLOR_WHITE, COLOR_RED);
    init_pair(PAIR_TITLE, COLOR_BLACK, COLOR_CYAN);
}

static void draw_header(const top_state_t *s, int *y)
{
    const report_live_table_t *t = &s->table;
    char buf[1024], el[32];
    attron(A_BOLD);
    int has_ct = s->container && s->container[0];
    snprintf(buf, sizeof buf, "scry top - pid %d%s%s (Python %s): %s", s->pid,
             has_ct ? " in container " : "", has_ct ? s->container : "",
             s->python_version ? s->python_version : "?", s->command ? s->command : "");
    line_clear(*y);
    put_at((*y)++, 0, buf);
    attroff(A_BOLD);
    if (*y >= LINES)
        return;
    fmt_elapsed(t->elapsed_s, el, sizeof el);
    char gil[32] = "?", thr[48] = "?";
    if (s->gil_pct >= 0)
        snprintf(gil, sizeof gil, "%.1f%%", s->gil_pct);
    if (s->threads_total >= 0)
        snprintf(thr, sizeof thr, "%d active / %d total", s->threads_active, s->threads_total);
    else
        snprintf(thr, sizeof thr, "%d active", s->threads_active);
    char late[48] = "";
    if (s->late)
        snprintf(late, sizeof late, "  Late %llu", (unsigned long long)s->late);
    snprintf(buf, sizeof buf,
             "Rate %.0f Hz (%.0f/s)  Samples %llu  Errors %llu%s  GIL %s of samples  Threads %s  "
             "Elapsed %s",
             s->rate_hz, t->window_s > 0 ? (double)t->samples / t->window_s : 0.0,
             (unsigned long long)t->samples_all, (unsigned long long)s->errors, late, gil, thr, el);
    line_clear(*y);
    put_at((*y)++, 0, buf);
    if (*y >= LINES)
        return;
    char win[48];
    if (s->use_window)
        snprintf(win, sizeof win, "last %.*f s", t->window_s < 9.95 ? 1 : 0,
                 t->window_s > 0 ? t->window_s : s->window_s);
    else
        snprintf(win, sizeof win, "since start");
    snprintf(buf, sizeof buf,
             "CPU %.1f%% = python %.1f%% + native %.1f%% + system %.1f%%  [%s]  %s by %s",
             t->cpu_pct, t->cls_pct[0], t->cls_pct[1], t->cls_pct[2], win,
             s->by_lines ? "lines" : "functions", top_sort_name(s->sort));
    line_clear(*y);
    put_at((*y)++, 0, buf);
}

static void draw_status(const top_state_t *s, int y)
{
    line_clear(y);
    const char *what = NULL;
    char buf[256];
    if (s->stopped) {
        snprintf(buf, sizeof buf, " sampling stopped: %s - press q to quit ", s->stopped);
        what = buf;
    } else if (s->exited) {
        what = " process exited - the data is final; press q to quit ";
    } else if (s->paused) {
        what = " paused (sampling continues) - p or space to resume ";
    }
    if (what) {
        attron(A_BOLD | (has_colors() ? COLOR_PAIR(PAIR_ALERT) : A_REVERSE));
        put_at(y, 0, what);
        attroff(A_BOLD | (has_colors() ? COLOR_PAIR(PAIR_ALERT) : A_REVERSE));
    }
    if (s->message[0]) {
        int x = what ? text_cols(what) + 2 : 0;
        if (x < COLS)
            put_at(y, x, s->message);
    }
}

static void draw_table(const top_state_t *s, int y, int last)
{
    int show[NCOLUMNS];
    visible_columns(COLS, show);
    char buf[64];
    /* column titles */
    line_clear(y);
    attron(A_REVERSE);
    mvhline(y, 0, ' ', COLS);
    int x = 0;
    for (int i = 0; i < NCOLUMNS; i++) {
        if (!show[i])
            continue;
        int sorted = all_columns[i].sort == s->sort;
        snprintf(buf, sizeof buf, "%*s", all_columns[i].width - 1, all_columns[i].title);
        if (sorted)
            attron(A_BOLD | A_UNDERLINE);
        put_at(y, x, buf);
        if (sorted)
            attroff(A_BOLD | A_UNDERLINE);
        x += all_columns[i].width;
    }
    put_at(y, x + 1, s->by_lines ? "Line: function (file:line)" : "Function (file:line)");
    attroff(A_REVERSE);
    y++;
    const report_live_table_t *t = &s->table;
    for (uint32_t k = 0; k < t->nrows && y <= last; k++, y++) {
        const report_live_row_t *r = &t->rows[k];
        line_clear(y);
        double vals[NCOLUMNS] = {r->own_pct,    r->total_pct,  r->own_s,     r->total_s,
                                 r->cls_pct[0], r->cls_pct[1], r->cls_pct[2]};
        x = 0;
        for (int i = 0; i < NCOLUMNS; i++) {
            if (!show[i])
                continue;
            int w = all_columns[i].width - 1;
            if (i == 2 || i == 3) {
                char tm[24];
                fmt_time(vals[i], tm, sizeof tm);
                snprintf(buf, sizeof buf, "%*s", w, tm);
                put_at(y, x, buf);
            } else {
                if (i <= 1)
                    snprintf(buf, sizeof buf, "%*.1f%%", w - 1, vals[i]);
                else
                    snprintf(buf, sizeof buf, "%*.1f", w, vals[i]);
                pct_attr_on(vals[i], 1);
                put_at(y, x, buf);
                pct_attr_on(vals[i], 0);
            }
            x += all_columns[i].width;
        }
        int room = COLS - x - 1 - (y == LINES - 1 ? 1 : 0);
        if (room > 0) {
            char name[2048];
            row_name(r, name, sizeof name, room);
            put_at(y, x + 1, name);
        }
    }
    for (; y <= last; y++)
        line_clear(y);
}

static void draw_help(void)
{
    static const char *const lines[] = {
        "scry top - keys",
        "",
        "1 2 3 4   sort by %Own, %Total, OwnTime, TotalTime",
        "< > arrows  previous / next sort column",
        "l         functions / lines",
        "w         last N seconds / since start",
        "p, space  pause the display (sampling continues)",
        "r         reset the counts",
        "q, Ctrl-C quit",
        "? h       this help (any key closes it)",
        "",
        "%Own: time as the innermost Python frame; %Total: time",
        "anywhere on the stack; 100% = one CPU busy. OwnTime and",
        "TotalTime are cumulative. %Py/%Nat/%Sys split %Own into",
        "bytecode, native code and off-CPU (system) time.",
    };
    int n = (int)(sizeof lines / sizeof lines[0]), w = 0;
    for (int i = 0; i < n; i++)
        if ((int)strlen(lines[i]) > w)
            w = (int)strlen(lines[i]);
    w += 4;
    int h = n + 2;
    if (w > COLS)
        w = COLS;
    if (h > LINES)
        h = LINES;
    int y0 = (LINES - h) / 2, x0 = (COLS - w) / 2;
    for (int i = 0; i < h; i++) {
        move(y0 + i, x0);
        for (int j = 0; j < w && x0 + j < COLS - (y0 + i == LINES - 1 ? 1 : 0); j++)
            addch(' ' | A_REVERSE);
    }
    attron(A_REVERSE);
    for (int i = 0; i < n && 1 + i < h; i++) {
        char buf[128];
        fit(lines[i], buf, sizeof buf, w - 4, 0);
        if (i == 0)
            attron(A_BOLD);
        mvaddstr(y0 + 1 + i, x0 + 2, buf);
        if (i == 0)
            attroff(A_BOLD);
    }
    attroff(A_REVERSE);
}

void top_screen_draw(const top_state_t *s)
{
    init_colors_once();
    erase();
    if (LINES < 6 || COLS < 30) {
        /* too small for the table: the hottest row only */
        char buf[512];
        snprintf(buf, sizeof buf, "scry top: pid %d%s", s->pid,
                 s->exited   ? " exited"
                 : s->paused ? " paused"
                             : "");
        put_at(0, 0, buf);
        if (LINES > 1 && s->table.nrows) {
            char name[256];
            row_name(&s->table.rows[0], name, sizeof name, COLS > 10 ? COLS - 10 : 1);
            snprintf(buf, sizeof buf, "%5.1f%% %s", s->table.rows[0].own_pct, name);
            put_at(1, 0, buf);
        }
        if (LINES > 2)
            put_at(LINES - 1, 0, "(enlarge; q quits)");
        refresh();
        return;
    }
    int y = 0;
    draw_header(s, &y);
    draw_status(s, y++);
    draw_table(s, y, LINES - 2);
    line_clear(LINES - 1);
    attron(A_DIM);
    put_at(LINES - 1, 0,
           "1-4 </> sort  l lines/functions  w window  p pause  r reset  ? help  q quit");
    attroff(A_DIM);
    if (s->help)
        draw_help();
    refresh();
}

/* --- plain text --- */

void top_screen_print(const top_state_t *s, FILE *out, uint32_t max_rows)
{
    const report_live_table_t *t = &s->table;
    char el[32], cmd[1024];
    fit(s->command ? s->command : "", cmd, sizeof cmd, 200, 0);
    fmt_elapsed(t->elapsed_s, el, sizeof el);
    int has_ct = s->container && s->container[0];
    fprintf(out, "scry top: pid %d%s%s, Python %s: %s\n", s->pid, has_ct ? " in container " : "",
            has_ct ? s->container : "", s->python_version ? s->python_version : "?", cmd);
    fprintf(out, "elapsed %s, %llu samples (%.0f/s at %.0f Hz), %llu errors", el,
            (unsigned long long)t->samples_all,
            t->window_s > 0 ? (double)t->samples / t->window_s : 0.0, s->rate_hz,
            (unsigned long long)s->errors);
    if (s->late)
        fprintf(out, ", %llu late ticks", (unsigned long long)s->late);
    if (s->gil_pct >= 0)
        fprintf(out, ", GIL %.1f%% of samples", s->gil_pct);
    fprintf(out, ", threads %d active", s->threads_active);
    if (s->threads_total >= 0)
        fprintf(out, " / %d total", s->threads_total);
    fprintf(out, "\nCPU %.1f%% (python %.1f%%, native %.1f%%, system %.1f%%) ", t->cpu_pct,
            t->cls_pct[0], t->cls_pct[1], t->cls_pct[2]);
    if (s->use_window)
        fprintf(out, "over the last %.1f s", t->window_s);
    else
        fprintf(out, "since start");
    fprintf(out, "; %s by %s%s\n", s->by_lines ? "lines" : "functions", top_sort_name(s->sort),
            s->exited ? "; process exited" : "");
    if (s->stopped)
        fprintf(out, "sampling stopped: %s\n", s->stopped);
    fprintf(out, "%7s %7s %9s %9s %5s %5s %5s  %s\n", "%Own", "%Total", "OwnTime", "TotalTime",
            "%Py", "%Nat", "%Sys",
            s->by_lines ? "Line: function (file:line)" : "Function (file:line)");
    for (uint32_t k = 0; k < t->nrows && (!max_rows || k < max_rows); k++) {
        const report_live_row_t *r = &t->rows[k];
        char own[24], tot[24], name[2048];
        fmt_time(r->own_s, own, sizeof own);
        fmt_time(r->total_s, tot, sizeof tot);
        row_name(r, name, sizeof name, -1);
        fprintf(out, "%6.1f%% %6.1f%% %9s %9s %5.1f %5.1f %5.1f  %s\n", r->own_pct, r->total_pct,
                own, tot, r->cls_pct[0], r->cls_pct[1], r->cls_pct[2], name);
    }
    if (t->nrows_all > t->nrows || (max_rows && t->nrows > max_rows))
        fprintf(out, "(%u more)\n",
                t->nrows_all - (max_rows && t->nrows > max_rows ? max_rows : t->nrows));
    fflush(out);
}
