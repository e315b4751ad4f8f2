#!/usr/bin/env python3
"""Merge `chunkgen bench` JSON with the peers' JSON of the same run, and add ratios.

The first file is chunkgen's (its device and config blocks lead); the others are
peers' files (torch_peers.py, gpu_peers.py) or further chunkgen files (other parts of
the matrix: their seq_lens, configs and impls are added to the config block). Every row that
has a median gets "speedup_vs": {other_impl: other_median / this_median} over the
other impls of the same cell (op, config, seq, mode): > 1 means this row is faster.

usage: merge.py CHUNKGEN.json [PEERS.json ...] -o MERGED.json
"""
import argparse
import json
import os
import sys


def cell_key(r):
    if "shape" in r:
        return ("sscan", r.get("config"), r["shape"]["seq"], r.get("mode"))
    return (r.get("op", "ssd"), r.get("config"), r.get("seq"), r.get("mode"))


def merge(docs, names):
    base = docs[0]
    out = {"device": dict(base.get("device", {})), "config": dict(base.get("config", {})), "results": []}
    peers_dev, peers_cfg = {}, {}
    for doc, name in zip(docs, names):
        rows = doc.get("results", [])
        out["results"].extend(rows)
        if doc is base:
            continue
        if "chunkgen" in doc.get("device", {}):
            # a further chunkgen file (another part of the matrix): union its lists
            cfg = doc.get("config", {})
            for key in ("seq_lens", "impls", "modes"):
                have = out["config"].setdefault(key, [])
                have.extend(x for x in cfg.get(key, []) if x not in have)
            for key in ("configs", "sscan_configs", "unavailable"):
                out["config"].setdefault(key, {}).update(cfg.get(key, {}))
            if "omitted" in cfg:
                out["config"]["omitted"] = cfg["omitted"]
            continue
        impls = sorted({r.get("impl") for r in rows if r.get("impl")})
        for impl in impls:
            peers_dev[impl] = doc.get("device", {})
            peers_cfg[impl] = doc.get("config", {})
    if peers_dev:
        out["device"]["peers"] = peers_dev
        out["config"]["peers"] = peers_cfg
    out["config"]["merged_from"] = [os.path.basename(n) for n in names]

    by_cell = {}
    for r in out["results"]:
        if r.get("kind"):
            continue
        by_cell.setdefault(cell_key(r), []).append(r)
    for rows in by_cell.values():
        for r in rows:
            m = r.get("median_ms")
            if not m:
                continue
            sp = {}
            for o in rows:
                if o is r or not o.get("median_ms") or o.get("impl") == r.get("impl"):
                    continue
                sp[o["impl"]] = o["median_ms"] / m
            if sp:
                r["speedup_vs"] = sp
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="set a string field of the merged config block (repeatable)")
    args = ap.parse_args()
    docs, names = [], []
    for p in args.inputs:
        try:
            with open(p) as f:
                docs.append(json.load(f))
            names.append(p)
        except (OSError, ValueError) as e:
            print("merge: skipping %s: %s" % (p, e), file=sys.stderr)
    if not docs:
        print("merge: no input could be read", file=sys.stderr)
        return 1
    out = merge(docs, names)
    for kv in args.set:
        k, _, v = kv.partition("=")
        out["config"][k] = v
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=2)
    os.replace(tmp, args.out)
    print("merge: wrote %s (%d rows)" % (args.out, len(out["results"])), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
