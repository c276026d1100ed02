#!/usr/bin/env python3
"""Summarises a gpu_bench.sh output folder: railyard-train --log-json files and the PyTorch
reference's JSON lines, as one markdown table (tokens/s per GPU from the median step time over
steps 10..N, MFU against 790 TFLOP/s, peak memory, the time each checkpoint held training, with its reason: periodic, final...)."""
import glob
import json
import os
import statistics
import sys

PEAK = 790e12
FLOPS_PER_TOKEN = None  # from the model: 6 N + 6 L C T, the same formula railyard uses


def gpt2_flops(T=1024, L=12, C=768, V=50304):
    params = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
    return 6 * params + 6 * L * C * T


def railyard_rows(out):
    rows = []
    for path in sorted(glob.glob(os.path.join(out, "railyard_*.jsonl"))):
        lines = [json.loads(l) for l in open(path) if l.strip().startswith("{")]
        steps = [l for l in lines if l.get("type") == "step"]
        ckpt = [l for l in lines if l.get("type") == "checkpoint"]
        if len(steps) < 12:
            rows.append((os.path.basename(path), "too few steps", "", "", "", ""))
            continue
        world = int(os.path.basename(path).split("_x")[-1].split(".")[0])
        med = statistics.median(s["step_seconds"] for s in steps if s["step"] >= 10)
        # Tokens per step per GPU from the log itself (grad-accum and world size included).
        tok = steps[-1]["tokens_seen"] / steps[-1]["step"] / world / med
        mem = max(s.get("device_mem_used", 0) for s in steps) / 2**30
        # A final save stops training by design; label each save so it is not read as a stall.
        stall = ", ".join(f'{c.get("reason", "save")} {c.get("stall_seconds", 0)*1e3:.0f} ms'
                          for c in ckpt) or "-"
        rows.append((os.path.basename(path)[:-6].replace("_", " "), f"{med*1e3:.1f}",
                     f"{tok:,.0f}", f"{tok * gpt2_flops() / PEAK:.1%}", f"{mem:.1f}", stall))
    return rows


def pytorch_rows(out):
    rows = []
    path = os.path.join(out, "pytorch.jsonl.log")
    if not os.path.exists(path):
        return rows
    for l in open(path):
        if not l.startswith("{"):
            continue
        j = json.loads(l)
        rows.append((j["system"], f'{j["median_step_ms"]:.1f}', f'{j["tokens_per_s_per_gpu"]:,.0f}',
                     f'{j["mfu"]:.1%}', f'{j["peak_mem_gib"]:.1f}', "-"))
    return rows


def main():
    out = sys.argv[1]
    print("| system | median step ms | tokens/s per GPU | MFU | peak mem GiB | training held by checkpoints |")
    print("|---|---|---|---|---|---|")
    for r in railyard_rows(out) + pytorch_rows(out):
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
