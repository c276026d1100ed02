#!/bin/bash
# A second cluster in a scratch state dir (its own ports, derived from the dir): starting it
# twice is harmless, status reports it, and stop leaves none of its daemons behind.
set -euo pipefail
cluster=$RAILYARD_SOURCE_DIR/slurm/local-cluster
state=$RAILYARD_TEST_TMP/cluster
rm -rf "$RAILYARD_TEST_TMP" && mkdir -p "$RAILYARD_TEST_TMP"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
pids() { cat "$state"/munge/munged.pid "$state"/run/slurmctld.pid "$state"/nodes/*/slurmd.pid 2>/dev/null || true; }
trap '"$cluster" stop --state-dir "$state" >/dev/null 2>&1 || true' EXIT

"$cluster" start --state-dir "$state" --gpus 2 --cpus 4
first=$(pids | sort)
[[ $(wc -l <<<"$first") == 3 ]] || fail "expected 3 daemon pids (munged, slurmctld, slurmd), got: $first"
"$cluster" start --state-dir "$state" --gpus 2 --cpus 4
[[ $(pids | sort) == "$first" ]] || fail "a second start replaced the running daemons"
grep -q '^SlurmctldPort=' "$state/etc/slurm.conf"
[[ $(grep '^SlurmctldPort=' "$state/etc/slurm.conf") != $(grep '^SlurmctldPort=' "$RAILYARD_CLUSTER_DIR/etc/slurm.conf") ]] ||
  fail "the scratch cluster uses the fixture cluster's port"
status=$("$cluster" status --state-dir "$state") || fail "status failed on a running cluster: $status"
grep -q 'slurmd node1 running' <<<"$status" || fail "status does not report slurmd: $status"

(source "$state/env.sh" && timeout 60 srun -n 2 --gres=gpu:2 printenv CUDA_VISIBLE_DEVICES) >"$RAILYARD_TEST_TMP/srun.out"
[[ $(sort -u "$RAILYARD_TEST_TMP/srun.out") == 0,1 ]] || fail "scratch cluster's GPUs: $(cat "$RAILYARD_TEST_TMP/srun.out")"

"$cluster" stop --state-dir "$state"
for pid in $first; do
  [[ ! -d /proc/$pid ]] || fail "pid $pid ($(cat /proc/"$pid"/comm 2>/dev/null)) survived stop"
done
[[ -z $(pids) ]] || fail "pid files left after stop: $(pids)"
if "$cluster" status --state-dir "$state" >/dev/null; then fail "status reports a running cluster after stop"; fi
"$cluster" stop --state-dir "$state" >/dev/null || fail "a second stop failed"
echo "PASS"
