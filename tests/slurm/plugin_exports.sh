#!/bin/bash
# spank_railyard.so exports only what Slurm looks up in a SPANK plugin (its identity and the
# slurm_spank_* entry points) and links no NVIDIA library, so it loads on nodes without a
# driver and its C++ internals cannot clash with the host process's symbols.
set -euo pipefail
so="${RAILYARD_BUILD_DIR:?}/plugin/spank_railyard.so"
[[ -f $so ]] || {
  echo "SKIP: $so not built"
  exit 77
}
exported=$(nm -D --defined-only "$so" | awk '{print $3}' | sort | paste -sd' ')
expected="plugin_name plugin_type plugin_version slurm_spank_init slurm_spank_task_init slurm_spank_user_init spank_plugin_version"
[[ $exported == "$expected" ]] || {
  echo "FAIL: exported symbols: $exported; expected: $expected" >&2
  exit 1
}
if ldd "$so" | grep -Eq 'libnvidia|libcuda|libslurm'; then
  echo "FAIL: links NVIDIA or Slurm libraries: $(ldd "$so")" >&2
  exit 1
fi
echo "plugin_exports: ok ($exported)"
