#!/usr/bin/env python3
"""static_report_check.py -- ctest static_report: runs bench/static_report.py on one small
odd shape (SSD fwd and bwd, sm_90 and sm_80) and checks that its JSON is consistent with
itself, with the plan and with hand formulas -- no hard-coded expected numbers.

  python3 tests/perf/static_report_check.py BUILD_DIR
Exit 0 pass, 1 fail, 77 skip (nvdisasm/cuobjdump or NVRTC missing)."""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHAPE = "ssd:B=1,T=100,G=1,H=2,dk=40,dv=24"
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL: " + what)


def check_row_kernels():
    """--kernels over a mixed matrix (--seeds has ssd and sscan rows): each row runs the named
    kernels of its own op; a kernel of no row's op or of no op at all is refused."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import static_report as sr
    rows = sr.seed_matrix()
    jobs = sr.row_kernels(rows, ["ssd_fwd", "ssd_bwd"])
    nssd = sum(1 for r in rows if r[1] == "ssd")
    check(nssd > 0 and nssd < len(rows), "the seeds' matrix has ssd and sscan rows")
    check(len(jobs) == 2 * nssd and all(op == "ssd" and k.startswith("ssd_") for _, op, _, k in jobs),
          "--seeds --kernels ssd_fwd,ssd_bwd: the ssd rows' fwd and bwd only (%d jobs)" % len(jobs))
    check(len(sr.row_kernels(rows)) == 2 * len(rows), "no --kernels: every row's fwd and bwd")
    for bad in (["ssd_fwd", "nope"], ["sscan_fwd"]):
        try:
            sr.row_kernels([r for r in rows if r[1] == "ssd"], bad)
            check(False, "--kernels %s over ssd rows: refused" % ",".join(bad))
        except ValueError as e:
            check(bad[-1] in str(e), "the refusal names %s: %s" % (bad[-1], e))


# nvdisasm -c text of a loop (label, body, back-branch), its epilogue, an exit: per_product's
# core is the loop body only; its label blocks add the epilogue up to the next label.
LISTING = """.text.f:
        /*0000*/                   MOV R1, c[0x0][0x28] ;
.L_x_1:
        /*0010*/                   LDS.64 R4, [R2] ;
        /*0020*/                   HMMA.1688.F32.TF32 R8, R4, R6, R8 ;
        /*0030*/                   HMMA.1688.F32.TF32 R12, R4, R7, R12 ;
        /*0040*/              @!P0 BRA `(.L_x_1) ;
        /*0050*/                   STG.E [R2.64], R8 ;
        /*0060*/                   STG.E [R2.64+0x4], R9 ;
        /*0070*/                   NOP ;
.L_x_2:
        /*0080*/                   EXIT ;
"""


def check_blocks():
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import static_report as sr
    ops = sr.parse_disasm(LISTING)["f"]
    check([o[0] for o in ops][:3] == ["MOV", "LDS.64", "HMMA.1688.F32.TF32"], "opcodes in order: %s" % ops[:3])
    whole, core, labels = sr.per_product(ops, 1)
    # 8 instructions (NOP left out), 2 products; loop body 4; its label block 4 + 2 stores
    check((whole, core, labels) == (4.0, 2.0, 3.0), "per product whole/core/labels = %s" % ((whole, core, labels),))


def main():
    check_row_kernels()
    check_blocks()
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
    tmp = tempfile.mkdtemp(prefix="cg-static-report-test-")
    try:
        return run_checks(os.path.join(build, "chunkgen"), tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_checks(cli, tmp):
    out = os.path.join(tmp, "r.json")
    env = dict(os.environ, CHUNKGEN_CACHE_DIR=tmp)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "static_report.py"), "--chunkgen", cli,
                        "--shape", SHAPE, "--arch", "90,80", "--cache-dir", os.path.join(tmp, "cache"),
                        "--emu-counters", "--out", out], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(r.stdout[-4000:])
    if r.returncode == 77:
        print("static_report: skipped (%s)" % r.stdout.strip().splitlines()[-1])
        return 77
    if r.returncode != 0 and "NVRTC" in r.stdout and "not" in r.stdout:
        return 77
    check(r.returncode == 0, "static_report.py exit status %d" % r.returncode)
    if r.returncode != 0:
        return 1
    doc = json.load(open(out))
    reps = doc["reports"]
    check(sorted((x["kernel"], x["arch"]) for x in reps) ==
          sorted((k, a) for k in ("ssd_fwd", "ssd_bwd") for a in (90, 80)), "one report per kernel and arch")
    lims = doc["model"]["limits"]
    for rep in reps:
        lim = lims[str(rep["arch"])]
        tag = "%s sm_%d" % (rep["kernel"], rep["arch"])
        # the plan, asked independently, agrees on name, config and launch geometry
        shape = SHAPE.split(":", 1)[1]
        plan = json.loads(subprocess.run([cli, "gen", rep["kernel"], "--shape", shape, "--arch", str(rep["arch"]),
                                          "--plan", "--json"], env=env, stdout=subprocess.PIPE, text=True,
                                         check=True).stdout)
        check(plan["name"] == rep["name"] and plan["config"] == rep["config"], tag + ": name/config = the plan's")
        check([l["entry"] for l in plan["launches"]] == [l["entry"] for l in rep["launches"]], tag + ": entries")
        mpp = {"3xtf32": 3, "tf32": 1}.get(rep["config"].get("precision"), 0)
        tot = {"time_ms": 0.0, "bytes": 0.0, "mma_flops": 0.0, "fp32_flops": 0.0}
        for pl, l in zip(plan["launches"], rep["launches"]):
            t = tag + " " + l["entry"]
            check(l["grid"] == pl["grid"] and l["block"] == pl["block"] and l["smem_dynamic"] == pl["smem"],
                  t + ": grid/block/smem = the plan's")
            check(l["regs"] > 0 and l["regs"] <= 255, t + ": registers in 1..255")
            check(l["spill_stores"] == 0 and l["spill_loads"] == 0 and l["local_bytes"] == 0, t + ": no spills")
            # occupancy by hand: CUDA's occupancy rules on this kernel's own numbers
            w = math.ceil(l["threads"] / 32)
            rw = math.ceil(l["regs"] * 32 / 256) * 256
            by_regs = (16384 // rw) * 4 // w
            sm = math.ceil((l["smem_static"] + l["smem_dynamic"] + 1024) / 128) * 128
            by_smem = lim["smem_per_sm"] // sm
            ctas = min(32, 64 // w, by_regs, by_smem)
            o = l["occupancy"]
            check(o["ctas_per_sm"] == ctas and o["warps_per_sm"] == ctas * w,
                  t + ": occupancy %d CTAs (hand formula %d)" % (o["ctas_per_sm"], ctas))
            check(o["by"][o["limiter"]] == o["ctas_per_sm"], t + ": the limiter gives the CTA count")
            check(abs(l["waves"]["waves"] - l["ctas"] / (ctas * lim["sms"])) < 1e-3, t + ": waves")
            # the SASS mix: classes sum to the total
            s = l["sass"]
            parts = s["other"] + sum(sum(v.values()) if isinstance(v, dict) else v
                                     for k, v in s.items() if k not in ("total", "other"))
            check(parts == s["total"] and s["total"] > 0, t + ": mix sums to the total (%d vs %d)" % (parts, s["total"]))
            if s["HMMA"]:
                check(mpp > 0, t + ": HMMA only in a tensor-core precision")
                check(abs(l["instr_per_mma_product"] - s["total"] / (s["HMMA"] / mpp)) < 0.01,
                      t + ": instructions per product = total / (HMMA / %d)" % mpp)
                check(l["instr_per_mma_product_core"] <= l["instr_per_mma_product_core_labels"] + 1e-9
                      and l["instr_per_mma_product_core_labels"] <= l["instr_per_mma_product"] + 1e-9,
                      t + ": core <= label blocks <= whole")
            m = l["model"]
            ceil = doc["model"]["ceilings"]
            want = max(m["mma_flops"] / ceil["tf32_flops"], m["fp32_flops"] / ceil["fp32_flops"],
                       m["bytes"] / ceil["hbm_Bps"]) * 1e3
            check(abs(m["time_ms"] - want) <= 1e-9 + 1e-9 * want, t + ": roofline time = max of the three terms")
            for k in tot:
                tot[k] += m[k]
        # the emulator's counts (docs/emulator.md): present where this build's emulator counts
        ec = rep["emu_counters"]
        check(ec["status"] in ("collected", "not available"), tag + ": emulator counts: %s" % ec)
        for l in rep["launches"]:
            e = l["emu"]
            if ec["status"] != "collected" or e is None:
                continue
            check(e["wavefronts"] >= e["ideal_wavefronts"] and e["sectors"] >= e["ideal_sectors"],
                  tag + " " + l["entry"] + ": wavefronts and sectors at least their ideal")
            if e["shared_requests"]:
                check(abs(e["wavefronts_per_request"] - e["wavefronts"] / e["shared_requests"]) < 1e-3,
                      tag + " " + l["entry"] + ": wavefronts per request")
            # the conflicted lines: each over its ideal, largest excess first, within the entry's excess
            cl = e["shared_conflict_lines"]
            ex = [x["wavefronts"] - x["ideal_wavefronts"] for x in cl]
            check(all(x > 0 for x in ex) and ex == sorted(ex, reverse=True)
                  and sum(ex) <= e["wavefronts"] - e["ideal_wavefronts"],
                  tag + " " + l["entry"] + ": conflicted lines over their ideal, sorted, within the entry's excess")
        mo = rep["model"]
        for k in tot:
            check(abs(mo[k] - tot[k]) <= 1e-6 * max(1.0, tot[k]), tag + ": op %s = sum over launches" % k)
        if mpp:
            check(mo["mma_flops"] >= mpp * mo["useful_flops"] * 0.999, tag + ": implemented mma >= useful x %d" % mpp)
        check(mo["bytes"] >= mo["unique_bytes"] * 0.999, tag + ": implemented bytes >= the tensors' bytes")
        check(mo["time_ms"] >= mo["ideal_ms"] * 0.999, tag + ": modeled time >= the ideal")
    print("static_report: %d reports, %d failures" % (len(reps), len(fails)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
