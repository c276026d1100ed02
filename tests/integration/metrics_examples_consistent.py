#!/usr/bin/env python3
"""The monitoring examples and docs agree with what railyard writes: every metric that
examples/grafana-dashboard.json and examples/prometheus-alerts.yml query is one the
MetricsObserver defines, and docs/metrics.md documents every one it defines. With promtool
installed, the alert rules and every dashboard query must also parse as PromQL."""
import json
import os
import re
import shutil
import subprocess
import sys

src = os.environ["RAILYARD_SOURCE_DIR"]
tmp = os.environ.get("RAILYARD_TEST_TMP", "/tmp/metrics_examples_consistent.tmp")
os.makedirs(tmp, exist_ok=True)
failures = []

observer = open(os.path.join(src, "runtime/metrics/metrics_observer.cpp")).read()
table = observer[observer.index("kMetrics[] = {"):]
table = table[:table.index("};")]
defined = set(re.findall(r'\{"(railyard_\w+)", k(?:Gauge|Counter),', table))
if len(defined) < 20:
    sys.exit(f"found only {len(defined)} metrics in kMetrics; has its layout changed?")

docs = open(os.path.join(src, "docs/metrics.md")).read()
for name in sorted(defined):
    if f"`{name}`" not in docs:
        failures.append(f"docs/metrics.md does not document {name}")

dashboard = json.load(open(os.path.join(src, "examples/grafana-dashboard.json")))
queries = []
for panel in dashboard["panels"]:
    if not panel.get("targets"):
        failures.append(f"dashboard panel {panel.get('title')!r} has no query")
    for target in panel.get("targets", []):
        queries.append((f"panel {panel['title']!r}", target["expr"]))
for note in dashboard.get("annotations", {}).get("list", []):
    queries.append((f"annotation {note['name']!r}", note["expr"]))
for variable in dashboard["templating"]["list"]:
    queries.append((f"variable {variable['name']!r}", variable["definition"]))
alerts_text = open(os.path.join(src, "examples/prometheus-alerts.yml")).read()

for where, text in queries + [("prometheus-alerts.yml", alerts_text)]:
    for name in set(re.findall(r"\brailyard_\w+", text)):
        if name not in defined:
            failures.append(f"{where} uses {name}, which railyard does not write")

if shutil.which("promtool"):
    check = subprocess.run(["promtool", "check", "rules", os.path.join(src, "examples/prometheus-alerts.yml")],
                           capture_output=True, text=True)
    if check.returncode != 0:
        failures.append(f"promtool check rules: {check.stdout}{check.stderr}")
    # Dashboard queries as recording rules: promtool parses each expression.
    rules = os.path.join(tmp, "dashboard-queries.yml")
    with open(rules, "w") as f:
        f.write("groups:\n  - name: dashboard\n    rules:\n")
        for i, (where, expr) in enumerate(queries):
            if where.startswith("variable"):
                continue  # label_values() is Grafana's, not PromQL
            expr = expr.replace("$job_id", ".*")
            f.write(f"      - record: dashboard_query_{i}\n        expr: {json.dumps(expr)}\n")
    check = subprocess.run(["promtool", "check", "rules", rules], capture_output=True, text=True)
    if check.returncode != 0:
        failures.append(f"dashboard queries do not parse: {check.stdout}{check.stderr}")
else:
    print("promtool not installed: PromQL syntax not checked")

for f in failures:
    print("FAIL:", f)
print(f"{len(defined)} metrics, {len(queries)} dashboard queries checked")
sys.exit(1 if failures else 0)
