#!/usr/bin/env python3
"""bench/step_timeline_cupti.cpp, loaded as the CUDA driver loads an injection library: without
RAILYARD_TIMELINE_OUT it records nothing and ends the process (exit 3) with a message naming the
variable, before CUPTI or a GPU is touched, so a misconfigured timeline run cannot pass for a
measured one. The library is $RAILYARD_BUILD_DIR/bench/libstep_timeline_cupti.so; exits 77
(skipped) where the build has none (no CUPTI)."""
import os
import subprocess
import sys

LOAD = "import ctypes, sys; sys.exit(0 if ctypes.CDLL(sys.argv[1]).InitializeInjection() else 9)"


def main():
    lib = os.path.join(os.path.abspath(os.environ.get("RAILYARD_BUILD_DIR", "build")), "bench",
                       "libstep_timeline_cupti.so")
    if not os.path.exists(lib):
        print(f"skipped: no {lib} (built only with CUDA and CUPTI)")
        return 77
    env = {k: v for k, v in os.environ.items() if k != "RAILYARD_TIMELINE_OUT"}
    run = subprocess.run([sys.executable, "-c", LOAD, lib], env=env, capture_output=True,
                         text=True, timeout=60)
    if run.returncode != 3 or "RAILYARD_TIMELINE_OUT is not set" not in run.stderr:
        print(f"expected exit 3 naming RAILYARD_TIMELINE_OUT, got {run.returncode}: {run.stderr}")
        return 1
    print("ok: refused without RAILYARD_TIMELINE_OUT:", run.stderr.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
