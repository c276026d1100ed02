#!/bin/sh
# The CPU engine's gradient average across real MPI ranks: under mpirun with 2 and 4 ranks
# every rank must hold the mean gradient of all ranks' batches and identical parameters
# (CpuEngineMpi in tests/unit/cpu_engine_test.cpp).
set -eu
bin="$RAILYARD_BUILD_DIR/tests/unit/cpu_engine_test"
if [ ! -x "$bin" ]; then
  echo "skip: $bin not built" >&2
  exit 77
fi
for n in 2 4; do
  echo "== mpirun -n $n"
  mpirun --oversubscribe -n "$n" "$bin" --gtest_filter='CpuEngineMpi.*' --gtest_color=no
done
