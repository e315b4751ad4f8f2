#!/usr/bin/env python3
"""static_report.py -- a static performance report of the generated CUDA kernels.

For each (op kernel, shape, config, arch) it asks the CLI for the plan
(`chunkgen gen K --plan --json --arch N`: the launch geometry, one source of truth),
compiles the kernels with NVRTC into a private kernel cache (`chunkgen build-kernels`),
takes the cubin out of the cache entry, reads it with cuobjdump (-res-usage) and nvdisasm,
and prints per launch: registers, shared memory (static + the plan's dynamic), spills,
occupancy (CTAs and warps per SM and the limiting resource), the SASS instruction mix,
the grid in waves, instructions per useful mma product, and the roofline model's time
(docs/perf-model.md: the formulas and the H200 ceilings). No GPU is needed.

  python3 bench/static_report.py --shape ssd:B=1,T=256,dk=64,dv=64 --arch 90
  python3 bench/static_report.py --seeds --out bench/results/static-<commit>-before.json

Exit status: 0 done; 1 a tool or compile failed; 2 bad arguments; 77 nvdisasm or
cuobjdump not found (the message says where it looked).
"""
import argparse
import datetime
import glob
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import perf_model  # noqa: E402  (bench/perf_model.py: limits, occupancy, roofline)

# The seeds' shapes (tools/bench_cell.c's presets; seq 512, 2048, 8192).
SSD_SEEDS = {"g2h8_d128": (4, 2, 8, 128, 128), "g1h24_dk128_dv64": (2, 1, 24, 128, 64),
             "g1h1_d128": (4, 1, 1, 128, 128), "g2h4_dk48_dv40": (4, 2, 4, 48, 40)}
SSCAN_SEEDS = {"sscan_d256": (4, 256, 16), "sscan_d512": (4, 512, 16), "sscan_d1024": (4, 1024, 16)}
SEQS = (512, 2048, 8192)
KERNELS = ("ssd_fwd", "ssd_bwd", "sscan_fwd", "sscan_bwd")  # what --kernels may name
# The published anchors (H100, bf16): fla chunk_simple_gla B=4, T=8192, H=32, d=128:
# 2.30 ms fwd, 8.78 ms fwd+bwd; mamba selective_scan_cuda at 65,536 tokens, d_inner 4096,
# N=16: 4.7-6.6 ms fwd, 27.6-34.4 ms fwd+bwd (here as B=8, L=8192).
ANCHORS = [("anchor_fla_chunk_simple_gla", "ssd", {"B": 4, "T": 8192, "G": 32, "H": 32, "dk": 128, "dv": 128},
            {"fwd_ms": 2.30, "fwd_bwd_ms": 8.78}),
           ("anchor_mamba_selective_scan", "sscan", {"B": 8, "L": 8192, "D": 4096, "N": 16, "G": 1},
            {"fwd_ms": [4.7, 6.6], "fwd_bwd_ms": [27.6, 34.4]})]


def die(msg, code=2):
    print("static_report: " + msg, file=sys.stderr)
    sys.exit(code)


def find_tool(name):
    """nvdisasm/cuobjdump: $NVDISASM/$CUOBJDUMP, PATH, the CUDA toolkit, the PyPI wheels
    (nvidia-cuda-nvdisasm, nvidia-cuda-cuobjdump) in this Python or the shared venv."""
    env = os.environ.get(name.upper())
    if env:
        return env if os.access(env, os.X_OK) else None
    p = shutil.which(name)
    if p:
        return p
    cands = ["/usr/local/cuda/bin/" + name]
    venvs = [sys.prefix, os.path.expanduser("~/.cache/chunkgen-venv"), os.environ.get("CHUNKGEN_VENV", "")]
    for v in venvs:
        if v:
            cands += sorted(glob.glob(os.path.join(v, "lib", "python3*", "site-packages", "nvidia", "*", "bin", name)))
            cands += sorted(glob.glob(os.path.join(v, "lib", "python3*", "site-packages", "nvidia", "cuda_" + name, "bin", name)))
    for c in cands:
        if os.access(c, os.X_OK):
            return c
    return None


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), r.returncode, (r.stderr or r.stdout).strip()[-2000:]))
    return r.stdout


# ------------------------------------------------------------------ kernel cache entries
def read_cgk(path):
    """runtime/cuda/kcache.h's entry: "CGKCACHE" | u32 version | u32 0 | u64 key bytes |
    u64 payload bytes | u64 log bytes | key | payload | log | 16-byte hash."""
    with open(path, "rb") as f:
        d = f.read()
    if d[:8] != b"CGKCACHE" or len(d) < 40:
        raise RuntimeError("%s: not a kernel cache entry" % path)
    _ver, _zero, kl, pl, ll = struct.unpack_from("<IIQQQ", d, 8)
    o = 40
    key = d[o:o + kl].decode("utf-8", "replace")
    o += kl
    payload = d[o:o + pl]
    o += pl
    log = d[o:o + ll].decode("utf-8", "replace")
    return key, payload, log


def find_entry(cache, name, arch, source):
    """The entry whose key names this plan, target and exact source (nvrtc.c's cg__cubin_key)."""
    for p in sorted(glob.glob(os.path.join(cache, "kernels", name + "-*.cgk"))):
        key, payload, log = read_cgk(p)
        if ("\ntarget sm_%d\n" % arch) in key and ("\nname %s\n" % name) in key and key.endswith(source):
            return payload, log
    return None, None


# ------------------------------------------------------------------ cubin readers
def res_usage(cuobjdump, cubin):
    """{function: {regs, shared_static, local, stack}} from cuobjdump -res-usage."""
    out = run([cuobjdump, "-res-usage", cubin])
    res, fn = {}, None
    for line in out.splitlines():
        m = re.match(r"\s*Function (\S+):", line)
        if m:
            fn = m.group(1)
            continue
        if fn and "REG:" in line:
            kv = dict(re.findall(r"([A-Z]+(?:\[\d+\])?):(\d+)", line))
            res[fn] = {"regs": int(kv.get("REG", 0)), "shared_static": int(kv.get("SHARED", 0)),
                       "local": int(kv.get("LOCAL", 0)), "stack": int(kv.get("STACK", 0))}
            fn = None
    return res


def ptxas_spills(log):
    """{function: {spill_stores, spill_loads, smem_static, barriers}} from the ptxas -v log
    in the entry (cuobjdump's SHARED includes the 1 KB the driver reserves per CTA on
    sm_80+ -- it prints 1024 for a kernel of none -- so the static size is ptxas's)."""
    res, fn = {}, None
    for line in log.splitlines():
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            fn = m.group(1)
            res[fn] = {"spill_stores": 0, "spill_loads": 0, "smem_static": 0, "barriers": 0}
            continue
        m = re.search(r"Used (\d+) registers(?:, used (\d+) barriers)?(?:, (\d+) bytes smem)?", line)
        if fn and m:
            res[fn]["barriers"] = int(m.group(2) or 0)
            res[fn]["smem_static"] = int(m.group(3) or 0)
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if fn and m:
            res[fn]["spill_stores"], res[fn]["spill_loads"] = int(m.group(1)), int(m.group(2))
    return res


SASS_LINE = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[0-9T]\s+)?([A-Z][A-Z0-9_.]*)")


# Opcodes after which control may leave the straight line: a basic block ends there.
BRANCHES = ("BRA", "BRX", "JMP", "JMX", "RET", "EXIT", "CALL")


def disassemble(nvdisasm, cubin):
    """{function: [(opcode with modifiers, basic block, label block)]}: a basic block starts
    at a label (a branch target) and after a branch instruction (BRANCHES, predicated or
    not); a label block only at a label (nvdisasm's labels: the code after a loop's
    back-branch, up to the next label, is in the loop's label block)."""
    return parse_disasm(run([nvdisasm, "-c", cubin]))


def parse_disasm(out):
    """disassemble()'s reading of nvdisasm -c text."""
    fns, fn, block, lblock = {}, None, 0, 0
    for line in out.splitlines():
        m = re.match(r"^\.text\.(\S+):", line)
        if m:
            fn, block, lblock = m.group(1), 0, 0
            fns[fn] = []
            continue
        if fn is None:
            continue
        if re.match(r"^\.L_x_\d+:", line) or re.match(r"^\.L\w*:", line):
            block += 1
            lblock += 1
            continue
        m = SASS_LINE.match(line)
        if m:
            fns[fn].append((m.group(2), block, lblock))
            if m.group(2).split(".")[0] in BRANCHES:
                block += 1
    return fns


WIDTHS = {"U8": "8", "S8": "8", "U16": "16", "S16": "16", "64": "64", "128": "128"}
MIX_KEYS = ("HMMA", "LDSM", "LDGSTS", "LDG", "STG", "LDS", "STS", "BAR", "SHFL", "LDL", "STL", "MUFU", "FFMA")


def mix_of(ops):
    """The SASS mix: counts per class (loads/stores by width in bits) and the total.
    Every instruction is in exactly one class ("other" for the rest): the classes sum
    to the total. NOPs (alignment padding after the last instruction) are left out."""
    ops = [o for o in ops if o[0] != "NOP"]
    mix = {"total": len(ops), "other": 0}
    for k in MIX_KEYS:
        mix[k] = 0 if k not in ("LDG", "STG", "LDS", "STS", "LDGSTS") else {}
    for op in (o[0] for o in ops):
        parts = op.split(".")
        base = parts[0]
        if base in ("LDG", "STG", "LDS", "STS", "LDGSTS"):
            w = "32"
            for p in parts[1:]:
                w = WIDTHS.get(p, w)
            mix[base][w] = mix[base].get(w, 0) + 1
        elif base in MIX_KEYS:
            mix[base] += 1
        else:
            mix["other"] += 1
    return mix


def mix_sum(mix):
    s = mix["other"]
    for k in MIX_KEYS:
        s += sum(mix[k].values()) if isinstance(mix[k], dict) else mix[k]
    return s


def per_product(ops, mma_per_product):
    """Instructions per useful mma product (one m16n8k8 product of the matmul; 3xtf32
    issues 3 HMMA per product): over the whole function; over the basic blocks that hold
    an HMMA (the matmul core: the loop bodies); over the label blocks that do (the core
    with the code that follows each loop up to the next label: epilogues). Static counts:
    a loop body counts once."""
    ops = [o for o in ops if o[0] != "NOP"]
    h = sum(1 for o in ops if o[0].startswith("HMMA"))
    if not h or not mma_per_product:
        return None, None, None
    products = h / mma_per_product

    def over(i):
        blocks = {o[i] for o in ops if o[0].startswith("HMMA")}
        return round(sum(1 for o in ops if o[i] in blocks) / products, 2)
    return round(len(ops) / products, 2), over(1), over(2)


# ------------------------------------------------------------------ one report row
def shape_arg(op, shape):
    return ",".join("%s=%d" % kv for kv in shape.items())


def report_one(cli, tools, cache, kernel, shape, arch, config, emu):
    sarg = shape_arg(kernel, shape)
    base = [cli, "gen", kernel, "--shape", sarg, "--arch", str(arch)]
    if config:
        base += ["--config", config]
    plan = json.loads(run(base + ["--plan", "--json"]))
    source = run(base)
    bk = [cli, "build-kernels", "--shape", sarg, "--kernels", kernel, "--arch", str(arch), "--cache-dir", cache,
          "--threads", "1"]
    if config:
        bk += ["--config", config]
    run(bk)
    payload, log = find_entry(cache, plan["name"], arch, source)
    if payload is None:
        raise RuntimeError("no cache entry for %s sm_%d in %s" % (plan["name"], arch, cache))
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(payload)
        cubin = f.name
    try:
        res = res_usage(tools["cuobjdump"], cubin)
        sass = disassemble(tools["nvdisasm"], cubin)
    finally:
        os.unlink(cubin)
    spills = ptxas_spills(log)
    lim = perf_model.LIMITS[arch]
    model = perf_model.model(kernel, shape, plan["config"], plan["launches"])
    mpp = perf_model.mma_per_product(plan["config"])
    launches = []
    for l in plan["launches"]:
        e = l["entry"]
        r = res.get(e)
        if r is None:
            raise RuntimeError("%s: entry %s not in the cubin" % (plan["name"], e))
        sp = spills.get(e)
        if sp is None:
            raise RuntimeError("%s: entry %s not in the ptxas log of the cache entry" % (plan["name"], e))
        threads = l["block"][0] * l["block"][1] * l["block"][2]
        ctas = l["grid"][0] * l["grid"][1] * l["grid"][2]
        occ = perf_model.occupancy(lim, r["regs"], threads, sp["smem_static"], l["smem"])
        ops = sass.get(e, [])
        ipp, ipp_core, ipp_labels = per_product(ops, mpp)
        m = model["launches"].get(e, {})
        row = {"entry": e, "grid": l["grid"], "block": l["block"], "ctas": ctas, "threads": threads,
               "regs": r["regs"], "smem_static": sp["smem_static"], "smem_dynamic": l["smem"],
               "smem_cuobjdump": r["shared_static"], "barriers": sp["barriers"],
               "local_bytes": r["local"], "stack_bytes": r["stack"], "spill_stores": sp["spill_stores"],
               "spill_loads": sp["spill_loads"], "occupancy": occ,
               "waves": perf_model.waves(ctas, occ["ctas_per_sm"], lim["sms"]),
               "sass": mix_of(ops), "instr_per_mma_product": ipp, "instr_per_mma_product_core": ipp_core,
               "instr_per_mma_product_core_labels": ipp_labels,
               "model": m}
        launches.append(row)
    emu_res = emu_counters(emu, kernel, shape, plan, cache) if emu else None
    for row in launches:
        row["emu"] = (emu_res.get("entries") or {}).get(row["entry"]) if emu_res else None
    return {"kernel": kernel, "name": plan["name"], "arch": arch, "device_model": lim["name"], "shape": shape,
            "config": plan["config"], "workspace_bytes": plan.get("workspace_bytes", 0), "launches": launches,
            "model": {k: v for k, v in model.items() if k != "launches"}, "emu_counters": emu_res}


def emu_shape(kernel, shape, cfg):
    """A small shape of the same compile-time sizes and config for the emulator: one batch,
    at most two heads per group (heads=split needs two), two chunks (SSD); two segments
    and at most two channel blocks (sscan)."""
    if kernel.startswith("ssd_"):
        t = min(shape["T"], 2 * cfg["chunk"])
        h = shape["G"] * min(shape["H"] // shape["G"], 2)
        return ("--ssd-shape", "emu:B=1,G=%d,H=%d,dk=%d,dv=%d" % (shape["G"], h, shape["dk"], shape["dv"])), t
    t = min(shape["L"], 2 * cfg.get("segment", 32))
    d = min(shape["D"], 2 * cfg["dim_block"])
    return ("--sscan-shape", "emu:B=1,D=%d,N=%d" % (d, shape["N"])), t


def emu_counters(cli, kernel, shape, plan, tmp):
    """The emulator's shared-memory wavefronts and global sectors per warp-wide request, per
    entry (docs/emulator.md, CHUNKGEN_EMU_STATS, schema chunkgen-emu-stats/1), from running
    the same kernel and config under the emulator at emu_shape(). Per-request ratios do not
    depend on T or B; totals are those of the small shape."""
    cfg = plan["config"]
    sh, t = emu_shape(kernel, shape, cfg)
    memo = (cli, kernel, sh, t, plan["name"])
    if memo not in _EMU_MEMO:
        # a config the constraints reject at the small seq (recompute=4 wants more chunks,
        # strategy=par more than one piece): 4x the seq, up to the shape's own
        full = shape["T"] if kernel.startswith("ssd_") else shape["L"]
        while True:
            res = _emu_run(cli, kernel, plan, cfg, sh, t, tmp)
            if res["status"] == "collected" or "is not valid for" not in res.get("why", "") or t >= full:
                break
            t = min(full, t * 4)
        _EMU_MEMO[memo] = res
    return _EMU_MEMO[memo]


_EMU_MEMO = {}


def _emu_run(cli, kernel, plan, cfg, sh, t, tmp):
    stats = os.path.join(tmp, "emu-stats-%s.json" % plan["name"])
    pin = "%s:%s" % (kernel, ",".join("%s=%s" % kv for kv in sorted(cfg.items())))
    cmd = [cli, "bench", "--impls", "chunkgen_emulate", sh[0], sh[1], "--seq", str(t), "--emu-max-seq", str(t),
           "--mode", "fwd" if kernel.endswith("_fwd") else "fwd_bwd", "--config", pin, "--repeats", "1",
           "--min-time", "0", "--no-check", "--no-probe", "--threads", "1",
           "--out", os.path.join(tmp, "emu-bench.json")]
    env = dict(os.environ, CHUNKGEN_EMU_STATS=stats)
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        return {"status": "failed", "why": (r.stderr or r.stdout).strip()[-500:], "command": " ".join(cmd)}
    skipped = [ln.split("skipped:", 1)[1].strip() for ln in r.stderr.splitlines() if "skipped:" in ln]
    if not os.path.exists(stats) and skipped:
        return {"status": "failed", "why": "no launch of %s under the emulator: %s" % (plan["name"], skipped[-1][-400:]),
                "command": " ".join(cmd)}
    if not os.path.exists(stats):
        return {"status": "not available", "why": "CHUNKGEN_EMU_STATS wrote nothing: this build's emulator has "
                "no access statistics (docs/emulator.md)"}
    with open(stats) as f:
        doc = json.load(f)
    os.unlink(stats)
    entries = {l["entry"] for l in plan["launches"]}
    per = {}
    for l in doc.get("launches", []):
        if not l.get("plan", "").startswith(kernel + "_") or l.get("kernel") not in entries:
            continue
        a = per.setdefault(l["kernel"], {"launches": 0, "dropped": 0, "shared_requests": 0, "wavefronts": 0,
                                         "ideal_wavefronts": 0, "global_requests": 0, "sectors": 0,
                                         "ideal_sectors": 0})
        a["launches"] += 1
        a["dropped"] += l.get("dropped", 0)
        sh_, gl = l.get("shared", {}), l.get("global", {})
        a["shared_requests"] += sh_.get("requests", 0)
        a["wavefronts"] += sh_.get("wavefronts", 0)
        a["ideal_wavefronts"] += sh_.get("ideal_wavefronts", 0)
        a["global_requests"] += gl.get("requests", 0)
        a["sectors"] += gl.get("sectors", 0)
        a["ideal_sectors"] += gl.get("ideal_sectors", 0)
        lines = a.setdefault("_lines", {})
        for ln in l.get("lines", []):
            if ln.get("space") != "shared":
                continue
            k = (ln.get("file", ""), ln.get("line", 0), ln.get("op", ""), ln.get("width", 0))
            t = lines.setdefault(k, [0, 0, 0])
            t[0] += ln.get("requests", 0)
            t[1] += ln.get("wavefronts", 0)
            t[2] += ln.get("ideal_wavefronts", 0)
    for a in per.values():
        q = lambda x, y: round(x / y, 4) if y else None  # noqa: E731
        # the template lines whose shared accesses take more wavefronts than their ideal
        # (docs/emulator.md: Lines), the largest excess first
        bad = [(k, t) for k, t in a.pop("_lines").items() if t[1] > t[2]]
        bad.sort(key=lambda kt: (-(kt[1][1] - kt[1][2]), kt[0]))
        a["shared_conflict_lines"] = [{"file": k[0], "line": k[1], "op": k[2], "width": k[3], "requests": t[0],
                                       "wavefronts": t[1], "ideal_wavefronts": t[2]} for k, t in bad[:12]]
        a["wavefronts_per_request"] = q(a["wavefronts"], a["shared_requests"])
        a["bank_conflict_excess"] = q(a["wavefronts"] - a["ideal_wavefronts"], a["ideal_wavefronts"])
        a["sectors_per_request"] = q(a["sectors"], a["global_requests"])
        a["coalescing_waste"] = q(a["sectors"], a["ideal_sectors"])
    if not per:
        return {"status": "failed", "why": "no launch of %s under the emulator%s" % (plan["name"], (": " + skipped[-1][-400:]) if skipped else ""),
                "command": " ".join(cmd)}
    return {"status": "collected", "schema": doc.get("schema"), "emulated_shape": sh[1].split(":", 1)[1],
            "emulated_seq": t, "entries": per}


# ------------------------------------------------------------------ matrix
def parse_shape(s):
    """ssd:B=..,T=..,G=..,H=..,dk=..,dv=..  or  sscan:B=..,L=..,D=..,N=..[,G=..]"""
    if ":" not in s:
        die("--shape %r: expected ssd:KEY=N,... or sscan:KEY=N,..." % s)
    op, kv = s.split(":", 1)
    if op not in ("ssd", "sscan"):
        die("--shape %r: the op must be ssd or sscan" % s)
    shape = {}
    for part in kv.split(","):
        if "=" not in part:
            die("--shape %r: %r is not KEY=N" % (s, part))
        k, v = part.split("=", 1)
        try:
            shape[k] = int(v)
        except ValueError:
            die("--shape %r: %s=%r is not an integer" % (s, k, v))
    need = ("dk", "dv") if op == "ssd" else ("D", "N")
    for k in need:
        if k not in shape:
            die("--shape %r: %s shapes need %s" % (s, op, ", ".join(need)))
    defaults = {"B": 1, "T": 256, "G": 1, "H": 1} if op == "ssd" else {"B": 1, "L": 256, "G": 1}
    for k, v in defaults.items():
        shape.setdefault(k, v)
    return op, shape


def seed_matrix():
    rows = []
    for name, (b, g, h, dk, dv) in SSD_SEEDS.items():
        for t in SEQS:
            rows.append((name, "ssd", {"B": b, "T": t, "G": g, "H": h, "dk": dk, "dv": dv}))
    for name, (b, d, n) in SSCAN_SEEDS.items():
        for t in SEQS:
            rows.append((name, "sscan", {"B": b, "L": t, "D": d, "N": n, "G": 1}))
    return rows


def row_kernels(rows, wanted=None):
    """(preset, op, shape, kernel) for every row and kernel to report: the op's fwd and bwd,
    or those of `wanted` that belong to the row's op (a mixed matrix such as --seeds runs
    each row's own kernels). ValueError when a wanted kernel is unknown or no row has its op."""
    if wanted:
        for k in wanted:
            if k not in KERNELS:
                raise ValueError("--kernels %s: not a kernel (expected a comma list of %s)" % (k, ", ".join(KERNELS)))
            if not any(k.startswith(op + "_") for _, op, _ in rows):
                raise ValueError("--kernels %s: no %s shape given (the shapes' ops: %s)"
                                 % (k, k.split("_")[0], ", ".join(sorted({op for _, op, _ in rows}))))
    jobs = []
    for preset, op, shape in rows:
        for k in (wanted or (op + "_fwd", op + "_bwd")):
            if k.startswith(op + "_"):
                jobs.append((preset, op, shape, k))
    return jobs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunkgen", default=os.path.join(ROOT, "build", "chunkgen"), help="the CLI (default build/chunkgen)")
    ap.add_argument("--shape", action="append", default=[], help="ssd:B=..,T=..,G=..,H=..,dk=..,dv=.. or sscan:B=..,L=..,D=..,N=..")
    ap.add_argument("--seeds", action="store_true", help="the seeds' matrix (every shape and seq, fwd and bwd)")
    ap.add_argument("--d128", action="store_true", help="with --seeds: only the SSD shapes with dk = 128, and sscan")
    ap.add_argument("--anchors", action="store_true", help="the issue's published anchor shapes (fla, mamba) too")
    ap.add_argument("--kernels", default=None, help="comma list (default: fwd and bwd of the shape's op)")
    ap.add_argument("--arch", default="90,80", help="comma list of sm numbers with limits in perf_model.py (90, 80)")
    ap.add_argument("--config", default=None, help="pin a config (as chunkgen gen --config)")
    ap.add_argument("--cache-dir", default=None, help="kernel cache (default: a new temporary directory)")
    ap.add_argument("--emu-counters", action="store_true", help="add the emulator's bank-conflict and coalescing counts "
                    "(CHUNKGEN_EMU_STATS; a small shape of the same sizes and config)")
    ap.add_argument("--emu-chunkgen", default=None, help="the CLI whose emulator counts (default --chunkgen)")
    ap.add_argument("--out", default="-", help="JSON output file (- stdout)")
    ap.add_argument("--remodel", metavar="JSON", help="recompute the roofline model of a report JSON (to --out) and exit")
    ap.add_argument("--summary", metavar="JSON", help="print a report JSON as a markdown table (sm_90) and exit")
    a = ap.parse_args(argv)
    if a.summary:
        summary(a.summary)
        return 0
    if a.remodel:
        text = json.dumps(remodel(a.remodel), indent=1, sort_keys=True)
        if a.out == "-":
            print(text)
        else:
            with open(a.out, "w") as f:
                f.write(text + "\n")
        return 0

    if not os.access(a.chunkgen, os.X_OK):
        die("--chunkgen %s: not an executable (build first: cmake --build build)" % a.chunkgen)
    try:
        archs = [int(x) for x in a.arch.split(",")]
    except ValueError:
        die("--arch %r: expected a comma list of integers such as 90,80" % a.arch)
    for x in archs:
        if x not in perf_model.LIMITS:
            die("--arch %d: no limits known (expected one of %s)" % (x, ", ".join(map(str, perf_model.LIMITS))))
    tools = {t: find_tool(t) for t in ("nvdisasm", "cuobjdump")}
    missing = [t for t, p in tools.items() if not p]
    if missing:
        print("static_report: %s not found (PATH, /usr/local/cuda/bin, the nvidia-cuda-%s wheels in %s or "
              "~/.cache/chunkgen-venv; pip install nvidia-cuda-nvdisasm nvidia-cuda-cuobjdump)"
              % (" and ".join(missing), "/".join(missing), sys.prefix), file=sys.stderr)
        return 77
    rows = [(None,) + parse_shape(s) for s in a.shape]
    if a.seeds:
        rows += [r for r in seed_matrix() if not a.d128 or r[1] == "sscan" or r[2]["dk"] == 128]
    if a.anchors:
        rows += [(name, op, shape) for name, op, shape, _ in ANCHORS]
    if not rows:
        die("give --shape, --seeds or --anchors")
    try:
        jobs = row_kernels(rows, a.kernels.split(",") if a.kernels else None)
    except ValueError as e:
        die(str(e))
    cache = a.cache_dir or tempfile.mkdtemp(prefix="cg-static-report-")
    results, failed = [], 0
    for preset, op, shape, k in jobs:
        for arch in archs:
            try:
                emu = (a.emu_chunkgen or a.chunkgen) if a.emu_counters else None
                r = report_one(a.chunkgen, tools, cache, k, shape, arch, a.config, emu)
                r["preset"] = preset
                results.append(r)
                print_row(r)
            except RuntimeError as e:
                failed += 1
                print("static_report: %s %s sm_%d: %s" % (k, shape, arch, e), file=sys.stderr)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True).stdout.strip() or None
    doc = {"kind": "chunkgen-static-report", "commit": commit,
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "chunkgen": run([a.chunkgen, "version"]).strip(), "tools": tools,
           "model": perf_model.describe(), "reports": results,
           "anchors": {name: {"shape": shape, "published_h100_bf16": t} for name, _, shape, t in ANCHORS}}
    text = json.dumps(doc, indent=1, sort_keys=True)
    if a.out == "-":
        print(text)
    else:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    return 1 if failed else 0


def widths(d):
    return "/".join("%s:%d" % (w, n) for w, n in sorted(d.items(), key=lambda kv: int(kv[0]))) or "-"


def summary(path, arch=90):
    """Markdown: one line per report of `arch` in a report JSON (the issue note's table)."""
    with open(path) as f:
        doc = json.load(f)
    print("static report %s (commit %s), sm_%d; model = roofline ms on H200 ceilings, ideal = useful FLOPs "
          "and tensor bytes only" % (os.path.basename(path), doc.get("commit"), arch))
    print("| shape | kernel | T | config | model ms | ideal ms | launch: warps/SM (limiter), instr/product "
          "(core/label blocks), LDG, LDGSTS, LDS widths |")
    print("|---|---|---|---|---|---|---|")
    for r in doc["reports"]:
        if r["arch"] != arch:
            continue
        parts = []
        for l in r["launches"]:
            o, sa = l["occupancy"], l["sass"]
            ipp = (" %.1f/%.1f" % (l["instr_per_mma_product_core"], l.get("instr_per_mma_product_core_labels") or 0)
                   if l["instr_per_mma_product_core"] else "")
            parts.append("%s %d (%s)%s LDG %s LDGSTS %s LDS %s" % (
                l["entry"].replace("cg_", ""), o["warps_per_sm"], o["limiter"], ipp, widths(sa["LDG"]),
                widths(sa["LDGSTS"]), widths(sa["LDS"])))
        sh = r["shape"]
        print("| %s | %s | %s | %s | %.3f | %.3f | %s |" % (
            r.get("preset"), r["kernel"], sh.get("T", sh.get("L")), ",".join("%s=%s" % kv for kv in r["config"].items()),
            r["model"]["time_ms"], r["model"]["ideal_ms"], "; ".join(parts)))


def remodel(path):
    """The report JSON at path with its roofline model recomputed from the stored shape,
    config and launches (after a change of perf_model.py; no compile)."""
    with open(path) as f:
        doc = json.load(f)
    for r in doc["reports"]:
        m = perf_model.model(r["kernel"], r["shape"], r["config"], r["launches"])
        for l in r["launches"]:
            l["model"] = m["launches"].get(l["entry"], {})
        r["model"] = {k: v for k, v in m.items() if k != "launches"}
    doc["model"] = perf_model.describe()
    return doc


def print_row(r):
    print("%-9s sm_%d %-52s model %8.3f ms (%s)" % (r["kernel"], r["arch"], r["name"], r["model"]["time_ms"],
                                                     r["model"]["bound"]), file=sys.stderr)
    for l in r["launches"]:
        o, s = l["occupancy"], l["sass"]
        print("   %-22s regs %3d smem %6d+%-6d spill %s/%s  %2d CTA %2d warps/SM (%s)  waves %.2f  sass %5d hmma %4d "
              "ipp %s/%s" % (l["entry"], l["regs"], l["smem_static"], l["smem_dynamic"], l["spill_stores"],
                          l["spill_loads"], o["ctas_per_sm"], o["warps_per_sm"], o["limiter"], l["waves"]["waves"],
                          s["total"], s["HMMA"], l["instr_per_mma_product_core"],
                          l["instr_per_mma_product_core_labels"]), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
