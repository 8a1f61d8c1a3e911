#!/usr/bin/env python3
"""Write the PPO golden for temper's control module (tests/control/test_ppo_golden.cpp).

Reference script only (Python is never part of the engine). A fixed batch, fixed networks, and the PPO update's
quantities computed by PyTorch autograd in float64 from inputs drawn in float32 (stored exactly):

  * networks: actor Linear(5,8)-tanh-Linear(8,8)-tanh-Linear(8,2) giving the Gaussian mean, a state-independent
    log_std [2]; critic Linear(5,8)-tanh-Linear(8,8)-tanh-Linear(8,1). Parameters as torch.nn.Linear holds
    them (weight [out, in], bias [out]), named actor.{layer}.weight / .bias, critic.{layer}.*, log_std.
  * GAE and returns, and the loss: the lines of CleanRL's ppo_continuous_action.py (Huang et al. 2022), with
    its defaults: gamma 0.99, gae_lambda 0.95, advantages normalised per minibatch, clip_coef 0.2, unclipped value
    loss 0.5 mean((V - R)^2), ent_coef 0.01 (0 in CleanRL's default; nonzero here so its gradient is checked),
    vf_coef 0.5. The whole batch is one minibatch.
  * old log-probs are the current ones plus noise N(0, 0.3^2), so some ratios fall outside [0.8, 1.2] and the
    clipped branch is exercised; the script checks no ratio lies within 1e-3 of a clip boundary (where float32
    and float64 could pick different branches).

Output: tests/data/golden/ppo/ppo_batch.safetensors (~7 KB), bitwise reproducible. Run from the repository root:

    .venv/bin/python tools/ref/make_ppo_golden.py [--out DIR]

Pinned: torch 2.5.1, safetensors 0.5.3 (tools/ref/requirements.txt).
"""

import argparse
import json
import os

import torch
from safetensors.torch import save_file

T, N, OBS, ACT, HID = 6, 4, 5, 2, 8
GAMMA, LAMBDA, CLIP, ENT, VF = 0.99, 0.95, 0.2, 0.01, 0.5


def mlp(sizes):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(torch.nn.Tanh())
    return torch.nn.Sequential(*layers)


def linear_layers(net):
    return [m for m in net if isinstance(m, torch.nn.Linear)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/golden/ppo")
    args = ap.parse_args()
    torch.manual_seed(43)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)

    actor, critic = mlp([OBS, HID, HID, ACT]), mlp([OBS, HID, HID, 1])  # float32 init, then float64
    log_std32 = torch.tensor([-0.3, 0.2], dtype=torch.float32)
    obs32 = torch.randn(T + 1, N, OBS)  # obs[T]: the state after the rollout (bootstrap value)
    actions32 = torch.randn(T, N, ACT)
    rewards32 = torch.randn(T, N)
    dones32 = torch.zeros(T, N)
    dones32[2, 0] = dones32[4, 1] = dones32[5, 2] = dones32[0, 3] = 1.0
    noise32 = 0.3 * torch.randn(T, N)
    actor.double(), critic.double()
    log_std = log_std32.double().requires_grad_(True)
    obs, actions, rewards, dones = obs32.double(), actions32.double(), rewards32.double(), dones32.double()

    # Rollout-time quantities (no gradient), as CleanRL stores them.
    with torch.no_grad():
        values = critic(obs).squeeze(-1)  # [T + 1, N]
        mean0 = actor(obs[:T])
        dist0 = torch.distributions.Normal(mean0, log_std.exp())
        old_logp = (dist0.log_prob(actions).sum(-1) + noise32.double()).float().double()  # stored as float32
        # CleanRL's GAE (next_value = values[T]; dones[t] marks the end of the episode after step t).
        advantages = torch.zeros(T, N, dtype=torch.float64)
        lastgaelam = torch.zeros(N, dtype=torch.float64)
        for t in reversed(range(T)):
            nextnonterminal = 1.0 - dones[t]
            nextvalues = values[t + 1]
            delta = rewards[t] + GAMMA * nextvalues * nextnonterminal - values[t]
            advantages[t] = lastgaelam = delta + GAMMA * LAMBDA * nextnonterminal * lastgaelam
        returns = advantages + values[:T]

    # CleanRL's update on one minibatch (the whole batch).
    b_obs, b_actions = obs[:T].reshape(-1, OBS), actions.reshape(-1, ACT)
    b_logprobs, b_advantages, b_returns = old_logp.reshape(-1), advantages.reshape(-1), returns.reshape(-1)
    mean = actor(b_obs)
    dist = torch.distributions.Normal(mean, log_std.expand_as(mean).exp())
    newlogprob, entropy = dist.log_prob(b_actions).sum(1), dist.entropy().sum(1)
    newvalue = critic(b_obs).view(-1)
    logratio = newlogprob - b_logprobs
    ratio = logratio.exp()
    with torch.no_grad():
        approx_kl = ((ratio - 1) - logratio).mean()
        clipfrac = ((ratio - 1.0).abs() > CLIP).float().mean()
    mb_advantages = (b_advantages - b_advantages.mean()) / (b_advantages.std() + 1e-8)
    pg_loss1 = -mb_advantages * ratio
    pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - CLIP, 1 + CLIP)
    pg_loss = torch.max(pg_loss1, pg_loss2).mean()
    v_loss = 0.5 * ((newvalue - b_returns) ** 2).mean()
    entropy_loss = entropy.mean()
    loss = pg_loss - ENT * entropy_loss + v_loss * VF
    loss.backward()

    margin = torch.minimum((ratio - (1 - CLIP)).abs(), (ratio - (1 + CLIP)).abs()).min().item()
    assert margin > 1e-3, f"a ratio lies {margin} from a clip boundary: pick another seed"
    assert 0.1 < clipfrac.item() < 0.9, f"clip fraction {clipfrac.item()}: the batch should exercise both branches"

    out = {
        "log_std": log_std32, "obs": obs32, "actions": actions32, "rewards": rewards32, "dones": dones32,
        "old_logp": old_logp.float(),
        "values": values, "advantages": advantages, "returns": returns,
        "losses": torch.stack([loss, pg_loss, v_loss, entropy_loss, approx_kl, clipfrac]).detach(),
        "grad.log_std": log_std.grad,
    }
    for name, net in (("actor", actor), ("critic", critic)):
        for l, lin in enumerate(linear_layers(net)):
            out[f"{name}.{l}.weight"] = lin.weight.detach().float()  # drawn in float32: exact
            out[f"{name}.{l}.bias"] = lin.bias.detach().float()
            out[f"grad.{name}.{l}.weight"] = lin.weight.grad
            out[f"grad.{name}.{l}.bias"] = lin.bias.grad
    out = {k: v.contiguous() for k, v in out.items()}
    meta = {"generator": "tools/ref/make_ppo_golden.py", "torch": torch.__version__, "seed": 43,
            "T": T, "N": N, "gamma": GAMMA, "gae_lambda": LAMBDA, "clip_coef": CLIP, "ent_coef": ENT,
            "vf_coef": VF, "norm_adv": True, "losses": "loss, pg_loss, v_loss, entropy, approx_kl, clipfrac",
            "clip_margin": margin}
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "ppo_batch.safetensors")
    save_file(out, path, metadata={"golden": json.dumps(meta, sort_keys=True)})
    print(f"wrote {path}: loss {loss.item():.6f} pg {pg_loss.item():.6f} v {v_loss.item():.6f} "
          f"clipfrac {clipfrac.item():.3f} margin {margin:.4f}")


if __name__ == "__main__":
    main()
