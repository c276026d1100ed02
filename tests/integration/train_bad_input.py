#!/usr/bin/python3
"""Every bad input makes railyard-train exit 2 with a message naming the option or file:
bad sizes, heads not dividing dim, missing data, unknown options, bad choices, and data that is
empty, shorter than one sequence, too small for the global batch, or outside the vocabulary."""
import struct
import subprocess
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0] + "/lib")
from train_common import DATA, TINY, check, fresh_tmp, text_data, train  # noqa: E402

tmp = fresh_tmp("train_bad_input")
data = str(text_data(tmp))


def bad(args, *needles, ranks=1):
    _, err, _ = train(args, ranks=ranks, expect=2)
    for n in needles:
        check(n in err, f"{args}: message lacks '{n}':\n{err}")
    if ranks > 1:
        check(err.count("railyard-train:") == 1, f"one rank should report, got:\n{err}")


bad(["--steps", 3], "--data", "required")
bad(["--data", tmp / "missing.h5"], "--data", "missing.h5", "does not exist")
bad(["--data", tmp / "nothing*.h5"], "no file matches")
bad(["--data", data, "--batch=-2"], "--batch", "positive", "-2")
bad(["--data", data, "--layers", "0"], "--layers", "positive")
bad(["--data", data, "--dim=-64"], "--dim")
bad(["--data", data, "--seq", "0"], "--seq")
bad(["--data", data, "--heads", "3", "--dim", "32"], "--heads", "divisor", "32")
bad(["--data", data, "--frobnicate"], "frobnicate")
bad(["--data", data, "--device", "gpu"], "--device", "cpu | cuda | auto")
bad(["--data", data, "--resume", "sometimes"], "--resume", "auto | never | PATH")
bad(["--data", data, "--signals", "TERM=explode", *TINY], "TERM=explode")
bad(["--data", data, "--vocab", "100", *TINY], "outside the model's vocab of 100", "text.h5")
bad(["--data", data, "--steps", "abc"], "steps")

# Data problems, also on two ranks (every rank finds them; one reports).
subprocess.run([str(DATA), "synthetic", "--tokens", "20", "--vocab", "50", "-o", tmp / "short.h5"],
               check=True, stdout=subprocess.DEVNULL)
bad(["--data", tmp / "short.h5", *TINY], "short.h5", "shorter than one sequence")
bad(["--data", tmp / "short.h5", *TINY], "short.h5", "shorter than one sequence", ranks=2)
subprocess.run([str(DATA), "synthetic", "--tokens", "200", "--vocab", "50", "-o", tmp / "few.h5"],
               check=True, stdout=subprocess.DEVNULL)
bad(["--data", tmp / "few.h5", "--batch", "8", *TINY], "few.h5", "global batch")
with open(tmp / "empty.bin", "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, 0, *([0] * 253)))
bad(["--data", tmp / "empty.bin", *TINY], "empty.bin", "empty")
with open(tmp / "big.bin", "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, 3, *([0] * 253)))
    f.write(struct.pack("<3H", 1, 2, 65000))
bad(["--data", tmp / "big.bin", *TINY], "big.bin", "token 65000", "outside")
(tmp / "notes.txt").write_text("plain text is not token data\n" * 100)
bad(["--data", tmp / "notes.txt", *TINY], "notes.txt", "neither an HDF5 file nor")
bad(["--data", data, "--val-data", tmp / "empty.bin", *TINY], "empty.bin")

# A checkpoint directory that cannot be one: a failure (1) with the path, on every rank.
(tmp / "plainfile").write_text("x")
_, err, _ = train(["--data", data, "--ckpt-dir", tmp / "plainfile", *TINY], ranks=2, expect=1)
check("plainfile" in err, f"the message must name the checkpoint directory:\n{err}")
print("ok: every bad input exits 2 with a message")
