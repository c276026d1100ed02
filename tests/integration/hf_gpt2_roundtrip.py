#!/usr/bin/python3
"""train -> export hf -> read back without railyard, and HF -> railyard again.

A tiny model (vocabulary 300, so railyard pads the embedding to 384 rows) is trained and
exported with `railyard-ckpt export --format hf`. The directory is read with json and numpy
only (the safetensors format parsed by hand); every tensor must have transformers' GPT-2 name,
shape and Conv1D orientation, and equal the checkpoint's parameter. An independent NumPy GPT-2
forward on those weights must give railyard's logits (`railyard-ckpt sample --dump-logits`)
within fp32 tolerance, and its mean loss on a one-batch .npy token file must equal the step-0
loss of `railyard-train --init-from DIR`, as must the loss from railyard's own logits of the
checkpoint. Also: sampling is deterministic and the same from the
checkpoint and the directory; a checkpoint to resume wins over --init-from; no overwrite without
--force; contradicting options, a non-GPT-2 config and a shape that does not fit are refused
naming the field and both values."""
import json
import os
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent / "lib"))
try:
    import h5py
    import numpy as np
except ImportError as e:
    print(f"skip: {e}", file=sys.stderr)
    sys.exit(77)
from train_common import BUILD, DATA, check, fresh_tmp, train  # noqa: E402

CKPT = BUILD / "runtime" / "tools" / "railyard-ckpt"
L, D, H, V, T, B = 2, 32, 4, 300, 16, 4
SHAPE = ["--layers", L, "--dim", D, "--heads", H, "--seq", T, "--batch", B, "--device", "cpu"]


def run(cmd, expect=0):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300)
    if expect is not None and p.returncode != expect:
        sys.exit(f"FAIL: {' '.join(map(str, cmd))}: exit {p.returncode}, expected {expect}\n"
                 f"{p.stdout}\n{p.stderr}")
    return p


def read_safetensors(path):
    raw = pathlib.Path(path).read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    tensors, end = {}, 0
    for name, t in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        check(t["dtype"] == "F32", f"{name}: dtype {t['dtype']}")
        a, b = t["data_offsets"]
        check(a == end, f"{name}: data starts at {a}, previous tensor ended at {end}")
        end = b
        tensors[name] = np.frombuffer(data[a:b], dtype="<f4").reshape(t["shape"])
    check(end == len(data), f"tensors cover {end} bytes of {len(data)}")
    return tensors, meta


def expected_names():
    names = {"transformer.wte.weight": (V, D), "transformer.wpe.weight": (T, D),
             "transformer.ln_f.weight": (D,), "transformer.ln_f.bias": (D,)}
    for l in range(L):
        p = f"transformer.h.{l}."
        names.update({p + "ln_1.weight": (D,), p + "ln_1.bias": (D,),
                      p + "attn.c_attn.weight": (D, 3 * D), p + "attn.c_attn.bias": (3 * D,),
                      p + "attn.c_proj.weight": (D, D), p + "attn.c_proj.bias": (D,),
                      p + "ln_2.weight": (D,), p + "ln_2.bias": (D,),
                      p + "mlp.c_fc.weight": (D, 4 * D), p + "mlp.c_fc.bias": (4 * D,),
                      p + "mlp.c_proj.weight": (4 * D, D), p + "mlp.c_proj.bias": (D,)})
    return names


def layernorm(x, w, b):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-5) * w + b


def gpt2_logits(W, ids):
    """transformers' GPT2LMHeadModel forward, written from its definition, in float64."""
    W = {k: v.astype(np.float64) for k, v in W.items()}
    n = len(ids)
    x = W["transformer.wte.weight"][ids] + W["transformer.wpe.weight"][:n]
    mask = np.triu(np.ones((n, n), dtype=bool), 1)
    for l in range(L):
        p = lambda s: W[f"transformer.h.{l}.{s}"]  # noqa: E731
        h = layernorm(x, p("ln_1.weight"), p("ln_1.bias"))
        q, k, v = np.split(h @ p("attn.c_attn.weight") + p("attn.c_attn.bias"), 3, axis=-1)
        q, k, v = (a.reshape(n, H, D // H).transpose(1, 0, 2) for a in (q, k, v))
        att = q @ k.transpose(0, 2, 1) / np.sqrt(D // H)
        att[:, mask] = -np.inf
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        y = (att @ v).transpose(1, 0, 2).reshape(n, D)
        x = x + y @ p("attn.c_proj.weight") + p("attn.c_proj.bias")
        h = layernorm(x, p("ln_2.weight"), p("ln_2.bias"))
        f = h @ p("mlp.c_fc.weight") + p("mlp.c_fc.bias")
        f = 0.5 * f * (1 + np.tanh(np.sqrt(2 / np.pi) * (f + 0.044715 * f ** 3)))
        x = x + f @ p("mlp.c_proj.weight") + p("mlp.c_proj.bias")
    x = layernorm(x, W["transformer.ln_f.weight"], W["transformer.ln_f.bias"])
    return x @ W["transformer.wte.weight"].T


def mean_loss(W, tokens):
    total = 0.0
    for s in range(B):
        seq = tokens[s * T:(s + 1) * T + 1]
        z = gpt2_logits(W, seq[:-1])
        z = z - z.max(-1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
        total -= logp[np.arange(T), seq[1:]].sum()
    return total / (B * T)


def write_npy(path, arr):
    np.save(path, arr)
    return path


tmp = fresh_tmp("hf_gpt2_roundtrip")
data = tmp / "syn.h5"
run([DATA, "synthetic", "--tokens", 20000, "--vocab", V, "--seed", 5, "-o", data])
ck = tmp / "ck"
train(["--data", data, *SHAPE, "--steps", 12, "--lr", "3e-3", "--warmup", 2,
       "--ckpt-dir", ck, "--log-every", 0])
ckpt = ck / "ckpt-00000012.h5"
hf = tmp / "hf"

# ---- export ----------------------------------------------------------------------------------
run([CKPT, "export", ckpt, "--format", "hf", "-o", hf])
cfg = json.loads((hf / "config.json").read_text())
for key, want in [("model_type", "gpt2"), ("architectures", ["GPT2LMHeadModel"]),
                  ("n_embd", D), ("n_layer", L), ("n_head", H), ("n_positions", T),
                  ("n_ctx", T), ("vocab_size", V), ("activation_function", "gelu_new"),
                  ("layer_norm_epsilon", 1e-5), ("tie_word_embeddings", True)]:
    check(cfg.get(key) == want, f"config.json {key} = {cfg.get(key)!r}, expected {want!r}")
W, meta = read_safetensors(hf / "model.safetensors")
check(meta.get("format") == "pt", f"metadata {meta}")
names = expected_names()
check(set(W) == set(names), f"tensor names differ: extra {set(W) - set(names)}, "
      f"missing {set(names) - set(W)}")
for name, shape in names.items():
    check(W[name].shape == shape, f"{name}: shape {W[name].shape}, expected {shape}")
with h5py.File(ckpt, "r") as f:
    P = {k: v[()] for k, v in f["params"].items()}
check(P["wte"].shape == (384, D) and not P["wte"][V:].any(), "padding rows of wte are not zero")
check(np.array_equal(W["transformer.wte.weight"], P["wte"][:V]), "wte differs")
check(np.array_equal(W["transformer.h.1.attn.c_attn.weight"], P["h.1.attn.qkv.weight"].T),
      "c_attn is not the transposed qkv weight")
check(np.array_equal(W["transformer.h.0.mlp.c_proj.weight"], P["h.0.mlp.proj.weight"].T),
      "mlp.c_proj is not the transposed proj weight")
check(np.array_equal(W["transformer.h.0.ln_2.bias"], P["h.0.ln2.bias"]), "ln_2.bias differs")

# ---- logits: railyard's forward against the NumPy GPT-2 --------------------------------------
prompt = [7, 299, 0, 150, 42, 42, 3, 260, 11, 1]
logits = tmp / "logits.npy"
run([CKPT, "sample", ckpt, "--prompt-ids", ",".join(map(str, prompt)), "--tokens", 0,
     "--dump-logits", logits])
ours = np.load(logits)
ref = gpt2_logits(W, prompt)
check(ours.shape == (len(prompt), V), f"dumped logits have shape {ours.shape}")
err = np.abs(ours - ref).max()
check(err < 1e-4 * max(1.0, np.abs(ref).max()), f"logits differ from NumPy GPT-2 by {err}")
print(f"logits: max |railyard - numpy| = {err:.2e}")

# ---- sampling -------------------------------------------------------------------------------
def sample(model, seed):
    return run([CKPT, "sample", model, "--prompt-ids", "7,299,0", "--tokens", 20,
                "--temperature", "0.8", "--top-k", 50, "--seed", seed]).stdout.split()


a, b, c = sample(ckpt, 3), sample(ckpt, 3), sample(hf, 3)
check(a == b and len(a) == 20, f"same seed, different tokens: {a} / {b}")
check(a == c, f"checkpoint and HF directory sample differently: {a} / {c}")
check(sample(ckpt, 4) != a, "another seed gave the same 20 tokens")

# ---- HF -> railyard: the step-0 loss on a one-batch .npy file --------------------------------
rng = np.random.default_rng(9)
batch_tokens = rng.integers(0, V, B * T + 1).astype(np.uint16)
npy = write_npy(tmp / "batch.npy", batch_tokens)
_, _, rec = train(["--data", npy, "--init-from", hf, "--device", "cpu", "--seq", T,
                   "--batch", B, "--steps", 1, "--log-every", 1], log=tmp / "init.jsonl")
step0 = [r["loss"] for r in rec if r["type"] == "step"][0]
want = mean_loss(W, batch_tokens.astype(np.int64))
check(abs(step0 - want) < 1e-5 * want, f"--init-from step-0 loss {step0}, NumPy {want}")
# The same loss from railyard's forward on the checkpoint itself (its logits, dumped).
ck_loss = 0.0
for i in range(B):
    seq = batch_tokens[i * T:(i + 1) * T + 1].astype(np.int64)
    run([CKPT, "sample", ckpt, "--prompt-ids", ",".join(map(str, seq[:-1])), "--tokens", 0,
         "--dump-logits", tmp / f"seq{i}.npy"])
    z = np.load(tmp / f"seq{i}.npy").astype(np.float64)
    z -= z.max(-1, keepdims=True)
    ck_loss -= (z[np.arange(T), seq[1:]] - np.log(np.exp(z).sum(-1))).sum()
ck_loss /= B * T
check(abs(step0 - ck_loss) < 1e-6 * ck_loss, f"--init-from step-0 loss {step0}, checkpoint {ck_loss}")
init = [r["detail"] for r in rec if r["type"] == "run" and r["kind"] == "init"]
check(init and "weights from" in init[0], f"no init event: {rec}")
print(f"step-0 loss: --init-from {step0:.7f}, checkpoint {ck_loss:.7f}, numpy {want:.7f}")

# A checkpoint to resume wins over --init-from, and the log says so.
_, _, rec = train(["--data", data, "--init-from", hf, "--device", "cpu", "--seq", T,
                   "--batch", B, "--steps", 13, "--ckpt-dir", ck], log=tmp / "resume.jsonl")
kinds = [(r["kind"], r["detail"]) for r in rec if r["type"] == "run"]
check(any(k == "init" and "a checkpoint wins" in d for k, d in kinds), f"{kinds}")
check(any(k == "resume" for k, _ in kinds), f"did not resume: {kinds}")

# ---- refusals --------------------------------------------------------------------------------
before = (hf / "model.safetensors").read_bytes()
p = run([CKPT, "export", ck / "ckpt-00000013.h5", "--format", "hf", "-o", hf], expect=1)
check("--force" in p.stderr and (hf / "model.safetensors").read_bytes() == before,
      f"overwrote without --force: {p.stderr}")
run([CKPT, "export", ck / "ckpt-00000013.h5", "--format", "hf", "-o", hf, "--force"])
st = tmp / "plain.safetensors"
st.write_text("keep me")
run([CKPT, "export", ckpt, "--format", "safetensors", "-o", st], expect=1)
check(st.read_text() == "keep me", "the safetensors export overwrote a file without --force")
check((hf / "model.safetensors").read_bytes() != before, "--force did not overwrite")

_, err, _ = train(["--data", data, "--init-from", hf, "--layers", 3, "--device", "cpu",
                   "--seq", T], expect=2)
check("--layers 3 contradicts n_layer 2" in err, err)
_, err, _ = train(["--data", data, "--init-from", hf, "--seq", 32, "--device", "cpu"], expect=2)
check("--seq 32 exceeds n_positions 16" in err, err)


def broken(name, tokens=data, **changes):
    d = tmp / name
    d.mkdir()
    (d / "model.safetensors").symlink_to(hf / "model.safetensors")
    (d / "config.json").write_text(json.dumps({**cfg, **changes}))
    _, err, _ = train(["--data", tokens, "--init-from", d, "--device", "cpu", "--seq", T,
                       "--batch", B, "--steps", 1], expect=2)
    return err


err = broken("llama", model_type="llama")
check('model_type is "llama", railyard reads only "gpt2"' in err, err)
err = broken("relu", activation_function="relu")
check("activation_function is 'relu'" in err and "gelu_new" in err, err)
err = broken("eps", layer_norm_epsilon=1e-6)
check("layer_norm_epsilon is 1e-06" in err and "1e-05" in err, err)
err = broken("wide", n_positions=32)
check("transformer.wpe.weight has shape [16, 32], config.json needs [32, 32]" in err, err)
err = broken("small", vocab_size=200)
check("holds token 299, outside the model's vocab of 200" in err, err)
# Byte-level text (tokens < 128, vocab_size 256) is not data for a 200-token model.
(tmp / "ascii.txt").write_text("the quick brown fox jumps over the lazy dog\n" * 50)
text = tmp / "text.h5"
run([DATA, "text", tmp / "ascii.txt", "-o", text])
err = broken("bytes", tokens=text, vocab_size=200)
check("--data declares vocab_size 256, --init-from's config.json has vocab_size 200" in err, err)

# A byte-level model prints text: the prompt, then the continuation.
ck3 = tmp / "ck_text"
train(["--data", text, *SHAPE, "--steps", 3, "--ckpt-dir", ck3, "--log-every", 0])
out = subprocess.run([str(CKPT), "sample", str(ck3 / "ckpt-00000003.h5"), "--prompt", "the ",
                      "--tokens", "12", "--temperature", "0"], capture_output=True, check=True).stdout
check(out.startswith(b"the ") and len(out) == 4 + 12 + 1, f"byte-level sample printed {out!r}")
err = run([CKPT, "sample", ckpt, "--prompt", "the "], expect=1).stderr
check("--prompt-ids" in err and "vocab 300" in err, err)
print("ok")
