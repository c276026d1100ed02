#!/bin/bash
# Bad input fails the step with a message naming the option or argument, the value and what
# is allowed, and the node stays idle: bad option values through srun, sbatch and salloc; an
# unknown or malformed plugstack.conf argument; an option the admin keeps; a missing topology
# file; a CUDA version on a node without a driver (also from inside a batch job); a bad
# argument in the node's plugstack.conf only (slurmstepd fails the tasks).
set -euo pipefail
# shellcheck source=lib/plugin_test_lib.bash
source "$(dirname "$0")/lib/plugin_test_lib.bash"
plugin_test_setup plugin_bad_input

xml="$scratch/dgx-like.xml"
write_dgx_like_xml "$xml"

# Runs a command that must fail with every given text in its output; the node must stay idle.
expect_failure() { # label, texts (one per line), command...
  local label=$1 texts=$2
  shift 2
  if "$@" >"$scratch/out" 2>&1; then
    cat "$scratch/out"
    fail "$label: succeeded"
  fi
  while IFS= read -r text; do
    grep -qF -- "$text" "$scratch/out" || {
      cat "$scratch/out"
      fail "$label: no '$text' in the output"
    }
  done <<<"$texts"
  grep -q 'ran-anyway' "$scratch/out" && fail "$label: the task ran"
  expect_node_idle
  echo "ok: $label"
}

set_plugstack "topology=$xml"
expect_failure "srun bad value" $'--railyard-gpu=nearest\n\'nearest\'\nclosest, rank' \
  srun -n 1 --railyard-gpu=nearest echo ran-anyway
expect_failure "srun bad cuda" $'--railyard-cuda=twelve\nMAJOR' \
  srun -n 1 --railyard-cuda=twelve echo ran-anyway
expect_failure "sbatch bad value" $'--railyard-visible=some\nrotate, isolate, all' \
  sbatch --railyard-visible=some --wrap 'echo ran-anyway'
expect_failure "salloc bad value" $'--railyard-cpu-bind=maybe\non, off' \
  salloc -Q --railyard-cpu-bind=maybe echo ran-anyway
[[ -z $(squeue -h) ]] || fail "a job was queued despite a bad option: $(squeue -h)"

set_plugstack "topology=$xml" user_override=visible,verbose
expect_failure "option the admin keeps" $'--railyard-gpu\nusers may change: visible, verbose' \
  srun -n 1 --railyard-gpu=rank echo ran-anyway
srun -n 1 --railyard-visible=isolate true || fail "an allowed override was refused"

set_plugstack "topology=$xml" colour=blue
expect_failure "unknown plugstack key" $'colour=blue\nunknown key \'colour\'\ntopology, nic_include' \
  srun -n 1 echo ran-anyway
set_plugstack "topology=$xml" default_gpu=far
expect_failure "bad plugstack value" $'default_gpu=far\nclosest, rank' srun -n 1 echo ran-anyway
set_plugstack "topology=relative.xml"
expect_failure "relative topology path" $'topology=relative.xml\nabsolute path' srun -n 1 echo ran-anyway

set_plugstack "topology=$scratch/missing.xml"
expect_failure "missing topology file" "$scratch/missing.xml" srun -n 1 --gres=gpu:1 echo ran-anyway

# The fake GPUs have no driver: a job that states a CUDA version fails before it runs, one
# without GPUs is not checked, and an admin default applies to every GPU step.
set_plugstack "topology=$xml"
expect_failure "no driver, CUDA required" $'has no NVIDIA driver\nneeds CUDA 12.4' \
  srun -n 1 --gres=gpu:1 --railyard-cuda=12.4 echo ran-anyway
srun -n 1 --railyard-cuda=12.4 true || fail "a step without GPUs was driver-checked"
set_plugstack "topology=$xml" default_cuda=12.0
expect_failure "admin default CUDA" "needs CUDA 12.0" srun -n 1 --gres=gpu:1 echo ran-anyway
if sbatch --wait -o "$scratch/batch.out" --gres=gpu:1 --wrap 'srun echo ran-anyway' >/dev/null; then
  fail "a batch job whose step failed the driver check succeeded"
fi
grep -q "needs CUDA 12.0" "$scratch/batch.out" || fail "the batch job's output lacks the message"
grep -q ran-anyway "$scratch/batch.out" && fail "the batch job's task ran"
expect_node_idle
echo "ok: batch job whose step fails the check"
# A bad argument only in the node's plugstack.conf (srun here reads a good copy, as a login
# node with its own file would): slurmstepd fails the step's tasks with the message.
set_plugstack "topology=$xml"
cp "$plugstack" "$scratch/login-plugstack.conf"
sed "s|^PlugStackConfig=.*|PlugStackConfig=$scratch/login-plugstack.conf|" "$SLURM_CONF" >"$scratch/login-slurm.conf"
set_plugstack "topology=$xml" colour=blue
expect_failure "bad argument on the node only" $'unknown key \'colour\'\nExited with exit code 1' \
  env SLURM_CONF="$scratch/login-slurm.conf" srun -n 2 --gres=gpu:2 echo ran-anyway

# plugstack.conf broken while a batch job waits: its batch step still starts (a plugin error
# there would drain the node), and the srun inside fails with the message.
set_plugstack "topology=$xml"
job=$(sbatch --parsable --hold -o "$scratch/held.out" --wrap 'echo batch-ran; srun echo ran-anyway')
set_plugstack "topology=$xml" colour=blue
scontrol release "$job"
for _ in $(seq 1 60); do
  [[ -z $(squeue -h -j "$job" 2>/dev/null) ]] && break
  sleep 0.5
done
grep -q batch-ran "$scratch/held.out" || fail "the batch step did not run: $(cat "$scratch/held.out")"
grep -q "unknown key 'colour'" "$scratch/held.out" || fail "the inner srun did not report the bad argument"
grep -q ran-anyway "$scratch/held.out" && fail "the inner step ran despite the bad argument"
expect_node_idle
echo "ok: bad plugstack.conf under a running batch job"
echo "plugin_bad_input: ok"
