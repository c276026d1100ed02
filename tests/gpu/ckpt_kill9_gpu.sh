#!/bin/bash
# Nothing lost on the GPU path: a CUDA run of GPT-2 small saving in the background every 10
# steps is killed with SIGKILL while a background write is in flight (its temporary file
# exists); every checkpoint under a final name must verify, and the next run must remove the
# temporary and resume from the newest complete checkpoint. Run on the GPU machine:
#   bash tests/gpu/ckpt_kill9_gpu.sh BUILD_DIR WORK_DIR
# (DEVICE=cpu MODEL="--layers 2 --heads 2 --dim 128 --seq 64 --vocab 50257 --batch 2" runs the
# same steps on the CPU engine in seconds, to check the script; the data's vocabulary is 50257.)
set -u -o pipefail
BUILD=$1
W=$2
DEVICE=${DEVICE:-cuda}
MODEL=${MODEL:---layers 12 --heads 12 --dim 768 --seq 1024 --vocab 50257 --batch 8 --precision bf16}
rm -rf "$W" && mkdir -p "$W"
fail() { echo "ckpt_kill9_gpu: FAIL: $*"; exit 1; }
"$BUILD/runtime/tools/railyard-data" synthetic --tokens 4000000 --vocab 50257 --seed 3 \
  -o "$W/data.h5" > /dev/null || fail "railyard-data"
# shellcheck disable=SC2206
TRAIN=("$BUILD/runtime/tools/railyard-train" --data "$W/data.h5" $MODEL --device "$DEVICE"
  --log-every 0 --ckpt-dir "$W/ckpt" --ckpt-every 10 --keep 3)
"${TRAIN[@]}" --steps 1000 > "$W/run1.log" 2>&1 &
pid=$!
# Wait for one complete checkpoint, then for the next background write to be in flight.
for _ in $(seq 600); do
  ls "$W"/ckpt/ckpt-*.h5 > /dev/null 2>&1 && break
  kill -0 $pid 2> /dev/null || fail "the run ended early: $(tail -3 "$W/run1.log")"
  sleep 0.1
done
ls "$W"/ckpt/ckpt-*.h5 > /dev/null 2>&1 || fail "no checkpoint within 60 s: $(tail -3 "$W/run1.log")"
for _ in $(seq 6000); do
  ls "$W"/ckpt/.ckpt-*.tmp-* > /dev/null 2>&1 && break
  sleep 0.01
done
ls "$W"/ckpt/.ckpt-*.tmp-* > /dev/null 2>&1 || fail "no background write seen"
kill -9 $pid
wait $pid 2> /dev/null
# Else the write finished between the poll and the kill, and nothing below would test a kill
# mid-write.
tmp=$(ls "$W"/ckpt/.ckpt-*.tmp-* 2> /dev/null) || fail "the write ended before the kill landed; run again"
echo "killed during the write of $tmp"
newest=$(ls "$W"/ckpt/ckpt-*.h5 | sort | tail -1)
for f in "$W"/ckpt/ckpt-*.h5; do
  "$BUILD/runtime/tools/railyard-ckpt" verify "$f" || fail "$f does not verify"
done
step=$(basename "$newest" .h5 | sed 's/ckpt-0*//')
"${TRAIN[@]}" --steps $((step + 3)) > "$W/run2.log" 2>&1 || fail "resume: $(tail -5 "$W/run2.log")"
grep -q "run resume | step $step | from $newest" "$W/run2.log" \
  || fail "did not resume from $newest: $(grep 'run ' "$W/run2.log" | head -3)"
ls "$W"/ckpt/.ckpt-*.tmp-* > /dev/null 2>&1 && fail "the stale temporary was not removed"
grep "checkpoint step" "$W/run2.log" | tail -1
echo "ckpt_kill9_gpu: ok (killed mid-write, resumed from step $step, $newest)"
rm -rf "$W"
