#!/usr/bin/env python3
"""PyTorch reference for railyard's GPU benchmark: the same GPT-2 124M (12 layers, 12 heads,
768 wide, vocab 50257 padded to 50304, tied LM head, GELU tanh, LayerNorm eps 1e-5), the same
batch (micro-batch 16, seq 1024 per GPU), bf16 autocast over fp32 master weights, fused AdamW,
reading the same token file railyard-train reads (HDF5 /tokens). Eager or torch.compile; DDP when
started by torchrun (WORLD_SIZE > 1). Prints one JSON line with the timing summary."""
import argparse
import json
import math
import os
import statistics
import time

import h5py
import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.fc_proj = nn.Linear(4 * dim, dim)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        shape = (B, T, self.heads, C // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, max_seq, layers, heads, dim):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(max_seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.lnf = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x)
        logits = self.lm_head(self.lnf(x))
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--peak-tflops", type=float, default=790.0)
    a = ap.parse_args()

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    if world > 1:
        dist.init_process_group("nccl")
    torch.manual_seed(1)
    tokens = np.asarray(h5py.File(a.data, "r")["tokens"][:], dtype=np.int64)
    vocab, padded, layers, heads, dim = 50257, 50304, 12, 12, 768
    model = GPT(padded, a.seq, layers, heads, dim).cuda()
    nparams = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    run = model
    if world > 1:
        run = nn.parallel.DistributedDataParallel(model, device_ids=[local])
    if a.compile:
        run = torch.compile(run)

    span = a.batch * a.seq + 1
    per_step = world * a.batch * a.seq
    times = []
    for step in range(a.steps):
        # The same contiguous windows in the same order as a sequential reader would take.
        base = (step * per_step + rank * a.batch * a.seq) % (len(tokens) - span)
        chunk = torch.from_numpy(tokens[base:base + span]).cuda(non_blocking=True)
        x = chunk[:-1].view(a.batch, a.seq)
        y = chunk[1:].view(a.batch, a.seq)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = run(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        if rank == 0 and (step % 10 == 0 or step == a.steps - 1):
            print(f"step {step} loss {loss.item():.4f} {times[-1]*1e3:.1f} ms", flush=True)
    med = statistics.median(times[10:])
    tok_s = a.batch * a.seq / med
    flops_tok = 6 * nparams + 6 * layers * a.seq * dim  # 6N + attention (12 L T C / 2, causal)
    if rank == 0:
        print(json.dumps({
            "system": "pytorch " + ("compile" if a.compile else "eager") + f" x{world}",
            "params": nparams, "median_step_ms": med * 1e3, "tokens_per_s_per_gpu": tok_s,
            "mfu": tok_s * flops_tok / (a.peak_tflops * 1e12),
            "peak_mem_gib": torch.cuda.max_memory_allocated() / 2**30,
            "last_loss": loss.item()}), flush=True)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
