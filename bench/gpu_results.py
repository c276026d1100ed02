#!/usr/bin/env python3
"""Writes the result file of one gpu_bench.sh call (bench/results/gpu-1x.json): commit, date,
GPU, and per system (railyard, pytorch_eager, pytorch_compile) the median ms per step (steps
10..N), tokens/s and peak device memory, plus the reproducibility verdicts of gpu_repro.py.
Usage: gpu_results.py OUT_DIR COMMIT GPU_NAME > gpu-1x.json"""
import datetime
import json
import os
import statistics
import sys


def railyard(out):
    path = os.path.join(out, "railyard_bf16_x1.jsonl")
    if not os.path.exists(path):
        return None
    rows = [json.loads(l) for l in open(path) if l.strip().startswith("{")]
    steps = [r for r in rows if r.get("type") == "step"]
    timed = [r["step_seconds"] for r in steps if r["step"] >= 10]
    if not timed:
        return None
    med = statistics.median(timed)
    tokens = steps[-1]["tokens_seen"] / steps[-1]["step"]
    return {"median_step_ms": round(med * 1e3, 3), "tokens_per_s": round(tokens / med),
            # cudaMemGetInfo: everything on the device, the CUDA context included
            "peak_mem_gib": round(max(r.get("device_mem_used", 0) for r in steps) / 2**30, 2)}


def pytorch(out):
    systems = {}
    path = os.path.join(out, "pytorch.jsonl.log")
    if not os.path.exists(path):
        return systems
    for l in open(path):
        if not l.startswith("{"):
            continue
        j = json.loads(l)
        if not j["system"].endswith(" x1"):
            continue
        name = "pytorch_" + j["system"].split()[1]
        systems[name] = {"median_step_ms": round(j["median_step_ms"], 3),
                         "tokens_per_s": round(j["tokens_per_s_per_gpu"]),
                         # torch.cuda.max_memory_allocated: tensors only, no context
                         "peak_mem_gib": round(j["peak_mem_gib"], 2)}
    return systems


def main():
    out, commit, gpu = sys.argv[1], sys.argv[2], sys.argv[3]
    res = {"commit": commit, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds"), "gpu": gpu,
        "model": "GPT-2 124M, seq 1024, micro-batch 16, bf16 with fp32 master weights",
        "systems": {}}
    r = railyard(out)
    if r:
        res["systems"]["railyard"] = r
    res["systems"].update(pytorch(out))
    repro_path = os.path.join(out, "repro.json")
    repro = json.load(open(repro_path)) if os.path.exists(repro_path) else {}
    res["deterministic"] = bool(repro.get("deterministic", False))
    res["resume_exact"] = bool(repro.get("resume_exact", False))
    prof = os.path.join(out, "profile.json")
    if os.path.exists(prof):
        res["railyard_step_phases_ms"] = json.load(open(prof))
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
