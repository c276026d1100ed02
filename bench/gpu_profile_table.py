#!/usr/bin/env python3
"""Per-phase device time of ONE whole training step from an ncu --csv log (metric
gpu__time_duration.sum over a window of a few steps): the kernels from one AdamW update to the
next are exactly one step. Grouped into attention, matmul, layernorm, loss, optimizer,
exchange, embedding, bias, elementwise, matmul, other; with the median step wall time (second argument, ms), the rest is
the gap (launch overhead, host waits, idle GPU). Prints a table; writes the phases as JSON to
the third argument."""
import collections
import csv
import json
import sys

PHASES = [  # first match wins; names as cuBLASLt, cuDNN, CUB, NCCL and railyard give them
    ("optimizer", ("adamw", "grad_sumsq", "sum_partials_kernel", "clip_factor")),
    ("exchange", ("nccl", "convert_kernel")),
    ("attention", ("attention", "softmax", "sdpa", "fmha", "flash", "cudnn", "permute", "causal")),
    ("layernorm", ("layernorm",)),
    ("loss", ("cross_entropy",)),
    ("embedding", ("embedding", "radix", "iota", "Onesweep", "DeviceRadix")),
    ("bias", ("bias_grad", "sum_partial_columns", "ones_column")),
    ("elementwise", ("gelu",)),
    ("matmul", ("gemm", "xmma", "nvjet", "cutlass", "splitkreduce", "Kernel", "sm90")),
]


def phase(name):
    low = name.lower()
    for p, keys in PHASES:
        if any(k.lower() in low for k in keys):
            return p
    return "other"


def kernels(path):
    rows = [r for r in csv.reader(l for l in open(path) if l.startswith('"'))]
    head, body = rows[0], rows[1:]
    idx = {k: head.index(k) for k in ("ID", "Kernel Name", "Metric Unit", "Metric Value")}
    scale = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0,
             "s": 1e3, "second": 1e3}
    out = []
    for r in sorted(body, key=lambda r: int(r[idx["ID"]])):
        ms = float(r[idx["Metric Value"]].replace(",", "")) * scale[r[idx["Metric Unit"]]]
        out.append((r[idx["Kernel Name"]], ms))
    return out


def main():
    ks = kernels(sys.argv[1])
    step_ms = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    marks = [i for i, (n, _) in enumerate(ks) if "adamw" in n.lower()]
    if len(marks) < 2:
        print(f"profile: {len(marks)} AdamW launches in the window of {len(ks)}: no whole step")
        return 1
    step = ks[marks[0] + 1:marks[1] + 1]
    total = collections.Counter()
    count = collections.Counter()
    top = collections.Counter()
    for name, ms in step:
        total[phase(name)] += ms
        count[phase(name)] += 1
        top[name.split("(")[0][:60]] += ms
    kern = sum(total.values())
    print(f"one step: {len(step)} kernels, {kern:.2f} ms of kernel time; step wall {step_ms:.2f} ms")
    print(f"{'phase':12s} {'kernels':>7s} {'ms':>8s} {'share of step':>14s}")
    wall = step_ms if step_ms > kern else kern
    for p, ms in total.most_common():
        print(f"{p:12s} {count[p]:7d} {ms:8.2f} {ms / wall:14.1%}")
    gap = max(0.0, step_ms - kern)
    print(f"{'gap':12s} {'':7s} {gap:8.2f} {gap / wall:14.1%}")
    print("largest kernels:")
    for name, ms in top.most_common(12):
        print(f"  {name:60s} {ms:8.2f}")
    phases = {p: round(ms, 3) for p, ms in total.items()}
    phases["gap"] = round(gap, 3)
    phases["kernel_total"] = round(kern, 3)
    phases["kernels"] = len(step)
    if len(sys.argv) > 3:
        json.dump(phases, open(sys.argv[3], "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
