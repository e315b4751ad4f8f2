#!/usr/bin/env python3
"""nvrtc_floor.py -- the fixed cost of an NVRTC compile on this host: an empty program
and a trivial kernel, with the executor's options (runtime/cuda/nvrtc.c) and variants,
and optionally rendered kernel sources (chunkgen gen ... > FILE). Each case is compiled
REPS times in this process, interleaved (case 1, case 2, ..., case 1, ...), after one
warm-up compile (the first NVRTC call of a process also loads libnvrtc-builtins and
initializes the compiler: measured separately, in fresh processes, as "first call").
Times: wall, this thread's CPU, and the process's CPU (NVRTC's --split-compile threads
included: the compile's whole cost, robust on a shared machine). Min and median.

  python3 bench/nvrtc_floor.py [--arch 90] [--reps 5] [--json OUT] [--src NAME=FILE ...]

Exit status: 0 done; 2 bad arguments or no NVRTC.
"""
import argparse
import ctypes
import json
import os
import resource
import statistics
import subprocess
import sys
import time

EMPTY = ""
TRIVIAL = 'extern "C" __global__ void k(float *p) { p[threadIdx.x] = 1.0f; }\n'


def load_nvrtc():
    for cand in (os.environ.get("CHUNKGEN_NVRTC"),
                 os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "lib64", "libnvrtc.so"),
                 "libnvrtc.so.13", "libnvrtc.so"):
        if not cand:
            continue
        try:
            return ctypes.CDLL(cand)
        except OSError:
            pass
    return None


def compile_once(nv, src, opts, want_cubin=True, keep=None):
    prog = ctypes.c_void_p()
    rc = nv.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"floor.cu", 0, None, None)
    if rc:
        raise RuntimeError("nvrtcCreateProgram: %d" % rc)
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0, t0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
    rc = nv.nvrtcCompileProgram(prog, len(opts), arr)
    size = ctypes.c_size_t(0)
    if rc == 0 and want_cubin:
        nv.nvrtcGetCUBINSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value or 1)
        nv.nvrtcGetCUBIN(prog, buf)
        if keep is not None:
            keep.append(buf.raw[:size.value])
    w1, t1, p1 = time.perf_counter(), time.thread_time(), time.process_time()
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    child = (c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime) * 1e3
    if rc:
        n = ctypes.c_size_t(0)
        nv.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        log = ctypes.create_string_buffer(n.value + 1)
        nv.nvrtcGetProgramLog(prog, log)
        nv.nvrtcDestroyProgram(ctypes.byref(prog))
        raise RuntimeError("compile failed (%d): %s" % (rc, log.value.decode(errors="replace")[:2000]))
    nv.nvrtcDestroyProgram(ctypes.byref(prog))
    return {"wall_ms": (w1 - w0) * 1e3, "thread_cpu_ms": (t1 - t0) * 1e3, "process_cpu_ms": (p1 - p0) * 1e3,
            "children_cpu_ms": child}


def base_opts(arch):
    return ["-std=c++17", "--gpu-architecture=sm_%d" % arch, "--ptxas-options=-v"]


def cases(arch, srcs):
    b = base_opts(arch)
    out = [
        ("empty, split (the options until 2026-12-02)", EMPTY, b + ["--split-compile=2"]),
        ("empty, no split", EMPTY, b),
        ("empty, split --minimal (the executor's)", EMPTY, b + ["--split-compile=2", "--minimal"]),
        ("empty, PTX only (compute_%d)" % arch, EMPTY, ["-std=c++17", "--gpu-architecture=compute_%d" % arch]),
        ("trivial kernel, split (until 2026-12-02)", TRIVIAL, b + ["--split-compile=2"]),
        ("trivial kernel, no split", TRIVIAL, b),
        ("trivial kernel, split --minimal (the executor's)", TRIVIAL, b + ["--split-compile=2", "--minimal"]),
        ("trivial kernel, --pch (automatic PCH)", TRIVIAL, b + ["--split-compile=2", "--pch"]),
    ]
    for name, path in srcs:
        with open(path) as f:
            text = f.read()
        out.append(("%s, split" % name, text, b + ["--split-compile=2"]))
        out.append(("%s, split --minimal (the executor's)" % name, text, b + ["--split-compile=2", "--minimal"]))
    return out


def first_call(arch, reps):
    """The first compile of a fresh process (trivial kernel, the executor's options)."""
    code = ("import sys; sys.path.insert(0, %r); import nvrtc_floor as f, json; nv = f.load_nvrtc(); "
            "print(json.dumps(f.compile_once(nv, f.TRIVIAL, f.base_opts(%d) + ['--split-compile=2', '--minimal'])))"
            % (os.path.dirname(os.path.abspath(__file__)), arch))
    runs = []
    for _ in range(reps):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    return runs


def summary(runs):
    return {k: {"min": round(min(r[k] for r in runs), 1), "median": round(statistics.median(r[k] for r in runs), 1)}
            for k in runs[0]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json")
    ap.add_argument("--src", action="append", default=[], help="NAME=FILE: a rendered kernel source as a case")
    a = ap.parse_args()
    if a.reps < 1:
        print("nvrtc_floor: --reps: expected >= 1, got %d" % a.reps, file=sys.stderr)
        return 2
    srcs = []
    for s in a.src:
        if "=" not in s or not os.path.isfile(s.split("=", 1)[1]):
            print("nvrtc_floor: --src: expected NAME=FILE with an existing file, got '%s'" % s, file=sys.stderr)
            return 2
        srcs.append(tuple(s.split("=", 1)))
    nv = load_nvrtc()
    if nv is None:
        print("nvrtc_floor: no libnvrtc (set CHUNKGEN_NVRTC or CUDA_HOME)", file=sys.stderr)
        return 2
    major, minor = ctypes.c_int(), ctypes.c_int()
    nv.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    cs = cases(a.arch, srcs)
    first = first_call(a.arch, a.reps)
    compile_once(nv, TRIVIAL, base_opts(a.arch))  # warm-up: the process's first compile
    runs = {c[0]: [] for c in cs}
    for _ in range(a.reps):
        for name, src, opts in cs:
            runs[name].append(compile_once(nv, src, opts, want_cubin="compute_" not in opts[1]))
    doc = {"kind": "chunkgen-nvrtc-floor", "nvrtc": "%d.%d" % (major.value, minor.value), "arch": a.arch,
           "reps": a.reps, "cores": os.cpu_count(), "load_average_at_end": list(os.getloadavg()),
           "note": "one compile at a time; min and median over reps, interleaved; first_call: a fresh process's "
                   "first compile (library and compiler initialization included)",
           "first_call": summary(first),
           "cases": [{"case": name, "options": " ".join(opts), "source_bytes": len(src), **summary(runs[name])}
                     for name, src, opts in cs]}
    print("%-52s %14s %14s %14s %14s" % ("case (ms: min / median)", "wall", "thread CPU", "process CPU",
                                         "children CPU"))
    rows = [("first call of a process (trivial kernel)", doc["first_call"])] + [(c["case"], c) for c in doc["cases"]]
    for name, c in rows:
        print("%-52s %14s %14s %14s %14s" % (name[:52], *("%.0f / %.0f" % (c[k]["min"], c[k]["median"]) for k in
                                                          ("wall_ms", "thread_cpu_ms", "process_cpu_ms",
                                                           "children_cpu_ms"))))
    print("load average", doc["load_average_at_end"])
    if a.json:
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
