#!/usr/bin/env python3
"""railyard-report on synthetic run logs: a run preempted at step 130 and resumed from its
checkpoint at 125, logged to one file (appended) and to two files. The HTML must parse, hold
the loss and throughput series per process run (with the redone steps apart), mark every
checkpoint, signal and resume, and embed nothing external; the SVG form must be valid XML;
several independent runs are compared side by side; bad input must fail naming the file and
line."""
import json
import math
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

build = os.environ["RAILYARD_BUILD_DIR"]
tmp = os.environ.get("RAILYARD_TEST_TMP", "/tmp/report_renders.tmp")
os.makedirs(tmp, exist_ok=True)
tool = os.path.join(build, "runtime", "tools", "railyard-report")
if not os.path.exists(tool):
    print("railyard-report not built:", tool)
    sys.exit(1)

T0 = 1_764_500_000.0


def step(n, t):
    return {"type": "step", "time": t, "step": n, "total_steps": 200,
            "loss": 10.5 * math.exp(-n / 60) + 3.0, "lr": 3e-4, "grad_norm": 1.0,
            "step_seconds": 0.5, "step_ms": 500.0, "tokens_per_s": 32768 + 500 * math.sin(n / 7),
            "tokens_seen": n * 16384, "device_mem_used": 0, "device_mem_total": 0}


def first_run():
    lines = [{"type": "run", "time": T0, "kind": "launch", "step": 0, "detail": "srun, 4 ranks"},
             {"type": "run", "time": T0, "kind": "bind", "step": 0, "detail": "rank 0 cpus 0-7"},
             {"type": "config", "time": T0, "layers": 12},  # another type: skipped
             {"type": "run", "time": T0, "kind": "start", "step": 0, "detail": "4 ranks"}]
    for n in range(1, 131):
        lines.append(step(n, T0 + n * 0.5))
        if n % 25 == 0:
            lines.append({"type": "checkpoint", "time": T0 + n * 0.5, "step": n,
                          "path": f"ckpt/step-{n:08d}.h5", "bytes": 6_000_000, "seconds": 0.8,
                          "stall_seconds": 0.01, "async": True, "reason": "periodic"})
        if n % 50 == 0:
            lines.append({"type": "eval", "time": T0 + n * 0.5, "step": n, "val_loss": 3.4})
    lines.append({"type": "run", "time": T0 + 65.2, "kind": "signal", "step": 130, "detail": "exit | SIGTERM on rank 0"})
    lines.append({"type": "run", "time": T0 + 66, "kind": "stop", "step": 130, "detail": "preempted"})
    return lines


def second_run():
    t1 = T0 + 400
    lines = [{"type": "run", "time": t1, "kind": "resume", "step": 125,
              "detail": "ckpt/step-00000125.h5"}]
    for n in range(126, 201):
        lines.append(step(n, t1 + (n - 125) * 0.5))
    lines.append({"type": "checkpoint", "time": t1 + 40, "step": 200, "path": "ckpt/step-00000200.h5",
                  "bytes": 6_000_000, "seconds": 0.9, "stall_seconds": 0.9, "async": False,
                  "reason": "final"})
    lines.append({"type": "run", "time": t1 + 41, "kind": "finish", "step": 200, "detail": ""})
    return lines


def write(path, records):
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
        f.write("\n")  # a trailing blank line is allowed


class Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.elements = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag


def run(args, expect_rc=0):
    p = subprocess.run([tool] + args, capture_output=True, text=True)
    if p.returncode != expect_rc:
        print("railyard-report", args, "exited", p.returncode, "expected", expect_rc)
        print(p.stdout, p.stderr)
        sys.exit(1)
    return p


failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def check_html(path, label):
    parser = Collect()
    with open(path) as f:
        text = f.read()
    parser.feed(text)
    parser.close()
    tags = [t for t, _ in parser.elements]
    check("script" not in tags, f"{label}: has a <script>")
    for tag, attrs in parser.elements:
        for key in ("src", "href"):
            check(key not in attrs, f"{label}: <{tag} {key}=...> points outside the page")
    lines = [a for t, a in parser.elements if t == "polyline"]

    def points(series, segment, part):
        found = [a for a in lines if a.get("data-series") == series and
                 a.get("data-segment") == str(segment) and a.get("data-part") == part]
        check(len(found) == 1, f"{label}: {series} segment {segment} {part}: {len(found)} lines")
        if not found:
            return 0
        pts = found[0]["points"].split()
        check(len(pts) == int(found[0]["data-points"]), f"{label}: point count mismatch")
        return len(pts)

    for series in ("loss", "throughput"):
        check(points(series, 0, "kept") == 125, f"{label}: {series} run 1 kept != 125 steps")
        # steps 126..130 were redone after the resume, drawn from the last kept point
        check(points(series, 0, "redone") == 6, f"{label}: {series} run 1 redone != 5+1 points")
        check(points(series, 1, "kept") == 75, f"{label}: {series} run 2 != 75 steps")
    marks = [a for t, a in parser.elements if t == "g" and a.get("class") == "mark"]
    kinds = [m["data-mark"] for m in marks]
    check(kinds.count("checkpoint") == 6, f"{label}: checkpoints marked {kinds.count('checkpoint')}")
    check(kinds.count("signal") == 1, f"{label}: signal marks {kinds.count('signal')}")
    check(">signal SIGTERM</text>" in text, f"{label}: the signal is not labelled with its name")
    check(kinds.count("resume") == 1, f"{label}: resume marks {kinds.count('resume')}")
    check([m["data-step"] for m in marks if m["data-mark"] == "resume"] == ["125"],
          f"{label}: resume not at step 125")
    evals = [a for t, a in parser.elements if t == "circle" and a.get("data-series") == "val_loss"]
    check(len(evals) == 2, f"{label}: {len(evals)} validation points")
    check("steps redone after resumes" in text and ">5 (2.5 s of training lost)<" in text,
          f"{label}: summary lacks the 5 redone steps")


one = os.path.join(tmp, "appended.jsonl")
write(one, first_run() + second_run())
run([one, "-o", os.path.join(tmp, "appended.html")])
check_html(os.path.join(tmp, "appended.html"), "one appended file")

a, b = os.path.join(tmp, "run1.jsonl"), os.path.join(tmp, "run2.jsonl")
write(a, first_run())
write(b, second_run())
run([a, b, "-o", os.path.join(tmp, "two.html"), "--title", "two files"])
check_html(os.path.join(tmp, "two.html"), "two files")

svg = os.path.join(tmp, "report.svg")
run([one, "-o", svg])
root = ET.parse(svg).getroot()
check(root.tag == "{http://www.w3.org/2000/svg}svg", f"svg root is {root.tag}")
check(len(root.findall(".//{http://www.w3.org/2000/svg}polyline")) == 6, "svg: expected 6 polylines")

# A loss that moves little (GPT-2 on random tokens: 11.05 down to 10.83) still gets distinct
# axis labels (ticks 0.05 apart read 10.85, 10.90, not 10.9 twice).
flat = os.path.join(tmp, "flat.jsonl")
write(flat, [dict(step(n, T0 + n), loss=11.05 - 0.22 * n / 400, tokens_per_s=541_234.0)
             for n in range(1, 401)])
run([flat, "-o", os.path.join(tmp, "flat.html")])
with open(os.path.join(tmp, "flat.html")) as f:
    flat_html = f.read()
for panel in ("loss", "throughput"):
    group = re.search(r'<g class="frame" data-panel="%s">(.*?)</g>' % panel, flat_html, re.S)
    check(group is not None, f"flat: no {panel} frame")
    labels = re.findall(r'text-anchor="end" fill="#444">([^<]*)</text>', group.group(1) if group else "")
    check(len(labels) >= 2 and len(set(labels)) == len(labels), f"flat: {panel} axis labels {labels}")
check(">541k tokens/s<" in flat_html, "flat: median throughput not shown as 541k tokens/s")

# Independent runs (a sweep: each log starts fresh) are compared, not joined: one colour per
# run, a legend naming each by what tells their paths apart, a summary row per run, and no
# steps counted as redone across runs. The resumed run among them stays one run.
sweep = []
for name, records in (("lr-1e-4", first_run()[:-2] + [{"type": "run", "time": T0 + 70, "kind": "finish",
                                                       "step": 130, "detail": ""}]),
                      ("lr-2e-4", first_run() + second_run())):
    os.makedirs(os.path.join(tmp, "sweep", name), exist_ok=True)
    sweep.append(os.path.join(tmp, "sweep", name, "log.jsonl"))
    write(sweep[-1], records)
run(sweep + ["-o", os.path.join(tmp, "sweep.html")])
text = open(os.path.join(tmp, "sweep.html")).read()
check("<th>runs compared</th><td>2</td>" in text, "sweep: not compared as 2 runs")
check("<tr><td>lr-1e-4</td><td>130</td>" in text and "<tr><td>lr-2e-4</td><td>200</td>" in text,
      "sweep: no row per run with its last step")
check("<td>1</td><td>0</td></tr>" in text, "sweep: run lr-1e-4 is not 1 process run, 0 steps redone")
check("<td>2</td><td>5</td></tr>" in text, "sweep: run lr-2e-4 is not 2 process runs, 5 steps redone")
check(">lr-1e-4</text>" in text and ">lr-2e-4</text>" in text, "sweep: the legend does not name the runs")
parser = Collect()
parser.feed(text)
strokes = {a["data-segment"]: a["stroke"] for t, a in parser.elements
           if t == "polyline" and a.get("data-series") == "loss"}
check(len(strokes) == 3 and strokes["1"] == strokes["2"] != strokes["0"],
      f"sweep: one colour per run expected, got {strokes}")

# A job requeued before its first checkpoint starts afresh, yet it is the same run: joined, its
# first three steps counted as redone.
requeued = [{"type": "run", "time": T0, "kind": "start", "step": 0, "detail": ""}]
requeued += [step(n, T0 + n) for n in (1, 2, 3)]
requeued += [{"type": "run", "time": T0 + 4, "kind": k, "step": 3, "detail": ""} for k in ("signal", "requeue", "stop")]
requeued += [{"type": "run", "time": T0 + 20, "kind": "start", "step": 0, "detail": ""}]
requeued += [step(n, T0 + 20 + n) for n in range(1, 11)]
fresh = os.path.join(tmp, "requeued-fresh.jsonl")
write(fresh, requeued)
run([fresh, "-o", os.path.join(tmp, "requeued-fresh.html")])
text = open(os.path.join(tmp, "requeued-fresh.html")).read()
check("runs compared" not in text and "<th>process runs</th><td>2 (1 resumed)</td>" in text,
      "a job requeued before its first checkpoint is not one run of two processes")
check(">3 (" in text, "the steps the fresh restart redid are not counted")

# Bad input names the file and line.
bad = os.path.join(tmp, "bad.jsonl")
with open(bad, "w") as f:
    f.write(json.dumps(step(1, T0)) + "\n" + json.dumps(step(2, T0)) + "\n{not json\n")
p = run([bad, "-o", os.path.join(tmp, "bad.html")], expect_rc=2)
check(f"{bad}:3:" in p.stderr, f"bad JSON: {p.stderr!r}")
with open(bad, "w") as f:
    record = step(1, T0)
    del record["loss"]
    f.write(json.dumps(record) + "\n")
p = run([bad, "-o", os.path.join(tmp, "bad.html")], expect_rc=2)
check(f"{bad}:1: missing field \"loss\"" in p.stderr, f"missing loss: {p.stderr!r}")
with open(bad, "w") as f:
    f.write(json.dumps({"type": "run", "kind": "start", "step": 0}) + "\n")
p = run([bad, "-o", os.path.join(tmp, "bad.html")], expect_rc=2)
check("no step records" in p.stderr, f"no steps: {p.stderr!r}")
p = run([os.path.join(tmp, "absent.jsonl"), "-o", os.path.join(tmp, "x.html")], expect_rc=2)
check("absent.jsonl: cannot open" in p.stderr, f"missing file: {p.stderr!r}")
p = run([one], expect_rc=2)
check("-o" in p.stderr, f"no -o: {p.stderr!r}")

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
