#!/bin/bash
# The local cluster as users meet it: srun and sbatch get the fake GPUs in CUDA_VISIBLE_DEVICES,
# and an MPI program launched by srun --mpi=pmix sees all its ranks.
set -euo pipefail
source "$RAILYARD_CLUSTER_DIR/env.sh"
tmp=$RAILYARD_TEST_TMP
rm -rf "$tmp" && mkdir -p "$tmp"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Each task prints "task RANK SLURM_STEP_GPUS CUDA_VISIBLE_DEVICES". Slurm must hand the step all
# four fake GPUs. A SPANK plugin may reorder CUDA_VISIBLE_DEVICES (railyard's puts the task's own
# GPU first), so that is compared as a set; SLURM_STEP_GPUS is Slurm's alone.
check_gpus() { # file-with-task-lines expected-tasks
  local lines
  lines=$(grep -c '^task ' "$1" || true)
  [[ $lines == "$2" ]] || fail "expected $2 task lines, got $lines: $(cat "$1")"
  while read -r _ rank step_gpus cvd; do
    [[ $step_gpus == 0,1,2,3 ]] || fail "task $rank has SLURM_STEP_GPUS='$step_gpus', expected 0,1,2,3"
    [[ $(tr ',' '\n' <<<"$cvd" | sort -n | paste -sd,) == 0,1,2,3 ]] ||
      fail "task $rank has CUDA_VISIBLE_DEVICES='$cvd', expected the GPUs 0,1,2,3"
  done < <(grep '^task ' "$1")
}

task_line='echo "task $SLURM_PROCID ${SLURM_STEP_GPUS:-unset} ${CUDA_VISIBLE_DEVICES:-unset}"'

echo "== srun -n 4 --gres=gpu:4"
timeout 60 srun -n 4 --gres=gpu:4 bash -c "$task_line" >"$tmp/srun.out"
cat "$tmp/srun.out"
check_gpus "$tmp/srun.out" 4

echo "== srun without --gres sees no GPU"
timeout 60 srun -n 1 bash -c "$task_line" >"$tmp/nogpu.out"
grep -qx 'task 0 unset unset' "$tmp/nogpu.out" || fail "a step without --gres got GPUs: $(cat "$tmp/nogpu.out")"

echo "== sbatch --wait"
cat >"$tmp/job.sh" <<JOB
#!/bin/bash
#SBATCH -n 4 --gres=gpu:4 -o $tmp/job.out
srun bash -c '$task_line'
JOB
timeout 90 sbatch --wait "$tmp/job.sh" >"$tmp/sbatch.out" || fail "sbatch --wait failed: $(cat "$tmp/sbatch.out" "$tmp/job.out" 2>/dev/null)"
cat "$tmp/job.out"
check_gpus "$tmp/job.out" 4

echo "== srun --mpi=pmix -n 2 of an MPI program"
cat >"$tmp/hello.c" <<'C'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
  int rank, size, sum = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("rank %d size %d sum %d\n", rank, size, sum);
  MPI_Finalize();
  return 0;
}
C
mpicc -o "$tmp/hello" "$tmp/hello.c"
timeout 60 srun --mpi=pmix -n 2 "$tmp/hello" >"$tmp/mpi.out"
cat "$tmp/mpi.out"
for rank in 0 1; do
  grep -qx "rank $rank size 2 sum 1" "$tmp/mpi.out" || fail "rank $rank did not report size 2 and the all-reduced sum 1"
done
echo "PASS"
