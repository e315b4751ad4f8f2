#!/usr/bin/env python3
"""opnames.py -- ctest arch_op_names: a new op is a table row (issue #34 item 4).

  python3 tests/arch/opnames.py [--list] [--words]

Only an op's own files name it: its line in runtime/op_list.h, its rows in the op table
(runtime/ops.c), its problem struct and typed entry points (runtime/internal.h), its CPU
kernel (runtime/cpu/), its float64 reference (runtime/ref/), its Lua generator and
templates, its tests (docs/architecture.md, "Adding an op"). Validation, dispatch, the
backends' tables, the key, the store, the CLI, the Python extension and the Python / JAX
package handle every op through the op table and name none, so that adding an op touches
none of them. This fails when one of those files names an op.

The op words come from runtime/op_list.h (its CG_OP_LIST lines: the op's name, its cg_op
constant, its args struct, its problem struct): the names (ssd_fwd, ...) and the
families (ssd, sscan: each problem struct cg_FAMILY_prob's, and each name without its
_fwd / _bwd). A file names an op when, comments left out,
  - an identifier has a family as one of its `_`-separated parts, in any case
    (CG_OP_SSD_FWD, cg_ssd_prob, cg_sscan_fwd_args, cg__ssd_cpu_fwd, ssd_views, is_ssd);
  - a string literal is an op word alone ("ssd_fwd", "sscan"), or lists op words (two
    in a row with only ", ", " or ", " and ", "/" or "|" between them: "expected ssd,
    sscan, ssd_fwd ...", "not ssd or sscan"); an op word elsewhere in a string (an
    example in a message, "e.g. ssd_fwd:B=1,...") is not a violation.
Python files are read with the tokenize module (comments and docstrings left out), C and
C++ files with archlib.strip_c.

The files checked: runtime/ (but for the op's own files: ops.c, op_list.h, internal.h,
cpu/, ref/; and python/chunkgen/compat/, the drop-in adapters), autotune/, tools/, python/src/ and python/chunkgen/. Today's exceptions
are in tests/arch/opnames_allow.txt: `path` or `path:word` (word: the identifier or the
op word of the string), `# why` after it. A violation not listed fails, and so does a
listed entry that no longer occurs (the list only shrinks). --list prints today's
violations in the list's format; --words prints the op words read from op_list.h.
Exit 0 pass, 1 fail."""
import io
import os
import re
import sys
import tokenize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import archlib  # noqa: E402

OP_LIST = "runtime/op_list.h"
CHECKED = ("runtime", "autotune", "tools", "python/src", "python/chunkgen")
# An op's own files (docs/architecture.md, "Adding an op").
OWN = ("runtime/ops.c", OP_LIST, "runtime/internal.h")
# python/chunkgen/compat/: the drop-in adapters (docs/compat.md) map another library's
# call (mamba_ssm's, fla's) onto one op each, so every function there is that op's own.
OWN_DIRS = ("runtime/cpu/", "runtime/ref/", "python/chunkgen/compat/")
LINE_RE = re.compile(r"\bX\(\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*\)")
IDENT_RE = re.compile(r"[A-Za-z_]\w*")
WORD_RE = re.compile(r"\w+")
LIST_SEP_RE = re.compile(r"\s*(?:,|/|\||,?\s+or|,?\s+and)\s*")


def op_words(root=archlib.ROOT):
    """(names, families) of the ops listed in runtime/op_list.h's CG_OP_LIST."""
    text = archlib.strip_c(archlib.read(OP_LIST, root))
    start = text.find("#define CG_OP_LIST(X)")
    if start < 0:
        raise SystemExit("FAIL arch_op_names: %s has no CG_OP_LIST(X)" % OP_LIST)
    body = []
    for line in text[start:].splitlines():
        body.append(line)
        if not line.rstrip().endswith("\\"):
            break
    rows = LINE_RE.findall("\n".join(body))
    if not rows:
        raise SystemExit("FAIL arch_op_names: no X(...) line in %s's CG_OP_LIST" % OP_LIST)
    names, families = [], []
    for name, _const, _args, prob in rows:
        names.append(name)
        m = re.fullmatch(r"cg_(\w+)_prob", prob)
        for fam in ([m.group(1)] if m else []) + [re.sub(r"_(fwd|bwd)$", "", name)]:
            if fam not in families:
                families.append(fam)
    return names, families


def checked_files(root=archlib.ROOT):
    out = []
    for rel in archlib.files_under(CHECKED, exts=archlib.SOURCE_EXT + (".py",), root=root):
        if rel in OWN or rel.startswith(OWN_DIRS):
            continue
        out.append(rel)
    return out


class Matcher:
    def __init__(self, names, families):
        self.words = set(names) | set(families)
        fam = "|".join(re.escape(f) for f in sorted(families, key=len, reverse=True))
        # a family as a `_`-separated part of an identifier (digits may follow: ssd16)
        self.ident = re.compile(r"(?i)(?:^|_)(?:%s)(?=_|\d|$)" % fam)

    def identifier(self, ident):
        return bool(self.ident.search(ident))

    def string(self, body):
        """The op word(s) a string literal's text names as a violation, or []: the string
        is an op word alone, or lists op words (two in a row with only a list's separator
        between them: ", ", " or ", " and ", "/", "|")."""
        if body.strip() in self.words:
            return [body.strip()]
        found = []
        words = [w for w in WORD_RE.finditer(body) if w.group(0) in self.words]
        for a, b in zip(words, words[1:]):
            if LIST_SEP_RE.fullmatch(body[a.end():b.start()]):
                for w in (a.group(0), b.group(0)):
                    if w not in found:
                        found.append(w)
        return found


def c_hits(text, m):
    """(pos, what, message) of the op words in C text."""
    hits = []
    code = archlib.strip_c(text)
    for t in IDENT_RE.finditer(code):
        if m.identifier(t.group(0)):
            hits.append((t.start(), t.group(0), "names op identifier %s" % t.group(0)))
    with_strings = archlib.strip_c(text, keep_strings=True)
    for s in re.finditer(r'"(?:\\.|[^"\\\n])*"', with_strings):
        words = m.string(s.group(0)[1:-1])
        if words:
            hits.append((s.start(), words[0], "string %s names the op(s) %s" % (s.group(0)[:60], ", ".join(words))))
    return hits


def py_hits(text, m):
    """(pos, what, message) of the op words in Python text (comments and docstrings out)."""
    hits = []
    lines = text.splitlines(True)
    offsets = [0]
    for ln in lines:
        offsets.append(offsets[-1] + len(ln))

    def pos(start):
        return offsets[start[0] - 1] + start[1]

    toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    skip = (tokenize.NL, tokenize.COMMENT)
    sig = [t for t in toks if t.type not in skip]
    for i, t in enumerate(sig):
        if t.type == tokenize.NAME and m.identifier(t.string):
            hits.append((pos(t.start), t.string, "names op identifier %s" % t.string))
        elif t.type == tokenize.STRING:
            prev = sig[i - 1].type if i else tokenize.NEWLINE
            nxt = sig[i + 1].type if i + 1 < len(sig) else tokenize.NEWLINE
            if prev in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING) and \
                    nxt in (tokenize.NEWLINE, tokenize.ENDMARKER):
                continue  # a docstring
            body = re.sub(r"^[A-Za-z]*('''|\"\"\"|'|\")", "", t.string)
            body = re.sub(r"('''|\"\"\"|'|\")$", "", body)
            words = m.string(body)
            if words:
                hits.append((pos(t.start), words[0], "string %s names the op(s) %s" % (t.string[:60], ", ".join(words))))
    return hits


def violations(root=archlib.ROOT):
    m = Matcher(*op_words(root))
    found = {}
    for rel in checked_files(root):
        text = archlib.read(rel, root)
        hits = py_hits(text, m) if rel.endswith(".py") else c_hits(text, m)
        for p, what, msg in hits:
            found.setdefault("%s:%s" % (rel, what), []).append(
                "%s:%d: %s (an op is named by its own files only: docs/architecture.md, \"Adding an op\")"
                % (rel, archlib.line_of(text, p), msg))
    return found


def main(argv):
    if "--words" in argv:
        names, families = op_words()
        print("names: %s\nfamilies: %s" % (" ".join(names), " ".join(families)))
        return 0
    return archlib.listed_check("arch_op_names", violations(), "opnames_allow.txt", argv)


if __name__ == "__main__":
    archlib.main_guard(main)
