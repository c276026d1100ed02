#!/usr/bin/env python3
"""What PyTorch's own attention kernels take at railyard's attention shape (issue 12): causal
SDPA, bf16, B=16, H=12, T=1024, head dim 64, through each backend PyTorch offers here (FlashAttention-2,
memory-efficient, cuDNN). Per backend: median forward time, median backward time (the forward's
graph kept, backward alone timed), and whether two backward passes give the same bits (the
FlashAttention-2 and memory-efficient backwards sum dQ with float atomics). The reference for an
own deterministic backward: railyard's cuDNN backward runs 320 us a call at this shape
(sdpa-plans.json). Prints a table; --json writes the figures."""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}


def median_us(fn, runs, warmup):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(times)


def measure(backend, q, k, v, dout, runs, warmup):
    with sdpa_kernel([BACKENDS[backend]]):
        forward_us = median_us(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                               runs, warmup)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)

        def backward():
            return torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)

        backward_us = median_us(backward, runs, warmup)
        first, second = backward(), backward()
    same = all(torch.equal(a, b) for a, b in zip(first, second))
    return {"forward_us": forward_us, "backward_us": backward_us, "backward_same_bits": same}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--json", default="")
    a = p.parse_args()
    torch.manual_seed(0)
    shape = (a.batch, a.heads, a.seq, a.head_dim)

    def tensor():
        return torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    q, k, v = tensor(), tensor(), tensor()
    dout = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    # Causal products: forward 2 (Q K^T, P V), backward 5, each B H T^2 hd / 2 multiply-adds.
    unit_flop = 2.0 * a.batch * a.heads * a.seq * a.seq * a.head_dim / 2
    results = {}
    print(f"{'backend':10s} {'fwd us':>9s} {'bwd us':>9s} {'bwd TFLOP/s':>12s}  bwd same bits")
    for name in BACKENDS:
        try:
            r = measure(name, q, k, v, dout, a.runs, a.warmup)
        except RuntimeError as e:  # a backend this build or GPU does not offer
            r = {"error": str(e).splitlines()[0][:200]}
            print(f"{name:10s} not available: {r['error']}")
        else:
            r["backward_tflops"] = 5 * unit_flop / (r["backward_us"] * 1e-6) / 1e12
            print(f"{name:10s} {r['forward_us']:9.1f} {r['backward_us']:9.1f} "
                  f"{r['backward_tflops']:12.1f}  {r['backward_same_bits']}")
        results[name] = r
    if a.json:
        shape_d = {"batch": a.batch, "seq": a.seq, "heads": a.heads, "head_dim": a.head_dim}
        with open(a.json, "w") as f:
            json.dump({"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                       "shape": shape_d, "causal": True, "backends": results}, f, indent=2)


if __name__ == "__main__":
    main()
