/* cg_store_py.h -- chunkgen._C's config-store functions (cg_store_py.c): export, import
 * and tune in this process through the public API (include/chunkgen.h), so that what they
 * write is seen by the next call at once. */
#ifndef CG_STORE_PY_H
#define CG_STORE_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "chunkgen.h"

/* This thread's context with the module's settings applied (cg_module.c); NULL with an
 * exception set. */
cg_context *cgpy_thread_ctx(void);

/* config_export(path, backend, op, dir, device) -> str, or None when written to path. */
PyObject *cgpy_config_export(PyObject *self, PyObject *args);
/* config_import(sources, text, allow_foreign, dry_run) -> (added, replaced, kept, rejected,
 * [message, ...]): sources a tuple of paths, or text a JSON document. */
PyObject *cgpy_config_import(PyObject *self, PyObject *args);

/* tune(shapes, backend, family, dirs, budget, force, threads, max_candidates) -> summary dict. */
PyObject *cgpy_tune(PyObject *self, PyObject *args);

#define CGPY_STORE_METHODS                                                                                             \
    {"config_export", cgpy_config_export, METH_VARARGS,                                                                \
     "config_export(path, backend, op, dir, device) -> the export document (str), or None when written to path"},      \
        {"config_import", cgpy_config_import, METH_VARARGS,                                                            \
         "config_import(sources, text, allow_foreign, dry_run) -> (added, replaced, kept, rejected, messages)"},       \
    {                                                                                                                  \
        "tune", cgpy_tune, METH_VARARGS,                                                                               \
            "tune(shapes, backend, family, dirs, budget, force, threads, max_candidates) -> summary (cg_tune)"         \
    }

#endif
