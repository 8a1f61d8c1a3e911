#!/usr/bin/env python3
"""Write the PyTorch goldens for temper's 2-D MLP flow (src/temper/flow/mlp_flow.h): forward, the
flow-matching loss and every parameter's gradient.

Reference script only (Python is never part of the engine). The same network in plain PyTorch: input rows
[x, cos(w_k t), sin(w_k t), E[y]] with w_k = 1000^(k / (F - 1)), k < F, an nn.Embedding of classes + 1 rows
(the last the null label), nn.Linear layers with the activation between them and none after the last.
The flow-matching loss in temper's convention (src/temper/flow/flow_matching.h): x_t = (1 - t) x0 + t eps,
target eps - x0, loss = sum_i w_i mean_j (v_ij - target_ij)^2 / sum_i w_i.

Run from the repository root with the pinned environment (tools/ref/requirements.txt):

    .venv/bin/python tools/ref/make_flow_golden.py     # writes tests/data/golden/flow/*.safetensors

Each file holds the parameters (F32, named as MlpFlow::param_shapes: net.<l>.weight / net.<l>.bias with l
counting linear layers, class_embed.weight; torch's default init under a fixed seed), the inputs (x0, eps
[B, dim], t [B], y [B] int32 with the null label in one row, w [B] sample weights), and, computed in float64 from
exactly those F32 values: xt, v = model(xt, t, y), loss (F64) and grad.<name> for every parameter (F32).
Metadata key "golden": a JSON string with the config and versions. Single-threaded, bitwise reproducible.
"""

import json
import os

import torch
import torch.nn as nn
from safetensors.torch import save_file

PINNED = {"torch": "2.5.1", "safetensors": "0.5.3"}
ACTS = {"silu": nn.SiLU, "tanh": nn.Tanh, "relu": nn.ReLU}

CONFIGS = {
    # unconditional 2-D flow, the default shape scaled down
    "mlp2d_uncond": dict(dim=2, classes=1, hidden=32, depth=3, time_freqs=8, class_dim=8, act="silu", batch=7,
                         weighted=False),
    # three classes, tanh, weighted samples (reward-weighted flow matching)
    "mlp2d_classes": dict(dim=2, classes=3, hidden=24, depth=2, time_freqs=6, class_dim=4, act="tanh", batch=9,
                          weighted=True),
}


class MlpFlow(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        sizes = [c["dim"] + 2 * c["time_freqs"] + c["class_dim"]] + [c["hidden"]] * c["depth"] + [c["dim"]]
        layers = []
        for i in range(len(sizes) - 1):
            layers.append(nn.Linear(sizes[i], sizes[i + 1]))
            if i + 2 < len(sizes):
                layers.append(ACTS[c["act"]]())
        self.net = nn.Sequential(*layers)
        self.class_embed = nn.Embedding(c["classes"] + 1, c["class_dim"])

    def forward(self, x, t, y):
        F = self.c["time_freqs"]
        k = torch.arange(F, dtype=x.dtype)
        w = torch.pow(torch.tensor(1000.0, dtype=x.dtype), k / (F - 1))
        a = t[:, None] * w[None, :]
        rows = torch.cat([x, torch.cos(a), torch.sin(a), self.class_embed(y)], dim=1)
        return self.net(rows)


def temper_names(model):
    """state_dict names -> MlpFlow::param_shapes names (net.<linear index>.weight)."""
    out, linear = {}, 0
    for i, m in enumerate(model.net):
        if isinstance(m, nn.Linear):
            out[f"net.{i}.weight"] = f"net.{linear}.weight"
            out[f"net.{i}.bias"] = f"net.{linear}.bias"
            linear += 1
    out["class_embed.weight"] = "class_embed.weight"
    return out


def make(name, c, seed):
    torch.manual_seed(seed)
    model = MlpFlow(c)
    B, d = c["batch"], c["dim"]
    x0 = torch.randn(B, d) * 2.0
    eps = torch.randn(B, d)
    t = torch.rand(B)
    t[0] = 1.0  # the ends of the interpolant
    t[1] = 0.0
    y = torch.randint(0, c["classes"], (B,), dtype=torch.int64)
    y[-1] = c["classes"]  # the null label
    w = torch.rand(B) + 0.1 if c["weighted"] else torch.ones(B)
    m64 = MlpFlow(c).double()
    m64.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    t64 = t.double()
    xt = (1 - t64[:, None]) * x0.double() + t64[:, None] * eps.double()
    v = m64(xt, t64, y)
    target = eps.double() - x0.double()
    w64 = w.double()
    loss = ((w64[:, None] * (v - target) ** 2).mean(dim=1)).sum() / w64.sum()
    loss.backward()
    names = temper_names(model)
    tensors = {names[k]: v.detach().float().contiguous() for k, v in model.state_dict().items()}
    for k, p in m64.named_parameters():
        tensors["grad." + names[k]] = p.grad.float().contiguous()
    tensors.update({"x0": x0, "eps": eps, "t": t, "y": y.to(torch.int32), "w": w, "xt": xt.float(),
                    "v": v.detach().float(), "loss": loss.detach().reshape(1)})
    meta = {"golden": json.dumps({"config": c, "seed": seed, "versions": {"torch": torch.__version__}})}
    os.makedirs("tests/data/golden/flow", exist_ok=True)
    save_file(tensors, f"tests/data/golden/flow/{name}.safetensors", metadata=meta)
    print(name, "loss", float(loss), "params", sum(p.numel() for p in model.parameters()))


def main():
    torch.set_num_threads(1)
    for key, want in PINNED.items():
        have = torch.__version__ if key == "torch" else __import__(key).__version__
        if not have.startswith(want):
            print(f"warning: {key} {have}, goldens were made with {want}")
    for i, (name, c) in enumerate(CONFIGS.items()):
        make(name, c, seed=100 + i)


if __name__ == "__main__":
    main()
