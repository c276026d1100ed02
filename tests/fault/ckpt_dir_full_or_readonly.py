#!/usr/bin/python3
"""Fault 7: a full or unwritable checkpoint directory gives a clear error and deletes no older
checkpoint. Full: a 1 MiB tmpfs (room for one ~0.5 MB checkpoint), and a file-size limit
(ulimit -f) that makes HDF5's own write fail with EFBIG; unwritable: the tmpfs remounted
read-only. Needs mount(2) (root in the container); without it only the ulimit case runs."""
import os
import resource
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "lib"))
from fault_common import check, checkpoints, fresh_dir, run, train_cmd, verify

d = fresh_dir("dir_full")


def mounted(path, opts):
    return subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "railyard-test", str(path)],
                          capture_output=True).returncode == 0


# -- a file-size limit: the second, larger-than-allowed write fails inside HDF5 -----------------
# MPI's own shared-memory files must fit under the limit, so this case uses a wider model
# (a ~19 MB checkpoint, limited to half of that).
lim = d / "ulimit"
wide = ["--dim", 256, "--heads", 4]
run(train_cmd(lim, 10, wide))  # one good checkpoint (step 10)
size = os.path.getsize(checkpoints(lim)[10])


def limit():
    resource.setrlimit(resource.RLIMIT_FSIZE, (size // 2, size // 2))


p = subprocess.run(train_cmd(lim, 20, wide), capture_output=True, text=True, timeout=120,
                   preexec_fn=limit)
err = p.stdout + p.stderr
# Exactly 1: a failed save, not a crash in HDF5's shutdown (SIGSEGV, -11 / 139).
check(p.returncode == 1, f"a save beyond the file-size limit exited {p.returncode}, not 1:\n{err}")
check("File too large" in err or "file write failed" in err,
      f"the error does not say why the save failed:\n{err}")
check(sorted(checkpoints(lim)) == [10] and verify(checkpoints(lim)[10]),
      f"the older checkpoint was lost: {os.listdir(lim)}")
check(not [n for n in os.listdir(lim) if n.startswith(".ckpt-")],
      f"a temporary file was left: {os.listdir(lim)}")
print("file-size limit: clear error, older checkpoint kept")

mnt = d / "tmpfs"
mnt.mkdir()
if not mounted(mnt, "size=1m,mode=0700"):
    print("mount not permitted here: full and read-only directories not tested")
    print("ckpt_dir_full_or_readonly: ok (ulimit only)")
    sys.exit(0)
try:
    ck = mnt / "ckpt"
    # -- full: the first save fits, the later ones do not --------------------------------------
    p = subprocess.run(train_cmd(ck, 30, ["--ckpt-every", 10, "--keep", 1]),
                       capture_output=True, text=True, timeout=120)
    err = p.stdout + p.stderr
    check(p.returncode == 1, f"the final save into a full directory exited {p.returncode}:\n{err}")
    check("not enough space" in err or "No space left" in err,
          f"the error does not say the disk is full:\n{err}")
    c = checkpoints(ck)
    check(10 in c and verify(c[10]), f"the checkpoint of step 10 was lost: {os.listdir(ck)}")
    print("full directory: clear error, older checkpoint kept")

    # -- read-only ------------------------------------------------------------------------------
    subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
    p = subprocess.run(train_cmd(ck, 40, ["--keep", 1]), capture_output=True, text=True,
                       timeout=120)
    err = p.stdout + p.stderr
    check(p.returncode != 0, f"a run with a read-only checkpoint directory succeeded:\n{err}")
    check("Read-only file system" in err, f"the error does not say read-only:\n{err}")
    check(verify(checkpoints(ck)[10]), "the checkpoint of step 10 was lost")
    print("read-only directory: clear error, older checkpoint kept")
finally:
    subprocess.run(["umount", "-l", str(mnt)], check=False)
print("ckpt_dir_full_or_readonly: ok")
