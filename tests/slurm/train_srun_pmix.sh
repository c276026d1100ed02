#!/bin/bash
# railyard-train launched by srun --mpi=pmix -n 2 through spank_railyard on the local cluster:
# the run logs the launcher "srun", 2 ranks and, per rank, what the plugin bound it to (its
# RAILYARD_* variables, CUDA_VISIBLE_DEVICES, cpus), and both ranks train the same model;
# srun without a PMI plugin fails before any training, naming srun --mpi=pmix.
set -euo pipefail
# shellcheck source=lib/plugin_test_lib.bash
source "$(dirname "$0")/lib/plugin_test_lib.bash"
plugin_test_setup train_srun_pmix

bin=$RAILYARD_BUILD_DIR/runtime/tools
xml="$scratch/dgx-like.xml"
write_dgx_like_xml "$xml"
set_plugstack "topology=$xml"

printf 'the quick brown fox jumps over the lazy dog. %.0s' $(seq 200) >"$scratch/fox.txt"
"$bin/railyard-data" text "$scratch/fox.txt" -o "$scratch/fox.h5" >/dev/null

timeout 120 srun --mpi=pmix -n 2 --gres=gpu:2 "$bin/railyard-train" --data "$scratch/fox.h5" \
  --device cpu --steps 4 --layers 2 --dim 32 --heads 2 --seq 32 --batch 2 --log-every 1 \
  --log-json "$scratch/log.jsonl" >"$scratch/out" 2>"$scratch/err" ||
  fail "srun railyard-train failed: $(cat "$scratch/out" "$scratch/err")"
cat "$scratch/out"

grep -q '^run launch | step 0 | launcher srun | ranks 2$' "$scratch/out" ||
  fail "the log does not name launcher srun with 2 ranks"
for r in 0 1; do
  line=$(grep "^run bind | step 0 | rank $r | " "$scratch/out") || fail "no binding line for rank $r"
  [[ $line == *"| local $r/2 |"* ]] || fail "rank $r: local rank missing: $line"
  [[ $line == *"RAILYARD_LOCAL_RANK=$r"* ]] || fail "rank $r: the plugin's RAILYARD_LOCAL_RANK missing: $line"
  [[ $line == *"CUDA_VISIBLE_DEVICES="* ]] || fail "rank $r: CUDA_VISIBLE_DEVICES missing: $line"
  cpus=${line#*| cpus }
  cpus=${cpus%% |*}
  [[ $line == *"RAILYARD_CPUS=$cpus"* || $line != *"RAILYARD_CPUS="* ]] ||
    fail "rank $r: affinity $cpus differs from the plugin's RAILYARD_CPUS: $line"
done
[[ $(grep -c '^step ' "$scratch/out") == 4 ]] || fail "expected 4 step lines"
python3 - "$scratch/log.jsonl" <<'PY' || fail "the JSON log is incomplete"
import json, sys
rec = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in rec if r["type"] == "step"]
assert [r["step"] for r in steps] == [1, 2, 3, 4], steps
assert steps[-1]["tokens_seen"] == 4 * 2 * 2 * 32, steps[-1]
assert any(r["type"] == "run" and r["kind"] == "finish" for r in rec)
PY

# Without a PMI plugin railyard-train refuses to start (rather than run every task as a lone
# rank 0 that trains alone and overwrites the others' checkpoints) and says how to launch it.
set +e
timeout 120 srun --mpi=none -n 2 "$bin/railyard-train" --data "$scratch/fox.h5" --device cpu \
  --steps 1 --layers 2 --dim 32 --heads 2 --seq 32 --batch 2 >"$scratch/nopmi.out" 2>&1
rc=$?
set -e
[[ $rc == 2 ]] || fail "srun --mpi=none: exit code $rc, expected 2: $(cat "$scratch/nopmi.out")"
# railyard-train names the fix before MPI_Init (whose own message suggests rebuilding Open MPI),
# once (rank 0), not once per task.
[[ $(grep -c "launch with 'srun --mpi=pmix railyard-train" "$scratch/nopmi.out") == 1 ]] ||
  fail "srun --mpi=none: no single message naming the fix: $(cat "$scratch/nopmi.out")"
! grep -q '^step ' "$scratch/nopmi.out" || fail "srun --mpi=none: a task trained alone"
echo "train_srun_pmix: ok"
