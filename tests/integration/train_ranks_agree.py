#!/usr/bin/python3
"""The same global batch split over 1, 2 and 4 ranks (mpirun) gives the same loss curve within
float tolerance, also with gradient accumulation; the per-step token count is the global one."""
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0] + "/lib")
from train_common import TINY, check, fresh_tmp, losses, text_data, train  # noqa: E402

tmp = fresh_tmp("train_ranks_agree")
data = text_data(tmp)
GLOBAL = 8
curves, evals = {}, {}
for ranks, accum in [(1, 1), (2, 1), (4, 1), (1, 2), (2, 2)]:
    batch = GLOBAL // ranks // accum
    log = tmp / f"r{ranks}a{accum}.jsonl"
    out, _, rec = train(["--data", data, "--steps", 8, "--batch", batch, "--grad-accum", accum,
                         "--val-data", data, "--val-every", 4, "--val-batches", accum, *TINY],
                        ranks=ranks, log=log)
    check(f"launcher {'mpirun' if ranks > 1 else 'none'} | ranks {ranks}" in out,
          f"launch line for {ranks} ranks missing:\n{out}")
    check(sum(1 for r in rec if r["type"] == "run" and r["kind"] == "bind") == ranks,
          f"one bind line per rank expected:\n{out}")
    steps = [r for r in rec if r["type"] == "step"]
    check(steps[-1]["tokens_seen"] == 8 * GLOBAL * 32, f"tokens_seen {steps[-1]['tokens_seen']}")
    curves[(ranks, accum)] = losses(rec)
    evals[(ranks, accum)] = [(r["step"], r["val_loss"]) for r in rec if r["type"] == "eval"]

ref = curves[(1, 1)]
check(len(ref) == 8, f"8 steps expected, got {ref}")
check(ref[-1][1] < ref[0][1], f"the loss must fall: {ref}")
for key, curve in curves.items():
    for (s1, l1), (s2, l2) in zip(ref, curve):
        check(s1 == s2 and abs(l1 - l2) <= 1e-4 * abs(l1),
              f"ranks/accum {key}: step {s2} loss {l2} differs from 1 rank's {l1}")
check([s for s, _ in evals[(1, 1)]] == [4, 8], f"validation steps: {evals[(1, 1)]}")
for key, ev in evals.items():
    if key[1] == 1:  # the same validation batches (ranks x batch x val-batches sequences)
        for (s1, v1), (s2, v2) in zip(evals[(1, 1)], ev):
            check(s1 == s2 and abs(v1 - v2) <= 1e-4 * v1, f"{key}: val_loss {v2} vs {v1}")
print("ok: 1/2/4 ranks and grad-accum agree:", [round(l, 6) for _, l in ref])
