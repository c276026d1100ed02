#!/usr/bin/python3
"""Fault 8: a checkpoint saved by 2 ranks resumes on 1 rank and on 4 ranks: the run says it
resumes from the 2-rank checkpoint, continues at its step with its parameters, moments and
loader position, finishes, and its final checkpoint records the new world size. The loss right
after the resume continues the 2-rank run's (same model state, different global batch)."""
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "lib"))
from fault_common import (check, checkpoints, fresh_dir, h5py, json_log, mpirun, run,
                          train_cmd, verify)

STEPS, AT = 80, 40
d = fresh_dir("other_ranks")
base = d / "two"
log2 = d / "two.jsonl"
run(mpirun(2) + train_cmd(base, STEPS, ["--ckpt-every", AT, "--keep", 5, "--log-json", log2]))
ref_loss = {r["step"]: r["loss"] for r in json_log(log2) if r.get("type") == "step"}
with h5py.File(base / f"ckpt-{AT:08d}.h5", "r") as f:
    check(f.attrs["world_size"] == 2, "the base checkpoint was not saved by 2 ranks")
    cursor_at = int(f.attrs["loader_cursor"])

for ranks in (1, 4):
    ck = d / f"on{ranks}"
    ck.mkdir()
    shutil.copy(base / f"ckpt-{AT:08d}.h5", ck)
    log = d / f"on{ranks}.jsonl"
    run(mpirun(ranks) + train_cmd(ck, STEPS, ["--log-json", log]), timeout=300)
    rec = json_log(log)
    resume = [r for r in rec if r.get("type") == "run" and r.get("kind") == "resume"]
    check(resume and "saved on 2 ranks" in resume[0]["detail"],
          f"{ranks} ranks: no resume from the 2-rank checkpoint: {resume}")
    steps = [r for r in rec if r.get("type") == "step"]
    check(steps[0]["step"] == AT + 1 and steps[-1]["step"] == STEPS,
          f"{ranks} ranks: steps {steps[0]['step']}..{steps[-1]['step']}")
    first = steps[0]["loss"]
    check(abs(first - ref_loss[AT + 1]) < 0.5,
          f"{ranks} ranks: loss after resume {first} does not continue the 2-rank run's "
          f"{ref_loss[AT + 1]}")
    final = ck / f"ckpt-{STEPS:08d}.h5"
    check(verify(final), f"{ranks} ranks: final checkpoint does not verify")
    with h5py.File(final, "r") as f:
        check(f.attrs["world_size"] == ranks, f"{ranks} ranks: world_size {f.attrs['world_size']}")
        per_step = 2 * ranks  # --batch 2 sequences per rank
        check(int(f.attrs["loader_cursor"]) == cursor_at + (STEPS - AT) * per_step or
              int(f.attrs["loader_epoch"]) > 0,
              f"{ranks} ranks: loader cursor {f.attrs['loader_cursor']} does not continue from "
              f"{cursor_at}")
    print(f"resume on {ranks} rank(s) from a 2-rank checkpoint: ok (loss {first:.4f} vs "
          f"{ref_loss[AT + 1]:.4f})", flush=True)
print("ckpt_resume_other_ranks: ok")
