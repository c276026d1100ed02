#!/bin/bash
# ZeRO-1 checkpoints across world sizes, on the GPU machine with 2 GPUs. A 2-rank --zero 1 run
# saves every 10 steps (one file with the whole logical moments: each rank's hyperslabs with
# parallel HDF5, gathered to rank 0 with serial HDF5; background saves write each rank's shard
# from its device snapshot into a part file that rank 0 merges). From its step-10 checkpoint
#   - 2 ranks with --zero 1 continue bit for bit: the losses of steps 11-20 equal the run's;
#   - 1 rank resumes at step 10 (saved on 2 ranks), finishes, its step-20 file says world size 1;
# and that 1-rank step-20 checkpoint resumes on 2 ranks with --zero 1 (each rank cuts its shard).
#   bash tests/gpu/ckpt_zero1_world_gpu.sh BUILD_DIR WORK_DIR
# (DEVICE=cpu ZERO=0 MODEL="--layers 1 --heads 2 --dim 32 --seq 32 --vocab 50257 --batch 2" runs
# the same steps on the CPU engine in seconds, to check the script.)
set -u -o pipefail
BUILD=$1
W=$2
DEVICE=${DEVICE:-cuda}
ZERO=${ZERO:-1}
MODEL=${MODEL:---layers 2 --heads 4 --dim 256 --seq 256 --vocab 50257 --batch 4}
# The GPU machine runs as root, which mpirun refuses without these.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rm -rf "$W" && mkdir -p "$W"
fail() {
  echo "ckpt_zero1_world_gpu: FAIL: $*"
  exit 1
}
"$BUILD/runtime/tools/railyard-data" synthetic --tokens 2000000 --vocab 50257 --seed 5 \
  -o "$W/data.h5" > /dev/null || fail "railyard-data"

# train RANKS NAME STEPS [options...]: checkpoints in $W/NAME, logs in $W/NAME.log and .jsonl.
train() {
  local n=$1 name=$2 steps=$3
  shift 3
  # shellcheck disable=SC2086
  mpirun -n "$n" --oversubscribe --bind-to none -x LD_LIBRARY_PATH \
    "$BUILD/runtime/tools/railyard-train" --data "$W/data.h5" $MODEL --device "$DEVICE" \
    --zero "$ZERO" --steps "$steps" --ckpt-dir "$W/$name" --log-every 0 \
    --log-json "$W/$name.jsonl" "$@" > "$W/$name.log" 2>&1 \
    || fail "$name: $(tail -5 "$W/$name.log")"
}
# The losses of steps after $2 in run $1, one per line, as logged (shortest exact text).
losses() {
  python3 -c 'import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") == "step" and r["step"] > int(sys.argv[2]):
        print(r["step"], r["loss"])' "$W/$1.jsonl" "$2"
}
world_of() {
  "$BUILD/runtime/tools/railyard-ckpt" inspect "$1" | awk '$1 == "world_size" {print $2}'
}
# resumed NAME STEP RANKS: run NAME said it resumed at STEP from a file saved on RANKS ranks.
resumed() {
  grep -q "run resume | step $2 | from .*(saved on $3 rank" "$W/$1.log" \
    || fail "$1 did not resume at step $2 from a $3-rank file: $(grep 'run ' "$W/$1.log" | head -2)"
}
seed() {  # seed NAME FILE: a fresh checkpoint directory NAME holding only FILE
  { mkdir -p "$W/$1" && cp "$2" "$W/$1/"; } || fail "copying $2"
}

train 2 a 20 --ckpt-every 10 --keep 5
[ "$(world_of "$W/a/ckpt-00000010.h5")" = 2 ] || fail "a/ckpt-00000010.h5 is not a 2-rank file"

seed b "$W/a/ckpt-00000010.h5"
train 2 b 20
resumed b 10 2
[ "$(losses b 10)" = "$(losses a 10)" ] || fail "2 ranks from step 10 differ from the run:
$(diff <(losses a 10) <(losses b 10) | head -6)"
[ "$(losses b 10 | wc -l)" = 10 ] || fail "b logged $(losses b 10 | wc -l) steps after 10, not 10"

seed c "$W/a/ckpt-00000010.h5"
train 1 c 20
resumed c 10 2
[ "$(world_of "$W/c/ckpt-00000020.h5")" = 1 ] || fail "c/ckpt-00000020.h5 is not a 1-rank file"

seed d "$W/c/ckpt-00000020.h5"
train 2 d 25
resumed d 20 1
[ "$(world_of "$W/d/ckpt-00000025.h5")" = 2 ] || fail "d/ckpt-00000025.h5 is not a 2-rank file"
"$BUILD/runtime/tools/railyard-ckpt" verify "$W/d/ckpt-00000025.h5" > /dev/null || fail "d's file"
echo "ckpt_zero1_world_gpu: ok (--zero $ZERO: 2 ranks -> 2 ranks bit for bit, 2 -> 1, 1 -> 2)"
rm -rf "$W"
