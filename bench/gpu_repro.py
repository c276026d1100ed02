#!/usr/bin/env python3
"""Reproducibility of railyard-train on the GPU, for gpu_bench.sh: run A (also the timed run),
run B with the same seed, and run C stopped by SIGTERM mid-way then resumed (--resume auto)
as run D. Compares per-step losses and gradient norms (JSON holds the exact values) and the
final checkpoints' parameters and AdamW moments bit for bit. Prints one JSON line:
deterministic (A == B), resume_exact (C + D == A) and what differed."""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import h5py
import numpy as np


def records(path):
    try:
        with open(path) as f:
            return [json.loads(l) for l in f if l.strip().startswith("{") and l.strip().endswith("}")]
    except FileNotFoundError:
        return []


def steps(path):
    return {r["step"]: (r["loss"], r["grad_norm"]) for r in records(path) if r.get("type") == "step"}


def run(cmd, log):
    p = subprocess.run(cmd + ["--log-json", log], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=300)
    sys.stderr.write(p.stdout[-1500:])
    return p.returncode


def interrupted(cmd, log, at_step):
    """Starts a run, sends SIGTERM once it logged step `at_step`, returns (code, stop step)."""
    p = subprocess.Popen(cmd + ["--log-json", log], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 300
    while time.time() < deadline and p.poll() is None:
        if any(r.get("type") == "step" and r["step"] >= at_step for r in records(log)):
            p.send_signal(signal.SIGTERM)
            break
        time.sleep(0.005)
    out, _ = p.communicate(timeout=300)
    sys.stderr.write(out[-1500:])
    stop = [r for r in records(log) if r.get("type") == "checkpoint" and r.get("reason") == "signal"]
    return p.returncode, (stop[0]["step"] if stop else None)


def tensors(path):
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and name.startswith(("params/", "adam/")):
                out[name] = np.asarray(obj[()]).tobytes()
        f.visititems(visit)
    return out


def last_ckpt(folder):
    files = sorted(x for x in os.listdir(folder) if x.startswith("ckpt-") and x.endswith(".h5"))
    return os.path.join(folder, files[-1]) if files else None


def differing(a, b):
    keys = sorted(set(a) | set(b))
    return [k for k in keys if a.get(k) != b.get(k)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--work", default="/tmp/ry-repro")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="after --: railyard-train arguments")
    a = ap.parse_args()
    base = [a.train] + [x for x in a.args if x != "--"] + ["--steps", str(a.steps)]
    shutil.rmtree(a.work, ignore_errors=True)
    dirs = {k: os.path.join(a.work, k) for k in "abc"}
    logs = {"a": os.path.join(a.out, "railyard_bf16_x1.jsonl"),
            "b": os.path.join(a.work, "b.jsonl"), "c": os.path.join(a.work, "c.jsonl"),
            "d": os.path.join(a.work, "d.jsonl")}
    for k in "abcd":
        if os.path.exists(logs[k]):
            os.remove(logs[k])
    codes = {}
    for k in "ab":
        codes[k] = run(base + ["--ckpt-dir", dirs[k], "--ckpt-every", str(a.steps)], logs[k])
    codes["c"], stop = interrupted(base + ["--ckpt-dir", dirs["c"], "--ckpt-every", "0"], logs["c"],
                                   a.steps // 3)
    codes["d"] = run(base + ["--ckpt-dir", dirs["c"], "--ckpt-every", str(a.steps),
                             "--resume", "auto"], logs["d"])
    sa, sb, sc, sd = (steps(logs[k]) for k in "abcd")
    joined = {s: v for s, v in sc.items() if stop is not None and s <= stop}
    joined.update(sd)
    ca, cb, cd = last_ckpt(dirs["a"]), last_ckpt(dirs["b"]), last_ckpt(dirs["c"])
    ta = tensors(ca) if ca else {}
    same_ab = [s for s in sa if sa[s] == sb.get(s)]
    res = {
        "system": "railyard",
        "steps": len(sa),
        "exit_codes": codes,
        "loss_and_norm_equal_steps": len(same_ab),
        "max_loss_diff": max((abs(sa[s][0] - sb[s][0]) for s in sa if s in sb), default=None),
        "params_differing_ab": differing(ta, tensors(cb))[:5] if cb else ["no checkpoint"],
        "stopped_at": stop,
        "resume_steps_equal": sum(1 for s in sa if joined.get(s) == sa[s]),
        "params_differing_resume": differing(ta, tensors(cd))[:5] if cd else ["no checkpoint"],
    }
    res["deterministic"] = (len(sa) == a.steps and len(same_ab) == a.steps and sa.keys() == sb.keys()
                            and not res["params_differing_ab"])
    res["resume_exact"] = (stop is not None and 0 < stop < a.steps and codes["c"] == 3
                           and res["resume_steps_equal"] == a.steps
                           and not res["params_differing_resume"])
    print(json.dumps(res))


if __name__ == "__main__":
    main()
