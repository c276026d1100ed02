#!/bin/bash
# The GPU benchmark, one command on the GPU machine (see docs/gpu.md):
#   bash bench/gpu_bench.sh [stage...]  stages: env build check bench variants pytorch profile hf
# (default: env build check bench pytorch). Builds railyard with CUDA, runs the GPU correctness
# checks (tests/gpu), then times railyard-train and the PyTorch reference (bench/pytorch_gpt.py,
# eager and torch.compile) on the same random-token file: GPT-2 124M, micro-batch 16, seq 1024,
# bf16 with fp32 master weights. Logs and JSON lines go to $OUT (default /tmp/railyard-bench);
# the table printed last is what bench/NOTES.md records.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/railyard-bench}
mkdir -p "$OUT"
STEPS=${STEPS:-40}
GPUS=${GPUS:-$(nvidia-smi -L 2>/dev/null | wc -l)}
BUILD=${BUILD:-build-gpu}
stages=${*:-env build check bench pytorch}
# NVLink multicast stays off on the shared hosts (KINDS.md).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
log() { echo "== $(date -u +%H:%M:%S) $*"; }
has() { [[ " $stages " == *" $1 "* ]]; }

# Libraries the GPU machine lacks come from .gpu-deps (scripts/gpu-deps-env).
# shellcheck source=../scripts/gpu-deps-env
source scripts/gpu-deps-env || exit 1
D=$GPU_DEPS_PREFIX

if has env; then
  log env
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv
  nvcc --version | tail -1
  python3 -c 'import torch; print("torch", torch.__version__, "gpus", torch.cuda.device_count())'
  ls /usr/include | grep -E "nlohmann|xxhash|hwloc|cblas|gtest" | tr '\n' ' '; echo
  ls /opt/gpu-deps/pc 2>/dev/null | tr '\n' ' '; echo
fi

if has build; then
  log build
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$D \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DRAILYARD_PLUGIN=OFF -DRAILYARD_CUDA=ON > "$OUT/cmake.log" 2>&1 \
    || { tail -30 "$OUT/cmake.log"; exit 1; }
  ninja -C "$BUILD" -j16 railyard-train railyard-data gpu_kernels_check gpu_model_check \
    > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" "$OUT/build.log" | head -30; exit 1; }
  log build done
fi

if has check; then
  log check: kernels
  timeout 300 "$BUILD/tests/gpu/gpu_kernels_check" 2>&1 | tee "$OUT/gpu_kernels_check.log"
  log check: model
  timeout 300 "$BUILD/tests/gpu/gpu_model_check" 2>&1 | tee "$OUT/gpu_model_check.log"
fi

if has hf; then
  # railyard <-> transformers GPT-2 directories (bench/hf_check.py): loads, logits, losses.
  log hf
  ninja -C "$BUILD" -j16 railyard-train railyard-ckpt > "$OUT/build_hf.log" 2>&1 \
    || { grep -E "error|FAILED" "$OUT/build_hf.log" | head -30; exit 1; }
  python3 bench/hf_check.py --build "$BUILD" --out "$OUT" 2>&1 | tee "$OUT/hf_check.log"
fi

DATA=/tmp/railyard-bench-data.h5
GPT="--layers 12 --heads 12 --dim 768 --seq 1024 --vocab 50257 --batch 16"
if has bench || has variants || has pytorch || has profile; then
  [ -f $DATA ] || "$BUILD/runtime/tools/railyard-data" synthetic --tokens 20000000 --vocab 50257 \
    --seed 7 -o $DATA > /dev/null
fi

if has bench; then
  # SM clock and power once a second while railyard trains: a GEMM-heavy step can run below
  # the boost clock, which per-kernel profiles (ncu replays kernels one by one) do not show.
  nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader,nounits -lms 1000 \
    > "$OUT/clocks.csv" 2>/dev/null &
  smi=$!
  for prec in ${PRECISIONS:-bf16}; do
    log "bench: railyard-train cuda $prec x1 ($STEPS steps)"
    rm -rf /tmp/ry-ckpt "$OUT/railyard_${prec}_x1.jsonl"
    timeout 300 "$BUILD/runtime/tools/railyard-train" --data $DATA $GPT --steps "$STEPS" \
      --device cuda --precision "$prec" --log-every 10 --ckpt-dir /tmp/ry-ckpt --ckpt-every 20 \
      --log-json "$OUT/railyard_${prec}_x1.jsonl" 2>&1 | tail -8
  done
  if [ "$GPUS" -ge 2 ]; then
    log "bench: railyard-train cuda bf16 x$GPUS"
    rm -rf /tmp/ry-ckpt
    timeout 300 mpirun -np "$GPUS" --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH \
      "$BUILD/runtime/tools/railyard-train" --data $DATA $GPT --steps "$STEPS" --device cuda \
      --precision bf16 --log-every 10 --log-json "$OUT/railyard_bf16_x$GPUS.jsonl" 2>&1 | tail -8
  fi
  kill $smi 2>/dev/null
  sort -n "$OUT/clocks.csv" | awk -F, '{c[NR]=$1; p[NR]=$2} END {if (NR) printf "SM clock MHz min %s median %s max %s; power W at the median clock %s\n", c[1], c[int((NR+1)/2)], c[NR], p[int((NR+1)/2)]}'
fi

if has variants; then
  # Other settings of the same model, no checkpoints: what --recompute and fp32 cost, and (with
  # --grad-accum 4, four micro-steps per optimizer step) how much of a step is per-step overhead
  # outside forward and backward.
  for v in "bf16-recompute:--precision bf16 --recompute" "bf16-accum4:--precision bf16 --grad-accum 4" \
           "fp32:--precision fp32"; do
    name=${v%%:*}
    log "variant: railyard-train cuda $name x1"
    rm -f "$OUT/railyard_${name}_x1.jsonl"
    timeout 200 "$BUILD/runtime/tools/railyard-train" --data $DATA $GPT --steps 30 --device cuda \
      ${v#*:} --log-every 0 --log-json "$OUT/railyard_${name}_x1.jsonl" 2>&1 | tail -3
  done
fi

if has pytorch; then
  for mode in eager compile; do
    flag=""; [ $mode = compile ] && flag="--compile"
    log "pytorch $mode x1"
    timeout 400 python3 bench/pytorch_gpt.py --data $DATA --steps "$STEPS" $flag 2>&1 \
      | grep -v Warning | tee -a "$OUT/pytorch.jsonl.log" | tail -3
    if [ "$GPUS" -ge 2 ]; then
      log "pytorch $mode DDP x$GPUS"
      timeout 400 torchrun --standalone --nproc_per_node "$GPUS" bench/pytorch_gpt.py --data $DATA \
        --steps "$STEPS" $flag 2>&1 | grep -v Warning | tee -a "$OUT/pytorch.jsonl.log" | tail -3
    fi
  done
fi

if has profile; then
  # Per-kernel device time of about one training step (420 launches after the first three steps;  ncu replays each kernel once for its duration).
  log profile
  timeout 400 ncu --clock-control none --metrics gpu__time_duration.sum --launch-skip 1300 \
    --launch-count 420 --csv --log-file "$OUT/ncu.csv" "$BUILD/runtime/tools/railyard-train" \
    --data $DATA $GPT --steps 6 --device cuda --precision bf16 --log-every 0 > /dev/null 2>&1
  python3 bench/gpu_profile_table.py "$OUT/ncu.csv" | tee "$OUT/profile.txt"
fi

log summary
python3 bench/gpu_bench_table.py "$OUT" | tee "$OUT/table.md"
