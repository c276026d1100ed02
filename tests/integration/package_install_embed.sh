#!/bin/bash
# The .deb made by cpack holds what the build made, where Debian looks for it: the tools in
# /usr/bin, the SPANK plugin in Slurm's plugin directory, headers, the static runtime, a CMake
# package config, and the examples, Slurm snippets and guides in /usr/share/doc/railyard. Extracted into a scratch root, its tools run, and a program built
# with find_package(railyard) against that root links the runtime and uses it (HDF5 included).
set -euo pipefail

build=${RAILYARD_BUILD_DIR:?}
tmp=${RAILYARD_TEST_TMP:-/tmp/package_install_embed.tmp}
for tool in cpack dpkg-deb cmake; do
  command -v $tool >/dev/null || { echo "skip: $tool not installed"; exit 77; }
done
rm -rf "$tmp"
mkdir -p "$tmp"
fail() { echo "FAIL: $*" >&2; exit 1; }

cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log"; fail "cpack -G DEB failed"; }
debs=("$tmp"/pkg/railyard_*.deb)
[[ ${#debs[@]} -eq 1 && -f ${debs[0]} ]] || fail "expected one railyard_*.deb in $tmp/pkg, got: ${debs[*]}"
deb=${debs[0]}
echo "package: $(basename "$deb") ($(du -h "$deb" | cut -f1))"

info=$(dpkg-deb --info "$deb")
grep -q '^ Package: railyard$' <<<"$info" || fail "control has no 'Package: railyard': $info"
depends=$(sed -n 's/^ Depends: //p' <<<"$info")
echo "Depends: $depends"
# dpkg-shlibdeps found the shared libraries the tools and the plugin link.
for lib in libc6 libstdc++6 libhdf5 libopenmpi libboost-program-options; do
  grep -q "$lib" <<<"$depends" || fail "Depends lacks $lib: $depends"
done

root=$tmp/root
dpkg-deb -x "$deb" "$root"
plugin_dir=$(sed -n 's/^RAILYARD_SLURM_PLUGIN_DIR:[A-Z]*=//p' "$build/CMakeCache.txt")
expect=(usr/include/railyard/metrics_observer.hpp usr/include/railyard/train_observer.hpp
        usr/lib/librailyard_runtime.a usr/lib/cmake/railyard/railyardConfig.cmake
        usr/lib/cmake/railyard/railyardConfigVersion.cmake
        usr/share/doc/railyard/examples/preemptible.sbatch
        usr/share/doc/railyard/slurm/slurm-preemption.conf usr/share/doc/railyard/guide.md)
# Every tool the build made is packaged, and the plugin where Debian's Slurm loads plugins.
for exe in "$build"/runtime/tools/railyard-* "$build"/plugin/railyard-*; do
  [[ -x $exe && ! -d $exe ]] && expect+=("usr/bin/$(basename "$exe")")
done
if [[ -f $build/plugin/spank_railyard.so ]]; then
  [[ $plugin_dir == lib/x86_64-linux-gnu/slurm-wlm ]] ||
    fail "RAILYARD_SLURM_PLUGIN_DIR is '$plugin_dir', not Debian's lib/x86_64-linux-gnu/slurm-wlm"
  expect+=("usr/$plugin_dir/spank_railyard.so")
fi
for f in "${expect[@]}"; do
  [[ -e $root/$f ]] || fail "$f is not in the package; it holds: $(cd "$root" && find . -type f | sort | tr '\n' ' ')"
done
echo "files: ${#expect[@]} expected paths present"

"$root/usr/bin/railyard-report" --help | grep -q "railyard-report RUN_LOG.jsonl" ||
  fail "the packaged railyard-report does not run"

# A program embedding the runtime, built only from the extracted package.
mkdir -p "$tmp/app"
cat >"$tmp/app/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.24)
project(embed_railyard CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(railyard 0.1 REQUIRED)
add_executable(embed main.cpp)
target_link_libraries(embed PRIVATE railyard::railyard_runtime)
CMAKE
cat >"$tmp/app/main.cpp" <<'CPP'
#include <railyard/prometheus_textfile.hpp>
#include <railyard/token_dataset.hpp>

#include <cstdint>
#include <iostream>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::vector<uint32_t> tokens = {1, 2, 3, 4, 5, 6, 7};
  railyard::write_token_file(argv[1], tokens, 50257);  // HDF5, through the runtime
  railyard::TokenDataset data({argv[1]});
  railyard::PrometheusTextfile metrics(railyard::MetricLabels{{"app", "embed"}});
  metrics.set("embed_tokens", railyard::MetricType::kGauge, "tokens read back",
              static_cast<double>(data.size()));
  std::cout << metrics.render();
  return data.size() == tokens.size() ? 0 : 1;
}
CPP
cmake -S "$tmp/app" -B "$tmp/app/build" -G Ninja -DCMAKE_PREFIX_PATH="$root/usr" \
  -DCMAKE_BUILD_TYPE=Release >"$tmp/app.log" 2>&1 || { cat "$tmp/app.log"; fail "configuring the embedding program failed"; }
grep -q "railyard_DIR:PATH=$root/usr/lib/cmake/railyard" "$tmp/app/build/CMakeCache.txt" ||
  fail "find_package(railyard) did not use the extracted package: $(grep railyard_DIR "$tmp/app/build/CMakeCache.txt")"
cmake --build "$tmp/app/build" >>"$tmp/app.log" 2>&1 || { cat "$tmp/app.log"; fail "building the embedding program failed"; }
out=$("$tmp/app/build/embed" "$tmp/tokens.h5") || fail "the embedding program failed: $out"
grep -qx 'embed_tokens{app="embed"} 7' <<<"$out" || fail "unexpected output: $out"
echo "find_package(railyard): the embedding program built and read 7 tokens back"
