#!/usr/bin/python3
"""A small GPT on the licence texts drives the loss well below the unigram entropy of the data
(computed here from the tokens): the model learns context, not just byte frequencies."""
import math
import sys

import h5py
import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0] + "/lib")
from train_common import check, fresh_tmp, text_data, train  # noqa: E402

tmp = fresh_tmp("train_learns_text")
data = text_data(tmp)
with h5py.File(data, "r") as f:
    tokens = f["tokens"][:]
    check(int(f["tokens"].attrs["vocab_size"]) == 256, "text data must have vocab 256")
p = np.bincount(tokens, minlength=256) / len(tokens)
entropy = float(-(p[p > 0] * np.log(p[p > 0])).sum())

log = tmp / "log.jsonl"
_, _, rec = train(["--data", data, "--steps", 200, "--batch", 16, "--seq", 64, "--layers", 2,
                   "--dim", 64, "--heads", 4, "--lr", "3e-3", "--warmup", 20, "--device", "cpu",
                   "--log-every", 50], log=log)
steps = [r["loss"] for r in rec if r["type"] == "step"]
check(len(steps) == 200, f"200 step records expected, got {len(steps)}")
check(abs(steps[0] - math.log(256)) < 0.3, f"first loss {steps[0]} should be near ln 256")
final = sum(steps[-20:]) / 20
print(f"unigram entropy {entropy:.4f} nats, mean loss of the last 20 steps {final:.4f}")
check(final < entropy - 0.5, f"loss {final:.4f} is not well below the unigram entropy {entropy:.4f}")
print("ok")
