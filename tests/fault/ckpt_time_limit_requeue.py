#!/usr/bin/python3
"""Fault 2: the time-limit signal: the job saves, requeues itself through libslurm
(slurm_requeue; the ranks run with no scontrol on their PATH), restarts with SLURM_RESTART_COUNT=1, resumes and finishes with the
state of an uninterrupted run.
What is covered: the signal Slurm sends for `--signal=USR1@N` (USR1 to every task of the step)
is sent with `scancel --signal=USR1 JOB`, and the `B:` form (USR1 to the batch shell only, which
forwards it to srun) with `scancel --batch --signal=USR1 JOB`; Slurm's own timer is not waited
for (it fires with up to 60 s of slack, beyond a test's budget). The ranks are held with SIGSTOP
while the signal is sent so that it lands mid-run on any machine."""
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "lib"))
from fault_common import (check, fail, fresh_dir, job_field, json_log, last_step, mpirun,
                          same_state, sbatch, scancel, slurm_env, slurm_rank_pids, train_cmd,
                          wait_for)

STEPS = 500
EXTRA = ["--ckpt-every", 200, "--log-every", 100]
env = slurm_env()
env["OPENBLAS_NUM_THREADS"] = "1"
d = fresh_dir("time_limit")
ref = d / "reference"
ref_p = subprocess.Popen(mpirun(2) + train_cmd(ref, STEPS, EXTRA), env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

for form in ("steps", "batch"):
    ck, log = d / form / "ckpt", d / form / "train.jsonl"
    (d / form).mkdir()
    cmd = " ".join(f"'{a}'" for a in train_cmd(ck, STEPS, EXTRA + ["--log-json", log]))
    if form == "steps":  # --signal=USR1@N: every task gets it
        # The ranks get an empty PATH: no scontrol to fall back on (as in many containers).
        script = f"#!/bin/bash\necho \"start: restart count ${{SLURM_RESTART_COUNT:-0}}\"\n" \
                 f"exec srun --mpi=pmix -n 2 /usr/bin/env PATH=/nonexistent {cmd}\n"
    else:  # --signal=B:USR1@N: the batch shell gets it and forwards it
        script = f"""#!/bin/bash
echo "start: restart count ${{SLURM_RESTART_COUNT:-0}}"
srun --mpi=pmix -n 2 {cmd} &
pid=$!
trap 'kill -USR1 $pid' USR1
wait $pid; rc=$?
[ $rc -gt 128 ] && {{ wait $pid; rc=$?; }}
exit $rc
"""
    job = sbatch(env, ["-p", "batch", "-n", "2", "--requeue", "--open-mode=append",
                       "--time=10", "-J", f"railyard-timelimit-{form}",
                       "-o", str(d / form / "job.out")], script)
    try:
        wait_for(lambda: last_step(log) >= 20 or job_field(env, job, "JobState") not in
                 ("PENDING", "RUNNING", "CONFIGURING"), 60, "the job to train 20 steps")
        pids = slurm_rank_pids(job)
        check(len(pids) == 2, f"{form}: expected 2 ranks of job {job}, found {pids}")
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        if form == "steps":
            scancel(env, "--signal=USR1", job)
        else:
            scancel(env, "--batch", "--signal=USR1", job)
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
        wait_for(lambda: int(job_field(env, job, "Restarts") or 0) >= 1 and
                 job_field(env, job, "JobState") == "COMPLETED", 90,
                 f"{form}: the job to requeue itself, restart and complete")
    finally:
        scancel(env, job)
    kinds = [(r.get("kind"), r.get("step"), r.get("detail")) for r in json_log(log)
             if r.get("type") == "run"]
    out = (d / form / "job.out").read_text()
    stop = [s for k, s, _ in kinds if k == "stop"]
    check(any(k == "signal" and "requeue" in (x or "") for k, _, x in kinds),
          f"{form}: no requeue signal event: {kinds}")
    check(any(k == "requeue" for k, _, _ in kinds), f"{form}: no self-requeue: {kinds}\n{out}")
    check(stop and any(k == "resume" and f"ckpt-{stop[0]:08d}.h5" in x for k, _, x in kinds),
          f"{form}: did not resume from the signal's checkpoint: {kinds}")
    check("start: restart count 1" in out, f"{form}: no restart count 1:\n{out}")
    check("exit code 4" in out, f"{form}: the stopped run did not exit 4 (requeued):\n{out}")
    ref_p.wait(timeout=300)
    check(ref_p.returncode == 0, f"the reference run failed: {ref_p.stderr.read()[-2000:]}")
    why = same_state(ck / f"ckpt-{STEPS:08d}.h5", ref / f"ckpt-{STEPS:08d}.h5")
    if why is not None:
        fail(f"{form}: the requeued run's final state differs from an uninterrupted run: {why}")
    print(f"{form}: USR1 at step {stop[0]} -> saved, requeued itself, resumed, finished", flush=True)
print("ckpt_time_limit_requeue: ok")
