#!/usr/bin/env bash
# scripts/gpu-node-story --dry-run judges the carried Slurm packages before device time is
# spent (a missing one, and one that would shadow the GPU machine's own, are named), and
# slurm/local-cluster refuses the real-node options' bad values before it starts anything.
set -euo pipefail
src="${RAILYARD_SOURCE_DIR:?}"
tmp="${RAILYARD_TEST_TMP:?}"
rm -rf "$tmp" && mkdir -p "$tmp/debs"
fail() { echo "FAIL: $*" >&2; exit 1; }
story() { OUT="$tmp/out" "$src/scripts/gpu-node-story" --dry-run --stages install --debs "$tmp/debs"; }

bash -n "$src/scripts/gpu-node-story"
for p in slurmd slurmctld slurm-client slurm-wlm-basic-plugins munge libmunge2 libslurm-dev; do
  : >"$tmp/debs/${p}_22.05.8-4_amd64.deb"
done
rc=0
story >"$tmp/missing.txt" 2>&1 || rc=$?
((rc == 1)) || fail "dry run without libslurm38 exited $rc, want 1"
grep -q "missing: $tmp/debs/libslurm38_\*.deb" "$tmp/missing.txt" || fail "libslurm38 not named: $(cat "$tmp/missing.txt")"

: >"$tmp/debs/libslurm38_22.05.8-4_amd64.deb"
story >"$tmp/complete.txt" 2>&1 || fail "complete inputs: $(cat "$tmp/complete.txt")"
grep -q "would unpack 8 packages under /opt/slurm" "$tmp/complete.txt" || fail "plan: $(cat "$tmp/complete.txt")"

: >"$tmp/debs/libpmix2_4.2.2-1_amd64.deb"
rc=0
story >"$tmp/refused.txt" 2>&1 || rc=$?
{ ((rc == 1)) && grep -q "refused: .*libpmix2_" "$tmp/refused.txt"; } || fail "libpmix2 not refused: $(cat "$tmp/refused.txt")"

cluster() { "$src/slurm/local-cluster" start --state-dir "$tmp/cluster" "$@" 2>&1 && return 1 || return 0; }
cluster --gpu-device /dev/null | grep -q "'/dev/null' is not an NVIDIA GPU device" || fail "--gpu-device /dev/null accepted"
cluster --cgroup v3 | grep -q "'v3' must be v1 or v2" || fail "--cgroup v3 accepted"
cluster --constrain-devices | grep -q "needs --cgroup v1 or v2" || fail "--constrain-devices without --cgroup accepted"
cluster --plugin-dir "$tmp" | grep -q "holds no select_cons_tres.so" || fail "--plugin-dir without plugins accepted"
[[ ! -e $tmp/cluster ]] || fail "a refused start made $tmp/cluster"
echo "gpu-node-story inputs: ok"
