#!/bin/bash
# --railyard=off leaves a task's environment and affinity exactly as Slurm made them (compared
# with a step run with no plugin at all); a variable the user set stays unless the admin sets
# force=on, and the verbose report says which it kept.
# shellcheck disable=SC2016  # the single-quoted commands expand in the task
set -euo pipefail
# shellcheck source=lib/plugin_test_lib.bash
source "$(dirname "$0")/lib/plugin_test_lib.bash"
plugin_test_setup plugin_off_switch

xml="$scratch/dgx-like.xml"
write_dgx_like_xml "$xml"
set_plugstack "topology=$xml"

# Variables that differ between any two steps, whatever the plugin does.
per_step='(SLURM_(JOB_?ID|STEP_?ID|TASK_PID|STEP_LAUNCHER_PORT|SRUN_COMM_PORT|JOB_START_TIME|JOB_END_TIME|LAUNCH_NODE_IPADDR)|_?SLURM_SPANK_OPTION|SPANK_)'
probe_env() { # output file, srun options...
  local out=$1
  shift
  srun -n 2 --gres=gpu:2 "$@" bash -c \
    'env | sort | sed "s/^/$SLURM_LOCALID:/"; echo "$SLURM_LOCALID:affinity=$(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"' |
    grep -Ev "^[0-9]+:$per_step" | sort >"$out"
}

probe_env "$scratch/off.env" --railyard=off
probe_env "$scratch/on.env"
printf '# no plugin\n' >"$plugstack"
probe_env "$scratch/none.env"
plugin_test_restore

if ! diff -u "$scratch/none.env" "$scratch/off.env"; then
  fail "--railyard=off changed the environment or affinity (diff above: no plugin vs off)"
fi
grep -q '^1:RAILYARD_LOCAL_RANK=1$' "$scratch/on.env" || fail "the plugin, on, set no RAILYARD_LOCAL_RANK"
grep -q '^1:CUDA_VISIBLE_DEVICES=1,0$' "$scratch/on.env" || fail "the plugin, on, did not rotate"
if grep -Eq ':(RAILYARD_(LOCAL_RANK|POLICY|CPUS|GPU_PCI|NIC)|NCCL_|UCX_|CUDA_DEVICE_ORDER)=' "$scratch/off.env"; then
  fail "--railyard=off still set variables"
fi

# A variable the user set is theirs; the admin's force=on takes it over.
set_plugstack "topology=$xml"
NCCL_IB_HCA=mine srun -n 2 --gres=gpu:2 --railyard-verbose bash -c 'echo "hca=$NCCL_IB_HCA"' \
  >"$scratch/user.out" 2>"$scratch/user.err"
[[ $(sort -u "$scratch/user.out") == "hca=mine" ]] || fail "user's NCCL_IB_HCA was overwritten"
grep -q 'kept=.*NCCL_IB_HCA' "$scratch/user.err" || fail "verbose report does not say NCCL_IB_HCA was kept"
set_plugstack "topology=$xml" force=on
NCCL_IB_HCA=mine srun -n 2 --gres=gpu:2 bash -c 'echo "hca=$NCCL_IB_HCA"' >"$scratch/force.out"
if grep -q 'hca=mine' "$scratch/force.out"; then fail "force=on left the user's NCCL_IB_HCA"; fi
echo "plugin_off_switch: ok"
