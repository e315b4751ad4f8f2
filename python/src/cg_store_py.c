/* cg_store_py.c -- chunkgen._C's config-store functions: the library's own export and
 * import (include/chunkgen.h: cg_config_export, cg_config_import, cg_config_import_json)
 * run in this process with the GIL released; the per-entry messages come through the
 * progress callback, collected here and returned as a list. */
#include "cg_store_py.h"

#include <string.h>

/* The messages of one call, one line each ("SUBJECT (TASK): TEXT"). */
typedef struct msgs {
    char *text;
    size_t len, cap;
    int n;
} msgs;

static void collect(const cg_progress *ev, void *user) {
    msgs *m = user;
    if (ev->kind != CG_PROGRESS_MESSAGE) return;
    char line[2400];
    int k = ev->task[0] ? snprintf(line, sizeof line, "%s (%s): %s", ev->subject, ev->task, ev->text)
                        : snprintf(line, sizeof line, "%s: %s", ev->subject[0] ? ev->subject : "chunkgen", ev->text);
    size_t n = k < 0 ? 0 : (size_t)k >= sizeof line ? sizeof line - 1 : (size_t)k;
    if (m->len + n + 1 >= m->cap) {
        size_t nc = (m->cap ? 2 * m->cap : 4096) + n;
        char *nt = realloc(m->text, nc);
        if (!nt) return;
        m->text = nt, m->cap = nc;
    }
    memcpy(m->text + m->len, line, n);
    m->len += n;
    m->text[m->len++] = '\n';
    m->n++;
}

/* RuntimeError "chunkgen export: MESSAGE" (as the CLI's failure was before). */
static PyObject *fail(cg_status s, cg_context *ctx, const char *what) {
    PyErr_Format(PyExc_RuntimeError, "%s: %s", what, cg_errmsg(ctx)[0] ? cg_errmsg(ctx) : cg_status_str(s));
    return NULL;
}

PyObject *cgpy_config_export(PyObject *self, PyObject *args) {
    (void)self;
    const char *path = NULL;
    cg_config_filter f = CG_CONFIG_FILTER_INIT;
    if (!PyArg_ParseTuple(args, "zzzzz", &path, &f.backend, &f.op, &f.dir, &f.device)) return NULL;
    cg_context *ctx = cgpy_thread_ctx();
    if (!ctx) return NULL;
    char *text = NULL;
    size_t len = 0;
    cg_status s;
    Py_BEGIN_ALLOW_THREADS
    s = cg_config_export(ctx, &f, &text, &len, NULL);
    if (s == CG_OK && path) s = cg_write_file(ctx, path, text, len);
    Py_END_ALLOW_THREADS
    PyObject *r = s != CG_OK ? fail(s, ctx, "chunkgen export")
                  : path     ? (Py_INCREF(Py_None), Py_None)
                             : PyUnicode_FromStringAndSize(text, (Py_ssize_t)len);
    cg_free(text);
    return r;
}

PyObject *cgpy_config_import(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *sources;
    const char *text = NULL;
    Py_ssize_t tlen = 0;
    int allow_foreign = 0, dry_run = 0;
    if (!PyArg_ParseTuple(args, "Oz#pp", &sources, &text, &tlen, &allow_foreign, &dry_run)) return NULL;
    Py_ssize_t n = sources == Py_None ? 0 : PyTuple_Check(sources) ? PyTuple_GET_SIZE(sources) : -1;
    if (n < 0 || (!n && !text)) return PyErr_Format(PyExc_TypeError, "sources: expected a tuple of paths, or text");
    const char **paths = calloc((size_t)n + 1, sizeof *paths);
    if (!paths) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++)
        if (!(paths[i] = PyUnicode_AsUTF8(PyTuple_GET_ITEM(sources, i)))) {
            free(paths);
            return NULL;
        }
    cg_context *ctx = cgpy_thread_ctx();
    if (!ctx) {
        free(paths);
        return NULL;
    }
    cg_import_options o = CG_IMPORT_OPTIONS_INIT;
    o.allow_foreign = allow_foreign, o.dry_run = dry_run;
    cg_import_stats st = CG_IMPORT_STATS_INIT;
    msgs m = {0};
    cg_status s;
    Py_BEGIN_ALLOW_THREADS
    cg_context_set_progress(ctx, collect, &m);
    s = n ? cg_config_import(ctx, paths, (int)n, &o, &st)
          : cg_config_import_json(ctx, text, (size_t)tlen, "json", &o, &st);
    cg_context_set_progress(ctx, NULL, NULL);
    Py_END_ALLOW_THREADS
    free(paths);
    PyObject *r = NULL;
    if (s != CG_OK) {
        fail(s, ctx, "chunkgen import");
    } else {
        PyObject *lines = PyUnicode_FromStringAndSize(m.text ? m.text : "", (Py_ssize_t)(m.len ? m.len - 1 : 0));
        PyObject *list = lines ? (m.n ? PyUnicode_Splitlines(lines, 0) : PyList_New(0)) : NULL;
        Py_XDECREF(lines);
        if (list) r = Py_BuildValue("(iiiiN)", st.added, st.replaced, st.kept, st.rejected, list);
    }
    free(m.text);
    return r;
}

/* tune(shapes, backend, family, dirs, budget, force, threads, max_candidates): each shape
 * a text "OP:ITEM,..." (cg_shape_parse); none: the backend's built-in set of family (None:
 * all) for dirs (1 fwd, 2 bwd, 3 both). threads >= 0: a context of that many threads on
 * the same store. */
PyObject *cgpy_tune(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *texts;
    const char *backend = "auto", *family = NULL;
    int dirs = 3, force = 0, threads = -1, max_candidates = 0;
    double budget = 0;
    if (!PyArg_ParseTuple(args, "Oszidpii", &texts, &backend, &family, &dirs, &budget, &force, &threads,
                          &max_candidates))
        return NULL;
    if (!PyTuple_Check(texts)) return PyErr_Format(PyExc_TypeError, "shapes: expected a tuple of shape texts");
    cg_context *tctx = cgpy_thread_ctx();
    if (!tctx) return NULL;
    cg_context *ctx = tctx;
    if (threads >= 0) { /* the thread count is part of a CPU key: a context of its own */
        cg_status s = cg_context_create(&ctx);
        if (s == CG_OK) s = cg_context_set_cache_dir(ctx, cg_context_cache_dir(tctx));
        if (s == CG_OK) s = cg_context_set_threads(ctx, threads);
        if (s != CG_OK) {
            PyObject *r = fail(s, ctx ? ctx : tctx, "chunkgen tune");
            cg_context_free(ctx);
            return r;
        }
    }
    const Py_ssize_t nt = PyTuple_GET_SIZE(texts);
    const int nops = cg_op_count();
    cg_shape *shapes = calloc((size_t)(nt * nops) + 1, sizeof *shapes); /* a family: one shape per op */
    int n = 0;
    cg_tune_options o = CG_TUNE_OPTIONS_INIT;
    cg_status s = shapes ? cg_backend_parse(backend, &o.backend) : CG_ENOMEM;
    if (s == CG_EINVAL)
        s = (cg_status)(PyErr_Format(PyExc_RuntimeError,
                                     "chunkgen tune: backend '%s' (expected auto, cpu, cuda or "
                                     "emulate)",
                                     backend),
                        -100);
    for (Py_ssize_t i = 0; s == CG_OK && i < nt; i++) {
        const char *t = PyUnicode_AsUTF8(PyTuple_GET_ITEM(texts, i));
        if (!t) {
            s = (cg_status)-100;
            break;
        }
        /* "FAMILY:ITEMS" stands for the family's ops of dirs; anything else is one shape */
        const char *colon = strchr(t, ':');
        char fam[64] = "";
        if (colon && (size_t)(colon - t) < sizeof fam) memcpy(fam, t, (size_t)(colon - t));
        int expanded = 0;
        for (int k = 0; s == CG_OK && fam[0] && k < nops; k++) {
            cg_op_info in = {.size = sizeof in};
            if (cg_op_describe(NULL, (cg_op)k, &in) != CG_OK || strcmp(in.family, fam)) continue;
            expanded = 1;
            if (!(dirs >> in.bwd & 1)) continue;
            char text[1400];
            snprintf(text, sizeof text, "%s%s", in.name, colon);
            shapes[n].size = sizeof shapes[n];
            if ((s = cg_shape_parse(ctx, text, &shapes[n])) != CG_OK)
                fail(s, ctx, "chunkgen tune"), s = (cg_status)-100;
            else n++;
        }
        if (s == CG_OK && !expanded) {
            shapes[n].size = sizeof shapes[n];
            if ((s = cg_shape_parse(ctx, t, &shapes[n])) != CG_OK) fail(s, ctx, "chunkgen tune"), s = (cg_status)-100;
            else n++;
        }
    }
    o.directions = nt ? 0 : dirs, o.family = family, o.budget_s = budget, o.force = force;
    o.max_candidates = max_candidates;
    cg_tune_summary sum = CG_TUNE_SUMMARY_INIT;
    if (s == CG_OK) {
        Py_BEGIN_ALLOW_THREADS
        s = cg_tune(ctx, shapes, n, &o, &sum);
        Py_END_ALLOW_THREADS
        if (s != CG_OK) fail(s, ctx, "chunkgen tune");
    } else if (s == CG_ENOMEM) {
        PyErr_NoMemory();
    }
    free(shapes);
    if (ctx != tctx) cg_context_free(ctx);
    if (s != CG_OK) return NULL;
    return Py_BuildValue("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:d}", "backend",
                         cg_backend_name(sum.backend), "keys", sum.keys, "tuned", sum.tuned, "resumed", sum.resumed,
                         "cached", sum.cached, "unsupported", sum.unsupported, "failed", sum.failed, "skipped_budget",
                         sum.skipped_budget, "candidates", sum.candidates, "rejected", sum.rejected, "seconds",
                         sum.seconds);
}
