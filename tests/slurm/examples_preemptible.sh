#!/bin/bash
# examples/preemptible.sbatch (the short form: the batch script is the srun line, signals go to
# the ranks directly) as a user submits it, unchanged, on the local cluster with a tiny CPU
# model. One job is cancelled (scancel: the ranks save and stop, nothing is requeued); another
# is interrupted three times and resumes each time from the step it stopped at: (1) preempted
# by a job in the higher-priority partition, (2) the time-limit warning (USR1 to the steps, as
# --signal=USR1@120 sends it), (3) scontrol requeue by an admin; then it finishes and the
# script writes the report.
set -euo pipefail
source "$(dirname "$0")/lib/example_fixture.bash"
example_test_setup
fail() {
  echo "FAIL: $*" >&2
  for f in "$tmp"/*.out; do [[ -f $f ]] && { echo "--- $f" >&2; cat "$f" >&2; }; done
  [[ -n ${job:-} ]] && scancel "$job" 2>/dev/null
  exit 1
}

example_fixture
source "$(dirname "$0")/lib/preempt_job.bash"
export PATH=$tools:$PATH DATA=$tmp/fox.h5 STEPS=60
export MODEL="--layers 2 --dim 64 --heads 2 --seq 64 --batch 4 --device cpu --log-every 5"
# Submits the script for run directory $tmp/NAME and waits for its first 2 steps, then pauses them.
start_job() { # name
  export RUN=$tmp/$1
  log=$RUN/log.jsonl
  job=$(cd "$tmp" && sbatch --parsable "$RAILYARD_SOURCE_DIR/examples/preemptible.sbatch") ||
    fail "sbatch failed"
  echo "job $job ($1)"
  wait_for 90 "2 training steps" running_with 0 2
  pause_ranks
}
kinds() { python3 -c 'import json,sys; print(" ".join(r["kind"] for r in map(json.loads, open(sys.argv[1])) if r["type"] == "run" and r["kind"] in ("start","signal","requeue","stop","resume","finish")))' "$log"; }

# scancel: TERM to the ranks, which save and stop with exit code 3; Slurm cancels the job.
start_job cancelled
scancel "$job"
gone() { [[ $(job_state) == CANCELLED ]] && ! squeue -h -j "$job" -t R,CG | grep -q .; }
wait_for 60 "the cancelled job to end (state $(job_state))" gone
[[ $(kinds) == "start signal stop" ]] || fail "scancel: the log shows '$(kinds)', expected 'start signal stop'"
grep -q '"detail":"exit code 3"' "$log" || fail "scancel: the ranks did not stop with exit code 3"
grep -q '"reason":"signal"' "$log" || fail "scancel: no checkpoint saved on the signal"
[[ $(restarts) == 0 ]] || fail "scancel: the job was requeued"

# (1) Preemption: Slurm sends TERM to the ranks; they save, see the preemption and requeue.
start_job run
preempt_job
wait_for 120 "the preempted job to resume (state $(job_state), restarts $(restarts))" running_with 1 2
# (2) The time-limit warning: --signal=USR1@120 signals the steps, not the batch script.
pause_ranks
scancel --signal=USR1 "$job"
sleep 1
scancel --signal=CONT "$job.0"
wait_for 120 "the job to resume after USR1 (state $(job_state), restarts $(restarts))" running_with 2 2
# (3) An admin's requeue: Slurm ends the job with TERM (the ranks save) and queues it again.
pause_ranks
scontrol requeue "$job"
finished() { [[ $(job_state) == COMPLETED && $(restarts) -ge 3 ]]; }
wait_for 150 "the job to finish after its third requeue (state $(job_state), restarts $(restarts))" finished
out=$tmp/gpt-preemptible-$job.out
cat "$out"

expect="start signal requeue stop resume signal requeue stop resume signal stop resume finish"
[[ $(kinds) == "$expect" ]] || fail "the log shows '$(kinds)', expected '$expect'"
python3 - "$log" <<'PY' || fail "the saves, stops and resumes do not line up"
import json, sys
rec = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
runs = [r for r in rec if r["type"] == "run"]
signals = [r for r in runs if r["kind"] == "signal"]
assert ["TERM" in signals[0]["detail"], "USR1" in signals[1]["detail"], "TERM" in signals[2]["detail"]] == [True] * 3, signals
stops = [r["step"] for r in signals]
resumed = [r["step"] for r in runs if r["kind"] == "resume"]
saved = [r["step"] for r in rec if r["type"] == "checkpoint" and r["reason"] == "signal"]
assert saved == stops == resumed, (saved, stops, resumed)
steps = [r["step"] for r in rec if r["type"] == "step"]
assert steps == list(range(1, 61)), steps  # nothing lost, nothing redone
PY
[[ $(grep -c '^step 60/60 ' "$out") == 1 ]] || fail "the output file does not end at step 60/60 (--open-mode=append)"
[[ -f $RUN/report.html ]] || fail "the script did not write the report"
grep -q '<th>process runs</th><td>4 (3 resumed)</td>' "$RUN/report.html" ||
  fail "the report does not show four process runs"
echo "examples_preemptible: ok"
