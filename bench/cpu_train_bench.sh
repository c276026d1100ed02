#!/bin/bash
# End-to-end CPU training throughput of railyard-train (data loading, the loop, logging
# included): the model of the issue (4 layers, dim 256, 4 heads, seq 256, byte-level text) on
# 1 rank and on 2 ranks (mpirun, one core each), the same per-rank batch. Prints one markdown
# table row per run: median step time and global tokens/s over the steps after the first, and
# the CPU seconds the ranks used per step (what an idle machine would give in wall time).
#
#   bench/cpu_train_bench.sh [BUILD_DIR] [STEPS]      (defaults: build, 12)
set -euo pipefail
build=${1:-build}
steps=${2:-12}
tools=$build/runtime/tools
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

files=()
for f in /usr/share/common-licenses/*; do [[ -f $f ]] && files+=("$f"); done
"$tools/railyard-data" text "${files[@]}" -o "$tmp/text.h5" >/dev/null
args=(--data "$tmp/text.h5" --device cpu --layers 4 --dim 256 --heads 4 --seq 256 --batch 4
      --steps "$steps" --warmup 2 --lr 1e-3 --log-every 0)

echo "commit $(git -C "$(dirname "$0")" rev-parse --short HEAD), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| ranks | batch per rank | ms/step (median) | tokens/s global (median) | CPU s per step (all ranks) | final loss |"
echo "|---|---|---|---|---|---|"
for ranks in 1 2; do
  launch=()
  [[ $ranks -gt 1 ]] && launch=(mpirun -n "$ranks" --oversubscribe)
  python3 - "$tmp/r$ranks.jsonl" "$ranks" "${launch[@]}" "$tools/railyard-train" "${args[@]}" \
    --log-json "$tmp/r$ranks.jsonl" <<'PY'
import json, resource, statistics, subprocess, sys
log, ranks, cmd = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
use = resource.getrusage(resource.RUSAGE_CHILDREN)
steps = [r for r in map(json.loads, open(log)) if r["type"] == "step"]
timed = steps[1:] or steps
ms = statistics.median(r["step_ms"] for r in timed)
tps = statistics.median(r["tokens_per_s"] for r in timed)
cpu = (use.ru_utime + use.ru_stime) / len(steps)
print(f"| {ranks} | 4 | {ms:.0f} | {tps:,.0f} | {cpu:.2f} | {steps[-1]['loss']:.3f} |")
PY
done
