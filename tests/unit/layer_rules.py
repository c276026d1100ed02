#!/usr/bin/env python3
"""The one-way rules of docs/architecture.md, checked on the build's real include graph.

Two checks:
1. The walls are in the build: a source of the model, the kernels or the planner that included
   mpi.h or hdf5.h would not compile, because those layers do not link MPI or HDF5. A probe file
   including each is compiled with the exact flags of one of the layer's own sources
   (compile_commands.json) and must fail.
2. No object file includes a header its layer must not know, directly or through another header
   (nccl.h and <csignal> sit in directories the layer may see, so this is how those rules hold):
   the full list of headers each object was compiled with comes from Ninja's dependency log.
3. Checkpoints see MPI only as parallel HDF5's communicator: their sources call no MPI function
   (collectives go through the Communicator).
Checkpoints see named tensors, not the model: no checkpoint object includes a header of the
model's (one per source of runtime/model, less the state structs they store), checked as in 2.

Needs the Ninja build in RAILYARD_BUILD_DIR to be built (exits 77, skipped, for other generators).
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

BUILD = os.environ.get("RAILYARD_BUILD_DIR", "")
SOURCE = os.environ.get("RAILYARD_SOURCE_DIR", "")

MPI = r"(^|/)mpi\.h$"
NCCL = r"(^|/)nccl\.h$"
HDF5 = r"(^|/)(hdf5|H5[A-Za-z]*public)\.h$"
SIGNALS = r"(^|/)(csignal|signal\.h)$"
SLURM = r"(^|/)slurm/[a-z_]+\.h$"
SPANK = r"(^|/)slurm/spank\.h$"


def model_headers():
    """The model's public headers (railyard/<source>.hpp for each source of runtime/model), less
    state_snapshot.hpp: the state structs are what checkpoints store."""
    folder = os.path.join(SOURCE, "runtime", "model")
    names = sorted(n[:-4] for n in os.listdir(folder) if n.endswith(".cpp"))
    names = [n for n in names if n != "state_snapshot"]
    return r"(^|/)railyard/(" + "|".join(map(re.escape, names)) + r")\.hpp$"


MODEL = model_headers() if os.path.isdir(os.path.join(SOURCE, "runtime", "model")) else r"^$^"

# target -> forbidden headers (regexes on the dependency paths), with the reason.
RULES = {
    "railyard_model": [(MPI, "MPI"), (NCCL, "NCCL"), (HDF5, "HDF5"), (SIGNALS, "signals"),
                       (SLURM, "Slurm")],
    "railyard_optim": [(MPI, "MPI"), (NCCL, "NCCL"), (HDF5, "HDF5"), (SIGNALS, "signals")],
    "railyard_cuda_kernels": [(MPI, "MPI"), (NCCL, "NCCL"), (HDF5, "HDF5"),
                              (SIGNALS, "signals"), (SLURM, "Slurm")],
    # The engines reach MPI only through communicator.hpp, which does not include mpi.h.
    "railyard_engine": [(MPI, "MPI"), (HDF5, "HDF5"), (SLURM, "Slurm"), (SPANK, "spank.h")],
    "railyard_cuda_engine": [(MPI, "MPI"), (HDF5, "HDF5"), (SLURM, "Slurm"), (SPANK, "spank.h")],
    "railyard_comm": [(NCCL, "NCCL"), (HDF5, "HDF5"), (SPANK, "spank.h")],
    "railyard_nccl_comm": [(HDF5, "HDF5"), (SPANK, "spank.h")],
    "railyard_hdf5_io": [(NCCL, "NCCL"), (SPANK, "spank.h")],
    "railyard_data": [(NCCL, "NCCL"), (SPANK, "spank.h")],
    # Checkpoints see named tensors and attributes (checkpoint_schema.hpp), not the model.
    "railyard_ckpt": [(NCCL, "NCCL"), (SPANK, "spank.h"), (MODEL, "the model")],
    "railyard_preempt": [(NCCL, "NCCL"), (HDF5, "HDF5"), (SPANK, "spank.h")],
    "railyard_metrics": [(MPI, "MPI"), (NCCL, "NCCL"), (HDF5, "HDF5"), (SPANK, "spank.h")],
    "railyard_train": [(NCCL, "NCCL"), (SPANK, "spank.h")],
    "railyard_util": [(MPI, "MPI"), (NCCL, "NCCL"), (HDF5, "HDF5"), (SLURM, "Slurm")],
    # The planner knows nothing of Slurm; only the SPANK glue does.
    "railyard_plugin_core": [(SLURM, "Slurm"), (MPI, "MPI"), (HDF5, "HDF5")],
}
# Layers that must exist in every build (the CUDA ones only where CUDA is built).
ALWAYS = {"railyard_util", "railyard_hdf5_io", "railyard_model", "railyard_optim", "railyard_engine", "railyard_comm", "railyard_data",
          "railyard_ckpt", "railyard_preempt", "railyard_metrics", "railyard_train",
          "railyard_plugin_core"}
# Headers whose absence from a layer's include path the build itself guarantees.
WALLS = {"railyard_model": ["mpi.h", "hdf5.h"], "railyard_cuda_kernels": ["mpi.h", "hdf5.h"],
         "railyard_plugin_core": ["mpi.h", "hdf5.h"]}


def objects_by_target():
    """{target: {object: [header paths]}} from `ninja -t deps`."""
    out = subprocess.run(["ninja", "-C", BUILD, "-t", "deps"], check=True, capture_output=True,
                         text=True).stdout
    graph, current = {}, None
    for line in out.splitlines():
        if line and not line[0].isspace():
            obj = line.split(":")[0]
            m = re.search(r"CMakeFiles/([^/]+)\.dir/", obj)
            current = graph.setdefault(m.group(1), {}).setdefault(obj, []) if m else None
        elif current is not None and line.strip():
            current.append(line.strip())
    return graph


def check_include_graph(graph):
    failures = []
    for target, rules in RULES.items():
        objects = graph.get(target)
        if not objects:
            if target in ALWAYS:
                failures.append(f"{target}: no objects in Ninja's dependency log; build "
                                f"{BUILD} first (cmake --build {BUILD})")
            continue
        for obj, headers in objects.items():
            for pattern, what in rules:
                bad = [h for h in headers if re.search(pattern, h)]
                if bad:
                    failures.append(f"{target}: {obj} includes {bad[0]} ({what}), which this "
                                    f"layer must not know (docs/architecture.md)")
        print(f"ok: {target}: {len(objects)} objects, none includes a forbidden header")
    return failures


def check_walls():
    failures = []
    commands = json.load(open(os.path.join(BUILD, "compile_commands.json")))
    for target, headers in WALLS.items():
        entry = next((c for c in commands if f"/{target}.dir/" in c.get("output", c["command"])
                      and c["file"].endswith(".cpp")), None)
        if entry is None:
            if target in ALWAYS:
                failures.append(f"{target}: not in compile_commands.json")
            continue
        args = shlex.split(entry["command"])
        for header in headers:
            with tempfile.TemporaryDirectory() as tmp:
                probe = os.path.join(tmp, "probe.cpp")
                with open(probe, "w") as f:
                    f.write(f"#include <{header}>\nint main() {{ return 0; }}\n")
                cmd = [a for a in args if a not in ("-c",)]
                # Same compiler and flags; the probe instead of the source, preprocessing only.
                cmd = [probe if a == entry["file"] else a for a in cmd]
                if "-o" in cmd:
                    i = cmd.index("-o")
                    del cmd[i:i + 2]
                if cmd and cmd[0].endswith("ccache"):
                    cmd = cmd[1:]
                r = subprocess.run(cmd + ["-E", "-o", os.devnull], cwd=entry["directory"],
                                   capture_output=True, text=True)
                if r.returncode == 0:
                    failures.append(f"{target}: a source including <{header}> compiles with "
                                    f"this layer's flags; its dependencies must stay private")
                elif header not in r.stderr:
                    failures.append(f"{target}: the <{header}> probe failed for another "
                                    f"reason: {r.stderr.strip()[:300]}")
                else:
                    print(f"ok: {target}: <{header}> is not reachable (the build fails)")
    return failures


# folder -> (forbidden pattern in its sources, what it means)
SOURCE_RULES = {
    "runtime/ckpt": (r"\bMPI_[A-Z][a-z_]+\s*\(", "a raw MPI call; use the Communicator"),
}


def check_sources():
    failures = []
    for folder, (pattern, what) in SOURCE_RULES.items():
        names = sorted(os.listdir(os.path.join(SOURCE, folder)))
        sources = [n for n in names if n.endswith((".cpp", ".hpp"))]
        if not sources:
            failures.append(f"{folder}: no sources found under {SOURCE}")
        for name in sources:
            text = open(os.path.join(SOURCE, folder, name)).read()
            for n, line in enumerate(text.splitlines(), 1):
                code = line.split("//", 1)[0]
                if re.search(pattern, code):
                    failures.append(f"{folder}/{name}:{n}: {what}: {line.strip()}")
        print(f"ok: {folder}: {len(sources)} sources checked for {what.split(';')[0]}")
    return failures


def main():
    if not BUILD or not os.path.isfile(os.path.join(BUILD, "build.ninja")):
        print(f"skip: RAILYARD_BUILD_DIR ({BUILD!r}) is not a Ninja build")
        return 77
    if not SOURCE or not os.path.isdir(os.path.join(SOURCE, "runtime")):
        print(f"FAIL: RAILYARD_SOURCE_DIR ({SOURCE!r}) is not the source tree")
        return 1
    failures = check_include_graph(objects_by_target()) + check_walls() + check_sources()
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
