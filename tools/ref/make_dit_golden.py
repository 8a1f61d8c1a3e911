#!/usr/bin/env python3
"""Write the PyTorch goldens for temper's DiT (src/temper/flow/dit.h): forward and every gradient.

Reference script only (Python is never part of the engine). A plain PyTorch DiT with the layout of
facebookresearch/DiT models.py (Peebles & Xie 2023; SiT uses the same network): patch embedding (a
p x p stride-p convolution), fixed 2-D sin-cos position embedding, timestep embedding (sinusoid of
t * t_scale, Linear, SiLU, Linear), class embedding with a null class (CFG), blocks with adaLN-Zero
(shift/scale/gate from SiLU(c), c = t_emb + y_emb), bidirectional multi-head attention with a fused qkv
projection, an MLP with GELU(tanh), the final adaLN layer and linear to patches, unpatchify. DiT's
learn_sigma is left out: the output is a velocity with the input's channels.

Run from the repository root with the pinned environment (tools/ref/requirements.txt):

    .venv/bin/python tools/ref/make_dit_golden.py        # writes tests/data/golden/dit/*.safetensors

Each file holds the parameters (F32, torch's state_dict names; random, not DiT's zero init, so every
gradient is non-zero), the inputs (x = x_t [B, C, H, W], t [B], y [B] with the null label in one row,
target [B, C, H, W]) and, computed in float64 from exactly those F32 parameters: v = model(x, t, y),
loss = mean((v - target)^2) (the flow-matching loss for target = x1 - x0), and grad.<name> for every
parameter (stored as F32 after the f64 computation; the loss as F64). Metadata key "golden": a JSON string with the config and versions. Single-threaded and
bitwise reproducible.
"""

import argparse
import json
import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file

PINNED = {"torch": "2.5.1", "safetensors": "0.5.3"}
FREQ_DIM = 256  # DiT's frequency_embedding_size

CONFIGS = {
    # 16x16x3, patch 4: 16 tokens; hidden 64, 2 blocks, 4 heads (D = 16)
    "dit_rgb": dict(image=16, channels=3, patch=4, hidden=64, depth=2, heads=4, mlp_ratio=4.0, classes=5,
                    t_scale=1000.0, batch=3, seed=11),
    # 12x12x1, patch 2: 36 tokens (not a power of two); hidden 48, 2 blocks, 3 heads, FFN 72 (ratio 1.5)
    "dit_gray": dict(image=12, channels=1, patch=2, hidden=48, depth=2, heads=3, mlp_ratio=1.5, classes=3,
                     t_scale=1.0, batch=2, seed=12),
}


def timestep_embedding(t, dim, max_period=10000):
    """DiT's TimestepEmbedder.timestep_embedding: [cos(t f), sin(t f)], f_i = max_period^(-i / half)."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float64) / half).to(t.dtype)
    args = t[:, None] * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


def sincos_1d(dim, pos):
    omega = np.arange(dim // 2, dtype=np.float64) / (dim / 2.0)
    omega = 1.0 / 10000**omega
    out = np.einsum("m,d->md", pos.reshape(-1), omega)
    return np.concatenate([np.sin(out), np.cos(out)], axis=1)


def sincos_2d(dim, grid):
    """DiT's get_2d_sincos_pos_embed: first half from the column (w) coordinate, second from the row (h)."""
    gh = np.arange(grid, dtype=np.float64)
    gw = np.arange(grid, dtype=np.float64)
    g = np.stack(np.meshgrid(gw, gh), axis=0)  # g[0][i, j] = j, g[1][i, j] = i
    return np.concatenate([sincos_1d(dim // 2, g[0]), sincos_1d(dim // 2, g[1])], axis=1)


def modulate(x, shift, scale):
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, T, C = x.shape
        D = C // self.heads
        qkv = self.qkv(x).reshape(B, T, 3, self.heads, D).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D), dim=-1)  # no mask: patches see each other
        return self.proj((att @ v).transpose(1, 2).reshape(B, T, C))


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, dim, heads, ffn):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.mlp = Mlp(dim, ffn)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))

    def forward(self, x, c):
        sh1, sc1, g1, sh2, sc2, g2 = self.adaLN_modulation(c).chunk(6, dim=1)
        x = x + g1.unsqueeze(1) * self.attn(modulate(self.norm1(x), sh1, sc1))
        return x + g2.unsqueeze(1) * self.mlp(modulate(self.norm2(x), sh2, sc2))


class DiT(nn.Module):
    def __init__(self, image, channels, patch, hidden, depth, heads, mlp_ratio, classes, t_scale, **_):
        super().__init__()
        self.channels, self.patch, self.t_scale = channels, patch, t_scale
        self.grid = image // patch
        self.x_embedder = nn.Module()
        self.x_embedder.proj = nn.Conv2d(channels, hidden, kernel_size=patch, stride=patch)
        self.t_embedder = nn.Module()
        self.t_embedder.mlp = nn.Sequential(nn.Linear(FREQ_DIM, hidden), nn.SiLU(), nn.Linear(hidden, hidden))
        self.y_embedder = nn.Module()
        self.y_embedder.embedding_table = nn.Embedding(classes + 1, hidden)  # row `classes`: the null label
        pos = torch.from_numpy(sincos_2d(hidden, self.grid)).unsqueeze(0)
        self.register_buffer("pos_embed", pos, persistent=False)
        ffn = int(hidden * mlp_ratio)
        self.blocks = nn.ModuleList([Block(hidden, heads, ffn) for _ in range(depth)])
        self.final_layer = nn.Module()
        self.final_layer.norm_final = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.final_layer.linear = nn.Linear(hidden, patch * patch * channels)
        self.final_layer.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(hidden, 2 * hidden))

    def forward(self, x, t, y):
        x = self.x_embedder.proj(x).flatten(2).transpose(1, 2) + self.pos_embed.to(x.dtype)
        c = self.t_embedder.mlp(timestep_embedding(t * self.t_scale, FREQ_DIM)) + self.y_embedder.embedding_table(y)
        for block in self.blocks:
            x = block(x, c)
        fl = self.final_layer
        shift, scale = fl.adaLN_modulation(c).chunk(2, dim=1)
        x = fl.linear(modulate(fl.norm_final(x), shift, scale))
        # unpatchify: [B, T, p*p*C] -> [B, C, H, W] (each token's outputs in (row, column, channel) order)
        B, p, g, C = x.shape[0], self.patch, self.grid, self.channels
        x = x.reshape(B, g, g, p, p, C)
        return torch.einsum("nhwpqc->nchpwq", x).reshape(B, C, g * p, g * p)


def make(name, cfg):
    torch.manual_seed(cfg["seed"])
    model = DiT(**cfg)
    with torch.no_grad():
        for pname, p in model.named_parameters():  # random everywhere (DiT zeroes adaLN and the final layer)
            fan_in = p.shape[1] if p.dim() > 1 else p.shape[0]
            if p.dim() == 4:
                fan_in = p.shape[1] * p.shape[2] * p.shape[3]
            std = 1.0 / math.sqrt(fan_in) if "embedding_table" not in pname else 0.5
            if "adaLN" in pname:
                std *= 0.5
            p.normal_(0.0, std)
    params = {k: v.detach().clone().float().contiguous() for k, v in model.named_parameters()}
    B, C, S = cfg["batch"], cfg["channels"], cfg["image"]
    x = torch.randn(B, C, S, S)
    t = torch.rand(B)
    y = torch.randint(0, cfg["classes"], (B,), dtype=torch.int32)
    y[-1] = cfg["classes"]  # the null label
    target = torch.randn(B, C, S, S)

    model = model.double()
    for k, p in model.named_parameters():
        p.data.copy_(params[k].double())
    v = model(x.double(), t.double(), y.long())
    loss = ((v - target.double()) ** 2).mean()
    loss.backward()

    out = dict(params)
    out.update(x=x, t=t, y=y, target=target, v=v.detach().float(), loss=loss.detach().reshape(1))
    for k, p in model.named_parameters():
        out["grad." + k] = p.grad.detach().float()  # f64 results rounded once to F32 (keeps the files small)
    meta = dict(generator="tools/ref/make_dit_golden.py", torch=torch.__version__, config=cfg, freq_dim=FREQ_DIM,
                loss="mean((v - target)^2)", names=[k for k, _ in model.named_parameters()])
    return out, {"golden": json.dumps(meta)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/golden/dit")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if not torch.__version__.startswith(PINNED["torch"]):
        print(f"warning: torch {torch.__version__}, pinned {PINNED['torch']}")
    os.makedirs(args.out, exist_ok=True)
    for name, cfg in CONFIGS.items():
        tensors, meta = make(name, cfg)
        path = os.path.join(args.out, name + ".safetensors")
        save_file({k: v.contiguous() for k, v in tensors.items()}, path, metadata=meta)
        print(f"{path}: loss {tensors['loss'].item():.6f}, {len(tensors)} tensors, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
