/* log.c -- the library's one way to say something: a process-wide log callback
 * (cg_set_log_callback). The library never writes to stdout or stderr itself; the
 * default callback writes each message to stderr as "chunkgen: [warning: ]TEXT". */
#include "internal.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void cg_log_stderr(cg_log_level level, const char *msg, void *user) {
    (void)user;
    fprintf(stderr, "chunkgen: %s%s\n",
            level == CG_LOG_ERROR  ? "error: "
            : level == CG_LOG_WARN ? "warning: "
                                   : "",
            msg);
}

void cg_log_silent(cg_log_level level, const char *msg, void *user) { (void)level, (void)msg, (void)user; }

#define default_log cg_log_stderr

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static cg_log_fn g_fn = default_log;
static void *g_user;

void cg_set_log_callback(cg_log_fn fn, void *user) {
    pthread_mutex_lock(&g_lock);
    g_fn = fn ? fn : default_log;
    g_user = fn ? user : NULL;
    pthread_mutex_unlock(&g_lock);
}

void cg__log(cg_log_level level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cg__logv(level, fmt, ap);
    va_end(ap);
}

void cg__logv(cg_log_level level, const char *fmt, va_list ap) {
    char msg[CG_ERRMSG_CAP];
    vsnprintf(msg, sizeof msg, fmt, ap);
    pthread_mutex_lock(&g_lock);
    cg_log_fn fn = g_fn;
    void *user = g_user;
    pthread_mutex_unlock(&g_lock);
    fn(level, msg, user);
}

void cg__progress(cg_context *ctx, cg_progress ev) {
    if (!ctx || !ctx->progress) return;
    ev.size = sizeof ev;
    if (!ev.task) ev.task = "";
    if (!ev.subject) ev.subject = "";
    if (!ev.text) ev.text = "";
    ctx->progress(&ev, ctx->progress_user);
}

_Noreturn void cg__assert_fail(const char *file, int line, const char *expr) {
    cg__log(CG_LOG_ERROR, "%s:%d: assertion failed: %s", file, line, expr);
    abort();
}
