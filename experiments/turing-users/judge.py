#!/usr/bin/env python3
"""Held-out measurements for the Turing-RL experiment (spec methods-other section 2, signatures i and ii).

A held-out judge (logistic regression on hashed character 1-3-gram features of the reply, the same
features multiplied by the user's history's, and the reply's length relative to the history) is trained
to tell a user's real turn from a simulator's and scored by pairwise accuracy on held-out conversations:
for each generated sample, does the judge's logit rank the real turn above it (ties count half)? 50% means
the judge cannot tell. Two judges:
  fixed  trained once on the starting simulator's (SFT-Init) samples on training conversations;
  refit  trained afresh on each arm's own samples on training conversations (cannot be "hacked").
Per-user diversity: distinct-2 (distinct word bigrams / bigrams) over all of a user's held-out samples,
averaged over users; the real turns' value is the reference. Style: the share of samples in the user's
latent casing, pet word and ending (users.json), as for the real turns.
Usage: judge.py DATA_DIR ARM=RUN_DIR ... (each RUN_DIR holds eval_samples.jsonl and train_samples.jsonl
from `temper eval --samples-out`; the first ARM is SFT-Init, whose training samples fit the fixed judge)."""
import json, sys, zlib
import numpy as np

DIM = 1024


def parse_reply(c):
    i = c.rfind("[HUMAN]:")
    if i < 0:
        j = c.rfind("</reasoning>")
        return c[j + len("</reasoning>"):].strip() if j >= 0 else c.strip()
    return c[i + len("[HUMAN]:"):].strip()


def grams(s):
    v = np.zeros(DIM)
    t = f"^{s}$"
    for n in (1, 2, 3):
        for i in range(len(t) - n + 1):
            v[zlib.crc32(t[i:i + n].encode()) % DIM] += 1
    nrm = np.linalg.norm(v)
    return v / nrm if nrm else v


def features(reply, history):
    r, h = grams(reply), grams(" ".join(history))
    w = len(reply.split())
    mh = np.mean([len(x.split()) for x in history]) if history else w
    return np.concatenate([r, r * h * 30, [np.log1p(w), abs(np.log((w + 1) / (mh + 1)))]])


def fit(X, y, l2=1e-3, iters=400, lr=0.5):
    mu, sd = X.mean(0), X.std(0) + 1e-6
    Z = (X - mu) / sd
    w, b = np.zeros(Z.shape[1]), 0.0
    wt = np.where(y == 1, 0.5 / max(1, y.sum()), 0.5 / max(1, (1 - y).sum()))
    for _ in range(iters):
        p = 1 / (1 + np.exp(-(Z @ w + b)))
        g = (p - y) * wt
        w -= lr * (Z.T @ g + l2 * w)
        b -= lr * g.sum()
    return lambda A: ((A - mu) / sd) @ w + b


def load(path):
    return [json.loads(l) for l in open(path)]


def pairs(samples, convs):
    real, gen = [], []
    for s in samples:
        c = convs[s["id"]]
        real.append(features(c["reply"], c["history"]))
        gen.append(features(parse_reply(s["completion"]), c["history"]))
    return np.array(real), np.array(gen)


def pairwise_acc(judge, real, gen):
    a, b = judge(real), judge(gen)
    return float(np.mean((a > b) + 0.5 * (a == b)))


def judge_on(samples, convs):
    real, gen = pairs(samples, convs)
    X = np.concatenate([real, gen])
    y = np.concatenate([np.ones(len(real)), np.zeros(len(gen))])
    return fit(X, y)


def distinct2(texts):
    bi = [tuple(t.lower().split()[i:i + 2]) for t in texts for i in range(len(t.split()) - 1)]
    return len(set(bi)) / max(1, len(bi))


def style(reply, u):
    words = reply.split()
    letters = [ch for ch in reply if ch.isalpha()]
    if u["case"] == "upper":
        case = bool(letters) and all(ch.isupper() for ch in letters)
    elif u["case"] == "lower":
        case = bool(letters) and all(ch.islower() for ch in letters)
    else:
        case = bool(words) and all(w[:1].isupper() and w[1:] == w[1:].lower() for w in words)
    pet = bool(words) and words[0].lower().startswith(u["pet"].split()[0])
    end = reply.endswith(u["end"]) and (u["end"] != "." or not reply.endswith("..."))
    return case, pet, end


def main():
    data, arms = sys.argv[1], [a.split("=", 1) for a in sys.argv[2:]]
    convs = {r["id"]: r for f in ("train", "eval") for r in load(f"{data}/{f}.jsonl")}
    users = {u["id"]: u for u in json.load(open(f"{data}/users.json"))}
    fixed = judge_on(load(f"{arms[0][1]}/train_samples.jsonl"), convs)
    out = {}
    ev0 = load(f"{arms[0][1]}/eval_samples.jsonl")
    real_by_user = {}
    for s in ev0:
        if s["sample"] == 0:
            c = convs[s["id"]]
            real_by_user.setdefault(c["user"], []).append(c["reply"])
    out["real"] = {"distinct2": float(np.mean([distinct2(v) for v in real_by_user.values()])),
                   "style": [float(np.mean([style(c, users[u])[k] for u, v in real_by_user.items() for c in v])) for k in range(3)]}
    for name, run in arms:
        ev = load(f"{run}/eval_samples.jsonl")
        real, gen = pairs(ev, convs)
        refit = judge_on(load(f"{run}/train_samples.jsonl"), convs)
        by_user = {}
        st = []
        for s in ev:
            u = convs[s["id"]]["user"]
            rep = parse_reply(s["completion"])
            by_user.setdefault(u, []).append(rep)
            st.append(style(rep, users[u]))
        out[name] = {"fixed_judge_acc": pairwise_acc(fixed, real, gen), "refit_judge_acc": pairwise_acc(refit, real, gen),
                     "distinct2": float(np.mean([distinct2(v) for v in by_user.values()])),
                     "style": [float(np.mean([x[k] for x in st])) for k in range(3)],
                     "formatted": float(np.mean(["[HUMAN]:" in s["completion"] for s in ev])), "samples": len(ev)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
