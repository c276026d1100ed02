# shellcheck shell=bash disable=SC2154 # $tmp and $tools come from the sourcing test
# Set-up shared by the tests that run examples/ on the local cluster.

# The cluster's environment; $tools (skipping the test unless they are built) and an empty $tmp.
example_test_setup() {
  # shellcheck disable=SC1091
  source "$RAILYARD_CLUSTER_DIR/env.sh"
  tools=$RAILYARD_BUILD_DIR/runtime/tools
  for exe in railyard-train railyard-data railyard-report; do
    [[ -x $tools/$exe ]] || { echo "SKIP: $exe is not built"; exit 77; }
  done
  tmp=$RAILYARD_TEST_TMP
  rm -rf "$tmp" && mkdir -p "$tmp"
}

# Where the cluster loads the plugin, steps asking for GPUs need a topology that has them: a
# DGX-like XML goes into plugstack.conf (restored on exit) and with_plugin=1. Either way
# $tmp/fox.h5 is a small byte-level dataset for the tiny CPU model.
example_fixture() {
  plugstack=$RAILYARD_CLUSTER_DIR/etc/plugstack.conf
  with_plugin=0
  if grep -q spank_railyard.so "$plugstack" 2>/dev/null; then
    # shellcheck disable=SC2034 # read by the sourcing test
    with_plugin=1
    source "$(dirname "${BASH_SOURCE[0]}")/plugin_test_lib.bash"
    # shellcheck disable=SC2034 # read by plugin_test_lib.bash
    scratch=$tmp ncpu=$(nproc)
    cp "$plugstack" "$tmp/plugstack.conf.orig"
    trap 'cp "$tmp/plugstack.conf.orig" "$plugstack"' EXIT
    write_dgx_like_xml "$tmp/topo.xml"
    "$RAILYARD_SOURCE_DIR/slurm/local-cluster" set-plugstack --state-dir "$RAILYARD_CLUSTER_DIR" \
      "topology=$tmp/topo.xml" >/dev/null
  fi
  printf 'the quick brown fox jumps over the lazy dog. %.0s' $(seq 300) >"$tmp/fox.txt"
  "$tools/railyard-data" text "$tmp/fox.txt" -o "$tmp/fox.h5" >/dev/null
}
