#!/bin/bash
# A 2-node cluster in a scratch state dir: each slurmd in its own network namespace with its own
# address and hostname. srun -N 2 reaches both nodes and gives each its fake GPUs; an MPI
# program launched by srun --mpi=pmix spans both; stop removes the daemons and the namespaces.
set -euo pipefail
cluster=$RAILYARD_SOURCE_DIR/slurm/local-cluster
tmp=$RAILYARD_TEST_TMP
state=$tmp/cluster
rm -rf "$tmp" && mkdir -p "$tmp"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
command -v ip >/dev/null && ip netns list >/dev/null 2>&1 || {
  echo "SKIP: no network namespaces here (ip netns)"
  exit 77
}
trap '"$cluster" stop --state-dir "$state" >/dev/null 2>&1 || true' EXIT

before=$(ip netns list | awk '{print $1}' | sort)
"$cluster" start --state-dir "$state" --nodes 2 --cpus 2 --gpus 2
pids=$(cat "$state"/munge/munged.pid "$state"/run/slurmctld.pid "$state"/nodes/*/slurmd.pid)
namespaces=$(comm -13 <(echo "$before") <(ip netns list | awk '{print $1}' | sort))
[[ $(wc -w <<<"$namespaces") == 2 ]] || fail "expected 2 new network namespaces, got: $namespaces"
source "$state/env.sh"

timeout 60 srun -N 2 -n 2 --gres=gpu:2 bash -c 'echo "task $SLURM_PROCID $(hostname) ${CUDA_VISIBLE_DEVICES:-unset}"' |
  sort >"$tmp/tasks"
cat "$tmp/tasks"
[[ $(cat "$tmp/tasks") == $'task 0 node1 0,1\ntask 1 node2 0,1' ]] ||
  fail "expected task 0 on node1 and task 1 on node2, each with GPUs 0,1"

cat >"$tmp/hello.c" <<'C'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
  int rank, size, sum = 0, len;
  char host[MPI_MAX_PROCESSOR_NAME];
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Get_processor_name(host, &len);
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("rank %d size %d sum %d on %s\n", rank, size, sum, host);
  MPI_Finalize();
  return 0;
}
C
mpicc -o "$tmp/hello" "$tmp/hello.c"
timeout 60 srun --mpi=pmix -N 2 -n 2 "$tmp/hello" | sort >"$tmp/mpi"
cat "$tmp/mpi"
[[ $(cat "$tmp/mpi") == $'rank 0 size 2 sum 1 on node1\nrank 1 size 2 sum 1 on node2' ]] ||
  fail "the MPI ranks did not span node1 and node2 with an all-reduced sum of 1"

"$cluster" stop --state-dir "$state"
for pid in $pids; do
  [[ ! -d /proc/$pid ]] || fail "pid $pid ($(cat /proc/"$pid"/comm 2>/dev/null)) survived stop"
done
for ns in $namespaces; do
  ! ip netns list | grep -qw "$ns" || fail "network namespace $ns survived stop"
done
echo "PASS"
