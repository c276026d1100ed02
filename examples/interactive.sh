#!/bin/bash
# An interactive session: hold GPUs with salloc, then run short trainings with srun while you
# try options. Type these commands one by one; running this file does the same end to end.
set -euo pipefail

# 1. Ask for one node with two GPUs for an hour. salloc opens a shell (on the login node) that
#    owns the allocation; every srun in that shell runs inside it, without queueing again.
#      salloc --nodes=1 --ntasks=2 --gpus=2 --cpus-per-task=4 --time=01:00:00
#    When this script is run directly, it requests the allocation itself:
if [[ -z ${SLURM_JOB_ID:-} ]]; then
  exec salloc --nodes=1 --ntasks=2 --gpus=2 --cpus-per-task=4 --time=01:00:00 "$0" "$@"
fi

# 2. See what the railyard plugin decides for each rank: GPU, cores, NIC. No training yet.
# shellcheck disable=SC2016 # expanded by each task, not here
srun --mpi=pmix --railyard-verbose bash -c \
  'echo "rank $SLURM_PROCID: CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES cpus=$(taskset -pc $$ | cut -d: -f2)"'

# 3. What the plugin sees on this node (GPUs, NICs, NUMA nodes, their distances) and the plan
#    it would make for 2 tasks on GPUs 0 and 1, without Slurm (docs/railyard-topo.md).
srun --ntasks=1 railyard-topo show
srun --ntasks=1 railyard-topo plan --ntasks 2 --gpus 0,1

# 4. A small model for a few steps, printing progress every step: fast to iterate on.
#    (MODEL and STEPS may be set from outside; a test of this script makes them tiny.)
MODEL=${MODEL:-"--layers 4 --heads 4 --dim 256 --seq 256 --device auto"}
DATA=${DATA:-$HOME/data/tinyshakespeare/tiny_shakespeare_train.bin}
# shellcheck disable=SC2086 # MODEL is a list of options
srun --mpi=pmix railyard-train --data "$DATA" $MODEL --batch 8 --steps "${STEPS:-50}" --log-every 1

# 5. Try a change and compare throughput (the "tok/s" column of the progress line).
# shellcheck disable=SC2086
srun --mpi=pmix railyard-train --data "$DATA" $MODEL --batch 16 --steps "${STEPS:-50}" --log-every 10

# 6. Leave the salloc shell (exit) to give the GPUs back; they are held until then.
