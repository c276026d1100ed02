#!/bin/bash
# The SPANK plugin's cost per job step: `srun -n 8 true` on the local cluster with no plugin
# in plugstack.conf, and with spank_railyard and a cached topology XML (the DGX-like node of
# the Slurm tests), with and without the step's 4 GPUs. Runs are interleaved so drift hits
# every variant alike; prints the median wall time of each and the plugin's added cost.
#
# On a busy machine the srun times vary by more than the plugin costs, so the script also times
# the plugin's per-step work alone: railyard-topo plan runs the same code (hwloc with the
# plugin's HWLOC_PLUGINS_BLACKLIST, the cached XML, the planner) as a whole process.
#
#   bench/plugin_overhead.sh [RUNS]      (default 20; needs the local cluster, started with
#                                         --plugin, RAILYARD_CLUSTER_DIR, and for the second
#                                         part RAILYARD_BUILD_DIR with railyard-topo built)
set -euo pipefail
runs=${1:-20}
[[ $runs =~ ^[0-9]+$ && $runs -ge 3 ]] || {
  echo "plugin_overhead: RUNS must be a number >= 3" >&2
  exit 2
}
: "${RAILYARD_CLUSTER_DIR:?set RAILYARD_CLUSTER_DIR to the local cluster state dir}"
here=$(cd "$(dirname "$0")/.." && pwd)
RAILYARD_SOURCE_DIR=$here
RAILYARD_TEST_TMP=${RAILYARD_TEST_TMP:-$(mktemp -d)}
# shellcheck source=../tests/slurm/lib/plugin_test_lib.bash
source "$here/tests/slurm/lib/plugin_test_lib.bash"
plugin_test_setup plugin_overhead
xml="$scratch/dgx-like.xml"
write_dgx_like_xml "$xml"
plugin_line=$(grep -E '^(required|optional) ' "$scratch/plugstack.conf.orig" | awk '{print $1, $2}')

# All steps run inside one allocation, so no run waits for the previous job to be cleaned
# up; slurmstepd reads plugstack.conf at each step, so the variants can alternate. Binding is
# off (--cpu-bind=none): the node claims more cpus than the machine has (local-cluster).
cat >"$scratch/steps.sh" <<'STEPS'
#!/bin/bash
# Inside the allocation: one line "VARIANT MICROSECONDS" per step.
set -euo pipefail
us_of() {
  local t0 t1
  t0=$(date +%s%N)
  "$@" >/dev/null
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000))
}
srun -n 8 --cpu-bind=none --gres=none true # warm up
for ((i = 0; i < RUNS; i++)); do
  for v in none:cpu plugin:cpu none:gpu plugin:gpu; do
    if [[ ${v%%:*} == plugin ]]; then
      printf '%s topology=%s\n' "$PLUGIN_LINE" "$XML" >"$PLUGSTACK"
    else
      printf '# no plugin\n' >"$PLUGSTACK"
    fi
    gres=none
    [[ ${v##*:} == gpu ]] && gres=gpu:4
    sleep 0.3 # let the previous step's cleanup finish outside the timed part
    echo "$v $(us_of srun -n 8 --cpu-bind=none --gres=$gres true)"
  done
done
STEPS
RUNS=$runs PLUGIN_LINE=$plugin_line XML=$xml PLUGSTACK=$plugstack \
  salloc -Q -n 8 --gres=gpu:4 bash "$scratch/steps.sh" >"$scratch/samples"
variants=(none:cpu plugin:cpu none:gpu plugin:gpu)

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
minimum() { sort -n | head -1; }
echo "plugin_overhead: $runs runs each of 'srun -n 8 --cpu-bind=none --gres=none|gpu:4 true'"
printf '  %-12s %10s %10s\n' variant median_ms min_ms
declare -A med min
for v in "${variants[@]}"; do
  awk -v v="$v" '$1 == v { print $2 }' "$scratch/samples" >"$scratch/$v.us"
  med[$v]=$(median <"$scratch/$v.us")
  min[$v]=$(minimum <"$scratch/$v.us")
  awk -v v="$v" -v m="${med[$v]}" -v n="${min[$v]}" 'BEGIN { printf "  %-12s %10.1f %10.1f\n", v, m / 1000, n / 1000 }'
done
added() { # statistic-array name: prints the plugin's added ms without and with GPUs
  local -n s=$1
  awk -v a="${s[none:cpu]}" -v b="${s[plugin:cpu]}" -v c="${s[none:gpu]}" -v d="${s[plugin:gpu]}" \
    'BEGIN { printf "%.1f ms without GPUs, %.1f ms with 4 GPUs", (b - a) / 1000, (d - c) / 1000 }'
}
echo "  added by the plugin (median): $(added med)"
echo "  added by the plugin (min):    $(added min)"

topo=${RAILYARD_BUILD_DIR:-$here/build}/plugin/railyard-topo
if [[ -x $topo ]]; then
  for ((i = 0; i < runs; i++)); do
    t0=$(date +%s%N)
    HWLOC_PLUGINS_BLACKLIST=hwloc_gl,hwloc_opencl,hwloc_xml_libxml \
      "$topo" plan --ntasks 8 --gpus 0,1,2,3 --topology "$xml" >/dev/null
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 1000))
  done >"$scratch/topo.us"
  printf '  railyard-topo plan (8 tasks, XML, whole process): median %.1f ms, min %.1f ms\n' \
    "$(awk '{print $1 / 1000}' <<<"$(median <"$scratch/topo.us")")" \
    "$(awk '{print $1 / 1000}' <<<"$(minimum <"$scratch/topo.us")")"
fi
