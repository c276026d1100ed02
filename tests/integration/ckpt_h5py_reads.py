#!/usr/bin/python3
"""A checkpoint is readable without railyard: h5py finds every documented attribute and dataset
with the exact values written (a known pattern over the flat layout), tensors listed in model
order; railyard-ckpt list/verify/inspect agree; the safetensors export parses with json+numpy
and holds the same parameters; a damaged file fails verify with the reason; --help and bad
options behave as in the other tools.
Uses Debian's /usr/bin/python3 (python3-h5py, python3-numpy)."""
import json
import os
import shutil
import struct
import subprocess
import sys

try:
    import h5py
    import numpy as np
except ImportError as e:
    print(f"skip: {e}", file=sys.stderr)
    sys.exit(77)

build = os.environ["RAILYARD_BUILD_DIR"]
bench = os.path.join(build, "bench", "checkpoint_bench")
tool = os.path.join(build, "runtime", "tools", "railyard-ckpt")
for exe in (bench, tool):
    if not os.access(exe, os.X_OK):
        print(f"skip: {exe} not built", file=sys.stderr)
        sys.exit(77)
tmp = os.environ.get("RAILYARD_TEST_TMP", "/tmp/ckpt_h5py_reads")
shutil.rmtree(tmp, ignore_errors=True)
os.makedirs(tmp)
d = os.path.join(tmp, "ckpt")
L, D, H, V, T = 2, 32, 2, 100, 32
subprocess.run([bench, "--dir", d, "--mode", "pattern", "--layers", str(L), "--dim", str(D),
                "--heads", str(H), "--vocab", str(V), "--seq", str(T), "--steps", "2"],
               check=True)
assert sorted(os.listdir(d)) == ["ckpt-00000001.h5", "ckpt-00000002.h5"], os.listdir(d)
assert os.stat(d).st_mode & 0o777 == 0o700
path = os.path.join(d, "ckpt-00000002.h5")
assert os.stat(path).st_mode & 0o777 == 0o600

PV = (V + 63) // 64 * 64
names, shapes = ["wte", "wpe"], [(PV, D), (T, D)]
for l in range(L):
    for n, s in [("ln1.weight", (D,)), ("ln1.bias", (D,)), ("attn.qkv.weight", (3 * D, D)),
                 ("attn.qkv.bias", (3 * D,)), ("attn.proj.weight", (D, D)),
                 ("attn.proj.bias", (D,)), ("ln2.weight", (D,)), ("ln2.bias", (D,)),
                 ("mlp.fc.weight", (4 * D, D)), ("mlp.fc.bias", (4 * D,)),
                 ("mlp.proj.weight", (D, 4 * D)), ("mlp.proj.bias", (D,))]:
        names.append(f"h.{l}.{n}")
        shapes.append(s)
names += ["lnf.weight", "lnf.bias"]
shapes += [(D,), (D,)]

with h5py.File(path, "r") as f:
    a = f.attrs
    assert a["format_version"] == 1
    assert a["step"] == 2 and a["tokens_seen"] == 2048 and a["adam_step"] == 2
    assert a["lr"] == 6e-4 and a["world_size"] == 1
    assert a["loader_seed"] == 7 and a["loader_epoch"] == 0 and a["loader_cursor"] == 2
    assert a["created"].decode().endswith("Z") and a["created_unix"] > 1.7e9
    assert "meta_xxh3_64" in a
    m = f["model"].attrs
    assert (m["vocab"], m["padded_vocab"], m["max_seq"], m["layers"], m["heads"], m["dim"]) == \
        (V, PV, T, L, H, D)
    assert json.loads(bytes(f["config_json"][()]).decode()) == {"bench": True, "layers": L}
    assert list(f["rng_state"][()]) == [1, 2, 3, 4]
    assert list(f["params"].keys()) == names, list(f["params"].keys())
    offset = 0
    params = {}
    for name, shape in zip(names, shapes):
        n = int(np.prod(shape))
        flat = np.arange(offset, offset + n)
        want = ((flat % 4096) / 4096.0).astype(np.float32).reshape(shape)
        for group, scale in (("params", 1.0), ("adam/m", -0.5), ("adam/v", 0.25)):
            ds = f[f"{group}/{name}"]
            assert ds.dtype == np.float32 and ds.shape == shape, (group, name, ds.shape)
            assert "xxh3_64" in ds.attrs
            np.testing.assert_array_equal(ds[()], (want * np.float32(scale)).astype(np.float32))
        params[name] = f[f"params/{name}"][()]
        offset += (n + 7) // 8 * 8  # tensors start on 8-element boundaries

out = subprocess.run([tool, "list", d], check=True, capture_output=True, text=True).stdout
assert out.count("valid") == 2 and "INVALID" not in out, out
subprocess.run([tool, "verify", path], check=True)
out = subprocess.run([tool, "inspect", path], check=True, capture_output=True, text=True).stdout
assert "h.1.mlp.proj.weight" in out and "step            2" in out, out

st = os.path.join(tmp, "model.safetensors")
subprocess.run([tool, "export", path, "--format", "safetensors", "-o", st], check=True)
with open(st, "rb") as fh:
    blob = fh.read()
hlen = struct.unpack("<Q", blob[:8])[0]
header = json.loads(blob[8:8 + hlen])
data = blob[8 + hlen:]
assert (8 + hlen) % 8 == 0
meta = header.pop("__metadata__")
assert meta["railyard_step"] == "2" and meta["dim"] == str(D)
assert sorted(header.keys()) == sorted(names)
end = 0
for name, shape in zip(names, shapes):
    h = header[name]
    assert h["dtype"] == "F32" and tuple(h["shape"]) == shape
    b, e = h["data_offsets"]
    assert b == end
    end = e
    arr = np.frombuffer(data[b:e], dtype="<f4").reshape(shape)
    np.testing.assert_array_equal(arr, params[name])
assert end == len(data)

# A flipped byte inside /params/wte: verify says which dataset is damaged.
with h5py.File(path, "r") as f:
    off = f["params/wte"].id.get_offset()
with open(path, "r+b") as fh:
    fh.seek(off + 1000)
    c = fh.read(1)
    fh.seek(off + 1000)
    fh.write(bytes([c[0] ^ 0x01]))
r = subprocess.run([tool, "verify", path], capture_output=True, text=True)
assert r.returncode == 1 and "checksum mismatch in dataset /params/wte" in r.stderr, r.stderr
out = subprocess.run([tool, "list", d], check=True, capture_output=True, text=True).stdout
assert out.count("INVALID") == 1, out
r = subprocess.run([tool, "export", path, "--format", "onnx", "-o", st], capture_output=True,
                   text=True)
assert r.returncode == 2 and "not supported" in r.stderr
# Options as in the other tools (Boost.Program_options): --help per command, usage errors exit 2.
r = subprocess.run([tool, "export", "--help"], capture_output=True, text=True)
assert r.returncode == 0 and "--format" in r.stdout and "--output" in r.stdout, r
r = subprocess.run([tool, "export", path, "--format=safetensors", "--bogus"], capture_output=True,
                   text=True)
assert r.returncode == 2 and "--bogus" in r.stderr, r
r = subprocess.run([tool, "export", path, "--format", "hf"], capture_output=True, text=True)
assert r.returncode == 2 and "missing -o OUT" in r.stderr, r
r = subprocess.run([tool, "verify", path, path], capture_output=True, text=True)
assert r.returncode == 2 and "usage:" in r.stderr, r
print("ok")
