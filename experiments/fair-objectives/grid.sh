#!/usr/bin/env bash
# After `experiments/run.sh fair-objectives SEEDS`: evaluates the fair policy of each seed at the
# preferences (1,0), (.75,.25), (.5,.5), (.25,.75), (0,1) and each linear-scalarisation policy at its
# own, greedy on 500 held-out problems, measuring (correct, brevity) and GGF_w(omega * means) with the
# linear Gini weights (2/3, 1/3); prints a markdown table (means over seeds), whether the fair
# policy's points are mutually non-dominated, and the seconds per 1000 generated tokens of each arm
# (the method's overhead against plain GRPO).
# Usage: experiments/fair-objectives/grid.sh [SEEDS] [TEMPER]
set -euo pipefail
seeds=${1:-"1"}
temper=${2:-build/bin/temper}
out=${OUT:-runs/experiments/fair-objectives}
ckpt() { ls -d "$1"/checkpoints/step-* | sort -t- -k2 -n | tail -1; }
ev() {  # run pref json
  [ -f "$3" ] || "$temper" eval --model "$(ckpt "$1")" --task arithmetic --param seed=1 --param min_ops=1 --param max_ops=2 \
    --param max_operand=20 --param ops=+- --problems 500 --max-new 40 --preference "$2" --objectives correct,brevity --json "$3" > /dev/null 2>&1
}
for s in $seeds; do
  for p in 100 75 50 25 0; do
    pref=$(python3 -c "print(f'{$p/100:.2f},{1-$p/100:.2f}')")
    ev "$out/fair-s$s" "$pref" "$out/fair-s$s/grid_$p.json"
    ev "$out/lin_$p-s$s" "$pref" "$out/lin_$p-s$s/grid_$p.json"
  done
done
python3 - "$out" "$seeds" <<'PY'
import json, statistics, sys
out, seeds = sys.argv[1], sys.argv[2].split()
def load(arm, p):
    rows = [json.load(open(f"{out}/{arm}-s{s}/grid_{p}.json")) for s in seeds]
    return [statistics.mean(r["objectives"][k] for r in rows) for k in ("correct", "brevity")] + [statistics.mean(r["welfare"] for r in rows)]
print("| preference (correct, brevity) | fair: correct | fair: brevity | fair: GGF | linear: correct | linear: brevity | linear: GGF |")
print("|---|---|---|---|---|---|---|")
pts = []
for p in (100, 75, 50, 25, 0):
    f, l = load("fair", p), load(f"lin_{p}", p)
    pts.append((p, f[0], f[1]))
    print(f"| ({p/100:.2f}, {1-p/100:.2f}) | {f[0]:.3f} | {f[1]:.3f} | {f[2]:.4f} | {l[0]:.3f} | {l[1]:.3f} | {l[2]:.4f} |")
dominated = [(a[0], b[0]) for a in pts for b in pts if a is not b and b[1] >= a[1] and b[2] >= a[2] and (b[1] > a[1] or b[2] > a[2])]
print("\nfair points dominated by another fair point:", dominated if dominated else "none (mutually non-dominated)")
def speed(arm):
    v = []
    for s in seeds:
        rows = [json.loads(l) for l in open(f"{out}/{arm}-s{s}/metrics.jsonl")]
        tr = [r for r in rows if r["kind"] == "train"][1:]
        tok = sum(r["rollout_tokens_per_s"] * r["rollout_s"] for r in tr)
        v.append(1000 * sum(r["step_s"] for r in tr) / tok)
    return statistics.mean(v)
g = speed("grpo")
for arm in ("fair", "lin_50", "grpo"):
    print(f"{arm}: {speed(arm):.3f} s per 1000 generated tokens ({100 * (speed(arm) / g - 1):+.1f}% vs grpo)")
PY
