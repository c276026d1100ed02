#!/usr/bin/python3
"""Fault 4: a signal delivered to one rank only (kill -USR1 / -TERM of one process under
mpirun): every rank stops at the same step, the checkpoint of that step is complete, the exit
code says "saved and stopped" (3); resuming to the end gives the state of an uninterrupted run,
bit for bit. Trials cover rank 0 and rank 1, TERM and USR1."""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "lib"))
from fault_common import (check, checkpoints, fresh_dir, json_log, last_step, mpirun,
                          newest, rank_pids, reference, rng, run, same_state, train_cmd, verify,
                          wait_for)

STEPS = 800
EXTRA = ["--requeue", "off", "--ckpt-every", 100]
d = fresh_dir("one_rank")
ck = d / "ckpt"
trials = [(0, signal.SIGUSR1), (1, signal.SIGTERM), (1, signal.SIGUSR1), (0, signal.SIGTERM)]
for i, (victim, sig) in enumerate(trials):
    log = d / f"trial{i}.jsonl"
    start = max(checkpoints(ck), default=0)
    cmd = mpirun(2) + train_cmd(ck, STEPS, EXTRA + ["--log-json", log])
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    pids = wait_for(lambda: (lambda r: r if len(r) == 2 else None)(rank_pids(p.pid)), 30,
                    "two ranks")
    target = start + rng.randint(5, 40)
    wait_for(lambda: last_step(log) >= target or p.poll() is not None, 60, f"step {target}")
    os.kill(pids[victim], sig)
    out, _ = p.communicate(timeout=60)
    check(p.returncode == 3, f"trial {i}: exit {p.returncode}, expected 3 (saved, stopped):\n"
          f"{out[-3000:]}")
    stops = [r for r in json_log(log) if r.get("type") == "run" and r.get("kind") == "stop"]
    check(len(stops) == 1, f"trial {i}: expected one stop event, got {stops}")
    step = stops[0]["step"]
    check(step > start, f"trial {i}: stopped at {step}, not after {start}")
    check(max(checkpoints(ck)) == step and verify(newest(ck)),
          f"trial {i}: newest checkpoint {max(checkpoints(ck))} is not the stop step {step}")
    print(f"trial {i}: {signal.Signals(sig).name} to rank {victim} only -> all stopped at step "
          f"{step}, checkpoint valid", flush=True)

run(mpirun(2) + train_cmd(ck, STEPS, EXTRA), timeout=300)
why = same_state(ck / f"ckpt-{STEPS:08d}.h5", reference(STEPS, 2, EXTRA))
check(why is None, f"the interrupted run differs from an uninterrupted one: {why}")
print("ckpt_signal_one_rank: ok")
