#!/usr/bin/python3
"""kill -9 during a background save of ZeRO-1 shards (2 ranks through mpirun): each rank's part
file and rank 0's temporary file are left behind, never a checkpoint; the next start (on 1 rank
and on 2) removes them and loads the previous complete checkpoint."""
import os
import pathlib
import signal
import subprocess
import sys
import time

sys.path.insert(0, __file__.rsplit("/", 1)[0] + "/lib")
from train_common import BUILD, check, fresh_tmp, mpirun, rank_pids  # noqa

BENCH = BUILD / "bench" / "checkpoint_bench"
if not BENCH.exists():
    print(f"skip: {BENCH} not built", file=sys.stderr)
    sys.exit(77)

tmp = fresh_tmp("ckpt_zero1_kill9")
ckpt = tmp / "ckpt"
# About 0.5 GB of state: a background write takes seconds here, long enough to be killed in.
DIMS = ["--layers", "4", "--dim", "512", "--heads", "8", "--seq", "128"]
run = subprocess.Popen(mpirun(2) + [str(BENCH), "--mode", "shards", "--dir", str(ckpt),
                                    "--repeat", "3", *DIMS],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       start_new_session=True)
part = ckpt / ".ckpt-00000002.h5.tmp-part1of2"
deadline = time.time() + 240
while not part.exists() and time.time() < deadline and run.poll() is None:
    time.sleep(0.02)
if not part.exists():
    os.killpg(run.pid, signal.SIGKILL)
    check(False, f"no part of the second save appeared; output:\n{run.communicate()[0]}")
check((ckpt / "ckpt-00000001.h5").exists(), "the first save is not complete before the second")
# Both ranks and mpirun, mid-write. Open MPI puts each rank in a process group of its own, so
# killing mpirun's group alone leaves the ranks writing on.
ranks = rank_pids(run.pid)
check(len(ranks) == 2, f"expected 2 ranks under mpirun, found {ranks}")
for pid in ranks.values():
    os.kill(pid, signal.SIGKILL)
os.killpg(run.pid, signal.SIGKILL)
run.wait()
deadline = time.time() + 30
while any(os.path.exists(f"/proc/{pid}") for pid in ranks.values()) and time.time() < deadline:
    time.sleep(0.02)
left = sorted(p.name for p in ckpt.iterdir())
print("left after kill -9:", left)
check("ckpt-00000002.h5" not in left, f"the killed save became a checkpoint: {left}")
check(any(".tmp-" in n for n in left), f"no temporary left to clean up: {left}")

for ranks in (1, 2):
    p = subprocess.run(mpirun(ranks) + [str(BENCH), "--mode", "load", "--dir", str(ckpt),
                                        "--repeat", "1", *DIMS],
                       capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, f"load on {ranks} rank(s) failed:\n{p.stdout}\n{p.stderr}")
    check('"load_gbps"' in p.stdout, f"no load figure on {ranks} rank(s):\n{p.stdout}")
    left = sorted(n.name for n in ckpt.iterdir())
    check(left == ["ckpt-00000001.h5"], f"after a start on {ranks} rank(s): {left}")
print("ok: the killed background save left the previous checkpoint newest, on 1 and 2 ranks")
