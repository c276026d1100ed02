#!/bin/bash
# Binding plans of real nodes against golden files: for each case of golden_plans/cases.txt,
# railyard-topo plan --json on the node's hwloc XML must print exactly golden_plans/NAME.json.
# A planner change that moves a task shows up here as a diff to review; after reviewing, run
# with RAILYARD_UPDATE_GOLDEN=1 to rewrite the files. Skipped (77) when ../shared/topologies,
# which holds the XMLs, is absent.
set -euo pipefail

topo=${RAILYARD_BUILD_DIR:?}/plugin/railyard-topo
dir=$(cd "$(dirname "$0")" && pwd)/golden_plans
xmls=${RAILYARD_SOURCE_DIR:?}/../shared/topologies
[[ -x $topo ]] || { echo "skip: $topo not built"; exit 77; }
[[ -d $xmls ]] || { echo "skip: $xmls absent"; exit 77; }

compared=0 failed=0
while read -r name xml args; do
  [[ -z $name || $name == \#* ]] && continue
  [[ -f $xmls/$xml ]] || { echo "skip $name: $xmls/$xml absent"; continue; }
  # shellcheck disable=SC2086 # ARGS are words
  actual=$("$topo" plan --json --node golden --topology "$xmls/$xml" $args)
  if [[ ${RAILYARD_UPDATE_GOLDEN:-0} == 1 ]]; then
    printf '%s\n' "$actual" >"$dir/$name.json"
    echo "wrote $name.json"
  elif [[ ! -f $dir/$name.json ]]; then
    echo "FAIL $name: no golden file $dir/$name.json (review the plan, then RAILYARD_UPDATE_GOLDEN=1)"
    failed=$((failed + 1))
  elif ! diff -u --label "$name.json" --label "railyard-topo plan" "$dir/$name.json" \
    <(printf '%s\n' "$actual"); then
    echo "FAIL $name: the plan differs from $name.json (above)"
    failed=$((failed + 1))
  fi
  compared=$((compared + 1))
done <"$dir/cases.txt"
((compared > 0)) || { echo "skip: no case's XML is present"; exit 77; }
((failed == 0)) || exit 1
echo "ok: $compared plans match their golden files"
