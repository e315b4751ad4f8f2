"""archlib.py -- what the architecture checks (tests/arch/*.py) share: the library's
folders, reading source text without comments and strings, and the allow-lists.

An allow-list (tests/arch/*_allow.txt) holds one entry a line, `# why` after it; blank
lines and lines that are only a comment are skipped. A check fails on every violation
that is not listed AND on every listed entry that no longer occurs, so a list can only
shrink: remove the entry in the change that removes the violation."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The library: everything linked into libchunkgen (or embedded in it and run in-process).
LIBRARY = ("runtime", "autotune", "generator", "templates", "emulator")
# The callers, which may use include/chunkgen.h only.
CALLERS = ("tools", "python/src", "bench")
SOURCE_EXT = (".c", ".h", ".cc", ".cpp", ".cu", ".cuh")


def files_under(folders, exts=SOURCE_EXT, root=ROOT):
    """Repository-relative paths of the files under folders whose names end in exts, sorted."""
    out = []
    for top in folders:
        for d, _, names in os.walk(os.path.join(root, top)):
            for n in names:
                if n.endswith(exts):
                    out.append(os.path.relpath(os.path.join(d, n), root))
    return sorted(out)


def read(rel, root=ROOT):
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        return f.read()


_C_TOKENS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def strip_c(text, keep_strings=False):
    """C/C++ text with comments (and, unless keep_strings, string and character literals)
    blanked out; newlines are kept, so line numbers stay right."""
    def blank(m):
        s = m.group(0)
        if keep_strings and s[0] in "\"'":
            return s
        return re.sub(r"[^\n]", " ", s)
    return _C_TOKENS.sub(blank, text)


_LUA_TOKENS = re.compile(r'--\[(=*)\[.*?\]\1\]|--[^\n]*|\[(=*)\[.*?\]\2\]|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                         re.S)


def strip_lua(text):
    """Lua text with comments and string literals blanked out (newlines kept)."""
    return _LUA_TOKENS.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def load_allow(path):
    """The entries of an allow-list: {entry: line number}."""
    entries = {}
    if not os.path.exists(path):
        return entries
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            entry = line.split("#", 1)[0].strip()
            if entry:
                entries[" ".join(entry.split())] = no
    return entries


def settle(name, found, allow_path, match=None, gone="no longer occurs"):
    """Report a check's result. found: {key: [description, ...]} of today's violations; a
    violation is allowed when match(key, entry) holds for a listed entry (default: the key
    is the entry). Returns the exit status: 0 when every violation is listed and every
    listed entry still matches one."""
    allow = load_allow(allow_path)
    match = match or (lambda key, entry: key == entry)
    used = set()
    bad = []
    for key in sorted(found):
        hits = [e for e in allow if match(key, e)]
        if hits:
            used.update(hits)
        else:
            bad.append(key)
    rel = os.path.relpath(allow_path, ROOT)
    for key in bad:
        for what in found[key]:
            print("FAIL %s: %s" % (name, what))
    stale = sorted(set(allow) - used, key=lambda e: allow[e])
    for e in stale:
        print("FAIL %s: %s:%d lists '%s', which %s: remove the line (the list only shrinks)"
              % (name, rel, allow[e], e, gone))
    n_allowed = sum(len(found[k]) for k in found if k not in bad)
    print("%s: %d violation(s) not allowed, %d allowed by %s (%d entries), %d stale entr%s"
          % (name, len(bad), n_allowed, rel, len(allow), len(stale), "y" if len(stale) == 1 else "ies"))
    return 1 if bad or stale else 0


def path_or_key(key, entry):
    """An allow-list match: the entry is the violation's key (`path:what`) or its path."""
    return key == entry or key.split(":", 1)[0] == entry


def listed_check(name, found, allow_file, argv, match=path_or_key):
    """A check's exit status over found ({`path:what`: [message]}) against
    tests/arch/<allow_file>; with --list in argv, print the keys (the list's format)."""
    if "--list" in argv:
        for k in sorted(found):
            print(k)
        return 0
    return settle(name, found, os.path.join(ROOT, "tests/arch", allow_file), match)


def main_guard(fn):
    try:
        sys.exit(fn(sys.argv[1:]))
    except BrokenPipeError:
        sys.exit(1)
