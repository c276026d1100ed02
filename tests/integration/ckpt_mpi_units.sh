#!/bin/sh
# Checkpoints and the stop agreement across real MPI ranks: sharded moments cut mid-tensor are
# written as one logical tensor per dataset (collective hyperslabs with parallel HDF5, gathered
# to rank 0 for async saves), a failure on one rank fails all, every rank loads the whole state;
# agree_stop gives every rank the strongest request; the communicator's collectives and
# point-to-point messages they use. The same GoogleTest programs run on one rank under the unit
# label.
set -eu
for t in communicator_test checkpoint_sharded_test stop_agreement_test; do
  bin="$RAILYARD_BUILD_DIR/tests/unit/$t"
  if [ ! -x "$bin" ]; then
    echo "skip: $bin not built" >&2
    exit 77
  fi
  for n in 2 3; do
    echo "== mpirun -n $n $t"
    mpirun --oversubscribe -n "$n" "$bin" --gtest_color=no
  done
done
