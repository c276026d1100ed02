#!/usr/bin/python3
"""Fault 1: partition-priority preemption of a running 2-rank batch job. The job (sbatch
--requeue in `batch`, srun --mpi=pmix -n 2) is preempted by a job in `urgent` that needs the
whole node (PreemptMode=REQUEUE, GraceTime): it gets TERM, saves, sees from Slurm that it is
being preempted, requeues itself (Slurm marks a job whose script exits inside GraceTime
COMPLETED otherwise), restarts with SLURM_RESTART_COUNT=1, resumes from its checkpoint and
finishes; its final state equals an uninterrupted run's, bit for bit.
So that the preemption lands mid-run however fast the machine, the test stops the ranks with
SIGSTOP after step 20; Slurm's preemption sends SIGCONT before TERM, which resumes them."""
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "lib"))
from fault_common import (check, checkpoints, fail, fresh_dir, job_field, json_log, last_step,
                          mpirun, same_state, sbatch, scancel, slurm_env, slurm_rank_pids,
                          train_cmd, wait_for)

STEPS = 600
EXTRA = ["--ckpt-every", 200, "--log-every", 100]
env = slurm_env()
env["OPENBLAS_NUM_THREADS"] = "1"
d = fresh_dir("preempt_partition")
ck, log = d / "ckpt", d / "train.jsonl"
cmd = " ".join(f"'{a}'" for a in train_cmd(ck, STEPS, EXTRA + ["--log-json", log]))
script = f"""#!/bin/bash
echo "start: restart count ${{SLURM_RESTART_COUNT:-0}}"
exec srun --mpi=pmix -n 2 {cmd}
"""
# The uninterrupted reference runs meanwhile, outside Slurm (same 2 ranks, same result).
ref = d / "reference"
ref_p = subprocess.Popen(mpirun(2) + train_cmd(ref, STEPS, EXTRA), env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
job = sbatch(env, ["-p", "batch", "-n", "2", "--requeue", "--open-mode=append",
                   "-J", "railyard-preempted", "-o", str(d / "job.out")], script)
urgent = None
try:
    wait_for(lambda: last_step(log) >= 20 or job_field(env, job, "JobState") not in
             ("PENDING", "RUNNING", "CONFIGURING"), 60, "the batch job to train 20 steps")
    check(job_field(env, job, "JobState") == "RUNNING", "the batch job is not running")
    pids = slurm_rank_pids(job)
    check(len(pids) == 2, f"expected 2 ranks of job {job}, found {pids}")
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    urgent = sbatch(env, ["-p", "urgent", "-n", "8", "-J", "railyard-urgent",
                          "-o", str(d / "urgent.out")], "#!/bin/bash\nsleep 2\n")
    # The urgent job starts once the batch job is preempted (and has requeued itself).
    wait_for(lambda: job_field(env, urgent, "JobState") in ("RUNNING", "COMPLETED"), 60,
             "the urgent job to start, preempting the batch job")
    for pid in pids:  # Slurm sent SIGCONT with its TERM already; this only makes sure
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    wait_for(lambda: job_field(env, job, "JobState") == "COMPLETED", 120,
             "the preempted job to be requeued, resumed and completed")
finally:
    scancel(env, job)
    if urgent:
        scancel(env, urgent)
rec = json_log(log)
kinds = [(r.get("kind"), r.get("step")) for r in rec if r.get("type") == "run"]
out = (d / "job.out").read_text()
check(any(k == "requeue" for k, _ in kinds), f"the job did not requeue itself: {kinds}\n{out}")
stop = [s for k, s in kinds if k == "stop"]
resume = [r for r in rec if r.get("type") == "run" and r.get("kind") == "resume"]
check(stop and resume and f"ckpt-{stop[0]:08d}.h5" in resume[0]["detail"],
      f"the restarted job did not resume from the preemption checkpoint: {kinds}")
check("start: restart count 1" in out, f"no restart with SLURM_RESTART_COUNT=1:\n{out}")
check(int(job_field(env, job, "Restarts") or 0) >= 1, "Slurm shows no restart")
check(0 < stop[0] < STEPS, f"preempted at step {stop[0]}")
ref_p.wait(timeout=300)
check(ref_p.returncode == 0, f"the reference run failed: {ref_p.stderr.read()[-2000:]}")
why = same_state(ck / f"ckpt-{STEPS:08d}.h5", ref / f"ckpt-{STEPS:08d}.h5")
if why is not None:
    fail(f"the preempted run's final state differs from an uninterrupted run: {why}")
print(f"ckpt_preempt_partition: ok (preempted at step {stop[0]}, requeued, resumed, finished)")
