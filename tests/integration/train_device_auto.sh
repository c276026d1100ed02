#!/bin/bash
# --device auto is one decision for the whole job: two ranks under mpirun, one of which sees no
# GPU (CUDA_VISIBLE_DEVICES empty), both run on the CPU and train exactly as --device cpu does.
# On the GPU machine rank 0 sees a GPU, so this is the case that used to split the job (rank 0
# on CUDA, rank 1 on CPU, a hang in NCCL's setup); on a machine without GPUs both ranks lack one.
set -euo pipefail

train=${RAILYARD_BUILD_DIR:?}/runtime/tools/railyard-train
[[ -x $train ]] || { echo "skip: $train not built"; exit 77; }
command -v mpirun >/dev/null || { echo "skip: mpirun not installed"; exit 77; }
tmp=${RAILYARD_TEST_TMP:?}
rm -rf "$tmp" && mkdir -p "$tmp"
fail() { echo "FAIL: $*" >&2; exit 1; }

"${RAILYARD_BUILD_DIR}/runtime/tools/railyard-data" synthetic --tokens 20000 --vocab 256 --seed 3 \
  -o "$tmp/data.h5" >/dev/null
args=(--data "$tmp/data.h5" --steps 4 --batch 2 --seq 32 --layers 1 --dim 32 --heads 2
      --lr 3e-3 --warmup 2 --seed 5 --log-every 1)

# MPMD: the same program twice, rank 1 without any visible GPU.
run() { # device log
  timeout 300 mpirun --oversubscribe -n 1 "$train" "${args[@]}" --device "$1" --log-json "$2" \
    : -n 1 env CUDA_VISIBLE_DEVICES= "$train" "${args[@]}" --device "$1" --log-json "$2"
}
run auto "$tmp/auto.jsonl" >"$tmp/auto.out" 2>&1 || { cat "$tmp/auto.out"; fail "--device auto failed"; }
grep -q "engine cpu" "$tmp/auto.out" || { cat "$tmp/auto.out"; fail "--device auto did not choose the CPU"; }
run cpu "$tmp/cpu.jsonl" >"$tmp/cpu.out" 2>&1 || { cat "$tmp/cpu.out"; fail "--device cpu failed"; }

losses() { python3 -c 'import json,sys; print([r["loss"] for r in map(json.loads, open(sys.argv[1])) if r["type"] == "step"])' "$1"; }
auto=$(losses "$tmp/auto.jsonl")
cpu=$(losses "$tmp/cpu.jsonl")
[[ $auto == "$cpu" && $auto != "[]" ]] || fail "auto losses $auto differ from cpu losses $cpu"
echo "ok: --device auto with one GPU-less rank: every rank on the CPU, losses $auto"
