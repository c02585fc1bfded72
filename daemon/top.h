/* top.h - what 'scry top' shows, shared by its loop (top.c) and its screens (top_screen.c). */
#ifndef SCRY_TOP_H
#define SCRY_TOP_H

#include "live.h"

#include <stdint.h>
#include <stdio.h>

typedef struct top_state {
    /* the view */
    int by_lines;              /* lines instead of functions */
    int sort;                  /* enum report_live_sort */
    int use_window;            /* percentages over the last window_s (else since start) */
    double window_s;           /* --window */
    int paused;                /* the display is frozen (sampling goes on) */
    int help;                  /* the help box is shown */
    int exited;                /* the target exited: the data is final */
    report_live_table_t table; /* what is on screen */
    /* the header */
    int pid;
    const char *command;        /* the target's command line; "" unknown */
    const char *python_version; /* "3.12.1" */
    const char *container;      /* "docker:4f3c2b1a0011" (runtime and 12 digits), "" none */
    double rate_hz;             /* configured */
    uint64_t errors;            /* rounds or threads lost to errors */
    uint64_t late;              /* rounds that started late (the machine is busy) */
    double gil_pct;             /* over the window; < 0 unknown */
    int threads_active;         /* threads sampled on a CPU in the last interval */
    int threads_total;          /* the target's OS threads; < 0 unknown */
    const char *stopped;        /* why sampling stopped (an error), or NULL */
    char message[128];          /* a transient note ("reset", ...), "" none */
} top_state_t;

/* Draws S on the curses screen (stdscr must be initialised) and refreshes it. Copes with
 * any terminal size, including ones too small for anything but a note. */
void top_screen_draw(const top_state_t *s);

/* Prints S as a plain-text table of at most MAX_ROWS rows (0: every row) to OUT. */
void top_screen_print(const top_state_t *s, FILE *out, uint32_t max_rows);

/* Column title of sort key SORT ("%Own", ...). */
const char *top_sort_name(int sort);

#endif
