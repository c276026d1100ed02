"""Shared helpers for the checkpoint fault tests (imported, not a test itself): tiny training
runs under mpirun or the local Slurm cluster, and checkpoint comparison with h5py."""
import glob
import json
import os
import pathlib
import random
import shutil
import subprocess
import sys
import time

try:
    import h5py
    import numpy as np
except ImportError as e:  # Debian's python3-h5py lives in /usr/bin/python3
    print(f"skip: {e}", file=sys.stderr)
    sys.exit(77)

BUILD = pathlib.Path(os.environ.get("RAILYARD_BUILD_DIR", "build"))
TOOLS = BUILD / "runtime" / "tools"
TRAIN = TOOLS / "railyard-train"
DATA = TOOLS / "railyard-data"
CKPT = TOOLS / "railyard-ckpt"
TMP = pathlib.Path(os.environ.get("RAILYARD_TEST_TMP", "/tmp/railyard-fault"))
# 2 layers, 32 wide, sequence 32: a step takes about a millisecond, a checkpoint ~0.5 MB.
TINY = ["--layers", "2", "--dim", "32", "--heads", "2", "--seq", "32", "--batch", "2",
        "--device", "cpu", "--lr", "3e-3", "--warmup", "5", "--log-every", "1"]

for exe in (TRAIN, DATA, CKPT):
    if not os.access(exe, os.X_OK):
        print(f"skip: {exe} not built", file=sys.stderr)
        sys.exit(77)

# The integration tests' helpers, shared: where mpirun's ranks are.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "integration" / "lib"))
from train_common import rank_pids  # noqa: E402,F401

SEED = int(os.environ.get("RAILYARD_FAULT_SEED", str(int(time.time()))))
rng = random.Random(SEED)
print(f"random seed {SEED} (set RAILYARD_FAULT_SEED to repeat)", flush=True)


def fail(msg):
    sys.exit("FAIL: " + msg)


def check(cond, msg):
    if not cond:
        fail(msg)


def fresh_dir(name):
    d = TMP / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    return d


def text_data():
    """Byte-level tokens of the licence texts every Debian machine has."""
    TMP.mkdir(parents=True, exist_ok=True)
    out = TMP / "text.h5"
    if not out.exists():
        files = sorted(glob.glob("/usr/share/common-licenses/*"))
        files = [f for f in files if os.path.isfile(f)]
        subprocess.run([str(DATA), "text", *files, "-o", str(out)], check=True,
                       stdout=subprocess.DEVNULL)
    return out


def mpirun(ranks):
    return ["mpirun", "-n", str(ranks), "--oversubscribe"]


def train_cmd(ckpt_dir, steps, extra=()):
    """railyard-train on the tiny model; options in `extra` override TINY's."""
    extra = [str(x) for x in extra]
    base = []
    for i in range(0, len(TINY), 2):
        if TINY[i] not in extra:
            base += TINY[i:i + 2]
    return [str(TRAIN), "--data", str(text_data()), *base, "--steps", str(steps),
            "--ckpt-dir", str(ckpt_dir), *extra]


def run(cmd, expect=0, timeout=120, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if expect is not None and p.returncode != expect:
        fail(f"{' '.join(map(str, cmd))}\nexit {p.returncode}, expected {expect}\n"
             f"stdout:\n{p.stdout[-3000:]}\nstderr:\n{p.stderr[-3000:]}")
    return p


def checkpoints(d):
    """{step: path} of the final-named checkpoint files in d."""
    out = {}
    for p in glob.glob(os.path.join(str(d), "ckpt-*.h5")):
        out[int(os.path.basename(p)[5:-3])] = p
    return out


def newest(d):
    c = checkpoints(d)
    check(c, f"no checkpoint in {d}")
    return c[max(c)]


def verify(path):
    return subprocess.run([str(CKPT), "verify", str(path)], capture_output=True,
                          text=True).returncode == 0


def state_of(path):
    """Everything a resume restores, for bitwise comparison."""
    with h5py.File(path, "r") as f:
        s = {"attrs": {k: f.attrs[k] for k in ("step", "tokens_seen", "adam_step", "lr",
                                                 "loader_seed", "loader_epoch",
                                                 "loader_cursor")},
             "rng": f["rng_state"][()].tolist()}
        for group in ("params", "adam/m", "adam/v"):
            for name, ds in f[group].items():
                s[f"{group}/{name}"] = ds[()]
    return s


def same_state(a_path, b_path):
    """None when the two checkpoints hold the same training state bit for bit, else why not."""
    a, b = state_of(a_path), state_of(b_path)
    if a["attrs"] != b["attrs"]:
        return f"metadata differs: {a['attrs']} vs {b['attrs']}"
    if a["rng"] != b["rng"]:
        return "rng_state differs"
    if set(a) != set(b):
        return "different datasets"
    for k in a:
        if k in ("attrs", "rng"):
            continue
        if a[k].tobytes() != b[k].tobytes():
            return f"{k} differs (max abs diff {np.max(np.abs(a[k] - b[k]))})"
    return None


_reference = {}


def reference(steps, ranks, extra=()):
    """The final checkpoint of an uninterrupted run (cached per configuration)."""
    key = (steps, ranks, tuple(extra))
    if key not in _reference:
        d = fresh_dir(f"reference-{steps}-{ranks}-{abs(hash(key)) % 10**8}")
        run(mpirun(ranks) + train_cmd(d, steps, extra), timeout=300)
        _reference[key] = newest(d)
    return _reference[key]


def json_log(path):
    p = pathlib.Path(path)
    if not p.exists():
        return []
    out = []
    for line in p.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # a line cut by kill -9
    return out


def wait_for(pred, timeout, what):
    t0 = time.time()
    while time.time() - t0 < timeout:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    fail(f"timed out after {timeout} s waiting for {what}")


def last_step(log):
    steps = [r["step"] for r in json_log(log) if r.get("type") == "step"]
    return steps[-1] if steps else 0


# ---- the local Slurm cluster ---------------------------------------------------------------
def slurm_env():
    """The environment of $RAILYARD_CLUSTER_DIR/env.sh; exits 77 when the cluster is absent."""
    cdir = os.environ.get("RAILYARD_CLUSTER_DIR", "")
    env_sh = os.path.join(cdir, "env.sh")
    if not cdir or not os.path.exists(env_sh):
        print(f"skip: no local Slurm cluster ({env_sh} missing)", file=sys.stderr)
        sys.exit(77)
    out = subprocess.run(["bash", "-c", f"source '{env_sh}' && env -0"], check=True,
                         capture_output=True).stdout.decode()
    env = dict(kv.split("=", 1) for kv in out.split("\0") if "=" in kv)
    if subprocess.run(["sinfo", "-h"], env=env, capture_output=True).returncode != 0:
        print("skip: the local Slurm cluster does not answer", file=sys.stderr)
        sys.exit(77)
    # Open MPI names its shared-memory files after the PMIx job id, which is the Slurm job id:
    # other local clusters on the same machine (numbering their jobs from 1 too) would collide
    # in /dev/shm and /tmp. Private directories keep the ranks of different clusters apart.
    for var, sub in (("TMPDIR", "tmp"), ("OMPI_MCA_btl_vader_backing_directory", "shm")):
        path = TMP / sub
        path.mkdir(parents=True, exist_ok=True)
        env[var] = str(path)
    return env


def job_field(env, job, field):
    """A field of `scontrol show job` (e.g. JobState, Restarts), or None when gone."""
    p = subprocess.run(["scontrol", "show", "job", str(job)], env=env, capture_output=True,
                       text=True)
    for tok in p.stdout.split():
        if tok.startswith(field + "="):
            return tok.split("=", 1)[1]
    return None


def sbatch(env, args, script):
    p = subprocess.run(["sbatch", "--parsable", *args], input=script, env=env,
                       capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"sbatch {' '.join(args)} failed: {p.stderr}")
    return p.stdout.strip().split(";")[0]


def scancel(env, *args):
    subprocess.run(["scancel", *map(str, args)], env=env, check=False)


def temp_files(d):
    try:
        return [n for n in os.listdir(d) if n.startswith(".ckpt-") and ".tmp-" in n]
    except FileNotFoundError:
        return []


def slurm_rank_pids(job):
    """PIDs of the railyard-train processes of Slurm job `job` on this machine."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv0 = fh.read().split(b"\0")[0]
            if not argv0.endswith(b"railyard-train"):
                continue
            with open(f"/proc/{pid}/environ", "rb") as fh:
                env = dict(kv.split(b"=", 1) for kv in fh.read().split(b"\0") if b"=" in kv)
            if env.get(b"SLURM_JOB_ID") == str(job).encode():
                out.append(int(pid))
        except (OSError, ValueError):
            continue
    return out
