#!/usr/bin/env python3
"""cycles.py -- ctest arch_no_import_circle: no circle among the library's files.

  python3 tests/arch/cycles.py BUILD_DIR [--nm NM] [--graph]

1. Files: the dependency graph between the library's compiled files, measured from the
   build's object files (chunkgen_lib's and the CPU ISA variants' objects, read with
   `nm -P`): file A depends on file B when A's object uses a global symbol (function or
   data) that B's object defines. A variant of runtime/cpu/X.c built per ISA is one file.
   Every strongly connected component of more than one file is a circle. A call through
   a function pointer (a backend's vtable, a callback) is not a dependency: that is how a
   lower layer calls up without knowing who is above.
   The circles of today are listed in tests/arch/cycles_allow.txt by the dependency that
   closes each one, the one that points the wrong way (`A.c -> B.c`, with the circle in
   its comment): the check drops the listed dependencies and then fails on any circle
   left; and it fails on a listed dependency that no longer closes a circle (gone, or no
   longer inside one), so the list only shrinks.
2. Layers: docs/architecture.md's "Layers" section has a table of the layers, top (1)
   to bottom, each with its files (`path` or a glob, `<build>/generated/...` for the
   generated sources). Every compiled file is in exactly one layer, every name there
   matches a file, and every dependency goes to its own layer or one below -- but for
   the ones listed in cycles_allow.txt. So the document's picture is the measured one.
3. Headers: the #include graph among the library's headers (runtime/, autotune/,
   templates/, emulator/, include/) must have no circle at all (no allow-list).

--graph prints the file graph's components in dependency order (a file after all it
uses), one line each: what docs/architecture.md's picture is drawn from.
Exit 0 pass, 1 fail."""
import fnmatch
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import archlib  # noqa: E402

OBJ_TARGETS = ("chunkgen_lib", "chunkgen_cpu_baseline", "chunkgen_cpu_avx2", "chunkgen_cpu_avx512")


def objects(build):
    """{object path: the source file's repository-relative name} of the library."""
    out = {}
    for t in OBJ_TARGETS:
        top = os.path.join(build, "CMakeFiles", t + ".dir")
        for d, _, names in os.walk(top):
            for n in names:
                if n.endswith(".o"):
                    p = os.path.join(d, n)
                    src = os.path.relpath(p, top)[:-2]  # runtime/x.c.o -> runtime/x.c
                    if src.startswith("generated/"):
                        src = "<build>/" + src
                    out[p] = src
    return out


NM = ["nm"]


def symbols(obj):
    """(defined, used): the global symbols obj defines and the ones it uses."""
    res = subprocess.run(NM + ["-P", obj], capture_output=True, text=True, check=True)
    defined, used = set(), set()
    for line in res.stdout.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        name, kind = f[0], f[1]
        if kind in ("U", "w", "v"):
            used.add(name)
        elif kind.isupper():
            defined.add(name)
    return defined, used


def file_graph(build):
    objs = objects(build)
    if not objs:
        return None
    definer, uses = {}, {}
    for obj, src in objs.items():
        d, u = symbols(obj)
        for s in d:
            definer.setdefault(s, set()).add(src)
        uses.setdefault(src, set()).update(u)
    graph = {src: {} for src in uses}
    for src, u in uses.items():
        for s in u:
            for dst in definer.get(s, ()):
                if dst != src:
                    graph[src].setdefault(dst, set()).add(s)
    return graph


def sccs(graph):
    """Tarjan's strongly connected components, iteratively; each comes out after every
    component it reaches (so the list is in dependency order, lowest first)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def describe_circle(comp, graph):
    """The edges inside a circle, with up to three symbols each, for the failure message."""
    parts = []
    for a in comp:
        for b in sorted(graph[a]):
            if b in comp:
                syms = sorted(graph[a][b])
                more = " ..." if len(syms) > 3 else ""
                parts.append("%s -> %s (%s%s)" % (a, b, ", ".join(syms[:3]), more))
    return "; ".join(parts)


# ------------------------------------------------------------------- layers
ARCH_DOC = "docs/architecture.md"


def doc_layers():
    """[(number, name, [pattern, ...])] of the layer table in ARCH_DOC's "## Layers"."""
    text = archlib.read(ARCH_DOC)
    start = text.find("\n## Layers")
    end = text.find("\n## ", start + 1)
    out = []
    for line in text[start:end if end > 0 else None].splitlines():
        m = re.match(r"\|\s*(\d+)\s+([^|]*?)\s*\|(.*)\|\s*$", line)
        if m:
            out.append((int(m.group(1)), m.group(2), re.findall(r"`([^`]+)`", m.group(3))))
    return sorted(out) if start >= 0 else []


def check_layers(graph, allowed):
    """The failures of the layer table against the measured graph."""
    layers = doc_layers()
    if not layers:
        return ["%s: no layer table in its \"## Layers\" section" % ARCH_DOC]
    fails = []
    where = {}
    for f in sorted(graph):
        hits = [(n, name) for n, name, pats in layers if any(fnmatch.fnmatchcase(f, p) for p in pats)]
        if len(hits) != 1:
            fails.append("%s is in %s of %s's layer table (expected exactly one): add it to the layer its "
                         "dependencies put it in" % (f, "no layer" if not hits else "layers %s" % hits, ARCH_DOC))
        else:
            where[f] = hits[0]
    for n, name, pats in layers:
        for p in pats:
            if not any(fnmatch.fnmatchcase(f, p) for f in graph):
                fails.append("%s: layer %d %s names %s, which is no compiled file of the library" % (ARCH_DOC, n, name, p))
    for a in sorted(graph):
        for b in sorted(graph[a]):
            if a in where and b in where and where[b][0] < where[a][0] and (a, b) not in allowed:
                fails.append("%s (layer %d %s) uses %s (layer %d %s, above it): %s" % (
                    a, where[a][0], where[a][1], b, where[b][0], where[b][1], ", ".join(sorted(graph[a][b])[:4])))
    return fails


# ------------------------------------------------------------------ headers
HEADER_DIRS = ("include", "runtime", "runtime/cpu", "runtime/cuda", "runtime/emu", "runtime/ref", "autotune",
               "templates", "emulator")
INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.M)


def header_graph():
    headers = archlib.files_under(("include",) + archlib.LIBRARY, exts=(".h", ".cuh"))
    by_path = set(headers)

    def resolve(frm, name):
        cand = os.path.normpath(os.path.join(os.path.dirname(frm), name))
        if cand in by_path:
            return cand
        for d in HEADER_DIRS:
            cand = os.path.normpath(os.path.join(d, name))
            if cand in by_path:
                return cand
        return None

    graph = {}
    for h in headers:
        text = archlib.strip_c(archlib.read(h), keep_strings=True)
        graph[h] = {}
        for m in INCLUDE_RE.finditer(text):
            dst = resolve(h, m.group(1))
            if dst:
                graph[h].setdefault(dst, set()).add("line %d" % archlib.line_of(text, m.start()))
    return graph


def main(argv):
    if not argv:
        print(__doc__)
        return 2
    build = argv[0]
    if "--nm" in argv and argv.index("--nm") + 1 < len(argv):
        NM[0] = argv[argv.index("--nm") + 1]
    graph = file_graph(build)
    if graph is None:
        print("FAIL arch_no_import_circle: no object files under %s/CMakeFiles/chunkgen_lib.dir (build first)" % build)
        return 1
    comps = sccs(graph)
    if "--graph" in argv:
        for c in comps:
            deps = sorted({d for f in c for d in graph[f]} - set(c))
            print("%s  ->  %s" % (" ".join(c), " ".join(deps) if deps else "(nothing)"))
        return 0
    allow_path = os.path.join(archlib.ROOT, "tests/arch/cycles_allow.txt")
    allowed = {}
    for entry in archlib.load_allow(allow_path):
        a, arrow, b = entry.partition(" -> ")
        if not arrow:
            print("FAIL arch_no_import_circle: %s: '%s' is not 'A -> B'" % (allow_path, entry))
            return 1
        allowed[(a.strip(), b.strip())] = entry
    comp_of = {f: i for i, c in enumerate(comps) for f in c}
    found = {}
    for a, b in allowed:  # a listed dependency that still closes a circle is a violation, allowed
        if b in graph.get(a, {}) and comp_of.get(a) == comp_of.get(b):
            found[allowed[(a, b)]] = ["%s -> %s (%s)" % (a, b, ", ".join(sorted(graph[a][b])))]
    pruned = {a: {b: s for b, s in e.items() if (a, b) not in allowed} for a, e in graph.items()}
    left = [c for c in sccs(pruned) if len(c) > 1]
    for c in left:
        found[" ".join(c)] = ["a circle among %d files: %s" % (len(c), describe_circle(c, pruned))]
    rc = archlib.settle("arch_no_import_circle", found, allow_path, gone="no longer closes a circle")
    print("arch_no_import_circle: %d files, %d components, %d circle(s) (%d left after the listed dependencies)"
          % (len(graph), len(comps), sum(len(c) > 1 for c in comps), len(left)))
    lfails = check_layers(graph, allowed)
    for f in lfails:
        print("FAIL arch_no_import_circle: " + f)
    print("arch_no_import_circle: %d layer problem(s) against %s" % (len(lfails), ARCH_DOC))

    hg = header_graph()
    hbad = 0
    for c in sccs(hg):
        if len(c) > 1 or c[0] in hg[c[0]]:
            hbad += 1
            print("FAIL arch_no_import_circle: the headers include each other in a circle: %s"
                  % describe_circle(c, hg))
    print("arch_no_import_circle: %d headers, %d include circle(s)" % (len(hg), hbad))
    return 1 if rc or hbad or lfails else 0


if __name__ == "__main__":
    archlib.main_guard(main)
