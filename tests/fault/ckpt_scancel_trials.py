#!/usr/bin/python3
"""Fault 3: `scancel --signal=USR1` and `scancel --signal=TERM` of a 2-rank srun --mpi=pmix job
at random steps, 20 trials, each resuming from the previous trial's checkpoint: every trial
exits 3 (saved, stopped) with a complete checkpoint of the step it stopped at; the run then
finishes with the state of an uninterrupted run, bit for bit. The ranks are held (SIGSTOP) while
scancel delivers the signal, so it lands near the chosen step. USR1 is mapped to a plain stop
(--requeue off): an srun job is not a batch job Slurm could requeue."""
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "lib"))
from fault_common import (check, checkpoints, fail, fresh_dir, json_log, last_step, newest, rng,
                          same_state, scancel, slurm_env, slurm_rank_pids, train_cmd, verify,
                          wait_for)

TRIALS = 20
STEPS = 3000
EXTRA = ["--requeue", "off", "--ckpt-every", 500]
env = slurm_env()
env["OPENBLAS_NUM_THREADS"] = "1"
d = fresh_dir("scancel_trials")
ck = d / "ckpt"
name = f"railyard-fault-{os.getpid()}"


def srun(args, log, job_name=name):
    return ["srun", "--mpi=pmix", "-n", "2", "-J", job_name, "--kill-on-bad-exit=1",
            *train_cmd(ck, STEPS, EXTRA + args + ["--log-json", log])]


stopped = 0
for i in range(TRIALS):
    sig = "USR1" if i % 2 == 0 else "TERM"
    log = d / f"trial{i}.jsonl"
    start = max(checkpoints(ck), default=0)
    if start >= STEPS:
        break
    trial_name = f"{name}-{i}"  # a finished trial's job may still be listed under its name
    p = subprocess.Popen(srun([], log, trial_name), env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    target = start + rng.randint(1, 25)
    job = wait_for(lambda: subprocess.run(["squeue", "-h", "-n", trial_name, "-o", "%i"], env=env,
                                          capture_output=True, text=True).stdout.split(), 60,
                   "the job id")[0]
    pids = wait_for(lambda: (lambda r: r if len(r) == 2 else None)(slurm_rank_pids(job)), 60,
                    "two ranks")
    wait_for(lambda: last_step(log) >= target or p.poll() is not None, 60, f"step {target}")
    # Hold the ranks while the signal is on its way, so it lands near the chosen step however
    # fast the machine (Slurm's signal to a stopped task waits for it, SIGCONT releases it).
    for how in (signal.SIGSTOP, None, signal.SIGCONT):
        if how is None:
            scancel(env, f"--signal={sig}", job)
            continue
        for pid in pids:
            try:
                os.kill(pid, how)
            except ProcessLookupError:
                pass  # that rank already finished
    out, _ = p.communicate(timeout=60)
    if p.returncode == 0:
        print(f"trial {i}: finished before the signal arrived", flush=True)
        break
    check(p.returncode == 3, f"trial {i} ({sig}): exit {p.returncode}, expected 3:\n{out[-3000:]}")
    stops = [r for r in json_log(log) if r.get("type") == "run" and r.get("kind") == "stop"]
    check(len(stops) == 1, f"trial {i}: expected one stop event, got {stops}")
    step = stops[0]["step"]
    check(step > start and max(checkpoints(ck)) == step and verify(newest(ck)),
          f"trial {i}: stop step {step}, checkpoints {sorted(checkpoints(ck))}")
    stopped += 1
    print(f"trial {i}: scancel --signal={sig} -> saved and stopped at step {step}", flush=True)

check(stopped >= TRIALS // 2, f"only {stopped} trials were stopped by their signal")
p = subprocess.run(srun([], d / "final.jsonl"), env=env, capture_output=True, text=True,
                   timeout=300)
check(p.returncode == 0, f"the final run failed: {p.stdout[-2000:]}{p.stderr[-2000:]}")
ref = d / "reference"
p = subprocess.run(["srun", "--mpi=pmix", "-n", "2", *train_cmd(ref, STEPS, EXTRA)], env=env,
                   capture_output=True, text=True, timeout=300)
check(p.returncode == 0, f"the reference run failed: {p.stdout[-2000:]}{p.stderr[-2000:]}")
why = same_state(ck / f"ckpt-{STEPS:08d}.h5", ref / f"ckpt-{STEPS:08d}.h5")
if why is not None:
    fail(f"after {stopped} interruptions the state differs from an uninterrupted run: {why}")
print(f"ckpt_scancel_trials: ok ({stopped} trials stopped by scancel)")
