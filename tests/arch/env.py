#!/usr/bin/env python3
"""env.py -- ctest arch_env: one table of environment variables, read in one place and
documented.

  python3 tests/arch/env.py [--list]

1. The library (runtime/, autotune/, generator/, templates/, emulator/) reads the
   environment only in runtime/env.c, through cg__env and the table there: a getenv,
   secure_getenv, environ or __environ anywhere else in its C and C++ files (comments
   left out), or os.getenv in its Lua, fails -- unless listed in tests/arch/env_allow.txt
   as `path:VAR` (VAR: the getenv argument, a string's contents or the expression) or
   `path`; a listed entry that no longer occurs fails too (the list only shrinks).
2. The table is whole: every cg_env_var of runtime/env.h (but CG_ENV_COUNT) has one row,
   and every CHUNKGEN_* name in a string literal of the library is a variable of the table
   (a variable read through an allow-listed getenv, or named in a message, is in it).
3. The documentation is the table: docs/environment.md's table has one row per variable,
   no other, each with the same "read" (per call / per context / once per process) and
   default as runtime/env.c; the list at the top of include/chunkgen.h names every
   variable of the table, and every CHUNKGEN_* and $NAME it names is one.
--list prints the violations of 1 in the allow-list's format. Exit 0 pass, 1 fail."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import archlib  # noqa: E402

ENV_C, ENV_H = "runtime/env.c", "runtime/env.h"
DOC, HEADER = "docs/environment.md", "include/chunkgen.h"
READ_RE = re.compile(r"(?<![\w.>])(secure_getenv|getenv)\s*\(\s*([^()]*?)\s*\)|(?<![\w.>])(__environ|environ)\b")
LUA_READ_RE = re.compile(r"\bos\.getenv\s*\(\s*([^()]*?)\s*\)")
WHEN = {"CG_ENV_PER_CALL": "per call", "CG_ENV_PER_CONTEXT": "per context", "CG_ENV_ONCE": "once per process"}


def c_strings(text):
    """The value of a run of adjacent C string literals."""
    return "".join(bytes(s, "utf-8").decode("unicode_escape") for s in re.findall(r'"((?:\\.|[^"\\])*)"', text))


def readers():
    """{`path:VAR`: [message]} for every read of the environment outside runtime/env.c."""
    found = {}
    for rel in archlib.files_under(archlib.LIBRARY):
        if rel == ENV_C:
            continue
        code = archlib.strip_c(archlib.read(rel), keep_strings=True)
        for m in READ_RE.finditer(code):
            arg = m.group(2) if m.group(1) else m.group(3)
            var = c_strings(arg) if arg.startswith('"') else arg
            found.setdefault("%s:%s" % (rel, var), []).append(
                "%s:%d: reads the environment (%s) outside runtime/env.c: add a row to the table there and "
                "read it with cg__env" % (rel, archlib.line_of(code, m.start()), m.group(0)))
    for rel in archlib.files_under(("generator",), exts=(".lua",)):
        code = re.sub(r"--[^\n]*", "", archlib.read(rel))
        for m in LUA_READ_RE.finditer(code):
            var = m.group(1).strip("\"'")
            found.setdefault("%s:%s" % (rel, var), []).append(
                "%s:%d: the generator reads the environment (%s): the library's C side reads it through "
                "cg__env and passes it in" % (rel, archlib.line_of(code, m.start()), m.group(0)))
    return found


def table():
    """[(enum id, name, when words, default)] of runtime/env.c's rows."""
    code = archlib.strip_c(archlib.read(ENV_C), keep_strings=True)
    rows = []
    row_re = re.compile(r'\bROW\(\s*(CG_ENV_\w+)\s*,\s*"([^"]+)"\s*,\s*(CG_ENV_\w+)\s*,\s*((?:"(?:\\.|[^"\\])*"\s*)+),')
    for m in row_re.finditer(code):
        rows.append((m.group(1), m.group(2), WHEN.get(m.group(3), m.group(3)), c_strings(m.group(4))))
    return rows


def enum_ids():
    code = archlib.strip_c(archlib.read(ENV_H))
    body = re.search(r"typedef\s+enum\s+cg_env_var\s*\{(.*?)\}", code, re.S).group(1)
    return [i for i in re.findall(r"\b(CG_ENV_\w+)", body) if i != "CG_ENV_COUNT"]


def doc_rows():
    """{name: (read, default)} of docs/environment.md's table rows (first cell `NAME`)."""
    rows = {}
    if not os.path.exists(os.path.join(archlib.ROOT, DOC)):
        return rows
    for line in archlib.read(DOC).splitlines():
        m = re.match(r"\|\s*`([A-Z][A-Z0-9_]*)`\s*\|(.*)\|\s*$", line)
        if m:
            cells = [c.strip() for c in m.group(2).split("|")]
            if len(cells) >= 2:
                rows[m.group(1)] = (cells[0], cells[1].replace("`", ""))
    return rows


def header_list():
    text = archlib.read(HEADER)
    start = text.find("Environment variables the library reads")
    end = text.find("Process-wide state", start)
    return text[start:end] if start >= 0 and end > start else ""


def main(argv):
    rc = archlib.listed_check("arch_env", readers(), "env_allow.txt", argv)
    if "--list" in argv:
        return rc

    fails = []
    rows = table()
    names = {r[1] for r in rows}
    ids = [r[0] for r in rows]
    for i in enum_ids():
        if ids.count(i) != 1:
            fails.append("%s: cg_env_var %s has %d rows in %s (expected 1)" % (ENV_H, i, ids.count(i), ENV_C))
    if len(names) != len(rows):
        fails.append("%s: a variable has two rows" % ENV_C)
    for rel in archlib.files_under(archlib.LIBRARY):
        code = archlib.strip_c(archlib.read(rel), keep_strings=True)
        for s in re.finditer(r'"(?:\\.|[^"\\\n])*"', code):
            for v in re.findall(r"\bCHUNKGEN_[A-Z0-9_]+", s.group(0)):
                if v not in names:
                    fails.append("%s:%d: names %s, which is not a variable of the table in %s"
                                 % (rel, archlib.line_of(code, s.start()), v, ENV_C))

    docs = doc_rows()
    for _, name, when, dflt in rows:
        if name not in docs:
            fails.append("%s: no row for %s (the table in %s has it)" % (DOC, name, ENV_C))
            continue
        if docs[name][0] != when:
            fails.append("%s: %s is read '%s' but %s says '%s'" % (DOC, name, docs[name][0], ENV_C, when))
        if docs[name][1] != dflt:
            fails.append("%s: %s's default is '%s' but %s says '%s'" % (DOC, name, docs[name][1], ENV_C, dflt))
    for name in sorted(set(docs) - names):
        fails.append("%s: documents %s, which the library does not read (no row in %s)" % (DOC, name, ENV_C))

    hl = header_list()
    if not hl:
        fails.append("%s: no 'Environment variables the library reads' list before 'Process-wide state'" % HEADER)
    for name in sorted(names):
        if hl and not re.search(r"(?<![A-Z0-9_])%s(?![A-Z0-9_])" % re.escape(name), hl):
            fails.append("%s: its environment list does not name %s" % (HEADER, name))
    for name in sorted(set(re.findall(r"\b(CHUNKGEN_[A-Z0-9_]+)", hl)) | set(re.findall(r"\$([A-Z][A-Z0-9_]*)", hl))):
        if name not in names:
            fails.append("%s: its environment list names %s, which is not in %s" % (HEADER, name, ENV_C))

    for f in fails:
        print("FAIL arch_env: " + f)
    print("arch_env: %d variables in %s, %d rows in %s; %d table/documentation problem(s)"
          % (len(rows), ENV_C, len(docs), DOC, len(fails)))
    return 1 if rc or fails else 0


if __name__ == "__main__":
    archlib.main_guard(main)
