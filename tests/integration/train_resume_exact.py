#!/usr/bin/python3
"""Resume is exact: a 2-rank run resumed from its periodic (background) checkpoint of step 8
repeats the uninterrupted run's losses of steps 9..16 bit for bit; --resume never refuses a
directory that already holds checkpoints; --resume PATH on 1 rank continues the 2-rank run
within float tolerance (same global batch)."""
import shutil
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0] + "/lib")
from train_common import TINY, check, fresh_tmp, losses, text_data, train  # noqa: E402

tmp = fresh_tmp("train_resume_exact")
data = text_data(tmp)
base = ["--data", data, "--keep", 5, *TINY]
common = [*base, "--steps", 16]
args = [*common, "--batch", 2, "--ckpt-every", 8]

full = tmp / "full"
out, _, rec = train([*args, "--ckpt-dir", full], ranks=2, log=tmp / "full.jsonl")
ref = losses(rec)
check(len(ref) == 16, f"16 steps expected: {ref}")
saves = [(r["step"], r["reason"], r["async"]) for r in rec if r["type"] == "checkpoint"]
check(saves == [(8, "periodic", True), (16, "final", False)], f"checkpoints: {saves}")
check(sorted(p.name for p in full.iterdir()) == ["ckpt-00000008.h5", "ckpt-00000016.h5"],
      f"files: {sorted(p.name for p in full.iterdir())}")

part = tmp / "part"
part.mkdir()
shutil.copy2(full / "ckpt-00000008.h5", part)
out, _, rec = train([*args, "--ckpt-dir", part], ranks=2, log=tmp / "part.jsonl")
resumed = [r for r in rec if r["type"] == "run" and r["kind"] == "resume"]
check(len(resumed) == 1 and resumed[0]["step"] == 8 and "ckpt-00000008.h5" in resumed[0]["detail"],
      f"no resume at step 8:\n{out}")
after = losses(rec)
check(after == ref[8:], f"resumed losses differ from the uninterrupted run:\n{after}\n{ref[8:]}")
check([r["tokens_seen"] for r in rec if r["type"] == "step"][-1] == 16 * 4 * 32, "tokens_seen")

_, err, _ = train([*args, "--ckpt-dir", part, "--resume", "never"], ranks=2, expect=2)
check("--resume never" in err and "already holds checkpoints" in err, err)

_, _, rec = train([*common, "--batch", 4, "--resume", full / "ckpt-00000008.h5"], ranks=1,
                  log=tmp / "one.jsonl")
one = losses(rec)
check([s for s, _ in one] == list(range(9, 17)), f"steps after --resume PATH: {one}")
for (s, a), (_, b) in zip(one, ref[8:]):
    check(abs(a - b) <= 1e-4 * abs(b), f"1-rank resume of a 2-rank run, step {s}: {a} vs {b}")

# Time-based saves (rank 0's clock decides for all ranks) and the save-budget warning.
_, err, rec = train([*base, "--batch", 2, "--steps", 4, "--ckpt-dir", tmp / "timed",
                     "--ckpt-interval", "1e-9", "--save-budget", "1e-9"], ranks=2,
                    log=tmp / "timed.jsonl")
saves = [(r["step"], r["reason"]) for r in rec if r["type"] == "checkpoint"]
check(saves == [(1, "periodic"), (2, "periodic"), (3, "periodic"), (4, "final")], f"{saves}")
check(all(r["stall_seconds"] <= r["seconds"] for r in rec if r["type"] == "checkpoint"),
      "a background save must stall training less than it takes")
check("--save-budget" in err and "grace time" in err, f"no save-budget warning:\n{err}")
print("ok: resume is exact")
