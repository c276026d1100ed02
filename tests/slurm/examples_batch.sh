#!/bin/bash
# The batch examples as a user submits them, fitted to the local cluster on the command line
# (sbatch options override the scripts' #SBATCH lines) and with a tiny CPU model:
# single-node-multi-gpu.sbatch and multi-node.sbatch (on one node) train 2 ranks and write
# per-rank metrics; job-array.sbatch runs two array tasks with their own learning rates,
# validation and reports; interactive.sh runs its steps inside an salloc allocation.
set -euo pipefail
source "$RAILYARD_CLUSTER_DIR/env.sh"
tools=$RAILYARD_BUILD_DIR/runtime/tools
for exe in railyard-train railyard-data railyard-report; do
  [[ -x $tools/$exe ]] || { echo "SKIP: $exe is not built"; exit 77; }
done
tmp=$RAILYARD_TEST_TMP
rm -rf "$tmp" && mkdir -p "$tmp/home"
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
examples=$RAILYARD_SOURCE_DIR/examples

source "$(dirname "$0")/lib/example_fixture.bash"
example_fixture
# The scripts keep their runs under $HOME/runs.
export HOME=$tmp/home PATH=$tools:$RAILYARD_BUILD_DIR/plugin:$PATH DATA=$tmp/fox.h5 VAL_DATA=$tmp/fox.h5 STEPS=6 VAL_EVERY=3
export MODEL="--layers 2 --dim 32 --heads 2 --seq 32 --batch 2 --device cpu --log-every 1"
fit=(--partition=batch --cpus-per-task=1 -D "$tmp")

pids=()
if ((with_plugin)); then
  timeout 240 sbatch --wait "${fit[@]}" --ntasks-per-node=2 --gpus-per-node=2 \
    --output="$tmp/single.out" "$examples/single-node-multi-gpu.sbatch" >/dev/null &
  pids+=($!)
  timeout 240 sbatch --wait "${fit[@]}" --nodes=1 --ntasks-per-node=2 --gpus-per-node=2 \
    --output="$tmp/multi.out" "$examples/multi-node.sbatch" >/dev/null &
  pids+=($!)
  # interactive.sh sets --batch and --log-every itself.
  (cd "$tmp" && MODEL="--layers 2 --dim 32 --heads 2 --seq 32 --device cpu" timeout 240 salloc -Q --partition=batch -n 2 --gpus=2 --cpus-per-task=1 \
    "$examples/interactive.sh" >"$tmp/interactive.out" 2>&1) &
  pids+=($!)
else
  echo "the cluster runs without the plugin: the single- and multi-node examples (which use --railyard-verbose) are not run"
fi
timeout 240 sbatch --wait "${fit[@]}" --array=0-1 --output="$tmp/array-%a.out" \
  "$examples/job-array.sbatch" >/dev/null &
pids+=($!)
for pid in "${pids[@]}"; do
  wait "$pid" || { cat "$tmp"/*.out; fail "a job failed (sbatch --wait exited non-zero)"; }
done

check_run() { # output-file run-dir ranks
  grep -Eq '^([0-9]+: )?step 6/6 ' "$1" || fail "$1 shows no step 6/6: $(tail -5 "$1")"
  grep -q '"kind":"finish"' "$2/log.jsonl" || fail "$2/log.jsonl has no finish"
  [[ -d $2/ckpt ]] || fail "no checkpoint directory in $2"
}
if ((with_plugin)); then
  for name in 1node 4node; do
    out=$tmp/$([[ $name == 1node ]] && echo single || echo multi).out
    run_dir=$(echo "$HOME"/runs/gpt-$name-*)
    [[ -d $run_dir ]] || fail "no run directory $HOME/runs/gpt-$name-<job id>"
    check_run "$out" "$run_dir"
    [[ -f $run_dir/metrics.rank0.prom && -f $run_dir/metrics.rank1.prom ]] ||
      fail "gpt-$name: per-rank metrics files missing in $run_dir"
    grep -Eq '^([0-9]+: )?railyard: host=' "$out" || fail "gpt-$name: --railyard-verbose printed no binding lines"
  done
fi
if ((with_plugin)); then
  out=$tmp/interactive.out
  [[ $(grep -c '^rank [01]: CUDA_VISIBLE_DEVICES=' "$out") == 2 ]] || fail "interactive.sh step 2: $(cat "$out")"
  grep -q '^GPUs (' "$out" || fail "interactive.sh: railyard-topo show printed no GPU list"
  grep -Eq '^railyard: host=[^ ]+ rank=1 ' "$out" || fail "interactive.sh: railyard-topo plan printed no plan"
  [[ $(grep -c '^step 6/6 ' "$out") == 2 ]] || fail "interactive.sh: the two training runs did not both finish: $(tail -5 "$out")"
fi
logs=()
for lr in 1e-4 2e-4; do
  run_dir=$(echo "$HOME"/runs/lr-sweep-*/lr-$lr)
  [[ -d $run_dir ]] || fail "no array task directory $HOME/runs/lr-sweep-<id>/lr-$lr"
  check_run "$tmp/array-$([[ $lr == 1e-4 ]] && echo 0 || echo 1).out" "$run_dir"
  [[ -f $run_dir/report.html ]] || fail "$run_dir: the array task wrote no report"
  logs+=("$run_dir/log.jsonl")
done
python3 - "${logs[@]}" <<'PY' || fail "the array tasks did not train with their own learning rates and validation"
import json, sys
def last(path, kind):
    return [r for r in map(json.loads, open(path)) if r["type"] == kind]
a, b = (last(p, "step")[-1]["lr"] for p in sys.argv[1:])
assert abs(b / a - 2) < 1e-9, (a, b)  # same schedule, twice the peak
assert all(len(last(p, "eval")) == 2 for p in sys.argv[1:])  # --val-every 3 over 6 steps
PY
echo "examples_batch: ok"
