#!/usr/bin/python3
"""NumPy .npy token files: what np.save writes is read by railyard-data (inspect, from-bin
--vocab) and railyard-train (--data x.npy); hostile or unsuitable arrays are refused with exit
status 2 and a message naming the file and the problem."""
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent / "lib"))
try:
    import numpy as np
except ImportError as e:
    print(f"skip: {e}", file=sys.stderr)
    sys.exit(77)
from train_common import DATA, check, fresh_tmp, train  # noqa: E402

tmp = fresh_tmp("data_npy")


def data(*args, expect=0):
    p = subprocess.run([str(DATA), *map(str, args)], capture_output=True, text=True, timeout=120)
    check(p.returncode == expect, f"railyard-data {args}: exit {p.returncode}\n{p.stdout}{p.stderr}")
    return p.stdout + p.stderr


rng = np.random.default_rng(1)
u16 = rng.integers(0, 300, 5000).astype(np.uint16)
np.save(tmp / "a.npy", u16)
np.save(tmp / "b.npy", np.array([70000, 3, 299], dtype=np.uint32))
out = data("inspect", tmp / "a.npy", tmp / "b.npy")
check("format: npy (uint16)" in out and "tokens: 5000" in out
      and f"vocab_size: {int(u16.max()) + 1}" in out, out)
check("format: npy (uint32)" in out and "vocab_size: 70001" in out, out)
out = data("from-bin", tmp / "a.npy", "--vocab", 512, "-o", tmp / "a.h5")
check("5000 tokens" in out and "vocab 512" in out, out)
check("--vocab 100 is below" in data("from-bin", tmp / "a.npy", "--vocab", 100, "-o",
                                      tmp / "x.h5", expect=2), "small --vocab accepted")
_, _, rec = train(["--data", tmp / "a.npy", "--layers", 1, "--dim", 16, "--heads", 2, "--seq", 16,
                   "--batch", 2, "--steps", 2, "--device", "cpu", "--log-every", 1],
                  log=tmp / "log.jsonl")
check(any(f"vocab {int(u16.max()) + 1}" in r.get("detail", "") for r in rec
          if r["type"] == "run"), f"{rec}")

# Unsuitable arrays and hostile headers: refused, naming the file.
np.save(tmp / "i8.npy", np.arange(10, dtype=np.int64))
np.save(tmp / "big.npy", np.arange(10, dtype=">u2"))
np.save(tmp / "twod.npy", np.zeros((4, 4), dtype=np.uint16))
np.save(tmp / "fortran.npy", np.asfortranarray(np.zeros((4, 4), dtype=np.uint16)))
raw = (tmp / "a.npy").read_bytes()
(tmp / "trunc.npy").write_bytes(raw[:-3])
(tmp / "trailing.npy").write_bytes(raw + b"\0\0")
(tmp / "hugelen.npy").write_bytes(raw[:8] + b"\xff\xff" + raw[10:])
(tmp / "garbage.npy").write_bytes(raw[:10] + raw[10:60].replace(b"'shape'", b"'shapf'") + raw[60:])
for name, needle in [("i8", "dtype '<i8'"), ("big", "dtype '>u2'"), ("twod", "2-D"),
                     ("fortran", "C order"), ("trunc", "truncated or trailing"),
                     ("trailing", "truncated or trailing"), ("hugelen", "runs past the end"),
                     ("garbage", "unknown key 'shapf'")]:
    path = tmp / f"{name}.npy"
    out = data("inspect", path, expect=2)
    check(str(path) in out and needle in out, f"{name}: {out}")
print("ok")
