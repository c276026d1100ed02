#!/usr/bin/python3
"""`railyard-ckpt sample` refuses bad options with exit 2 and a message naming the option,
before it reads MODEL; --help lists the options and exits 0. MODEL here does not exist, so a
call whose options are fine fails later, reading it (exit 1)."""
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent / "lib"))
from train_common import BUILD, check  # noqa: E402

CKPT = BUILD / "runtime" / "tools" / "railyard-ckpt"
MODEL = "no-such-ckpt.h5"


def run(*args, expect):
    p = subprocess.run([str(CKPT), "sample", *args], capture_output=True, text=True, timeout=60)
    check(p.returncode == expect,
          f"sample {' '.join(args)}: exit {p.returncode}, expected {expect}\n{p.stderr}")
    return p


def refused(args, message):
    err = run(*args, expect=2).stderr
    first = err.splitlines()[0] if err else ""
    check(first == f"railyard-ckpt: sample: {message}", f"sample {' '.join(args)}: {err!r}")
    check("railyard-ckpt sample MODEL" in err, f"no usage after the error: {err!r}")


ids = ["--prompt-ids", "1,2"]
refused([MODEL, *ids, "--bogus", "1"], "unrecognised option '--bogus'")
refused([MODEL, *ids, "--tokens"], "the required argument for option '--tokens' is missing")
refused([MODEL, *ids, "--tokens", "12x"], "--tokens needs a number (got '12x')")
refused([MODEL, *ids, "--tokens", "3000000000"], "--tokens needs a number (got '3000000000')")
refused([MODEL, *ids, "--tokens", "-1"], "--tokens must be 0 or positive")
refused([MODEL, *ids, "--top-k", "-1"], "--top-k must be 0 (off) or positive")
refused([MODEL, *ids, "--seed", "-1"], "--seed needs a number (got '-1')")
refused([MODEL, *ids, "--temperature", "inf"], "--temperature needs a number (got 'inf')")
refused([MODEL, "--prompt", "a", *ids], "needs exactly one of --prompt TEXT and --prompt-ids")
refused([MODEL], "needs exactly one of --prompt TEXT and --prompt-ids")
refused(ids, "missing MODEL (a checkpoint or HF directory)")

out = run("--help", expect=0).stdout
for option in ("--prompt TEXT", "--prompt-ids", "--tokens N", "--temperature T", "--top-k K",
               "--seed S", "--dump-logits", "--force"):
    check(option in out, f"--help does not list {option}: {out}")
# Options that parse (a value that looks like an option, a negative temperature) reach MODEL.
err = run(MODEL, "--prompt", "--tokens", "--temperature", "-1", "--top-k", "5", expect=1).stderr
check(MODEL in err, f"the missing model is not named: {err!r}")
print("ok")
