#!/bin/bash
# The SPANK plugin as the .deb installs it: build the package with cpack, extract it into a
# scratch root, point the local cluster's plugstack.conf at the plugin there, and check that
# srun (local context) offers the plugin's options and that a step's tasks (slurmstepd,
# remote context) get the plugin's decisions. plugstack.conf is restored afterwards.
set -euo pipefail
# shellcheck source=lib/plugin_test_lib.bash
source "$(dirname "$0")/lib/plugin_test_lib.bash"
plugin_test_setup package_plugin_loads

build=${RAILYARD_BUILD_DIR:?}
[[ -f $build/plugin/spank_railyard.so ]] || { echo "SKIP: the plugin is not built here"; exit 77; }
for tool in cpack dpkg-deb; do
  command -v $tool >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done

cpack -G DEB --config "$build/CPackConfig.cmake" -B "$scratch/pkg" >"$scratch/cpack.log" 2>&1 ||
  { cat "$scratch/cpack.log"; fail "cpack -G DEB failed"; }
deb=$(echo "$scratch"/pkg/railyard_*.deb)
[[ -f $deb ]] || fail "no railyard_*.deb in $scratch/pkg"
dpkg-deb -x "$deb" "$scratch/root"
packaged="$scratch/root/usr/lib/x86_64-linux-gnu/slurm-wlm/spank_railyard.so"
[[ -f $packaged ]] || fail "the package has no usr/lib/x86_64-linux-gnu/slurm-wlm/spank_railyard.so"
# Only the SPANK entry points are exported (slurmstepd resolves these by name).
nm -D --defined-only "$packaged" | grep -q ' slurm_spank_init$' || fail "packaged plugin exports no slurm_spank_init"

xml="$scratch/dgx-like.xml"
write_dgx_like_xml "$xml"
echo "required $packaged topology=$xml" >"$plugstack"
echo "plugstack.conf: $(cat "$plugstack")"

# Local context: srun reads plugstack.conf and lists the options the plugin registered.
srun --help >"$scratch/help" 2>&1 || true
grep -q -- '--railyard-verbose' "$scratch/help" ||
  fail "srun --help does not list --railyard-verbose with the packaged plugin: $(tail -5 "$scratch/help")"

# Remote context: the plugin in slurmstepd sets each task's RAILYARD_* variables and GPU.
timeout 60 srun -n 2 --gres=gpu:2 --railyard-verbose bash -c "$task_probe" \
  >"$scratch/out" 2>"$scratch/err" || fail "srun with the packaged plugin failed: $(cat "$scratch/err")"
cat "$scratch/out" "$scratch/err"
[[ $(grep -c '^probe|' "$scratch/out") == 2 ]] || fail "expected 2 task lines"
while IFS='|' read -r _ id cvd _ _ _ rank _; do
  [[ $rank == "$id" ]] || fail "task $id: RAILYARD_LOCAL_RANK='$rank': the plugin did not run in the step"
  [[ $cvd != unset ]] || fail "task $id has no CUDA_VISIBLE_DEVICES"
done < <(grep '^probe|' "$scratch/out")
[[ -s $scratch/err ]] || fail "--railyard-verbose printed nothing"
expect_node_idle
echo "the packaged plugin loaded in srun and in the step"
