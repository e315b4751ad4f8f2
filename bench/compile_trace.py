#!/usr/bin/env python3
"""compile_trace.py -- where an NVRTC compile's time went, from the Chrome traces that
CHUNKGEN_NVRTC_TIME_TRACE=DIR makes every compile write (NVRTC 13+, runtime/cuda/nvrtc.c):
front end, NVVM optimizer, NVVM codegen and ptxas, and per entry the NVVM optimizer's
and ptxas's share.

  d=$(mktemp -d); CHUNKGEN_CACHE_DIR=$(mktemp -d) CHUNKGEN_NVRTC_TIME_TRACE=$d \\
    build/chunkgen build-kernels --shape B=1,T=2048,G=2,H=8,dk=128,dv=128 --arch 90 --force --threads 1
  python3 bench/compile_trace.py $d/*.json

The trace's times are wall times of NVRTC's threads: with --split-compile the entries'
NVVM and ptxas work overlap, and on a loaded machine every number stretches; compare
shares within one compile, not milliseconds across runs.
Exit status: 0 done; 2 a file is not such a trace.
"""
import collections
import json
import sys

PHASES = [("front end", "CUDA C++ Front-End"), ("NVVM opt", "NVVM Optimizer"), ("NVVM codegen", "NVVM CodeGen"),
          ("ptxas", "Total PTXAS Time")]


def summarize(path):
    with open(path) as f:
        d = json.load(f)
    events = d.get("traceEvents") if isinstance(d, dict) else d
    if not isinstance(events, list):
        raise ValueError("no traceEvents")
    total = collections.Counter()
    nvvm = collections.Counter()  # OptFunction per function (entries and what is left uninlined)
    ptxas = {}  # ptxas per entry
    for e in events:
        if e.get("ph") != "X":
            continue
        name, ms, args = e.get("name"), e.get("dur", 0) / 1e3, e.get("args") or {}
        total[name] += ms
        if name == "OptFunction":
            nvvm[args.get("detail", "?")] += ms
        elif name == "Optimizing compilation unit":
            ptxas[args.get("name", "?")] = ptxas.get(args.get("name", "?"), 0) + ms
    return total, nvvm, ptxas


def main(paths):
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for p in paths:
        try:
            total, nvvm, ptxas = summarize(p)
        except (OSError, ValueError) as err:
            print("compile_trace: %s: not an NVRTC time trace (%s)" % (p, err), file=sys.stderr)
            return 2
        phases = [(label, total[key]) for label, key in PHASES]
        s = sum(ms for _, ms in phases) or 1.0
        print("%s\n  %s" % (p, ", ".join("%s %.0f ms (%.0f %%)" % (l, ms, 100 * ms / s) for l, ms in phases)))
        if ptxas:
            print("  ptxas per entry: " + ", ".join("%s %.0f" % (k, v) for k, v in
                                                    sorted(ptxas.items(), key=lambda x: -x[1])))
        if nvvm:
            print("  NVVM optimizer per function: " + ", ".join("%s %.0f" % (k[:48], v) for k, v in
                                                                nvvm.most_common(6)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
