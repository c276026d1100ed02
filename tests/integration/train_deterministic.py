#!/usr/bin/python3
"""Two runs with the same seed give bit-identical losses (1 and 2 ranks); another seed differs."""
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0] + "/lib")
from train_common import TINY, check, fresh_tmp, losses, text_data, train  # noqa: E402

tmp = fresh_tmp("train_deterministic")
data = text_data(tmp)
for ranks in (1, 2):
    runs = []
    for i, seed in enumerate((5, 5, 6)):
        log = tmp / f"r{ranks}_{i}.jsonl"
        _, _, rec = train(["--data", data, "--steps", 6, "--batch", 4 // ranks, "--seed", seed,
                           *TINY], ranks=ranks, log=log)
        runs.append(losses(rec))
    # JSON floats are written to round-trip, so equal text means equal bits.
    check(runs[0] == runs[1], f"{ranks} ranks: same seed, different losses:\n{runs[0]}\n{runs[1]}")
    check(runs[0] != runs[2], f"{ranks} ranks: another seed gave the same losses")
print("ok: bit-identical losses for the same seed")
