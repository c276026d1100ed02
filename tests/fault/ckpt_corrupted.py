#!/usr/bin/python3
"""Fault 6: damaged checkpoints are rejected with the reason and the next older valid one is
used. Newest to oldest: a checkpoint of another model shape, a flipped byte inside a dataset, a
truncated file, a wrong format version, a missing dataset; the oldest is intact. The resumed run
continues from it and ends with the same state as an uninterrupted run."""
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "lib"))
from fault_common import (check, checkpoints, fresh_dir, h5py, mpirun, newest, reference, run,
                          same_state, train_cmd, TINY, text_data, TRAIN)

STEPS = 60
d = fresh_dir("corrupted")
ck = d / "ckpt"
# Launched as reference() launches the uninterrupted run (mpirun, one rank). The CPU engine's bits
# no longer depend on its thread count (tests/unit/cpu_engine_test.cpp ThreadCountDoesNotChangeTheBits),
# so a plain launch would agree too; the same launch keeps this test about the checkpoints alone.
run(mpirun(1) + train_cmd(ck, STEPS, ["--ckpt-every", 10, "--keep", 10]))
c = checkpoints(ck)
check(sorted(c) == [10, 20, 30, 40, 50, 60], f"expected checkpoints 10..60, got {sorted(c)}")

# 60: replaced by a checkpoint of another model shape (4 layers instead of 2).
other = d / "other"
args = [a for a in TINY]
args[args.index("--layers") + 1] = "4"
run([str(TRAIN), "--data", str(text_data()), *args, "--steps", "3", "--ckpt-dir", str(other)])
shutil.copy(newest(other), ck / "ckpt-00000060.h5")

# 50: one flipped byte in the middle of a dataset's data.
with h5py.File(c[50], "r") as f:
    off = f["params/h.0.mlp.fc.weight"].id.get_offset()
with open(c[50], "r+b") as fh:
    fh.seek(off + 777)
    b = fh.read(1)
    fh.seek(off + 777)
    fh.write(bytes([b[0] ^ 0x10]))
# 40: truncated (a copy cut short, as by a full disk outside railyard).
os.truncate(c[40], os.path.getsize(c[40]) * 2 // 3)
# 30: a format version this build does not know.
with h5py.File(c[30], "r+") as f:
    f.attrs.modify("format_version", 2)
# 20: a dataset missing.
with h5py.File(c[20], "r+") as f:
    del f["adam/v/h.1.attn.qkv.weight"]

p = run(mpirun(1) + train_cmd(ck, STEPS, ["--keep", 10]))
err = p.stderr + p.stdout
for step, why in [(60, "a different model: layers 4 (this run: 2)"),
                  (50, "checksum mismatch in dataset /params/h.0.mlp.fc.weight"),
                  (40, "ckpt-00000040.h5: not a readable HDF5 file"),
                  (30, "format version 2; this railyard reads version 1"),
                  (20, "missing dataset /adam/v/h.1.attn.qkv.weight")]:
    check(why in err, f"no rejection message for step {step} ('{why}') in:\n{err}")
check("ckpt-00000010.h5" in err and "resume" in err, f"did not resume from step 10:\n{err}")
# The rejected files are left for the user to inspect; the new run saved its final step.
final = ck / f"ckpt-{STEPS:08d}.h5"
why = same_state(final, reference(STEPS, 1))
check(why is None, f"resumed run differs from an uninterrupted one: {why}")
print("ckpt_corrupted: ok")
