#!/usr/bin/env python3
"""Text summary of a merged bench JSON: one line per row, then issue 2's speed targets.

usage: summary.py MERGED.json [--markdown]
"""
import argparse
import json
import sys


def seq_of(r):
    return r["shape"]["seq"] if "shape" in r else r.get("seq")


def fnum(x, f="%.3g"):
    return f % x if isinstance(x, (int, float)) else "-"


def cells_table(rows, impl):
    """One markdown line per cell of `impl`: its median, the other impls' medians and the
    speed-ups against them, its rel_err and its fractions of the peak."""
    others = []
    for r in rows:
        if r["impl"] != impl and r["impl"] not in others:
            others.append(r["impl"])
    print("| config | seq | mode | %s ms | %s | rel_err | GFLOP/s | frac FMA peak |" % (
        impl, " | ".join("%s ms (speed-up)" % o for o in others)))
    print("|---|---|---|---|%s---|---|---|" % ("---|" * len(others)))
    by = {}
    for r in rows:
        by.setdefault((r.get("config"), seq_of(r), r["mode"]), {})[r["impl"]] = r
    for (cfg, seq, mode), d in by.items():
        me = d.get(impl)
        if not me:
            continue
        cells = []
        for o in others:
            x = d.get(o)
            if not x:
                cells.append("-")
            elif "median_ms" not in x:
                cells.append("skipped" if "skipped" in x else "error")
            else:
                sp = me.get("speedup_vs", {}).get(o)
                cells.append("%.1f (%s)" % (x["median_ms"], ("%.1fx" % sp) if sp else "-"))
        mine = fnum(me.get("median_ms"), "%.2f") if "median_ms" in me else (me.get("error") or me.get("skipped"))
        print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            cfg, seq, mode, mine, " | ".join(cells), fnum(me.get("rel_err"), "%.1e"), fnum(me.get("gflops"), "%.1f"),
            fnum(me.get("frac_flops"), "%.3f")))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("merged")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--cells", metavar="IMPL", help="markdown: one line per cell, IMPL against the others")
    a = ap.parse_args()
    doc = json.load(open(a.merged))
    rows = doc["results"]
    if a.cells:
        return cells_table(rows, a.cells)
    md = a.markdown
    sep = " | " if md else "  "
    hdr = ["impl", "config", "seq", "mode", "median_ms", "IQR_ms", "rel_err", "GFLOP/s", "frac_peak", "speedups"]
    if md:
        print("| " + " | ".join(hdr) + " |")
        print("|" + "---|" * len(hdr))
    else:
        print(sep.join(hdr))
    for r in rows:
        if r.get("kind"):
            continue
        status = r.get("error") or r.get("skipped")
        sp = ", ".join("%s %.2fx" % (k, v) for k, v in sorted(r.get("speedup_vs", {}).items()))
        cells = [r["impl"], str(r.get("config")), str(seq_of(r)), r["mode"],
                 fnum(r.get("median_ms"), "%.3f") if not status else ("skipped: " if r.get("skipped") else "error: ") + status[:60],
                 ("%.3f-%.3f" % (r["q1_ms"], r["q3_ms"])) if "q1_ms" in r else "-",
                 fnum(r.get("rel_err"), "%.1e"), fnum(r.get("gflops"), "%.1f"), fnum(r.get("frac_flops"), "%.3f"), sp]
        print(("| " + " | ".join(cells) + " |") if md else sep.join(cells))

    def find(impl, config, seq, mode):
        for r in rows:
            if r["impl"] == impl and r.get("config") == config and seq_of(r) == seq and r["mode"] == mode:
                return r
        return None

    def vs_best(r, peer):
        """Speed-up against the faster of the peer's rows (same threads, and IMPL_<N>t)."""
        sp = (r or {}).get("speedup_vs", {})
        cands = {k: v for k, v in sp.items() if k == peer or k.startswith(peer + "_")}
        if not cands:
            return None, None
        k = min(cands, key=lambda k: cands[k])
        return cands[k], k

    print()
    print("issue 2 speed targets (chunkgen_cpu; peers: the faster of the same-threads and the other-threads rows):")
    r = find("chunkgen_cpu", "g1h1_d128", 2048, "fwd_bwd")
    x, k = vs_best(r, "torch_chunked")
    print("- SSD fwd+bwd g1h1_d128 T=2048 vs %s (target >= 10x): %s%s" % (
        k or "torch_chunked", ("%.2fx" % x) if x else "not measured", "" if not x else (" MET" if x >= 10 else " NOT MET")))
    for r in rows:
        if r["impl"] == "chunkgen_cpu" and r["mode"] == "fwd" and r.get("dk") == 128 and r.get("dv") == 128 \
                and r.get("frac_flops") is not None:
            f, fn, fm = r["frac_flops"], r.get("frac_flops_nominal"), r.get("frac_flops_measured")
            print("- SSD fwd %s T=%d: %.1f GFLOP/s = %.1f%% of the FMA peak (%.1f%% of the nominal, %s of the "
                  "measured) (target >= 30%%)%s" % (
                      r["config"], r["seq"], r["gflops"], 100 * f, 100 * (fn or 0),
                      ("%.1f%%" % (100 * fm)) if fm else "-", " MET" if f >= 0.3 else " NOT MET"))
    for r in rows:
        if r["impl"] == "chunkgen_cpu" and "shape" in r and r["mode"] == "fwd_bwd":
            x, k = vs_best(r, "torch_scan")
            print("- sscan fwd+bwd %s L=%d vs %s (target >= 10x): %s%s" % (
                r.get("config"), seq_of(r), k or "torch_scan", ("%.2fx" % x) if x else "not measured",
                "" if not x else (" MET" if x >= 10 else " NOT MET")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
