#!/bin/bash
# examples/multi-node.sbatch, unchanged, on a scratch local cluster started as the script's
# comment says (--nodes 2; one slurmd per network namespace): 8 ranks, 4 per node, train together
# through srun --mpi=pmix; the output has each line labelled with its rank (srun --label), each
# rank's binding names its own node, and every rank keeps its own metrics file.
set -euo pipefail
cluster=$RAILYARD_SOURCE_DIR/slurm/local-cluster
tools=$RAILYARD_BUILD_DIR/runtime/tools
plugin=$RAILYARD_BUILD_DIR/plugin/spank_railyard.so
tmp=$RAILYARD_TEST_TMP
state=$tmp/cluster
rm -rf "$tmp" && mkdir -p "$tmp/home"
fail() {
  echo "FAIL: $*" >&2
  [[ -f $tmp/multi.out ]] && { echo "--- job output" >&2; cat "$tmp/multi.out" >&2; }
  exit 1
}
for exe in railyard-train railyard-data; do
  [[ -x $tools/$exe ]] || { echo "SKIP: $exe is not built"; exit 77; }
done
# The example asks for --railyard-verbose, an option only the plugin gives srun.
[[ -f $plugin ]] || { echo "SKIP: the plugin is not built"; exit 77; }
command -v ip >/dev/null && ip netns list >/dev/null 2>&1 || { echo "SKIP: no network namespaces here"; exit 77; }
trap '"$cluster" stop --state-dir "$state" >/dev/null 2>&1 || true' EXIT
"$cluster" start --state-dir "$state" --nodes 2 --plugin "$plugin" >"$tmp/cluster.log" ||
  { cat "$tmp/cluster.log"; fail "the 2-node cluster did not start"; }
source "$state/env.sh"

printf 'the quick brown fox jumps over the lazy dog. %.0s' $(seq 300) >"$tmp/fox.txt"
"$tools/railyard-data" text "$tmp/fox.txt" -o "$tmp/fox.h5" >/dev/null
export HOME=$tmp/home PATH=$tools:$PATH DATA=$tmp/fox.h5 STEPS=6
export MODEL="--layers 2 --dim 32 --heads 2 --seq 32 --batch 2 --device cpu --log-every 1"
job=$(cd "$tmp" && timeout 240 sbatch --parsable --wait "$RAILYARD_SOURCE_DIR/examples/multi-node.sbatch") ||
  { cp "$tmp"/gpt-multinode-*.out "$tmp/multi.out" 2>/dev/null; fail "the job failed"; }
cp "$tmp/gpt-multinode-$job.out" "$tmp/multi.out"
cat "$tmp/multi.out"

grep -q '^0: step 6/6 ' "$tmp/multi.out" || fail "rank 0 did not report step 6/6 with its label"
for rank in 0 1 2 3 4 5 6 7; do
  grep -Eq "^0: run bind \| step 0 \| rank $rank \| host node$((rank / 4 + 1)) " "$tmp/multi.out" ||
    fail "rank $rank did not run on node$((rank / 4 + 1))"
done
run_dir=$(echo "$HOME"/runs/gpt-multinode-*)
for rank in 0 1 2 3 4 5 6 7; do
  grep -q "^railyard_step{[^}]*rank=\"$rank\"} 6$" "$run_dir/metrics.rank$rank.prom" ||
    fail "rank $rank's metrics file does not end at step 6"
done
grep -q '"kind":"finish"' "$run_dir/log.jsonl" || fail "the log has no finish"
echo "examples_multinode: ok"
