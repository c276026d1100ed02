#!/bin/bash
# examples/preemptible-traps.sbatch (the long form, whose batch shell owns the signals) as a user
# submits it, unchanged, on the local cluster with a tiny CPU model,
# interrupted twice: (1) preempted by a job in the higher-priority partition (Slurm sends TERM;
# the script's TERM trap keeps it waiting; the ranks save, railyard requeues the job because
# it is being preempted, and stops), (2) the time-limit warning (USR1 to the batch shell, as
# --signal=B:USR1@120 sends it, passed to the ranks by the script's USR1 trap; they save,
# requeue and stop). Each requeued run resumes from the checkpoint of the step it stopped at
# and appends to the same output file and log; the last one finishes and writes the report.
# The ranks are paused (SIGSTOP) while a signal is on its way, so a fast machine cannot finish
# the run first; Slurm's SIGCONT before its TERM (preemption), or ours (USR1), resumes them.
set -euo pipefail
source "$(dirname "$0")/lib/example_fixture.bash"
example_test_setup
out=$tmp/job.out  # the job output, once the job id is known
fail() {
  echo "FAIL: $*" >&2
  [[ -f $out ]] && { echo "--- job output" >&2; cat "$out" >&2; }
  [[ -n ${job:-} ]] && scancel "$job" 2>/dev/null
  exit 1
}

example_fixture

export PATH=$tools:$PATH DATA=$tmp/fox.h5 RUN=$tmp/run STEPS=60
export MODEL="--layers 2 --dim 64 --heads 2 --seq 64 --batch 4 --device cpu --log-every 5"
job=$(cd "$tmp" && sbatch --parsable "$RAILYARD_SOURCE_DIR/examples/preemptible-traps.sbatch") ||
  fail "sbatch failed"
out=$tmp/gpt-preemptible-$job.out
echo "job $job"

log=$RUN/log.jsonl
source "$(dirname "$0")/lib/preempt_job.bash"

# (1) Preemption: a job in the "urgent" partition that needs the whole node.
wait_for 90 "2 training steps" running_with 0 2
pause_ranks
preempt_job
wait_for 120 "the preempted job to resume (state $(job_state), restarts $(restarts))" running_with 1 2

# (2) What Slurm does 120 s before the time limit with --signal=B:USR1@120.
pause_ranks
scancel --signal=USR1 --batch "$job"
sleep 1
scancel --signal=CONT "$job.0"
finished() { [[ $(job_state) == COMPLETED && $(restarts) -ge 2 ]]; }
wait_for 150 "the job to finish after its second requeue (state $(job_state), restarts $(restarts))" finished
cat "$out"
scontrol -o show job "$urgent" | grep -q 'JobState=COMPLETED' || fail "the urgent job did not run"

grep -q "TERM: waiting for railyard-train" "$out" || fail "the TERM trap did not run"
grep -q "time limit near: asking railyard-train to checkpoint" "$out" ||
  fail "the USR1 trap did not run"
for run in 0 1 2; do
  grep -q "run $run of job $job" "$out" ||
    fail "the output file does not hold run $run (--open-mode=append)"
done
grep -q "training finished" "$out" || fail "the last run did not finish"
! grep -q "railyard-train failed" "$out" || fail "the script took a stop for a failure"
[[ $(grep -c "stopped on a signal" "$out") == 2 ]] || fail "the script did not report both stops"
python3 - "$log" <<'PY' || fail "the run log does not show two saves on signals, two requeues and two resumes"
import json, sys
rec = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
runs = [r for r in rec if r["type"] == "run"]
kinds = [r["kind"] for r in runs if r["kind"] in ("start", "signal", "requeue", "stop", "resume", "finish")]
expect = ["start", "signal", "requeue", "stop", "resume", "signal", "requeue", "stop", "resume", "finish"]
assert kinds == expect, kinds
signals = [r for r in runs if r["kind"] == "signal"]
assert "TERM" in signals[0]["detail"] and "USR1" in signals[1]["detail"], signals
stops = [r["step"] for r in signals]
resumed = [r["step"] for r in runs if r["kind"] == "resume"]
saved = [r["step"] for r in rec if r["type"] == "checkpoint" and r["reason"] == "signal"]
assert saved == stops == resumed, (saved, stops, resumed)
steps = [r["step"] for r in rec if r["type"] == "step"]
assert steps == list(range(1, 61)), steps  # nothing lost, nothing redone
PY
[[ -f $RUN/report.html ]] || fail "the script did not write the report"
grep -q '<th>process runs</th><td>3 (2 resumed)</td>' "$RUN/report.html" ||
  fail "the report does not show three process runs"
[[ $(grep -c 'data-mark="resume"' "$RUN/report.html") == 2 ]] || fail "the report does not mark both resumes"
grep -q '^railyard_restarts{[^}]*rank="0"} 2$' "$RUN/metrics.rank0.prom" ||
  fail "the metrics do not count the restarts: $(grep restarts "$RUN/metrics.rank0.prom")"
echo "examples_preemptible_traps: ok"
