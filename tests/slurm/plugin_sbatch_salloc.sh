#!/bin/bash
# The plugin's options through sbatch and salloc: an option given to sbatch or salloc reaches
# the steps srun starts inside the allocation (an srun option overrides it for its step), and
# the batch step itself is left alone.
set -euo pipefail
# shellcheck source=lib/plugin_test_lib.bash
source "$(dirname "$0")/lib/plugin_test_lib.bash"
plugin_test_setup plugin_sbatch_salloc

xml="$scratch/dgx-like.xml"
write_dgx_like_xml "$xml"
set_plugstack "topology=$xml"

# sbatch --railyard-visible=isolate: each task of the inner srun sees only its own GPU; the
# batch script itself (the batch step, which the plugin skips) sees Slurm's list.
cat >"$scratch/job.sh" <<JOB
#!/bin/bash
echo "batch|\${CUDA_VISIBLE_DEVICES-unset}|\${RAILYARD_LOCAL_RANK-unset}"
srun bash -c '$task_probe'
srun --railyard-visible=rotate bash -c 'echo "override|\$CUDA_VISIBLE_DEVICES"'
JOB
sbatch --wait -Q -n 4 --gres=gpu:4 --railyard-visible=isolate --railyard-verbose \
  -o "$scratch/sbatch.out" -e "$scratch/sbatch.err" "$scratch/job.sh" ||
  fail "sbatch job failed: $(cat "$scratch/sbatch.out" "$scratch/sbatch.err")"
cat "$scratch/sbatch.out" "$scratch/sbatch.err"
grep -q '^batch|0,1,2,3|unset$' "$scratch/sbatch.out" || fail "the batch step was changed"
[[ $(grep '^probe|' "$scratch/sbatch.out" | cut -d'|' -f3 | sort | paste -sd' ') == "0 1 2 3" ]] ||
  fail "sbatch --railyard-visible=isolate did not give each task its own GPU only"
[[ $(grep -c '^railyard: host=node1 rank=' "$scratch/sbatch.err") == 8 ]] ||
  fail "sbatch --railyard-verbose: expected 4 report lines per step"
[[ $(grep -c '^override|[0-3],[0-3],[0-3],[0-3]$' "$scratch/sbatch.out") == 4 ]] ||
  fail "an srun option did not override the one given to sbatch"

# salloc without a terminal: its options reach srun the same way.
salloc -Q -n 4 --gres=gpu:4 --railyard-gpu=rank --railyard-net=off \
  srun bash -c "$task_probe" >"$scratch/salloc.out" 2>"$scratch/salloc.err" ||
  fail "salloc failed: $(cat "$scratch/salloc.err")"
cat "$scratch/salloc.out"
[[ $(grep -c '^probe|' "$scratch/salloc.out") == 4 ]] || fail "salloc: expected 4 task lines"
while IFS='|' read -r _ id cvd hca ucx _; do
  [[ ${cvd%%,*} == "$id" ]] || fail "salloc --railyard-gpu=rank: task $id sees $cvd first"
  [[ $hca == unset && $ucx == unset ]] || fail "salloc --railyard-net=off: task $id has $hca $ucx"
done < <(grep '^probe|' "$scratch/salloc.out")
echo "plugin_sbatch_salloc: ok"
