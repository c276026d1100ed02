#!/usr/bin/python3
"""The preemption protocol outside Slurm: TERM sent to ONE rank of a 2-rank run stops both at
the same step boundary with a synchronous checkpoint and exit code 3; the resumed run repeats
the uninterrupted losses bit for bit. USR1 (requeue) outside a Slurm job saves, warns that the
requeue failed and exits 3. A signal without --ckpt-dir stops with a warning that nothing was
saved."""
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, __file__.rsplit("/", 1)[0] + "/lib")
from train_common import TINY, TRAIN, check, fresh_tmp, losses, mpirun, text_data, train  # noqa

tmp = fresh_tmp("train_signal_stop")
data = text_data(tmp)
env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
STEPS = 200
args = ["--data", data, "--steps", STEPS, "--batch", 2, *TINY]


def records(log):
    try:
        return [json.loads(line) for line in open(log).read().splitlines() if line.endswith("}")]
    except FileNotFoundError:
        return []


def interrupted(name, sig, extra):
    """Starts a 2-rank run, signals rank 1 only after step 3, returns (exit code, records)."""
    log = tmp / f"{name}.jsonl"
    cmd = mpirun(2) + [str(TRAIN), *map(str, args), *extra, "--log-json", str(log)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None:
        if any(r["type"] == "step" and r["step"] >= 3 for r in records(log)):
            break
        time.sleep(0.05)
    ranks = subprocess.run(["pgrep", "-P", str(p.pid), "-f", str(TRAIN)], capture_output=True,
                           text=True).stdout.split()
    check(len(ranks) == 2, f"expected 2 rank processes under mpirun, found {ranks}")
    # The ranks are mpirun's children in rank order of their start; either one will do.
    os.kill(int(ranks[-1]), sig)
    out, err = p.communicate(timeout=120)
    return p.returncode, records(log), out, err


ckpt = tmp / "ckpt"
code, rec, out, err = interrupted("term", signal.SIGTERM, ["--ckpt-dir", ckpt])
check(code == 3, f"exit {code}, expected 3 (saved and stopped)\n{out}\n{err}")
stop = [r for r in rec if r["type"] == "run" and r["kind"] == "signal"]
check(len(stop) == 1 and stop[0]["detail"].startswith("exit"), f"signal event: {stop}\n{out}")
step = stop[0]["step"]
check(0 < step < STEPS, f"stopped at step {step}")
saves = [r for r in rec if r["type"] == "checkpoint"]
check([(r["step"], r["reason"]) for r in saves] == [(step, "signal")], f"saves: {saves}")
check((ckpt / f"ckpt-{step:08d}.h5").exists(), f"no checkpoint file for step {step}")
check(any(r["type"] == "run" and r["kind"] == "stop" for r in rec), "no stop event")

_, _, rec2 = train([*args, "--ckpt-dir", ckpt], ranks=2, log=tmp / "resumed.jsonl")
_, _, ref = train(args, ranks=2, log=tmp / "reference.jsonl")
first, rest, whole = losses(rec), losses(rec2), losses(ref)
check(first + rest == whole, f"interrupted + resumed != uninterrupted at step {step}")

code, rec, out, err = interrupted("usr1", signal.SIGUSR1, ["--ckpt-dir", tmp / "ckpt2"])
check(code == 3, f"USR1 without Slurm: exit {code}, expected 3\n{out}\n{err}")
check("requeue failed" in err, f"no requeue warning:\n{err}")
check([r["reason"] for r in rec if r["type"] == "checkpoint"] == ["signal"], "USR1 must save")

code, rec, out, err = interrupted("nockpt", signal.SIGTERM, [])
check(code == 3, f"TERM without --ckpt-dir: exit {code}\n{err}")
check("nothing is saved" in err, f"no warning that nothing was saved:\n{err}")
print(f"ok: stopped at step {step} on both ranks, resumed exactly")
