#!/usr/bin/env python3
"""railyard <-> Hugging Face transformers GPT-2, checked with transformers itself (GPU machine:
torch + transformers, no internet). Run by `bash bench/gpu_bench.sh build hf`, or alone, in
an environment where the railyard binaries run:

    python3 bench/hf_check.py --build build-gpu --out /tmp/railyard-bench

1. railyard -> transformers: a small model with the GPT-2 vocabulary (50257, padded to 50304
   inside railyard) is trained a few steps on a .npy token file, exported with
   `railyard-ckpt export --format hf`, and loaded with GPT2LMHeadModel.from_pretrained(DIR):
   no missing, unexpected or mismatched weights and no warning about them. Its logits on a
   prompt must equal railyard's own forward (`railyard-ckpt sample --dump-logits`) in fp32.
2. transformers -> railyard: the loss transformers computes on a batch must equal the step-0
   loss of `railyard-train --init-from DIR` on that batch (a .npy file holding exactly one
   global batch, so the data order cannot matter), on the CPU and, with a GPU, in CUDA fp32.
3. A directory written by transformers' own save_pretrained (a fresh GPT2LMHeadModel) starts
   railyard-train; the fine-tuned checkpoint exported again loads back into transformers with
   railyard's logits.
Prints one JSON object with every figure; exit status 1 when a check fails."""
import argparse
import json
import logging
import os
import pathlib
import shutil
import subprocess
import sys
import warnings

import numpy as np
import torch

ap = argparse.ArgumentParser()
ap.add_argument("--build", default="build-gpu")
ap.add_argument("--out", default="/tmp/railyard-bench")
args = ap.parse_args()
# railyard-train starts MPI as a singleton; the GPU machine runs everything as root.
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
tools = pathlib.Path(args.build) / "runtime" / "tools"
work = pathlib.Path(args.out) / "hf_check"
shutil.rmtree(work, ignore_errors=True)
work.mkdir(parents=True)

import transformers  # noqa: E402  (after argparse, so --help needs no transformers)
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

L, D, H, T, B, V = 2, 64, 4, 32, 4, 50257
result = {"transformers": transformers.__version__, "torch": torch.__version__, "checks": {}}
failed = []


def check(name, ok, **figures):
    result["checks"][name] = {"ok": bool(ok), **figures}
    if not ok:
        failed.append(name)


def run(*cmd):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def train(*extra, log):
    run(tools / "railyard-train", "--batch", B, "--seq", T, "--log-every", 1, "--log-json", log,
        *extra)
    return [json.loads(x) for x in pathlib.Path(log).read_text().splitlines()]


def load(directory):
    """from_pretrained with every warning and log record captured."""
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    tlog = transformers.utils.logging.get_logger("transformers")
    tlog.addHandler(handler)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, info = GPT2LMHeadModel.from_pretrained(str(directory), output_loading_info=True)
    tlog.removeHandler(handler)
    messages = [r.getMessage() for r in records if r.levelno >= logging.WARNING]
    messages += [str(w.message) for w in caught]
    weight_msgs = [m for m in messages if "weight" in m.lower() or "initialized" in m.lower()]
    return model.eval(), info, weight_msgs


def hf_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].double().numpy()


def hf_loss(model, tokens):
    x = torch.tensor(tokens[:B * T].reshape(B, T).astype(np.int64))
    y = torch.tensor(np.stack([tokens[s * T + 1:(s + 1) * T + 1] for s in range(B)]).astype(np.int64))
    with torch.no_grad():
        z = model(x).logits.double()
    return torch.nn.functional.cross_entropy(z.reshape(-1, z.shape[-1]), y.reshape(-1)).item()


def step0(directory, batch, device, tag):
    extra = ["--device", device] + (["--precision", "fp32"] if device == "cuda" else [])
    rec = train("--data", batch, "--init-from", directory, "--steps", 1, *extra,
                log=work / f"init_{tag}.jsonl")
    return [r["loss"] for r in rec if r["type"] == "step"][0]


def compare_logits(name, model, ckpt_or_dir, prompt):
    dump = work / f"{name}_logits.npy"
    run(tools / "railyard-ckpt", "sample", ckpt_or_dir, "--prompt-ids", ",".join(map(str, prompt)),
        "--tokens", 0, "--dump-logits", dump, "--force")
    ours, ref = np.load(dump).astype(np.float64), hf_logits(model, prompt)
    err = float(np.abs(ours - ref).max())
    check(name, ours.shape == ref.shape and err < 1e-4 * max(1.0, np.abs(ref).max()),
          max_abs_diff=err, max_abs_logit=float(np.abs(ref).max()))


rng = np.random.default_rng(7)
# Tokens with some structure (a repeated random phrase) so a few steps move the weights.
phrase = rng.integers(0, V, 97)
train_tokens = np.tile(phrase, 200).astype(np.uint16)
np.save(work / "train.npy", train_tokens)
batch = rng.integers(0, V, B * T + 1).astype(np.uint16)
np.save(work / "batch.npy", batch)
prompt = [int(t) for t in rng.integers(0, V, 20)]

# ---- 1. railyard -> transformers -----------------------------------------------------------
ck = work / "ck"
train("--data", work / "train.npy", "--vocab", V, "--layers", L, "--dim", D, "--heads", H,
      "--device", "cpu", "--steps", 8, "--lr", "3e-3", "--warmup", 2, "--ckpt-dir", ck,
      log=work / "train.jsonl")
ckpt = sorted(ck.glob("ckpt-*.h5"))[-1]
hf = work / "hf"
run(tools / "railyard-ckpt", "export", ckpt, "--format", "hf", "-o", hf)
model, info, msgs = load(hf)
check("from_pretrained_clean", not any(info.get(k) for k in
      ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs")) and not msgs,
      loading_info={k: list(map(str, v)) for k, v in info.items()}, warnings=msgs)
check("tied_head", model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr())
compare_logits("export_logits", model, ckpt, prompt)

# ---- 2. transformers' loss = railyard's --init-from step-0 loss ----------------------------
want = hf_loss(model, batch)
for device in ["cpu"] + (["cuda"] if torch.cuda.is_available() else []):
    got = step0(hf, work / "batch.npy", device, device)
    tol = 1e-5 if device == "cpu" else 1e-4
    check(f"init_from_step0_loss_{device}", abs(got - want) < tol * want, railyard=got,
          transformers=want, rel_diff=abs(got - want) / want)

# ---- 3. a directory transformers wrote -> fine-tune in railyard -> back --------------------
torch.manual_seed(3)
fresh = GPT2LMHeadModel(GPT2Config(vocab_size=V, n_positions=T, n_embd=D, n_layer=L, n_head=H,
                                   resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)).eval()
saved = work / "hf_saved"
fresh.save_pretrained(str(saved))
want = hf_loss(fresh, batch)
got = step0(saved, work / "batch.npy", "cpu", "saved")
check("save_pretrained_step0_loss", abs(got - want) < 1e-5 * want, railyard=got,
      transformers=want)
ck2 = work / "ck2"
train("--data", work / "train.npy", "--init-from", saved, "--device", "cpu", "--steps", 5,
      "--lr", "1e-3", "--warmup", 1, "--ckpt-dir", ck2, log=work / "finetune.jsonl")
back = work / "hf_finetuned"
run(tools / "railyard-ckpt", "export", sorted(ck2.glob("ckpt-*.h5"))[-1], "--format", "hf",
    "-o", back)
model2, info2, msgs2 = load(back)
check("finetuned_from_pretrained_clean", not any(info2.get(k) for k in
      ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs")) and not msgs2,
      warnings=msgs2)
compare_logits("finetuned_logits", model2, sorted(ck2.glob("ckpt-*.h5"))[-1], prompt)

result["failed"] = failed
print(json.dumps(result, indent=1))
(work / "hf_check.json").write_text(json.dumps(result, indent=1) + "\n")
sys.exit(1 if failed else 0)
