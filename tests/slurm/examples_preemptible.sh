#!/bin/bash
# examples/preemptible.sbatch as a user submits it, on the local cluster with a tiny CPU model:
# the time-limit warning (USR1 to the batch shell, as --signal=B:USR1@120 sends it) is passed
# to the ranks by the script's trap; they save, requeue the job and stop; the requeued job
# (SLURM_RESTART_COUNT=1) resumes from that checkpoint, appends to the same output file and
# log, finishes, and writes the report, which shows two process runs and the resume.
set -euo pipefail
source "$RAILYARD_CLUSTER_DIR/env.sh"
tools=$RAILYARD_BUILD_DIR/runtime/tools
for exe in railyard-train railyard-data railyard-report; do
  [[ -x $tools/$exe ]] || { echo "SKIP: $exe is not built"; exit 77; }
done
tmp=$RAILYARD_TEST_TMP
rm -rf "$tmp" && mkdir -p "$tmp"
fail() {
  echo "FAIL: $*" >&2
  [[ -f $tmp/job.out ]] && { echo "--- job output" >&2; cat "$tmp/job.out" >&2; }
  [[ -n ${job:-} ]] && scancel "$job" 2>/dev/null
  exit 1
}

# The plugin, where the cluster loads it, needs a topology with GPUs for --gpus steps.
plugstack=$RAILYARD_CLUSTER_DIR/etc/plugstack.conf
if grep -q spank_railyard.so "$plugstack" 2>/dev/null; then
  source "$(dirname "$0")/lib/plugin_test_lib.bash"
  scratch=$tmp ncpu=$(nproc)
  cp "$plugstack" "$tmp/plugstack.conf.orig"
  trap 'cp "$tmp/plugstack.conf.orig" "$plugstack"' EXIT
  write_dgx_like_xml "$tmp/topo.xml"
  "$RAILYARD_SOURCE_DIR/slurm/local-cluster" set-plugstack --state-dir "$RAILYARD_CLUSTER_DIR" \
    "topology=$tmp/topo.xml" >/dev/null
fi

printf 'the quick brown fox jumps over the lazy dog. %.0s' $(seq 300) >"$tmp/fox.txt"
"$tools/railyard-data" text "$tmp/fox.txt" -o "$tmp/fox.h5" >/dev/null

# The script's own #SBATCH lines ask for a site's partition and 4 GPUs of 8 cores each; the
# command line fits them to the local cluster, as a user would for a small test.
export PATH=$tools:$PATH DATA=$tmp/fox.h5 RUN=$tmp/run STEPS=60
export MODEL="--layers 2 --dim 64 --heads 2 --seq 64 --batch 4 --device cpu --log-every 5"
job=$(sbatch --parsable --partition=batch --ntasks-per-node=2 --gpus-per-node=2 \
  --cpus-per-task=1 --time=10 -D "$tmp" --output="$tmp/job.out" \
  "$RAILYARD_SOURCE_DIR/examples/preemptible.sbatch") || fail "sbatch failed"
echo "job $job"

wait_for() { # seconds description command...
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    ((SECONDS < deadline)) || fail "timed out waiting for $what"
    sleep 0.5
  done
}
steps_logged() { [[ -f $RUN/log.jsonl ]] && (($(grep -c '"type":"step"' "$RUN/log.jsonl") >= 5)); }
wait_for 90 "5 training steps" steps_logged

# What Slurm does 120 s before the time limit with --signal=B:USR1@120.
scancel --signal=USR1 --batch "$job"

job_state() { scontrol -o show job "$job" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
restarts() { scontrol -o show job "$job" | grep -o 'Restarts=[0-9]*' | cut -d= -f2; }
finished() { [[ $(job_state) == COMPLETED && $(restarts) -ge 1 ]]; }
wait_for 150 "the requeued job to finish (state $(job_state), restarts $(restarts))" finished
cat "$tmp/job.out"

grep -q "time limit near: asking railyard-train to checkpoint" "$tmp/job.out" ||
  fail "the USR1 trap did not run"
grep -q "run 0 of job $job" "$tmp/job.out" && grep -q "run 1 of job $job" "$tmp/job.out" ||
  fail "the output file does not hold both runs (--open-mode=append)"
grep -q "training finished" "$tmp/job.out" || fail "the second run did not finish"
python3 - "$RUN/log.jsonl" <<'PY' || fail "the run log does not show a save, a requeue and a resume"
import json, sys
rec = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
runs = [r for r in rec if r["type"] == "run"]
kinds = [r["kind"] for r in runs]
assert "signal" in kinds and "requeue" in kinds and "resume" in kinds and kinds[-1] == "finish", kinds
stop = next(r["step"] for r in runs if r["kind"] == "signal")
resume = next(r["step"] for r in runs if r["kind"] == "resume")
saved = [r["step"] for r in rec if r["type"] == "checkpoint" and r["reason"] == "signal"]
assert saved == [stop] and resume == stop, (saved, stop, resume)
steps = [r["step"] for r in rec if r["type"] == "step"]
assert steps == list(range(1, 61)), steps  # nothing lost, nothing redone
PY
[[ -f $RUN/report.html ]] || fail "the script did not write the report"
grep -q '<th>process runs</th><td>2 (1 resumed)</td>' "$RUN/report.html" ||
  fail "the report does not show two process runs"
grep -q 'data-mark="resume"' "$RUN/report.html" || fail "the report marks no resume"
grep -q '^railyard_restarts{[^}]*rank="0"} 1$' "$RUN/metrics.rank0.prom" ||
  fail "the metrics do not count the restart: $(grep restarts "$RUN/metrics.rank0.prom")"
echo "examples_preemptible: ok"
