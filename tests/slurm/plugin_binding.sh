#!/bin/bash
# srun -n 4 --gres=gpu:4 through spank_railyard with a DGX-like topology XML named in
# plugstack.conf: every task's first visible GPU differs and the others stay visible; each
# task's NCCL_IB_HCA/UCX_NET_DEVICES name the NIC behind its GPU's switch; its cpus are its
# GPU's socket narrowed to what Slurm allowed (the XML claims cpus the machine lacks); the
# verbose report has one line per task.
set -euo pipefail
# shellcheck source=lib/plugin_test_lib.bash
source "$(dirname "$0")/lib/plugin_test_lib.bash"
plugin_test_setup plugin_binding

xml="$scratch/dgx-like.xml"
write_dgx_like_xml "$xml"
set_plugstack "topology=$xml"

# Within one allocation, a step with the plugin off shows what Slurm allows each task.
salloc -Q -n 4 --gres=gpu:4 bash -c "
  srun --railyard=off bash -c '$task_probe' >'$scratch/off.out' &&
  srun --railyard-verbose bash -c '$task_probe' >'$scratch/out' 2>'$scratch/err' &&
  srun --railyard-cpu-bind=off bash -c '$task_probe' >'$scratch/nobind.out' &&
  srun --gres=none bash -c '$task_probe' >'$scratch/nogpu.out'" ||
  fail "salloc/srun failed: $(cat "$scratch/err")"
cat "$scratch/off.out" "$scratch/out" "$scratch/err"

[[ $(grep -c '^probe|' "$scratch/out") == 4 ]] || fail "expected 4 task lines"
firsts=()
while IFS='|' read -r _ id cvd hca ucx rcpus rank cpus; do
  first=${cvd%%,*}
  firsts+=("$first")
  [[ $(tr ',' '\n' <<<"$cvd" | sort | paste -sd,) == 0,1,2,3 ]] ||
    fail "task $id: CUDA_VISIBLE_DEVICES=$cvd does not keep all 4 GPUs visible"
  nic="mlx5_${nic_of_gpu[$first]}"
  [[ $hca == "=$nic:1" ]] || fail "task $id drives GPU $first: NCCL_IB_HCA=$hca, expected =$nic:1"
  [[ $ucx == "$nic:1" ]] || fail "task $id: UCX_NET_DEVICES=$ucx, expected $nic:1"
  [[ $rank == "$id" ]] || fail "task $id: RAILYARD_LOCAL_RANK=$rank"
  allowed=$(awk -F'|' -v id="$id" '$2 == id { print $8 }' "$scratch/off.out")
  [[ -n $allowed ]] || fail "no line for task $id with the plugin off"
  want=$(cpu_intersect "$(socket_cpus $((first / 2)))" "$allowed")
  [[ -n $want ]] || want=$allowed
  [[ $cpus == "$want" ]] || fail "task $id (GPU $first): Cpus_allowed_list=$cpus, expected $want"
  [[ $rcpus == "$cpus" ]] || fail "task $id: RAILYARD_CPUS=$rcpus but affinity is $cpus"
  [[ $(cpu_intersect "$cpus" "$allowed") == "$cpus" ]] ||
    fail "task $id: cpus $cpus leave the allocation $allowed"
  grep -q "^railyard: host=node1 rank=$id gpu=.* nic=$nic cpus=$cpus\$" "$scratch/err" ||
    fail "no verbose report line for task $id"
done < <(grep '^probe|' "$scratch/out")
[[ $(printf '%s\n' "${firsts[@]}" | sort -u | wc -l) == 4 ]] ||
  fail "first visible devices repeat: ${firsts[*]}"

# --railyard-cpu-bind=off keeps Slurm's affinity; a step without GPUs still gets a plan.
while IFS='|' read -r _ id _ _ _ _ _ cpus; do
  allowed=$(awk -F'|' -v id="$id" '$2 == id { print $8 }' "$scratch/off.out")
  [[ $cpus == "$allowed" ]] || fail "--railyard-cpu-bind=off: task $id runs on $cpus, not $allowed"
done < <(grep '^probe|' "$scratch/nobind.out")
while IFS='|' read -r _ id _ _ _ _ rank _; do
  [[ $rank == "$id" ]] || fail "step without GPUs: task $id has RAILYARD_LOCAL_RANK=$rank"
done < <(grep '^probe|' "$scratch/nogpu.out")
[[ $(grep -c '^probe|' "$scratch/nogpu.out") == 4 ]] || fail "step without GPUs: expected 4 tasks"

# By local rank, task i drives GPU i.
srun -n 4 --gres=gpu:4 --railyard-gpu=rank bash -c "$task_probe" >"$scratch/rank.out"
while IFS='|' read -r _ id cvd _; do
  [[ ${cvd%%,*} == "$id" ]] || fail "--railyard-gpu=rank: task $id sees $cvd first"
done < <(grep '^probe|' "$scratch/rank.out")

# isolate shows only the task's own GPU.
srun -n 4 --gres=gpu:4 --railyard-visible=isolate bash -c "$task_probe" >"$scratch/iso.out"
[[ $(cut -d'|' -f3 "$scratch/iso.out" | sort | paste -sd' ') == "0 1 2 3" ]] ||
  fail "--railyard-visible=isolate: $(cut -d'|' -f3 "$scratch/iso.out" | paste -sd' ')"
echo "plugin_binding: ok"
