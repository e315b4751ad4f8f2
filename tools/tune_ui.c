/* tune_ui.c -- the CLI's bar and lines, drawn from the library's progress events (the
 * library itself prints nothing). A key of a tune is a task: STEP events redraw its bar on
 * a terminal; DONE and MESSAGE events are one line each. */
#include "tune_ui.h"

#include <string.h>

static void close_bar(tune_ui *u) {
    if (!u->bar) return;
    fputs("\r\033[K", u->f);
    u->bar = 0;
}

static void bar(tune_ui *u, const cg_progress *ev) {
    char b[21];
    const int64_t fill = ev->total > 0 ? ev->done * 20 / ev->total : 0;
    for (int i = 0; i < 20; i++) b[i] = i < fill ? '#' : '.';
    b[20] = '\0';
    fprintf(u->f, "\r\033[K[%d/%d] %s [%s] %lld/%lld%s%s", ev->index, ev->count, ev->task, b, (long long)ev->done,
            (long long)ev->total, ev->text[0] ? "  " : "", ev->text);
    fflush(u->f);
    u->bar = 1;
}

static void line(tune_ui *u, const cg_progress *ev) {
    if (u->cap > 0 && u->shown >= u->cap) {
        u->hidden++;
        return;
    }
    u->shown++;
    close_bar(u);
    char where[1400] = "";
    if (ev->index > 0) snprintf(where, sizeof where, "[%d/%d] ", ev->index, ev->count);
    const char *a = u->subject_first ? ev->subject : ev->task, *b = u->subject_first ? ev->task : ev->subject;
    size_t n = strlen(where);
    if (a[0] && b[0]) snprintf(where + n, sizeof where - n, "%s (%s): ", a, b);
    else if (a[0] || b[0]) snprintf(where + n, sizeof where - n, "%s: ", a[0] ? a : b);
    const char *lv =
        ev->kind == CG_PROGRESS_MESSAGE && ev->level == CG_LOG_WARN && !u->subject_first ? "warning: " : "";
    fprintf(u->f, "%s: %s%s%s\n", u->prefix, where, lv, ev->text);
    fflush(u->f);
}

void tune_ui_event(const cg_progress *ev, void *user) {
    tune_ui *u = user;
    if (u->mode < 0) return;
    switch (ev->kind) {
    case CG_PROGRESS_START: break;
    case CG_PROGRESS_STEP:
        if (u->mode == 1) bar(u, ev);
        break;
    case CG_PROGRESS_DONE:
    case CG_PROGRESS_MESSAGE: line(u, ev); break;
    }
}

void tune_ui_end(tune_ui *u) {
    if (u->mode < 0) return;
    close_bar(u);
    if (u->hidden) fprintf(u->f, "%s: %d more message(s) not shown\n", u->prefix, u->hidden);
}
