#!/usr/bin/python3
"""Fault 5: kill -9 of a 2-rank run at random moments, half of them while a checkpoint is being
written (its temporary file exists): every checkpoint under a final name verifies, the next run
removes the stale temporary and resumes from the newest complete checkpoint (never a partial
one), and the run finishes with the state of an uninterrupted run, bit for bit."""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "lib"))
from fault_common import (check, checkpoints, fresh_dir, json_log, last_step, mpirun, rank_pids,
                          reference, rng, run, same_state, temp_files, train_cmd, verify,
                          wait_for)

STEPS = 400
# A wider model so a save takes long enough to be hit: ~2 MB per checkpoint, one every step.
EXTRA = ["--dim", 64, "--ckpt-every", 1, "--keep", 2]
TRIALS = 6
d = fresh_dir("kill9")
ck = d / "ckpt"
during_write = 0
for i in range(TRIALS):
    log = d / f"trial{i}.jsonl"
    before = max(checkpoints(ck), default=0)
    if before >= STEPS - 20:
        break
    p = subprocess.Popen(mpirun(2) + train_cmd(ck, STEPS, EXTRA + ["--log-json", log]),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pids = wait_for(lambda: (lambda r: r if len(r) == 2 else None)(rank_pids(p.pid)), 30,
                    "two ranks")
    target = before + rng.randint(2, 30)
    wait_for(lambda: last_step(log) >= target or p.poll() is not None, 60, f"step {target}")
    if i % 2 == 0:
        # Kill the moment a save is in flight.
        wait_for(lambda: temp_files(ck) or p.poll() is not None, 30, "a checkpoint write")
        hit = bool(temp_files(ck))
    else:
        time.sleep(rng.uniform(0, 0.05))
        hit = bool(temp_files(ck))
    for pid in pids.values():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    p.kill()
    p.wait()
    during_write += hit
    for step, path in checkpoints(ck).items():
        check(verify(path), f"trial {i}: {path} has a final name but does not verify")
    newest = max(checkpoints(ck), default=0)
    print(f"trial {i}: killed at step ~{last_step(log)}{' during a write' if hit else ''}; "
          f"complete checkpoints {sorted(checkpoints(ck))}, temporaries {temp_files(ck)}",
          flush=True)
    # The next run must start from the newest complete checkpoint.
    log2 = d / f"resume{i}.jsonl"
    p2 = subprocess.Popen(mpirun(2) + train_cmd(ck, STEPS, EXTRA + ["--log-json", log2]),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ev = wait_for(lambda: [r for r in json_log(log2) if r.get("type") == "run" and
                           r.get("kind") in ("resume", "start")], 60, "the resume event")
    check(ev[0]["kind"] == "resume" if newest else True, f"trial {i}: did not resume: {ev}")
    if newest:
        check(f"ckpt-{newest:08d}.h5" in ev[0]["detail"],
              f"trial {i}: resumed from {ev[0]['detail']}, expected step {newest}")
    wait_for(lambda: not temp_files(ck) or last_step(log2) > newest, 30, "stale temp removal")
    for pid in rank_pids(p2.pid).values():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    p2.kill()
    p2.wait()

check(during_write >= 1, "no kill landed during a checkpoint write")
run(mpirun(2) + train_cmd(ck, STEPS, EXTRA), timeout=300)
why = same_state(ck / f"ckpt-{STEPS:08d}.h5", reference(STEPS, 2, EXTRA))
check(why is None, f"after kill -9 the state differs from an uninterrupted run: {why}")
print(f"ckpt_kill9: ok ({during_write} kills during a write)")
