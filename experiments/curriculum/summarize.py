#!/usr/bin/env python3
"""Table and plots of the curriculum experiment (standard library only).
Usage: summarize.py RUNS_DIR SVG_DIR  -> prints a markdown table; writes SVG_DIR/curriculum-arms.svg
and SVG_DIR/curriculum-ratio.svg."""
import json, math, os, sys

runs, svg_dir = sys.argv[1], sys.argv[2]
SETS = ["seen", "unseen", "deeper", "holdout"]
ARMS = ["sft_only", "rl_atomic", "rl_novel_1-1", "rl_novel_2-1", "rl_novel_4-1", "rl_novel_8-1", "holdout"]
LABEL = {"sft_only": "SFT only (800 steps)", "rl_atomic": "SFT 640 + RL on atomic 160", "rl_novel_1-1": "SFT:RL novel 1:1",
         "rl_novel_2-1": "SFT:RL novel 2:1", "rl_novel_4-1": "SFT:RL novel 4:1", "rl_novel_8-1": "SFT:RL novel 8:1",
         "holdout": "4:1 novel, 'sort' held out of SFT"}
acc = {}  # (arm, set) -> [accuracy per seed]
seeds = sorted(d for d in os.listdir(runs) if os.path.isdir(os.path.join(runs, d)))
for seed in seeds:
    for arm in ARMS:
        for s in SETS:
            f = os.path.join(runs, seed, arm, f"eval_{s}.json")
            if os.path.exists(f):
                acc.setdefault((arm, s), []).append(json.load(open(f))["accuracy"])


def ms(v):
    if not v:
        return None
    m = sum(v) / len(v)
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else 0.0
    return m, sd, len(v)


def cell(arm, s):
    r = ms(acc.get((arm, s), []))
    return "" if r is None else f"{r[0]:.3f} ± {r[1]:.3f} ({r[2]})"


print("| arm | seen | unseen (depth 3) | deeper (depth 4) | held-out skill |")
print("|---|---|---|---|---|")
for arm in ARMS:
    if any((arm, s) in acc for s in SETS):
        print(f"| {LABEL[arm]} | " + " | ".join(cell(arm, s) for s in SETS) + " |")

# Unseen accuracy where RL starts (the run's eval after its SFT stage) and at its end, from metrics.jsonl.
print("\n| arm | unseen when RL starts | unseen at the end | change |")
print("|---|---|---|---|")
for arm in ARMS:
    if arm == "sft_only":
        continue
    pairs = []
    for seed in seeds:
        f = os.path.join(runs, seed, arm, "metrics.jsonl")
        if not os.path.exists(f) or not os.path.exists(os.path.join(runs, seed, arm, "eval_deeper.json")):
            continue
        ev = [json.loads(l) for l in open(f) if '"eval"' in l]
        ev = [r for r in ev if r["step"] > 0]
        if len(ev) >= 2:
            pairs.append((ev[0]["eval_accuracy"], ev[-1]["eval_accuracy"]))
    if pairs:
        a, b = ms([p[0] for p in pairs]), ms([p[1] for p in pairs])
        print(f"| {LABEL[arm]} | {a[0]:.3f} ± {a[1]:.3f} | {b[0]:.3f} ± {b[1]:.3f} | {b[0]-a[0]:+.3f} |")

COL = {"seen": "#1f77b4", "unseen": "#d62728", "deeper": "#2ca02c", "holdout": "#9467bd"}


def bars(path):
    arms = [a for a in ARMS if (a, "seen") in acc]
    sets = [s for s in SETS if any((a, s) in acc for a in arms)]
    W, H, L, B = 760, 320, 60, 90
    top = max([ms(acc[k])[0] + ms(acc[k])[1] for k in acc] + [0.05])
    ymax = math.ceil(top * 10) / 10
    y = lambda v: H - B - (H - B - 20) * v / ymax
    gw = (W - L - 20) / len(arms)
    bw = gw * 0.8 / len(sets)
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">']
    for t in range(0, int(round(ymax * 10)) + 1):
        v = t / 10
        o.append(f'<line x1="{L}" x2="{W-20}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/><text x="{L-6}" y="{y(v)+4:.1f}" text-anchor="end">{v:.1f}</text>')
    for i, a in enumerate(arms):
        x0 = L + i * gw + gw * 0.1
        for j, s in enumerate(sets):
            r = ms(acc.get((a, s), []))
            if r is None:
                continue
            x = x0 + j * bw
            o.append(f'<rect x="{x:.1f}" y="{y(r[0]):.1f}" width="{bw-2:.1f}" height="{y(0)-y(r[0]):.1f}" fill="{COL[s]}"/>')
            o.append(f'<line x1="{x+bw/2-1:.1f}" x2="{x+bw/2-1:.1f}" y1="{y(r[0]-r[1]):.1f}" y2="{y(r[0]+r[1]):.1f}" stroke="#000"/>')
        words = LABEL[a].split(" ")
        half = (len(words) + 1) // 2
        for k, line in enumerate([" ".join(words[:half]), " ".join(words[half:])]):
            o.append(f'<text x="{L + i*gw + gw/2:.1f}" y="{H-B+16+14*k}" text-anchor="middle">{line}</text>')
    for j, s in enumerate(sets):
        o.append(f'<rect x="{L+10+j*110}" y="{H-28}" width="12" height="12" fill="{COL[s]}"/><text x="{L+26+j*110}" y="{H-18}">{s}</text>')
    o.append(f'<text x="{L}" y="14">held-out greedy accuracy, mean ± sd over seeds (compose, quickstart model, 800 optimiser steps)</text></svg>')
    open(path, "w").write("\n".join(o))


def ratio_plot(path):
    rs = [("1:1", "rl_novel_1-1", 0.5), ("2:1", "rl_novel_2-1", 2 / 3), ("4:1", "rl_novel_4-1", 0.8), ("8:1", "rl_novel_8-1", 8 / 9), ("SFT only", "sft_only", 1.0)]
    rs = [r for r in rs if (r[1], "seen") in acc]
    if len(rs) < 2:
        return
    W, H, L, B = 640, 300, 60, 50
    top = max(ms(acc[(a, s)])[0] + ms(acc[(a, s)])[1] for _, a, _ in rs for s in ("seen", "unseen", "deeper") if (a, s) in acc)
    ymax = math.ceil(max(top, 0.05) * 10) / 10
    x = lambda f: L + (W - L - 110) * (f - 0.5) / 0.5
    y = lambda v: H - B - (H - B - 20) * v / ymax
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">']
    for t in range(0, int(round(ymax * 10)) + 1):
        v = t / 10
        o.append(f'<line x1="{L}" x2="{W-110}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/><text x="{L-6}" y="{y(v)+4:.1f}" text-anchor="end">{v:.1f}</text>')
    for name, a, f in rs:
        o.append(f'<text x="{x(f):.1f}" y="{H-B+16}" text-anchor="middle">{name}</text>')
    for s in ("seen", "unseen", "deeper"):
        pts = [(x(f), y(ms(acc[(a, s)])[0]), ms(acc[(a, s)])[1]) for _, a, f in rs if (a, s) in acc]
        o.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' % (COL[s], " ".join(f"{px:.1f},{py:.1f}" for px, py, _ in pts)))
        for px, py, sd in pts:
            o.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{COL[s]}"/>')
        o.append(f'<text x="{pts[-1][0]+6:.1f}" y="{pts[-1][1]+4:.1f}" fill="{COL[s]}">{s}</text>')
    o.append(f'<text x="{L}" y="14">accuracy vs SFT share of 800 optimiser steps (RL on novel compositions)</text>')
    o.append(f'<text x="{(W)/2:.0f}" y="{H-12}" text-anchor="middle">SFT:RL</text></svg>')
    open(path, "w").write("\n".join(o))


os.makedirs(svg_dir, exist_ok=True)
bars(os.path.join(svg_dir, "curriculum-arms.svg"))
ratio_plot(os.path.join(svg_dir, "curriculum-ratio.svg"))
