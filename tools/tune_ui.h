/* tune_ui.h -- how the CLI shows the library's progress events (cg_context_set_progress):
 * a bar on a terminal, or plain lines, for `tune` and `import` (tools/tune_ui.c). */
#ifndef CG_TUNE_UI_H
#define CG_TUNE_UI_H

#include "chunkgen.h"

#include <stdio.h>

typedef struct tune_ui {
    FILE *f;            /* where (stderr) */
    int mode;           /* 1: a bar that redraws (a terminal), 0: plain lines, -1: nothing */
    const char *prefix; /* each line's start, e.g. "tune" or "chunkgen import" */
    int subject_first;  /* a message names its subject, then the task in parentheses (import) */
    int cap;            /* messages shown at most (0: all); the rest are counted */
    int shown, hidden;
    int bar; /* a bar is drawn on the current line */
} tune_ui;

/* The progress callback: user is a tune_ui. */
void tune_ui_event(const cg_progress *ev, void *user);
/* Close the bar's line; say how many messages were not shown. */
void tune_ui_end(tune_ui *u);

#endif
