#!/usr/bin/env python3
"""The kernels behind each variant of gemm_epilogue_bench: its --once run launches an empty
marker kernel before each variant that ran, in the order of "variants" (those with
"marker": true) in its JSON; an ncu --csv log (metric gpu__time_duration.sum) of that run is cut
at the markers. Prints, per variant, each kernel's name and device time.
Usage: gemm_kernels.py ONCE_JSON NCU_CSV"""
import csv
import json
import sys

MARKER = "gemm_bench_marker"
SCALE = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}


def kernels(path):
    rows = [r for r in csv.reader(l for l in open(path) if l.startswith('"'))]
    if not rows:
        return []
    head, body = rows[0], rows[1:]
    idx = {k: head.index(k) for k in ("ID", "Kernel Name", "Metric Unit", "Metric Value")}
    out = []
    for r in sorted(body, key=lambda r: int(r[idx["ID"]])):
        us = float(r[idx["Metric Value"]].replace(",", "")) * SCALE[r[idx["Metric Unit"]]]
        out.append((r[idx["Kernel Name"]], us))
    return out


def main():
    variants = [v for v in json.load(open(sys.argv[1]))["variants"] if v.get("marker")]
    ks = kernels(sys.argv[2])
    # The kernels before the first marker are the setup's (random inputs, none; plan warm-up).
    groups, current = [], None
    for name, us in ks:
        if MARKER in name:
            current = []
            groups.append(current)
        elif current is not None:
            current.append((name, us))
    if len(groups) != len(variants):
        print(f"gemm kernels: {len(groups)} markers in the ncu log, {len(variants)} variants ran: "
              "the log is incomplete (ncu timed out or failed; see its log)")
    for v, group in zip(variants, groups):
        total = sum(us for _, us in group)
        print(f"{v['group']:8} {v['name']}  ({total:.1f} us)")
        for name, us in group:
            print(f"           {us:8.1f} us  {name[:150]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
