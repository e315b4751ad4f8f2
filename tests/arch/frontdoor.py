#!/usr/bin/env python3
"""frontdoor.py -- ctest arch_front_door: the callers use the public header only.

  python3 tests/arch/frontdoor.py [--list]

The callers (tools/ = the CLI, python/src/ = the Python extension, bench/) may use the
library through include/chunkgen.h alone. In their C and C++ files (comments and string
literals left out) this fails on
  - a `cg__` name (the library's internal symbols), and
  - an #include that resolves to a header of the library's own folders (runtime/,
    autotune/, generator/, templates/, emulator/) -- anything but include/chunkgen.h; a
    header next to the including file (tools/cli.h) is the caller's own.
tests/ is exempt (the tests check the insides).

Today's violations are listed in tests/arch/frontdoor_allow.txt, one a line: `path:cg__name`,
`path:runtime/x.h` (the header as resolved), or `path` alone for every violation of that
file; `# why` after it. A violation not listed fails, and so does a listed entry that no
longer occurs (remove it in the change that removes the use; the list only shrinks).
--list prints today's violations in the list's format.
Exit 0 pass, 1 fail."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import archlib  # noqa: E402

INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"]+)[>"]', re.M)
SYMBOL_RE = re.compile(r"\bcg__\w+")
PUBLIC = "include/chunkgen.h"
# Where the build looks for a header a caller names (its include directories).
SEARCH = ("include",) + tuple(
    os.path.relpath(d, archlib.ROOT)
    for top in archlib.LIBRARY
    for d, _, _ in os.walk(os.path.join(archlib.ROOT, top)))


def library_header(frm, name):
    """The repository path of the library header that `#include name` in frm names, or
    None (a system header, the caller's own, or the public header)."""
    here = os.path.normpath(os.path.join(os.path.dirname(frm), name))
    if os.path.isfile(os.path.join(archlib.ROOT, here)):
        cand = here
    else:
        cand = None
        for d in SEARCH:
            p = os.path.normpath(os.path.join(d, name))
            if os.path.isfile(os.path.join(archlib.ROOT, p)):
                cand = p
                break
    if not cand or cand == PUBLIC:
        return None
    return cand if cand.split(os.sep)[0] in archlib.LIBRARY else None


def violations():
    """{`path:what`: [message, ...]} over the callers' C and C++ files."""
    found = {}
    for rel in archlib.files_under(archlib.CALLERS):
        raw = archlib.read(rel)
        code = archlib.strip_c(raw)
        for m in SYMBOL_RE.finditer(code):
            key = "%s:%s" % (rel, m.group(0))
            found.setdefault(key, []).append("%s:%d: uses the internal %s (callers use include/chunkgen.h only)"
                                             % (rel, archlib.line_of(code, m.start()), m.group(0)))
        for m in INCLUDE_RE.finditer(archlib.strip_c(raw, keep_strings=True)):
            h = library_header(rel, m.group(2))
            if h:
                key = "%s:%s" % (rel, h)
                found.setdefault(key, []).append("%s:%d: includes the library's internal header %s"
                                                 % (rel, archlib.line_of(raw, m.start()), h))
    return found


def main(argv):
    return archlib.listed_check("arch_front_door", violations(), "frontdoor_allow.txt", argv)


if __name__ == "__main__":
    archlib.main_guard(main)
