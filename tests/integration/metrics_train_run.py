#!/usr/bin/env python3
"""The Prometheus textfile of a short real railyard-train run (2 ranks under mpirun, CPU):
per-rank files with job/step/rank labels, well-formed exposition text, values that move while
the run goes (step, heartbeat) and end where the run ended (step, tokens, checkpoints,
running 0). The memory alert fires at a threshold set low (one warning line per rank, the
alert metric at 1), also without a metrics file, and stays quiet at a high one. railyard-report then charts the run's own
JSON log."""
import math
import os
import re
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser

build = os.environ["RAILYARD_BUILD_DIR"]
tmp = os.environ.get("RAILYARD_TEST_TMP", "/tmp/metrics_train_run.tmp")
tools = os.path.join(build, "runtime", "tools")
train = os.path.join(tools, "railyard-train")
for exe in (train, os.path.join(tools, "railyard-data"), os.path.join(tools, "railyard-report")):
    if not os.path.exists(exe):
        print("skip:", exe, "is not built")
        sys.exit(77)
shutil.rmtree(tmp, ignore_errors=True)
os.makedirs(tmp)
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_btl_vader_single_copy_mechanism="none")
for key in [k for k in env if k.startswith("SLURM_")]:
    del env[key]  # outside Slurm the labels say "none"

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


with open(os.path.join(tmp, "fox.txt"), "w") as f:
    f.write("the quick brown fox jumps over the lazy dog. " * 300)
data = os.path.join(tmp, "fox.h5")
subprocess.run([os.path.join(tools, "railyard-data"), "text", os.path.join(tmp, "fox.txt"),
                "-o", data], check=True, stdout=subprocess.DEVNULL)

STEPS, BATCH, SEQ, RANKS = 20, 4, 64, 2
MODEL = ["--device", "cpu", "--layers", "2", "--dim", "64", "--heads", "2", "--seq", str(SEQ),
         "--batch", str(BATCH), "--log-every", "5"]
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{job_id="([^"]*)",step_id="([^"]*)",rank="(\d+)"\} (\S+)$')


def parse(path, rank):
    """{name: value}; checks the exposition format line by line."""
    values, typed = {}, set()
    with open(path) as f:
        for number, line in enumerate(f.read().splitlines(), 1):
            where = f"{os.path.basename(path)}:{number}"
            if line.startswith("# HELP "):
                continue
            if line.startswith("# TYPE "):
                _, _, name, kind = line.split(" ")
                check(kind in ("gauge", "counter"), f"{where}: type {kind}")
                check(kind == "gauge" or name.endswith("_total"), f"{where}: counter {name} lacks _total")
                typed.add(name)
                continue
            m = SAMPLE.match(line)
            check(m is not None, f"{where}: not a sample with job_id, step_id, rank labels: {line!r}")
            if not m:
                continue
            name, job, step, r, value = m.groups()
            check(name in typed, f"{where}: {name} has no # TYPE before it")
            check((job, step) == ("none", "none"), f"{where}: job/step labels {job}/{step}")
            check(r == str(rank), f"{where}: rank label {r} in rank {rank}'s file")
            values[name] = float(value)
    return values


def run(args, metrics, watch=None):
    """Runs railyard-train; while it runs, samples `watch` (a metrics file) for moving values."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    seen = []
    while watch and proc.poll() is None:
        try:
            v = parse(watch, 0)
            seen.append((v.get("railyard_step"), v.get("railyard_last_update_timestamp_seconds")))
        except FileNotFoundError:
            pass
        time.sleep(0.01)
    out, err = proc.communicate(timeout=300)
    if proc.returncode != 0:
        print(out, err)
        sys.exit(f"railyard-train exited {proc.returncode}")
    return out, err, seen


# 1. Two ranks, alert threshold set low: any resident process is above 0.001% of the host's memory.
prom = os.path.join(tmp, "metrics", "run.prom")
os.makedirs(os.path.dirname(prom))
log = os.path.join(tmp, "log.jsonl")
out, err, seen = run(["mpirun", "-n", str(RANKS), train, "--data", data, *MODEL, "--steps", str(STEPS),
                      "--metrics-file", prom, "--metrics-interval", "0.01", "--mem-alert", "0.00001",
                      "--ckpt-dir", os.path.join(tmp, "ckpt"), "--ckpt-every", "8", "--log-json", log],
                     prom, watch=os.path.join(tmp, "metrics", "run.rank0.prom"))
check(sorted(os.listdir(os.path.dirname(prom))) == ["run.rank0.prom", "run.rank1.prom"],
      f"metrics files: {os.listdir(os.path.dirname(prom))} (temporary files left, or not per rank)")
steps_seen = sorted({s for s, _ in seen if s is not None})
beats = sorted({b for _, b in seen if b is not None})
check(len(steps_seen) >= 2, f"railyard_step did not move while the run went: saw {steps_seen}")
check(len(beats) >= 3, f"the heartbeat did not move: {len(beats)} distinct values")
alerts = [l for l in err.splitlines() if l.startswith("railyard: warning: host memory")]
check(len(alerts) == RANKS, f"expected one alert line per rank, got: {alerts}")
check("above --mem-alert 0.0%" in (alerts or [""])[0], f"alert line: {alerts}")
first_loss = None
for rank in range(RANKS):
    v = parse(os.path.join(tmp, "metrics", f"run.rank{rank}.prom"), rank)
    check(v.get("railyard_step") == STEPS, f"rank {rank}: railyard_step {v.get('railyard_step')}")
    check(v.get("railyard_total_steps") == STEPS, f"rank {rank}: total steps")
    check(v.get("railyard_tokens_seen") == STEPS * BATCH * SEQ * RANKS, f"rank {rank}: tokens seen")
    check(v.get("railyard_running") == 0, f"rank {rank}: still running after the end")
    check(v.get("railyard_world_size") == RANKS, f"rank {rank}: world size")
    check(math.isfinite(v.get("railyard_loss", math.nan)) and v["railyard_loss"] < math.log(256),
          f"rank {rank}: loss {v.get('railyard_loss')} not below the uniform log(256)")
    check(v.get("railyard_tokens_per_second", 0) > 0, f"rank {rank}: tokens/s")
    check(v.get("railyard_step_seconds", 0) > 0, f"rank {rank}: step seconds")
    check(v.get("railyard_checkpoints_total", 0) >= 2, f"rank {rank}: checkpoints {v.get('railyard_checkpoints_total')}")
    check(v.get("railyard_last_checkpoint_step") == STEPS, f"rank {rank}: last checkpoint step")
    check(v.get("railyard_last_checkpoint_bytes", 0) > 0, f"rank {rank}: checkpoint bytes")
    check(0 <= v.get("railyard_last_checkpoint_age_seconds", -1) < 60, f"rank {rank}: checkpoint age")
    check(v.get("railyard_memory_alert") == 1, f"rank {rank}: railyard_memory_alert")
    check(v.get("railyard_memory_alerts_total") == 1, f"rank {rank}: alerts total")
    check(v.get("railyard_memory_alert_threshold_ratio") == 0.00001, f"rank {rank}: threshold")
    check(v.get("railyard_host_memory_rss_bytes", 0) > 0, f"rank {rank}: rss")
    check("railyard_gpu_utilization_ratio" not in v, f"rank {rank}: GPU utilisation without NVML/GPU")
    check(abs(v.get("railyard_last_update_timestamp_seconds", 0) - time.time()) < 120, "heartbeat time")
if shutil.which("promtool"):
    lint = subprocess.run(["promtool", "check", "metrics"], stdin=open(os.path.join(tmp, "metrics", "run.rank0.prom")),
                          capture_output=True, text=True)
    check(lint.returncode == 0, f"promtool check metrics: {lint.stdout} {lint.stderr}")

# 2. One rank, a high threshold: no alert, and the file is the path itself.
prom1 = os.path.join(tmp, "single.prom")
out, err, _ = run([train, "--data", data, *MODEL, "--steps", "3", "--metrics-file", prom1,
                   "--mem-alert", "0.99"], prom1)
v = parse(prom1, 0)
check(v.get("railyard_step") == 3 and v.get("railyard_memory_alert") == 0,
      f"single rank: step {v.get('railyard_step')}, alert {v.get('railyard_memory_alert')}")
check("railyard: warning: host memory" not in err, f"alert fired at 0.99: {err}")

# 2b. Without --metrics-file the alert still fires, once, with advice the CPU engine can follow
# (no --recompute, which it refuses).
out, err, _ = run([train, "--data", data, *MODEL, "--steps", "3", "--mem-alert", "0.00001"], None)
alerts = [l for l in err.splitlines() if l.startswith("railyard: warning: host memory")]
check(len(alerts) == 1, f"no --metrics-file: expected one alert line, got: {err}")
check("--grad-accum" in err and "--recompute" not in err, f"alert advice on the CPU: {alerts}")

# 3. A bad --metrics-file is a usage error naming it.
bad = subprocess.run([train, "--data", data, *MODEL, "--steps", "1", "--metrics-file", os.path.join(tmp, "m.txt")],
                     capture_output=True, text=True, env=env)
check(bad.returncode == 2 and "--metrics-file" in bad.stderr and ".prom" in bad.stderr,
      f"bad --metrics-file: rc {bad.returncode}: {bad.stderr}")

# 4. The run's own log as a report: one process run, every checkpoint marked.
html = os.path.join(tmp, "report.html")
subprocess.run([os.path.join(tools, "railyard-report"), log, "-o", html], check=True)


class Marks(HTMLParser):
    def __init__(self):
        super().__init__()
        self.marks, self.lines = [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "g" and a.get("class") == "mark":
            self.marks.append(a["data-mark"])
        if tag == "polyline":
            self.lines.append(a)


p = Marks()
p.feed(open(html).read())
with open(log) as f:
    checkpoints = sum('"type":"checkpoint"' in line.replace(" ", "") for line in f)
check(checkpoints >= 2 and p.marks.count("checkpoint") == checkpoints,
      f"report marks {p.marks.count('checkpoint')} checkpoints, log has {checkpoints}")
loss = [a for a in p.lines if a.get("data-series") == "loss"]
check(len(loss) == 1 and loss[0]["data-points"] == str(STEPS), f"report loss lines: {loss}")

for f in failures:
    print("FAIL:", f)
print("ok" if not failures else f"{len(failures)} failures")
sys.exit(1 if failures else 0)
