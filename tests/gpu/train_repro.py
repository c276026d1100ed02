#!/usr/bin/python3
"""railyard-train --device cuda is reproducible end to end: two runs with the same seed give the
same losses, gradient norms and final checkpoint bit for bit, and a run stopped by SIGTERM
mid-way and resumed with --resume auto equals the uninterrupted one (bench/gpu_repro.py does
the runs and the comparisons; here on a small model, bf16). Then a run with --cuda-graphs off
(every kernel launched from the host) must equal the first one, which replayed its steps as
CUDA graphs, bit for bit as well. Exits 77 without a GPU."""
import json
import os
import subprocess
import sys
import tempfile

src = os.environ.get("RAILYARD_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../.."))
build = os.environ.get("RAILYARD_BUILD_DIR", "build")
train = os.path.join(build, "runtime/tools/railyard-train")
data_tool = os.path.join(build, "runtime/tools/railyard-data")


def have_gpu():
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0
    except FileNotFoundError:
        return False


if not have_gpu():
    print("SKIPPED: no GPU (nvidia-smi)")
    sys.exit(77)

# Its run and comparison helpers (they need h5py, which machines without a GPU may lack).
sys.path.insert(0, os.path.join(src, "bench"))
import gpu_repro as repro  # noqa: E402

tmp = tempfile.mkdtemp(prefix="ry-gpu-repro-")
data = os.path.join(tmp, "tokens.h5")
subprocess.run([data_tool, "synthetic", "--tokens", "400000", "--vocab", "500", "--seed", "3",
                "-o", data], check=True, capture_output=True)
# Enough steps that the signal (after a third of them) lands well before the end.
model = ["--layers", "2", "--heads", "4", "--dim", "64", "--seq", "64", "--vocab", "500",
         "--batch", "8", "--device", "cuda", "--precision", "bf16", "--log-every", "0"]
p = subprocess.run([sys.executable, os.path.join(src, "bench/gpu_repro.py"), "--train", train,
                    "--out", tmp, "--work", os.path.join(tmp, "runs"), "--steps", "600", "--",
                    "--data", data, *model], capture_output=True, text=True, timeout=500)
lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
if p.returncode != 0 or not lines:
    print(p.stdout, p.stderr)
    sys.exit(1)
res = json.loads(lines[-1])
print(json.dumps(res))
ok = res["deterministic"] and res["resume_exact"]
print("ok: two runs and a stopped-and-resumed run agree bit for bit" if ok else
      "FAIL: " + ("runs differ" if not res["deterministic"] else "resume differs"))


def start_detail(log):
    return next((r["detail"] for r in repro.records(log)
                 if r.get("type") == "run" and r.get("kind") == "start"), "")


# The same run launched eagerly: gpu_repro.py's run A (graphs on, the default) is the reference.
graphs_log = os.path.join(tmp, "railyard_bf16_x1.jsonl")
eager_log, eager_dir = os.path.join(tmp, "eager.jsonl"), os.path.join(tmp, "eager")
code = repro.run([train, "--data", data, *model, "--steps", "600", "--cuda-graphs", "off",
                  "--ckpt-dir", eager_dir, "--ckpt-every", "600"], eager_log)
on, off = start_detail(graphs_log), start_detail(eager_log)
used = "cuda-graphs:on" in on and "cuda-graphs:off" in off
sg, se = repro.steps(graphs_log), repro.steps(eager_log)
ca, ce = repro.last_ckpt(os.path.join(tmp, "runs", "a")), repro.last_ckpt(eager_dir)
tensors_differ = repro.differing(repro.tensors(ca), repro.tensors(ce)) if ca and ce else ["none"]
same = code == 0 and len(sg) == 600 and sg == se and not tensors_differ
print(f"{'ok' if used else 'FAIL'}: start lines say graphs on / off: '{on}' / '{off}'")
print(f"{'ok' if same else 'FAIL'}: --cuda-graphs off equals the graphs run bit for bit "
      f"({sum(1 for k in sg if se.get(k) == sg[k])} of {len(sg)} steps equal, "
      f"tensors differing: {tensors_differ[:3]}, exit {code})")
sys.exit(0 if ok and used and same else 1)
