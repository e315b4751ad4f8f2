#!/usr/bin/env python3
"""noprint.py -- ctest arch_no_print: the library prints nothing.

  python3 tests/arch/noprint.py [--list]

The library (runtime/, autotune/, generator/, templates/, emulator/) says things through
the log callback (cg__log, runtime/log.c) and nothing else. In its C and C++ files
(comments and string literals left out) this fails on
  - a call of printf, vprintf, dprintf, puts, putchar or perror (they write to stdout or
    stderr by definition; a declaration is not a call: emulator/cg_emu.h declares
    `int printf(...)` because CUDA device code may call printf, as on a GPU, where a
    kernel's printf is the kernel's own output; a template that called it would fail here);
  - any use of stdout, stderr, STDOUT_FILENO, STDERR_FILENO, std::cout, std::cerr;
  - a stream handed in by the caller to print on: a `FILE *` parameter in a .c file, or
    any `FILE *` in a header (the library writes to files it opens itself, never to a
    caller's stream);
and in the Lua generator (comments and strings left out) on print(...), io.write,
io.stdout, io.stderr.
runtime/log.c is exempt: its default callback is the one place that writes (to stderr).

Today's exceptions are listed in tests/arch/noprint_allow.txt: `path` or `path:what` (what:
the name, or `FILE*`), `# why` after it. A violation not listed fails, and so does a
listed entry that no longer occurs (the list only shrinks). --list prints today's
violations in the list's format. Exit 0 pass, 1 fail."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import archlib  # noqa: E402

EXEMPT = {"runtime/log.c"}  # the default logger
CALL_RE = re.compile(r"(?<![\w.>])(printf|vprintf|dprintf|puts|putchar|perror)\s*\(")
DECL_RE = re.compile(r"\b(int|void)\s+$")  # `int printf(` declares, it does not call
NAME_RE = re.compile(r"(?<![\w.>])(stdout|stderr|STDOUT_FILENO|STDERR_FILENO|std::cout|std::cerr)\b")
FILE_PARAM_RE = re.compile(r"[(,]\s*(?:const\s+)?FILE\s*\*\s*\w*\s*(?=[,)])")
FILE_ANY_RE = re.compile(r"\bFILE\s*\*")
LUA_RE = re.compile(r"(?<![\w.:])(print)\s*\(|\bio\.(write|stdout|stderr)\b")


def violations():
    found = {}

    def add(rel, what, text, pos, msg):
        found.setdefault("%s:%s" % (rel, what), []).append("%s:%d: %s" % (rel, archlib.line_of(text, pos), msg))

    for rel in archlib.files_under(archlib.LIBRARY):
        if rel in EXEMPT:
            continue
        code = archlib.strip_c(archlib.read(rel))
        for m in CALL_RE.finditer(code):
            if DECL_RE.search(code[max(0, m.start() - 16):m.start()]):
                continue
            add(rel, m.group(1), code, m.start(), "calls %s (the library reports through cg__log)" % m.group(1))
        for m in NAME_RE.finditer(code):
            add(rel, m.group(1), code, m.start(), "uses %s (the library writes to no standard stream)" % m.group(1))
        pattern = FILE_ANY_RE if rel.endswith((".h", ".cuh")) else FILE_PARAM_RE
        for m in pattern.finditer(code):
            add(rel, "FILE*", code, m.start(), "a FILE * %s: a caller's stream to print on (report through cg__log "
                "or a callback)" % ("in a header" if pattern is FILE_ANY_RE else "parameter"))
    for rel in archlib.files_under(("generator",), exts=(".lua",)):
        code = archlib.strip_lua(archlib.read(rel))
        for m in LUA_RE.finditer(code):
            what = m.group(1) or "io." + m.group(2)
            add(rel, what, code, m.start(), "Lua %s writes to a standard stream (raise an error instead)" % what)
    return found


def main(argv):
    return archlib.listed_check("arch_no_print", violations(), "noprint_allow.txt", argv)


if __name__ == "__main__":
    archlib.main_guard(main)
