#!/usr/bin/env python3
"""A background checkpoint is reported once it is durable, not when the next save starts:
between two periodic saves (--ckpt-every 30), as soon as the file of step 30 is on disk and
the run has passed one more step boundary, the metrics file says railyard_last_checkpoint_step
30, the JSON log holds the checkpoint record and stdout the checkpoint line, all while the run
is still short of step 60 (and the fresh start said there was nothing to load). The run is paused (SIGSTOP) while the files are read, so a fast
machine cannot run on to the next save meanwhile."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

build = os.environ["RAILYARD_BUILD_DIR"]
tmp = os.environ.get("RAILYARD_TEST_TMP", "/tmp/ckpt_reported_when_durable.tmp")
tools = os.path.join(build, "runtime", "tools")
for exe in ("railyard-train", "railyard-data"):
    if not os.path.exists(os.path.join(tools, exe)):
        print("skip:", exe, "is not built")
        sys.exit(77)
shutil.rmtree(tmp, ignore_errors=True)
os.makedirs(tmp)
env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "RAILYARD_"))}
env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

with open(os.path.join(tmp, "fox.txt"), "w") as f:
    f.write("the quick brown fox jumps over the lazy dog. " * 300)
data = os.path.join(tmp, "fox.h5")
subprocess.run([os.path.join(tools, "railyard-data"), "text", os.path.join(tmp, "fox.txt"),
                "-o", data], check=True, stdout=subprocess.DEVNULL)

EVERY, STEPS = 30, 90
ckpt, log, prom, out = (os.path.join(tmp, n) for n in ("ckpt", "log.jsonl", "m.prom", "out"))
cmd = [os.path.join(tools, "railyard-train"), "--data", data, "--device", "cpu", "--layers", "2",
       "--dim", "64", "--heads", "2", "--seq", "64", "--batch", "8", "--steps", str(STEPS),
       "--log-every", "1", "--ckpt-dir", ckpt, "--ckpt-every", str(EVERY), "--log-json", log,
       "--metrics-file", prom, "--metrics-interval", "3600", "--warmup", "5"]
proc = subprocess.Popen(cmd, env=env, stdout=open(out, "w"), stderr=subprocess.STDOUT)


def fail(what):
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
    print("FAIL:", what)
    print(open(out).read()[-3000:])
    sys.exit(1)


def last_step():
    steps = [json.loads(l)["step"] for l in open(log) if '"type":"step"' in l] if os.path.exists(log) else []
    return steps[-1] if steps else 0


def wait_until(what, cond, seconds=120):
    deadline = time.time() + seconds
    while not cond():
        if proc.poll() is not None:
            fail(f"the run ended (exit {proc.returncode}) while waiting for {what}")
        if time.time() > deadline:
            fail(f"timed out waiting for {what}")
        time.sleep(0.005)


first = os.path.join(ckpt, "ckpt-%08d.h5" % EVERY)
wait_until("the checkpoint of step 30 on disk", lambda: os.path.exists(first))
# Durable now (the file gets its name after fsync). The next boundary after this step reports it.
os.kill(proc.pid, signal.SIGSTOP)
durable_by = last_step() + 1
os.kill(proc.pid, signal.SIGCONT)
# Slack of two steps: the writer thread sets its flag just after the rename, and a loaded machine
# may run a step or two in between. Reported an interval late would be 30 steps.
SLACK = 2
wait_until(f"step {durable_by + 1 + SLACK}", lambda: last_step() >= durable_by + 1 + SLACK)
os.kill(proc.pid, signal.SIGSTOP)
now = last_step()
if now >= 2 * EVERY:
    fail(f"the run reached step {now} before the check; the test needs slower steps")
metrics = open(prom).read()
m = re.search(r'^railyard_last_checkpoint_step\{[^}]*\} (\S+)$', metrics, re.M)
if not m or float(m.group(1)) != EVERY:
    fail(f"at step {now} the metrics say last checkpoint step {m.group(1) if m else 'none'}, "
         f"expected {EVERY} (durable since step {durable_by - 1})")
records = [json.loads(l) for l in open(log)]
saves = [r["step"] for r in records if r["type"] == "checkpoint"]
if saves != [EVERY]:
    fail(f"at step {now} the JSON log holds checkpoints {saves}, expected [{EVERY}]")
order = [r["step"] for r in records if r["type"] in ("step", "checkpoint")]
at = order.index(EVERY, order.index(EVERY) + 1)  # the checkpoint record after step 30's record
if order[at - 1] > durable_by + SLACK:
    fail(f"the checkpoint of step {EVERY} was logged after step {order[at - 1]}, "
         f"though durable by step {durable_by}")
text = open(out).read()
if f"run load | step 0 | no checkpoint in {ckpt} yet: a fresh start" not in text:
    fail("a fresh start does not say that there was no checkpoint to load")
if not re.search(r"^checkpoint step 30 ", text, re.M):
    fail(f"stdout has no checkpoint line for step 30 at step {now}")
os.kill(proc.pid, signal.SIGCONT)
if proc.wait(timeout=300) != 0:
    fail(f"railyard-train exited {proc.returncode}")
records = [json.loads(l) for l in open(log)]
saves = [r["step"] for r in records if r["type"] == "checkpoint"]
if saves != [EVERY, 2 * EVERY, STEPS]:
    fail(f"checkpoints logged {saves}, expected [{EVERY}, {2 * EVERY}, {STEPS}]")
print(f"ckpt_reported_when_durable: ok (step {EVERY} durable by step {durable_by}, "
      f"reported by step {now})")
