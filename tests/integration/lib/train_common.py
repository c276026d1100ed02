"""Shared helpers for the railyard-train integration tests (imported, not a test itself)."""
import json
import os
import pathlib
import subprocess
import sys

BUILD = pathlib.Path(os.environ.get("RAILYARD_BUILD_DIR", "build"))
TRAIN = BUILD / "runtime" / "tools" / "railyard-train"
DATA = BUILD / "runtime" / "tools" / "railyard-data"
TMP = pathlib.Path(os.environ.get("RAILYARD_TEST_TMP", "/tmp/railyard-test"))
TINY = ["--layers", "2", "--dim", "32", "--heads", "2", "--seq", "32", "--device", "cpu",
        "--lr", "3e-3", "--warmup", "2", "--log-every", "1"]


def fresh_tmp(name):
    d = TMP / name
    subprocess.run(["rm", "-rf", str(d)], check=True)
    d.mkdir(parents=True)
    return d


def text_data(directory):
    """Byte-level tokens of the licence texts every Debian machine has."""
    out = directory / "text.h5"
    if not out.exists():
        files = sorted(str(p) for p in pathlib.Path("/usr/share/common-licenses").iterdir()
                       if p.is_file())
        subprocess.run([str(DATA), "text", *files, "-o", str(out)], check=True,
                       stdout=subprocess.DEVNULL)
    return out


def mpirun(ranks):
    return ["mpirun", "-n", str(ranks), "--oversubscribe"] if ranks > 1 else []


def rank_pids(launcher_pid):
    """{rank: pid} of the railyard-train processes started by mpirun `launcher_pid`."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            if ppid != launcher_pid:
                continue
            with open(f"/proc/{pid}/environ", "rb") as fh:
                env = dict(kv.split(b"=", 1) for kv in fh.read().split(b"\0") if b"=" in kv)
            if b"OMPI_COMM_WORLD_RANK" in env:
                out[int(env[b"OMPI_COMM_WORLD_RANK"])] = int(pid)
        except (OSError, ValueError, IndexError):
            continue
    return out


def train(args, ranks=1, expect=0, log=None, timeout=300):
    """Runs railyard-train; returns (stdout, stderr, records of the JSON log)."""
    cmd = mpirun(ranks) + [str(TRAIN), *map(str, args)]
    if log is not None:
        cmd += ["--log-json", str(log)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if expect is not None and p.returncode != expect:
        sys.exit(f"FAIL: {' '.join(cmd)}\nexit {p.returncode}, expected {expect}\n"
                 f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    records = []
    if log is not None and pathlib.Path(log).exists():
        records = [json.loads(line) for line in pathlib.Path(log).read_text().splitlines()]
    return p.stdout, p.stderr, records


def losses(records):
    return [(r["step"], r["loss"]) for r in records if r["type"] == "step"]


def check(cond, msg):
    if not cond:
        sys.exit("FAIL: " + msg)
