#!/bin/bash
# The GPU benchmark, one command on the GPU machine (see docs/gpu.md):
#   bash bench/gpu_bench.sh [stage...]  stages: env build check bench variants pytorch profile ckpt hf
#                                        gemm sdpa gemmsurvey adamw timeline lnbench cebench
#                                        headbench cutlass sdpatorch attnbwd
# (default: env build check bench pytorch profile, about 7 minutes on one H200). Builds
# railyard with CUDA (and cuDNN attention where the cudnn-frontend headers are: a wheel in .whl/
# is unpacked to /tmp/site), runs the GPU correctness checks (tests/gpu), then times
# railyard-train (bench/gpu_repro.py: the timed run, a second run with the same seed and a run
# stopped by SIGTERM and resumed, compared bit for bit) and the PyTorch reference
# (bench/pytorch_gpt.py, eager and torch.compile) on the same random-token file: GPT-2 124M,
# micro-batch 16, seq 1024, bf16 with fp32 master weights; then a per-phase profile of whole
# steps (ncu). Logs go to $BENCH_DIR (default /tmp/railyard-bench), the files worth keeping
# also to $OUT where set; the table printed last is what bench/NOTES.md records, and
# gpu-1x.json (also written to bench/results/) the result file.
set -u -o pipefail
cd "$(dirname "$0")/.."
# Everything is written to $W; where $OUT is set (the device tool's return folder), the few
# files worth keeping are copied there at the end, whatever the outcome.
W=${BENCH_DIR:-/tmp/railyard-bench}
mkdir -p "$W"
keep() {
  [ -n "${OUT:-}" ] && [ "$OUT" != "$W" ] || return 0
  mkdir -p "$OUT"
  for f in gpu-1x.json checks.log repro.json railyard_bf16_x1.jsonl pytorch.jsonl.log profile.txt \
    hf_check.log ckpt-gpu.json ckpt-gpu.log gemm-epilogue.json gemm.log gemm-kernels.txt \
    gemm-once.json sdpa-plans.json sdpa-plans.log sdpa-plans-torch-cudnn.json \
    sdpa-plans-torch-cudnn.log gemm-survey.json gemm-survey.log adamw.json adamw.log \
    step-timeline.json step-timeline.txt layernorm-bench.json layernorm-bench.log \
    cross-entropy-bench.json cross-entropy-bench.log cutlass-gelu.json cutlass.log \
    head-weight-grad.json head-weight-grad.log sdpa-torch-backends.json \
    sdpa-torch-backends.log attention-backward.json attention-backward.log; do
    [ -f "$W/$f" ] && cp "$W/$f" "$OUT/"
  done
  return 0
}
trap keep EXIT
STEPS=${STEPS:-60}
GPUS=${GPUS:-$(nvidia-smi -L 2>/dev/null | wc -l)}
BUILD=${BUILD:-build-gpu}
stages=${*:-env build check bench pytorch profile}
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

# cudnn-frontend's headers: the nvidia-cudnn-frontend wheel carried in .whl/, else pip's.
FE_INCLUDE=""
if ls .whl/nvidia_cudnn_frontend-*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/nvidia_cudnn_frontend-*.whl && FE_INCLUDE=/tmp/site/include
fi
# CUTLASS's headers (the engine's bf16 fc forward on sm_90, and the cutlass stage): the
# nvidia-cutlass wheel carried in .whl/ (its Python dependencies are not needed: --no-deps), else
# pip's; without either the engine uses cuBLASLt's GELU epilogue and the bench is not built.
CUTLASS_INCLUDE=""
if ls .whl/nvidia_cutlass-*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/nvidia_cutlass-*.whl \
    && CUTLASS_INCLUDE=/tmp/site/cutlass_library/source/include
fi

if has build; then
  log build
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$D \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DRAILYARD_PLUGIN=OFF -DRAILYARD_CUDA=ON \
    -DRAILYARD_CUDNN=${RAILYARD_CUDNN:-AUTO} -DRAILYARD_CUDNN_FRONTEND_INCLUDE="$FE_INCLUDE" \
    -DRAILYARD_CUTLASS_INCLUDE="$CUTLASS_INCLUDE" \
    > "$W/cmake.log" 2>&1 || { tail -30 "$W/cmake.log"; exit 1; }
  grep -E "cuDNN attention|step timeline|CUTLASS|attention backward" "$W/cmake.log"
  # The plan bench (one long frontend unit) compiles beside the rest when the sdpa stage follows.
  extra=""
  has sdpa && grep -q "cuDNN attention: ON" "$W/cmake.log" && extra=cudnn_sdpa_plans
  has gemmsurvey && extra="$extra gemm_step_survey"
  has attnbwd && grep -q "attention backward bench: ON" "$W/cmake.log" \
    && extra="$extra attention_backward_bench"
  # CUTLASS's kernels are the longest units: they compile beside the rest.
  has cutlass && grep -q "CUTLASS GELU bench: ON" "$W/cmake.log" && extra="$extra cutlass_gelu_bench"
  grep -q "CUTLASS fc forward: ON" "$W/cmake.log" \
    && extra="$extra gpu_cutlass_check gpu_cutlass_residual_check gpu_cutlass_head_check"
  grep -q "cuDNN attention: ON" "$W/cmake.log" && extra="$extra gpu_attention_stagger_check"
  ninja -C "$BUILD" -j16 railyard-train railyard-data gpu_kernels_check gpu_model_check \
    gpu_graph_memsets_check $extra \
    > "$W/build.log" 2>&1 || { grep -E "error|FAILED" "$W/build.log" | head -30; exit 1; }
  log build done
fi

if has check; then
  log check: kernels
  timeout 300 "$BUILD/tests/gpu/gpu_kernels_check" 2>&1 | tee "$W/checks.log"
  log check: small memsets of a graph as kernels, workspace-slot memsets hoisted
  timeout 120 "$BUILD/tests/gpu/gpu_graph_memsets_check" 2>&1 | tee -a "$W/checks.log"
  if [ -x "$BUILD/tests/gpu/gpu_attention_stagger_check" ]; then
    log check: cuDNN attention at staggered workspaces, its memsets hoisted
    timeout 300 "$BUILD/tests/gpu/gpu_attention_stagger_check" 2>&1 | tee -a "$W/checks.log"
  fi
  if [ -x "$BUILD/tests/gpu/gpu_cutlass_check" ]; then
    log check: the CUTLASS fc forward
    timeout 300 "$BUILD/tests/gpu/gpu_cutlass_check" 2>&1 | tee -a "$W/checks.log"
  fi
  if [ -x "$BUILD/tests/gpu/gpu_cutlass_residual_check" ]; then
    log check: the CUTLASS residual forward
    timeout 300 "$BUILD/tests/gpu/gpu_cutlass_residual_check" 2>&1 | tee -a "$W/checks.log"
  fi
  if [ -x "$BUILD/tests/gpu/gpu_cutlass_head_check" ]; then
    log check: the CUTLASS LM-head weight gradient
    timeout 300 "$BUILD/tests/gpu/gpu_cutlass_head_check" 2>&1 | tee -a "$W/checks.log"
  fi
  log check: model
  timeout 300 "$BUILD/tests/gpu/gpu_model_check" 2>&1 | tee -a "$W/checks.log"
  log check: railyard-train twice and stopped + resumed, small model
  RAILYARD_SOURCE_DIR=$PWD RAILYARD_BUILD_DIR=$BUILD timeout 300 python3 tests/gpu/train_repro.py \
    2>&1 | tee -a "$W/checks.log"
fi

if has hf; then
  # railyard <-> transformers GPT-2 directories (bench/hf_check.py): loads, logits, losses.
  log hf
  ninja -C "$BUILD" -j16 railyard-train railyard-ckpt > "$W/build_hf.log" 2>&1 \
    || { grep -E "error|FAILED" "$W/build_hf.log" | head -30; exit 1; }
  python3 bench/hf_check.py --build "$BUILD" --out "$W" 2>&1 | tee "$W/hf_check.log"
fi

DATA=/tmp/railyard-bench-data.h5
GPT="--layers 12 --heads 12 --dim 768 --seq 1024 --vocab 50257 --batch 16"
if has bench || has variants || has pytorch || has profile || has timeline; then
  [ -f $DATA ] || "$BUILD/runtime/tools/railyard-data" synthetic --tokens 20000000 --vocab 50257 \
    --seed 7 -o $DATA > /dev/null
fi

if has bench; then
  # SM clock and power once a second while railyard trains: a GEMM-heavy step can run below
  # the boost clock, which per-kernel profiles (ncu replays kernels one by one) do not show.
  nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader,nounits -lms 1000 \
    > "$W/clocks.csv" 2>/dev/null &
  smi=$!
  log "bench: railyard-train cuda bf16 x1 ($STEPS steps), twice, then stopped and resumed"
  timeout 400 python3 bench/gpu_repro.py --train "$BUILD/runtime/tools/railyard-train" \
    --out "$W" --steps "$STEPS" -- --data $DATA $GPT --device cuda --precision bf16 \
    --log-every 20 > "$W/repro.json" 2> "$W/repro.log"
  tail -4 "$W/repro.log"
  cat "$W/repro.json"
  if [ "$GPUS" -ge 2 ]; then
    log "bench: railyard-train cuda bf16 x$GPUS"
    rm -rf /tmp/ry-ckpt
    timeout 300 mpirun -np "$GPUS" --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH \
      "$BUILD/runtime/tools/railyard-train" --data $DATA $GPT --steps "$STEPS" --device cuda \
      --precision bf16 --log-every 10 --log-json "$W/railyard_bf16_x$GPUS.jsonl" 2>&1 | tail -8
  fi
  kill $smi 2>/dev/null
  sort -n "$W/clocks.csv" | awk -F, '{c[NR]=$1; p[NR]=$2} END {if (NR) printf "SM clock MHz min %s median %s max %s; power W at the median clock %s\n", c[1], c[int((NR+1)/2)], c[NR], p[int((NR+1)/2)]}'
fi

if has variants; then
  # Other settings of the same model, no checkpoints: what --recompute and fp32 cost, (with
  # --grad-accum 4, four micro-steps per optimizer step) how much of a step is per-step overhead
  # outside forward and backward, and what the CUDA graphs save (--cuda-graphs off).
  for v in "bf16-recompute:--precision bf16 --recompute" "bf16-accum4:--precision bf16 --grad-accum 4" \
           "bf16-nographs:--precision bf16 --cuda-graphs off" "fp32:--precision fp32"; do
    name=${v%%:*}
    # VARIANTS="a b" runs only those (one device call has a time limit).
    [ -n "${VARIANTS:-}" ] && [[ " $VARIANTS " != *" $name "* ]] && continue
    log "variant: railyard-train cuda $name x1"
    rm -f "$W/railyard_${name}_x1.jsonl"
    timeout 200 "$BUILD/runtime/tools/railyard-train" --data $DATA $GPT --steps 30 --device cuda \
      ${v#*:} --log-every 0 --log-json "$W/railyard_${name}_x1.jsonl" 2>&1 | tail -3
  done
fi

if has pytorch; then
  for mode in eager compile; do
    flag=""; [ $mode = compile ] && flag="--compile"
    log "pytorch $mode x1"
    timeout 400 python3 bench/pytorch_gpt.py --data $DATA --steps "$STEPS" $flag 2>&1 \
      | grep -v Warning | tee -a "$W/pytorch.jsonl.log" | tail -3
    if [ "$GPUS" -ge 2 ]; then
      log "pytorch $mode DDP x$GPUS"
      timeout 400 torchrun --standalone --nproc_per_node "$GPUS" bench/pytorch_gpt.py --data $DATA \
        --steps "$STEPS" $flag 2>&1 | grep -v Warning | tee -a "$W/pytorch.jsonl.log" | tail -3
    fi
  done
fi

if has profile; then
  # Device time of each kernel over a window of a few whole steps (ncu replays each kernel once
  # for its duration); gpu_profile_table.py cuts one step from one AdamW update to the next and
  # sets the kernel time against the median step wall time: the rest is the gap.
  log profile
  timeout 300 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --launch-skip 1500 \
    --launch-count 850 --csv --log-file "$W/ncu.csv" "$BUILD/runtime/tools/railyard-train" \
    --data $DATA $GPT --steps 14 --device cuda --precision bf16 --log-every 0 > /dev/null 2>&1
  step_ms=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['systems']['railyard']['median_step_ms'])" \
    <(python3 bench/gpu_results.py "$W" x x) 2>/dev/null || echo 0)
  python3 bench/gpu_profile_table.py "$W/ncu.csv" "$step_ms" "$W/profile.json" \
    | tee "$W/profile.txt"
fi

# $W/NAME (a bench's JSON) gets the commit, date and GPU it is for, as gpu-1x.json says them, and
# is copied to bench/results/NAME.
stamp_result() {
  python3 - "$W/$1" "${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}" \
    "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" <<'PY' \
    && mkdir -p bench/results && cp "$W/$1" "bench/results/$1"
import datetime, json, sys
path, commit, gpu = sys.argv[1:4]
figures = json.load(open(path))
out = {"commit": commit, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
       "gpu": gpu}
out.update(figures)
json.dump(out, open(path, "w"), indent=2)
PY
}

# Checkpoint costs on this GPU and disk (bench/checkpoint_bench.cpp): stall, step slowdown during
# a background write, sync save vs dd oflag=direct, load vs read and the load's phases; JSON to
# $W/ckpt-gpu.json.
stage_ckpt() {
  log "ckpt: checkpoint_bench cuda"
  ninja -C "$BUILD" -j16 checkpoint_bench railyard-ckpt railyard-train railyard-data \
    > "$W/build-ckpt.log" 2>&1 \
    || { grep -E "error|FAILED" "$W/build-ckpt.log" | head -30; return 1; }
  local dir=${CKPT_DIR:-/tmp/ry-ckpt-bench}
  rm -rf "$dir"
  timeout 400 "$BUILD/bench/checkpoint_bench" --dir "$dir" --device cuda --precision bf16 \
    --batch 16 --repeat 3 --json "$W/ckpt-gpu.json" 2>&1 | tee "$W/ckpt-gpu.log"
  rm -rf "$dir"
  # The load path alone (no engine), 5 loads beside a warm dd read, with its phases: added to
  # ckpt-gpu.json as loadonly_* fields.
  log "ckpt: checkpoint_bench --mode load (GPT-2 124M pattern checkpoint, 5 loads)"
  rm -f "$W/ckpt-load.json"
  "$BUILD/bench/checkpoint_bench" --dir "$dir-load" --mode pattern --steps 1 > /dev/null \
    && timeout 200 "$BUILD/bench/checkpoint_bench" --dir "$dir-load" --mode load --repeat 5 \
      --json "$W/ckpt-load.json" 2>&1 | tee -a "$W/ckpt-gpu.log"
  rm -rf "$dir-load"
  [ -f "$W/ckpt-load.json" ] && [ -f "$W/ckpt-gpu.json" ] && python3 - "$W/ckpt-gpu.json" \
    "$W/ckpt-load.json" <<'PY'
import json, sys
out = json.load(open(sys.argv[1]))
out.update({"loadonly_" + k: v for k, v in json.load(open(sys.argv[2])).items()})
json.dump(out, open(sys.argv[1], "w"))
PY
  stamp_result ckpt-gpu.json
  log "ckpt: kill -9 during a background write of a GPU run, then resume"
  timeout 400 bash tests/gpu/ckpt_kill9_gpu.sh "$BUILD" "$dir-kill9" 2>&1 | tail -4 | tee -a "$W/ckpt-gpu.log"
  if [ "$GPUS" -ge 2 ]; then
    log "ckpt: --zero 1 checkpoints resumed on 2 ranks (bit for bit), on 1, and 1 -> 2"
    timeout 400 bash tests/gpu/ckpt_zero1_world_gpu.sh "$BUILD" "$dir-zero1" 2>&1 | tail -4 \
      | tee -a "$W/ckpt-gpu.log"
  fi
}
if has ckpt; then stage_ckpt; fi

# The MLP's GELU products at the model's shapes, every way cuBLASLt and our kernels compute them
# (bench/gemm_epilogue_bench.cpp, bench/NOTES.md issue 12): the timed table with same-bits and
# bias-gradient checks ($W/gemm-epilogue.json, also bench/results/), then one run of each variant
# under ncu, cut at its marker kernels: which kernels each variant runs (gemm-kernels.txt).
stage_gemm() {
  log "gemm: gemm_epilogue_bench"
  ninja -C "$BUILD" -j16 gemm_epilogue_bench > "$W/build-gemm.log" 2>&1 \
    || { grep -E "error|FAILED" "$W/build-gemm.log" | head -30; return 1; }
  timeout 300 "$BUILD/bench/gemm_epilogue_bench" --json "$W/gemm-epilogue.json" 2>&1 \
    | tee "$W/gemm.log"
  [ -f "$W/gemm-epilogue.json" ] && stamp_result gemm-epilogue.json
  log "gemm: kernels of each variant (ncu, one run each)"
  rm -f "$W/gemm-once.json" "$W/gemm-ncu.csv"
  timeout 300 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
    --csv --log-file "$W/gemm-ncu.csv" "$BUILD/bench/gemm_epilogue_bench" --once \
    --json "$W/gemm-once.json" > "$W/gemm-ncu.log" 2>&1 || tail -5 "$W/gemm-ncu.log"
  [ -f "$W/gemm-once.json" ] && [ -f "$W/gemm-ncu.csv" ] \
    && python3 bench/gemm_kernels.py "$W/gemm-once.json" "$W/gemm-ncu.csv" \
    | tee "$W/gemm-kernels.txt"
  return 0
}
if has gemm; then stage_gemm; fi

# The MLP's GELU products as CUTLASS sm_90a kernels with the GELU fused (and the backward once
# more with the fc bias gradient fused), beside cuBLASLt's GELU_AUX_BIAS / DGELU (+ bias_grad)
# and the plain products (issue 12, bench/cutlass_gelu_bench.cu): median time, relative
# difference to float64 on sampled rows, same bits on a second launch. The table
# to cutlass.log, JSON to cutlass-gelu.json (also bench/results/). Needs CUTLASS's headers: the
# nvidia-cutlass wheel in .whl/ (docs/gpu.md).
stage_cutlass() {
  log "cutlass: cutlass_gelu_bench (M 16384, N 3072, K 768, bf16; residual forwards N 768)"
  ninja -C "$BUILD" -j16 cutlass_gelu_bench > "$W/build-cutlass.log" 2>&1 || {
    grep -E "error|FAILED" "$W/build-cutlass.log" | head -30
    echo "cutlass: no cutlass_gelu_bench: run the build stage first with the nvidia-cutlass" \
      "wheel in .whl/; cmake.log must say CUTLASS GELU bench: ON"
    return 1
  }
  rm -f "$W/cutlass-gelu.json"
  timeout 300 "$BUILD/bench/cutlass_gelu_bench" --warmup 10 --reps 50 \
    --json "$W/cutlass-gelu.json" 2>&1 | tee "$W/cutlass.log"
  [ -s "$W/cutlass-gelu.json" ] && stamp_result cutlass-gelu.json
  return 0
}
if has cutlass; then stage_cutlass; fi

# Every cuDNN SDPA execution plan of the attention at the benchmark's shape (issue 12,
# bench/cudnn_sdpa_plans.cpp): built or not, workspace, median time, repeatable bits, difference
# from the engine's plan; the table to sdpa-plans.log, JSON to sdpa-plans.json.
stage_sdpa() {
  log "sdpa: cudnn_sdpa_plans (B=16 T=1024 H=12 hd=64, causal bf16)"
  # The target exists only where the build found cuDNN and the frontend ("cuDNN attention: ON").
  ninja -C "$BUILD" -j16 cudnn_sdpa_plans > "$W/build-sdpa.log" 2>&1 || {
    grep -E "error|FAILED" "$W/build-sdpa.log" | head -30
    echo "sdpa: no cudnn_sdpa_plans: run the build stage first (cuDNN attention must be ON)"
    return 1
  }
  # Which libcudnn the run loads, and the one PyTorch carries (a newer one may offer more plans).
  ldd "$BUILD/bench/cudnn_sdpa_plans" | grep -i cudnn
  python3 -c 'import torch; print("torch cuDNN", torch.backends.cudnn.version())' 2>/dev/null
  timeout 300 "$BUILD/bench/cudnn_sdpa_plans" --runs 20 --warmup 3 --bit-runs 3 \
    --json "$W/sdpa-plans.json" 2>&1 | tee "$W/sdpa-plans.log"
  [ -s "$W/sdpa-plans.json" ] && stamp_result sdpa-plans.json
  # PyTorch's libcudnn where its version differs from the system's: the same plans against it
  # (the frontend opens routes by the library's version, ordered dQ from 9.25). The bench's
  # RUNPATH yields to LD_LIBRARY_PATH.
  local lib
  lib=$(python3 - "$W/sdpa-plans.json" <<'PY' 2>/dev/null
import json, os, sys, torch
import nvidia.cudnn
ours = json.load(open(sys.argv[1])).get("cudnn_backend_version")
lib = os.path.join(list(nvidia.cudnn.__path__)[0], "lib")
if torch.backends.cudnn.version() != ours and os.path.exists(os.path.join(lib, "libcudnn.so.9")):
    print(lib)
PY
)
  [ -n "$lib" ] || return 0
  log "sdpa: the same against PyTorch's libcudnn ($lib)"
  LD_LIBRARY_PATH=$lib:${LD_LIBRARY_PATH:-} timeout 200 "$BUILD/bench/cudnn_sdpa_plans" --runs 20 \
    --warmup 3 --bit-runs 3 --json "$W/sdpa-plans-torch-cudnn.json" 2>&1 \
    | tee "$W/sdpa-plans-torch-cudnn.log"
  [ -s "$W/sdpa-plans-torch-cudnn.json" ] && stamp_result sdpa-plans-torch-cudnn.json
}
if has sdpa; then stage_sdpa; fi

# PyTorch's own attention kernels at the same shape (bench/sdpa_torch_backends.py): forward and
# backward time per backend and whether the backward repeats its bits; the bar an own
# deterministic backward must clear. The table to sdpa-torch-backends.log, JSON beside it.
stage_sdpatorch() {
  log "sdpatorch: PyTorch SDPA backends (B=16 T=1024 H=12 hd=64, causal bf16)"
  rm -f "$W/sdpa-torch-backends.json"
  timeout 120 python3 bench/sdpa_torch_backends.py --json "$W/sdpa-torch-backends.json" 2>&1 \
    | tee "$W/sdpa-torch-backends.log"
  [ -s "$W/sdpa-torch-backends.json" ] && stamp_result sdpa-torch-backends.json
  return 0
}
if has sdpatorch; then stage_sdpatorch; fi

# The wgmma attention backward prototype (bench/attention_backward_bench.cpp): against float64
# at a small shape and against cuDNN's backward at the step's, same bits twice, median times
# beside cuDNN's; the table to attention-backward.log, JSON to attention-backward.json.
stage_attnbwd() {
  log "attnbwd: wgmma attention backward vs cuDNN (B=16 T=1024 H=12 hd=64, causal bf16)"
  # The target exists only where the build found cuDNN attention and CUTLASS.
  ninja -C "$BUILD" -j16 attention_backward_bench > "$W/build-attnbwd.log" 2>&1 || {
    grep -E "error|FAILED" "$W/build-attnbwd.log" | head -30
    echo "attnbwd: no attention_backward_bench: run the build stage first (cmake.log must say" \
      "attention backward bench: ON)"
    return 1
  }
  rm -f "$W/attention-backward.json"
  timeout 120 "$BUILD/bench/attention_backward_bench" --reps 20 --warmup 3 \
    --json "$W/attention-backward.json" 2>&1 | tee "$W/attention-backward.log"
  [ -s "$W/attention-backward.json" ] && stamp_result attention-backward.json
  return 0
}
if has attnbwd; then stage_attnbwd; fi

# Every cuBLASLt product of one training step with the heuristic's candidates and configurations
# enumerated from each algorithm's capabilities, 128 per product (issue 12,
# bench/gemm_step_survey.cpp): time, repeatable bits, difference from the heuristic's first, and
# the pick per product by a fixed rule (what runtime/cuda's pin table takes:
# bench/gemm_pins_from_survey.py writes it). The LM head at the engine's chunk rows
# (runtime/cuda/head_chunks.hpp: 5504, 5504, 5376) and, at 0 calls, at ALSO_HEAD_ROWS (4096, the
# 4-chunk plan: pins for its A/B; 0: none). Bounded to 66 s of surveying (34 products, about 27 s
# expected); the table to gemm-survey.log, JSON to gemm-survey.json.
stage_gemmsurvey() {
  log "gemmsurvey: gemm_step_survey (B=16 T=1024 C=768 V=50304, the engine's head chunks)"
  ninja -C "$BUILD" -j16 gemm_step_survey > "$W/build-gemmsurvey.log" 2>&1 \
    || { grep -E "error|FAILED" "$W/build-gemmsurvey.log" | head -30; return 1; }
  local t0=$SECONDS
  # SUSTAIN_MS > 0: the fastest candidates timed again under the power limit (the step's regime).
  timeout 200 "$BUILD/bench/gemm_step_survey" --warmup 3 --reps 20 --candidates 128 \
    --heuristic 128 --space 768 --screen 1.5 --max-seconds 66 --sustain-ms "${SUSTAIN_MS:-0}" \
    --sustain-top "${SUSTAIN_TOP:-6}" --also-head-rows "${ALSO_HEAD_ROWS:-4096}" \
    --json "$W/gemm-survey.json" 2>&1 | tee "$W/gemm-survey.log"
  log "gemmsurvey: took $((SECONDS - t0)) s"
  [ -s "$W/gemm-survey.json" ] && stamp_result gemm-survey.json
  return 0
}
if has gemmsurvey; then stage_gemmsurvey; fi

# A kernel bench of the --warmup/--reps/--json kind (bench/bench_args.hpp): builds target $1,
# runs it, its table to $2.log and its JSON to $2.json, stamped into bench/results/.
kernel_bench() {
  local target=$1 out=$2
  ninja -C "$BUILD" -j16 "$target" > "$W/build-$target.log" 2>&1 \
    || { grep -E "error|FAILED" "$W/build-$target.log" | head -30; return 1; }
  rm -f "$W/$out.json"
  timeout 200 "$BUILD/bench/$target" --warmup 5 --reps 50 --json "$W/$out.json" 2>&1 \
    | tee "$W/$out.log"
  [ -s "$W/$out.json" ] && stamp_result "$out.json"
  return 0
}

# The optimizer's update alone (issue 12, bench/adamw_bench.cpp): the engine's first AdamW kernel,
# other memory-access shapes and the engine's kernel as built, on GPT-2 124M's state; median
# time, memory rate, and every variant's bits against the first kernel's (a difference fails).
# The table to adamw.log, JSON to adamw.json.
stage_adamw() {
  log "adamw: adamw_bench (124.5M parameters, bf16 copy)"
  kernel_bench adamw_bench adamw
}
if has adamw; then stage_adamw; fi

# The step's GPU timeline (issue 12, bench/step_timeline_cupti.cpp): a normal railyard-train run
# (CUDA graphs on, nothing serialised, unlike ncu) with CUPTI recording every kernel, copy and
# runtime call on one clock; bench/step_timeline.py cuts it into steps (AdamW to AdamW, the first
# 3 left out) and accounts for each step's wall: busy (union of kernel intervals), idle, the gaps
# between kernels (count, total, p50, p90, max, the 10 largest with their neighbours and the
# runtime calls in flight) and the busy time per phase (gpu_profile_table.py's phases). The
# table to step-timeline.txt, JSON to step-timeline.json.
stage_timeline() {
  log "timeline: railyard-train cuda bf16 x1 (14 steps) under CUPTI"
  ninja -C "$BUILD" -j16 railyard-train step_timeline_cupti > "$W/build-timeline.log" 2>&1 || {
    grep -E "error|FAILED" "$W/build-timeline.log" | head -30
    echo "timeline: no step_timeline_cupti: run the build stage first; cmake.log must say" \
      "step timeline (CUPTI): ON"
    return 1
  }
  rm -f "$W/timeline-raw.json" "$W/step-timeline.json" "$W/timeline-train.jsonl"
  CUDA_INJECTION64_PATH=$(cd "$BUILD" && pwd)/bench/libstep_timeline_cupti.so \
    RAILYARD_TIMELINE_OUT=$W/timeline-raw.json timeout 300 "$BUILD/runtime/tools/railyard-train" \
    --data $DATA $GPT --steps 14 --device cuda --precision bf16 --log-every 0 \
    --log-json "$W/timeline-train.jsonl" 2>&1 | tail -4
  python3 bench/step_timeline.py "$W/timeline-raw.json" --skip 3 \
    --log-json "$W/timeline-train.jsonl" --json "$W/step-timeline.json" | tee "$W/step-timeline.txt"
  [ -s "$W/step-timeline.json" ] && stamp_result step-timeline.json
  return 0
}
if has timeline; then stage_timeline; fi

# LayerNorm (forward plain: the residual add is in the products' epilogues; backward) and
# embedding backward alone (issue 12, bench/layernorm_bench.cpp) at the step's shapes (16384 x
# 768 bf16, LN output rows 776 apart; B 16, T 1024, vocabulary 50257, uniform and word-like
# tokens): the LayerNorm backward before (2877015) beside the engine's ("engine:"; the forward,
# the engine's alone, against float64), the
# embedding's beside its old kernels; median time, memory rate; the LayerNorm's errors against
# float64, bits run twice and bits against the kernel before, the embedding's bits against the
# old kernels' (a failure fails). The table to layernorm-bench.log, JSON to layernorm-bench.json.
stage_lnbench() {
  log "lnbench: layernorm_bench (LayerNorm 16384 x 768, embedding 16 x 1024, bf16)"
  kernel_bench layernorm_bench layernorm-bench
}
if has lnbench; then stage_lnbench; fi

# The LM head's loss kernel alone (issue 12, bench/cross_entropy_bench.cpp): the engine's
# cross-entropy with its gradient on one chunk of GPT-2's logits (4096 x 50304 bf16); median
# time, memory rate, errors against float64 on 64 rows, the engine's bits twice (a difference
# fails). The table to cross-entropy-bench.log, JSON to cross-entropy-bench.json.
stage_cebench() {
  log "cebench: cross_entropy_bench (4096 x 50304 bf16, gradient in place)"
  kernel_bench cross_entropy_bench cross-entropy-bench
}
if has cebench; then stage_cebench; fi

# The LM head's weight gradient alone (issue 12, bench/head_weight_grad_bench.cpp): cuBLASLt as
# the engine calls it beside the CUTLASS kernel's tiles, "=" and "+=" at 4096 x 50304 x 768.
stage_headbench() {
  log "headbench: head_weight_grad_bench (50304 x 768 fp32 dW over 4096 positions)"
  kernel_bench head_weight_grad_bench head-weight-grad
}
if has headbench; then stage_headbench; fi

# The summary and gpu-1x.json only where a stage that trains ran: a checkpoint- or plan-only call
# must not replace the recorded result file with an empty one.
if has bench || has variants || has pytorch || has profile; then
  log summary
  python3 bench/gpu_bench_table.py "$W" | tee "$W/table.md"
  commit=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  python3 bench/gpu_results.py "$W" "$commit" "$gpu" > "$W/gpu-1x.json" \
    && mkdir -p bench/results && cp "$W/gpu-1x.json" bench/results/gpu-1x.json
  cat "$W/gpu-1x.json"
fi
