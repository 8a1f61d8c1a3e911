#!/usr/bin/env python3
"""PyTorch peer benchmark: the DiT's flow-matching training step on CPU (the peer of `temper bench dit`).

What it measures
    One step = the SiT linear interpolant x_t = (1 - t) x0 + t x1 (x0 ~ N(0, 1) noise, x1 a fixed batch of
    N(0, 1) "images", t ~ U(0, 1), labels uniform over the classes plus the null label), v = DiT(x_t, t, y),
    loss = mean((v - (x1 - x0))^2), backward, torch.optim.AdamW(lr=1e-4, torch defaults otherwise: betas
    (0.9, 0.999), eps 1e-8, weight_decay 0.01, for-loop implementation on CPU) step, zero_grad(set_to_none=True).
    The noise, t and y are drawn inside the step (as a trainer does). `--warmup` steps run untimed, then
    `--steps` are timed with time.perf_counter():  images_per_s = batch * steps / elapsed, and each step's
    seconds in step_s (a median is robust to a noisy neighbour) and its process CPU seconds in cpu_step_s
    (time.process_time: on a shared machine with --threads 1, the work without the time other processes held the
    core; with more threads it counts OpenMP's spinning too).

    The network is tools/ref/make_dit_golden.py's DiT (the layout the goldens check temper's against:
    facebookresearch/DiT's modules, learn_sigma off, timestep sinusoid of t * t_scale), with attention through
    torch.nn.functional.scaled_dot_product_attention (timm's fused_attn, what DiT runs), DiT's init.
    f32 = plain fp32. bf16 = torch.autocast("cpu", dtype=torch.bfloat16) around the forward and the loss (fp32
    master weights, grads and AdamW state).

How to run (repository root, the pinned venv of tools/ref/requirements.txt), beside temper on the same shape:
    .venv/bin/python bench/peers/dit_step.py --image 16 --channels 3 --patch 2 --hidden 128 --depth 4 \\
        --heads 4 --batch 64 --threads 2 --dtype f32 --steps 10 --warmup 2 --json
    ./build/bin/temper bench dit (the same options)
Export OMP_NUM_THREADS=N and MKL_NUM_THREADS=N as --threads, on an otherwise idle machine.

Output with --json: one line {"engine":"pytorch","torch":...,"images_per_s":...,"step_s":[...],...}.
"""

import argparse
import contextlib
import json
import math
import os
import resource
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "ref"))
import make_dit_golden as ref  # noqa: E402


def sdpa_forward(self, x):
    B, T, C = x.shape
    D = C // self.heads
    qkv = self.qkv(x).reshape(B, T, 3, self.heads, D).permute(2, 0, 3, 1, 4)
    o = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
    return self.proj(o.transpose(1, 2).reshape(B, T, C))


def dit_init(model):
    """DiT's initialize_weights: xavier-uniform linears, zero biases, N(0, 0.02) class table and timestep MLP,
    zero adaLN modulations and final layer."""
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight)
            torch.nn.init.zeros_(m.bias)
    w = model.x_embedder.proj.weight
    torch.nn.init.xavier_uniform_(w.view(w.shape[0], -1))
    torch.nn.init.zeros_(model.x_embedder.proj.bias)
    torch.nn.init.normal_(model.y_embedder.embedding_table.weight, std=0.02)
    torch.nn.init.normal_(model.t_embedder.mlp[0].weight, std=0.02)
    torch.nn.init.normal_(model.t_embedder.mlp[2].weight, std=0.02)
    for b in model.blocks:
        torch.nn.init.zeros_(b.adaLN_modulation[-1].weight)
        torch.nn.init.zeros_(b.adaLN_modulation[-1].bias)
    fl = model.final_layer
    for m in (fl.adaLN_modulation[-1], fl.linear):
        torch.nn.init.zeros_(m.weight)
        torch.nn.init.zeros_(m.bias)


def main():
    ap = argparse.ArgumentParser(description="PyTorch CPU DiT flow-matching training step (peer benchmark)")
    ap.add_argument("--image", type=int, default=16)
    ap.add_argument("--channels", type=int, default=3)
    ap.add_argument("--patch", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--mlp-ratio", type=float, default=4.0)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--t-scale", type=float, default=1000.0)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    ref.Attention.forward = sdpa_forward
    model = ref.DiT(image=a.image, channels=a.channels, patch=a.patch, hidden=a.hidden, depth=a.depth,
                    heads=a.heads, mlp_ratio=a.mlp_ratio, classes=a.classes, t_scale=a.t_scale)
    model.pos_embed = model.pos_embed.float()
    dit_init(model)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x1 = torch.randn(a.batch, a.channels, a.image, a.image)

    def autocast():
        return torch.autocast("cpu", dtype=torch.bfloat16) if a.dtype == "bf16" else contextlib.nullcontext()

    def step():
        x0 = torch.randn_like(x1)
        t = torch.rand(a.batch)
        y = torch.randint(0, a.classes + 1, (a.batch,))
        tb = t.view(-1, 1, 1, 1)
        xt = (1 - tb) * x0 + tb * x1
        with autocast():
            v = model(xt, t, y)
            loss = ((v.float() - (x1 - x0)) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    for _ in range(a.warmup):
        step()
    losses, step_s, cpu_s = [], [], []
    t0 = time.perf_counter()
    for _ in range(a.steps):
        ts, cs = time.perf_counter(), time.process_time()
        losses.append(step())
        step_s.append(round(time.perf_counter() - ts, 4))
        cpu_s.append(round(time.process_time() - cs, 4))
    elapsed = time.perf_counter() - t0
    result = {
        "engine": "pytorch", "torch": torch.__version__, "image": a.image, "channels": a.channels, "patch": a.patch,
        "hidden": a.hidden, "depth": a.depth, "heads": a.heads, "batch": a.batch, "threads": a.threads,
        "dtype": a.dtype, "params": sum(p.numel() for p in model.parameters()),
        "images_per_s": round(a.batch * a.steps / elapsed, 2), "step_s": step_s, "cpu_step_s": cpu_s, "final_loss": losses[-1],
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    if a.json:
        sys.stdout.write(json.dumps(result) + "\n")
    else:
        med = sorted(step_s)[len(step_s) // 2]
        print(f"pytorch {torch.__version__} DiT {result['params'] / 1e6:.2f}M params, {a.image}x{a.image}x{a.channels} "
              f"patch {a.patch}, batch {a.batch}, {a.threads} threads, {a.dtype}: {result['images_per_s']:.1f} images/s, "
              f"median step {med:.4f} s")
        print("losses:", " ".join(f"{x:.4f}" for x in losses))


if __name__ == "__main__":
    main()
