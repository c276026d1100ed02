#!/bin/bash
# The examples as a user submits them, unchanged, on the local cluster (8 CPUs, 4 GPUs), with a
# tiny CPU model through the scripts' own MODEL/DATA/STEPS variables: single-node-multi-gpu.sbatch
# trains 4 ranks and writes per-rank metrics; job-array.sbatch runs its eight tasks (four at a
# time) with their own learning rates, validation and reports, and railyard-report compares them
# side by side; interactive.sh, run directly, requests its allocation and runs its steps inside.
# (multi-node.sbatch needs two nodes: examples_multinode.sh.)
set -euo pipefail
source "$(dirname "$0")/lib/example_fixture.bash"
example_test_setup
mkdir -p "$tmp/home"
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
examples=$RAILYARD_SOURCE_DIR/examples

example_fixture
# The scripts keep their runs under $HOME/runs.
export HOME=$tmp/home PATH=$tools:$RAILYARD_BUILD_DIR/plugin:$PATH DATA=$tmp/fox.h5 VAL_DATA=$tmp/fox.h5 STEPS=6 VAL_EVERY=3
export MODEL="--layers 2 --dim 32 --heads 2 --seq 32 --batch 2 --device cpu --log-every 1"

pids=()
if ((with_plugin)); then
  (cd "$tmp" && timeout 300 sbatch --wait "$examples/single-node-multi-gpu.sbatch" >/dev/null) &
  pids+=($!)
  # interactive.sh sets --batch and --log-every itself.
  (cd "$tmp" && MODEL="--layers 2 --dim 32 --heads 2 --seq 32 --device cpu" timeout 300 \
    "$examples/interactive.sh" >"$tmp/interactive.out" 2>&1) &
  pids+=($!)
else
  echo "the cluster runs without the plugin: the single-node and interactive examples (which use --railyard-verbose) are not run"
fi
(cd "$tmp" && timeout 300 sbatch --wait "$examples/job-array.sbatch" >/dev/null) &
pids+=($!)
for pid in "${pids[@]}"; do
  wait "$pid" || { tail -n 20 "$tmp"/*.out; fail "a job failed (sbatch --wait exited non-zero)"; }
done

check_run() { # output-file run-dir
  grep -Eq '^step 6/6 ' "$1" || fail "$1 shows no step 6/6: $(tail -5 "$1")"
  grep -q '"kind":"finish"' "$2/log.jsonl" || fail "$2/log.jsonl has no finish"
  [[ -d $2/ckpt ]] || fail "no checkpoint directory in $2"
}
if ((with_plugin)); then
  out=$(echo "$tmp"/gpt-1node-*.out)
  run_dir=$(echo "$HOME"/runs/gpt-1node-*)
  [[ -d $run_dir ]] || fail "no run directory $HOME/runs/gpt-1node-<job id>"
  check_run "$out" "$run_dir"
  for rank in 0 1 2 3; do
    [[ -f $run_dir/metrics.rank$rank.prom ]] || fail "gpt-1node: metrics.rank$rank.prom missing in $run_dir"
  done
  [[ $(grep -c '^railyard: host=' "$out") == 4 ]] || fail "gpt-1node: --railyard-verbose printed no 4 binding lines"

  out=$tmp/interactive.out
  [[ $(grep -c '^rank [01]: CUDA_VISIBLE_DEVICES=' "$out") == 2 ]] || fail "interactive.sh step 2: $(cat "$out")"
  grep -q '^GPUs (' "$out" || fail "interactive.sh: railyard-topo show printed no GPU list"
  grep -Eq '^railyard: host=[^ ]+ rank=1 ' "$out" || fail "interactive.sh: railyard-topo plan printed no plan"
  [[ $(grep -c '^step 6/6 ' "$out") == 2 ]] || fail "interactive.sh: the two training runs did not both finish: $(tail -5 "$out")"
fi
lrs=(1e-4 2e-4 3e-4 6e-4 1e-3 2e-3 3e-3 6e-3)
logs=()
for i in "${!lrs[@]}"; do
  run_dir=$(echo "$HOME"/runs/lr-sweep-*/lr-"${lrs[i]}")
  [[ -d $run_dir ]] || fail "no array task directory $HOME/runs/lr-sweep-<id>/lr-${lrs[i]}"
  check_run "$(echo "$tmp"/lr-sweep-*_"$i".out)" "$run_dir"
  [[ -f $run_dir/report.html ]] || fail "$run_dir: the array task wrote no report"
  logs+=("$run_dir/log.jsonl")
done
python3 - "${logs[@]:0:2}" <<'PY' || fail "the array tasks did not train with their own learning rates and validation"
import json, sys
def last(path, kind):
    return [r for r in map(json.loads, open(path)) if r["type"] == kind]
a, b = (last(p, "step")[-1]["lr"] for p in sys.argv[1:])
assert abs(b / a - 2) < 1e-9, (a, b)  # same schedule, twice the peak
assert all(len(last(p, "eval")) == 2 for p in sys.argv[1:])  # --val-every 3 over 6 steps
PY
# The comparison the script's last comment suggests: one line per task, a legend naming each.
railyard-report "$HOME"/runs/lr-sweep-*/lr-*/log.jsonl -o "$tmp/sweep.html" || fail "railyard-report of the sweep failed"
grep -q '<th>runs compared</th><td>8</td>' "$tmp/sweep.html" || fail "the sweep report does not compare 8 runs"
echo "examples_batch: ok"
