#!/usr/bin/env python3
"""Write the TRL GRPO golden for temper's advantage and policy-loss tests.

Reference script only (Python is never part of the engine). It runs the pinned `trl` package's own
code, not a re-implementation:

  * advantages: TRL 0.19.1 computes them inline in GRPOTrainer._generate_and_score_completions.
    The script takes that block (from `mean_grouped_rewards = ...` to the division by
    `std_grouped_rewards + 1e-4`) out of the installed source with inspect.getsource and executes it
    on our rewards, for scale_rewards True and False.
  * loss, gradient, KL and clip statistics: GRPOTrainer.compute_loss on an instance made with
    object.__new__ (no __init__: no model, no dataset, no accelerator launch) carrying only the
    attributes compute_loss/_compute_loss read, with _get_per_token_logps replaced by a function that
    returns our logp tensor (requires_grad). d(loss)/d(logp) comes from autograd. KL and clip
    fractions are read back from the trainer's own _metrics.

Everything runs in float64 on inputs drawn in float32 (stored exactly), so the golden is an fp64
reference of the stored inputs. Output: tests/data/golden/trl_grpo/grpo_loss.json (~10 KB),
bitwise reproducible. Run from the repository root with the pinned environment:

    .venv/bin/python tools/ref/trl_grpo_golden.py [--out DIR]

TRL loss_type -> temper LossAgg: grpo -> seq_mean_token_mean, bnpo -> token_mean,
dr_grpo -> seq_mean_token_sum_norm (max_len = max_completion_length); TRL `delta` (two-sided
clipping, INTELLECT-2) -> dual_clip. TRL's KL is k3.
"""

import argparse
import inspect
import json
import os
import textwrap
import types
from collections import defaultdict

import torch
import transformers

try:
    import trl
    from trl.trainer.grpo_trainer import GRPOTrainer
except ImportError as e:
    raise SystemExit(f"trl_grpo_golden.py: {e}; install trl as tools/ref/requirements.txt says (TRL section)")

B, G, T = 9, 3, 6  # sequences, group size (num_generations), padded completion length
MAX_COMPLETION_LENGTH = 8  # dr_grpo's constant; deliberately != T
LENGTHS = [6, 3, 1, 5, 6, 2, 4, 6, 3]
EPSILON, EPSILON_HIGH = 0.2, 0.28


def trl_advantages(rewards, scale_rewards):
    """Run TRL's own advantage block from _generate_and_score_completions."""
    src = textwrap.dedent(inspect.getsource(GRPOTrainer._generate_and_score_completions))
    lines = src.splitlines()
    start = next(i for i, l in enumerate(lines) if l.strip().startswith("mean_grouped_rewards = rewards.view("))
    end = next(i for i, l in enumerate(lines) if "advantages = advantages / (std_grouped_rewards + 1e-4)" in l)
    block = textwrap.dedent("\n".join(lines[start : end + 1]))
    assert "std(dim=1)" in block and "if self.scale_rewards:" in block, block
    ns = {"torch": torch, "rewards": rewards, "self": types.SimpleNamespace(num_generations=G, scale_rewards=scale_rewards)}
    exec(compile(block, "trl:GRPOTrainer._generate_and_score_completions", "exec"), ns)
    return ns["advantages"], block


def trl_loss(loss_type, beta, delta, epsilon_high, advantages, logp, old_logp, ref_logp, mask):
    """GRPOTrainer.compute_loss on a bare instance; returns loss, d loss / d logp and the metrics."""
    tr = object.__new__(GRPOTrainer)
    tr.use_liger_loss = False
    tr.beta = beta
    tr.epsilon_low = EPSILON
    tr.epsilon_high = epsilon_high
    tr.loss_type = loss_type
    tr.max_completion_length = MAX_COMPLETION_LENGTH
    tr.args = types.SimpleNamespace(delta=delta, report_to=[])
    tr.model = types.SimpleNamespace(training=True)
    tr._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    tr.accelerator = types.SimpleNamespace(gather=lambda t: t.reshape(-1))
    lp = logp.clone().requires_grad_(True)

    def per_token_logps(model, input_ids, attention_mask, logits_to_keep, batch_size=None):
        assert logits_to_keep == T and input_ids.shape == (B, 1 + T)
        return lp

    tr._get_per_token_logps = per_token_logps
    inputs = {
        "prompt_ids": torch.zeros(B, 1, dtype=torch.long),
        "prompt_mask": torch.ones(B, 1, dtype=torch.int32),
        "completion_ids": torch.zeros(B, T, dtype=torch.long),
        "completion_mask": mask,  # int32, as TRL builds it
        "advantages": advantages,
        "old_per_token_logps": old_logp,
        "ref_per_token_logps": ref_logp if beta != 0.0 else None,
    }
    loss = tr.compute_loss(None, inputs)
    loss.backward()
    m = tr._metrics["train"]
    out = {
        "loss": loss.item(),
        "grad": lp.grad.reshape(-1).tolist(),
        "clip_low": m["clip_ratio/low_mean"][-1],
        "clip_high": m["clip_ratio/high_mean"][-1],
        "clip_region": m["clip_ratio/region_mean"][-1],
    }
    if beta != 0.0:
        out["kl"] = m["kl"][-1]
    return out


def rounded(x):
    if isinstance(x, float):
        return float(f"{x:.12g}")
    if isinstance(x, list):
        return [rounded(v) for v in x]
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    return x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/golden/trl_grpo")
    args = ap.parse_args()
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(20250601)

    # Inputs in float32 (stored exactly), computed on in float64.
    mask = (torch.arange(T)[None, :] < torch.tensor(LENGTHS)[:, None]).int()
    logp32 = -(torch.rand(B, T, generator=g) * 2.5 + 0.05)
    old32 = logp32 + 0.25 * torch.randn(B, T, generator=g)  # ratios ~ exp(N(0, 0.25)): clipped both sides
    ref32 = logp32 + 0.3 * torch.randn(B, T, generator=g)
    rewards32 = torch.cat([
        torch.rand(G, generator=g) * 2 - 0.5,  # group 0: continuous rewards
        torch.tensor([1.0, 0.0, 1.0]),         # group 1: binary verifier rewards
        torch.tensor([1.0, 1.0, 1.0]),         # group 2: all equal (advantage 0; DAPO would drop it)
    ]).float()
    logp, old, ref, rewards = (t.double() for t in (logp32, old32, ref32, rewards32))

    adv_scaled, block = trl_advantages(rewards, True)
    adv_unscaled, _ = trl_advantages(rewards, False)
    per_token_kl = torch.exp(ref - logp) - (ref - logp) - 1  # TRL's k3 expression (checked below via its metric)

    cases = []
    for loss_type in ("grpo", "bnpo", "dr_grpo"):
        for beta in (0.0, 0.04):
            for delta in (None, 1.3):
                cases.append(dict(loss_type=loss_type, beta=beta, delta=delta, epsilon_high=EPSILON_HIGH,
                                  scale_rewards=loss_type != "dr_grpo", on_policy=False))
    cases.append(dict(loss_type="bnpo", beta=0.04, delta=None, epsilon_high=EPSILON, scale_rewards=True, on_policy=False))
    cases.append(dict(loss_type="grpo", beta=0.04, delta=None, epsilon_high=EPSILON_HIGH, scale_rewards=True, on_policy=True))
    for c in cases:
        adv = adv_scaled if c["scale_rewards"] else adv_unscaled
        r = trl_loss(c["loss_type"], c["beta"], c["delta"], c["epsilon_high"], adv, logp,
                     None if c["on_policy"] else old, ref, mask)
        if c["beta"] != 0.0:
            want = ((per_token_kl * mask).sum() / mask.sum()).item()
            assert abs(r["kl"] - want) <= 1e-14 * abs(want), (r["kl"], want)
        c["epsilon"] = EPSILON
        c.update(r)

    golden = {
        "generator": "tools/ref/trl_grpo_golden.py",
        "trl": trl.__version__, "torch": torch.__version__.split("+")[0], "transformers": transformers.__version__,
        "note": "float64 TRL GRPOTrainer on float32 inputs; arrays [B, T] row-major",
        "B": B, "T": T, "num_generations": G, "max_completion_length": MAX_COMPLETION_LENGTH,
        "group": [b // G for b in range(B)],
        "rewards": rewards32.tolist(),
        "mask": mask.reshape(-1).tolist(),
        "logp": logp32.reshape(-1).tolist(),
        "old_logp": old32.reshape(-1).tolist(),
        "ref_logp": ref32.reshape(-1).tolist(),
        "trl_advantage_code": block,
        "advantages_scaled": adv_scaled.tolist(),
        "advantages_unscaled": adv_unscaled.tolist(),
        "per_token_kl_k3": per_token_kl.reshape(-1).tolist(),
        "cases": cases,
    }
    # float32 inputs are written with repr (exact); computed float64 values with 12 significant digits.
    for k in ("advantages_scaled", "advantages_unscaled", "per_token_kl_k3", "cases"):
        golden[k] = rounded(golden[k])
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "grpo_loss.json")
    with open(path, "w") as f:
        json.dump(golden, f, indent=None, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes, {len(cases)} loss cases)")


if __name__ == "__main__":
    main()
