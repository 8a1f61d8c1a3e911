#!/usr/bin/env bash
# After `experiments/run.sh fair-compose SEEDS`: the SFT checkpoint and each seed's fair policy at the
# preferences (1,0), (.75,.25), (.5,.5), (.25,.75), (0,1) (correct, brevity), and each linear arm lin_P at its own
# preference (P, 1-P): greedy on 300 held-out problems of unseen depth-3 compositions, GGF_w(omega * means) with
# the linear Gini weights (2/3, 1/3); whether one policy's points are mutually non-dominated (a front traced by
# one policy) and, per preference, fair's GGF against the policy trained for that preference alone.
# Usage: experiments/fair-compose/grid.sh [SEEDS] [TEMPER]   (env OUT: the experiment's run folder; FAIR_ARM: the
# one-policy arm to evaluate, default fair, e.g. fair_dir)
set -euo pipefail
seeds=${1:-"1 2 3"}
temper=${2:-build/bin/temper}
out=${OUT:-runs/experiments/fair-compose}
arm=${FAIR_ARM:-fair}
ckpt() { ls -d "$1"/checkpoints/step-* | sort -t- -k2 -n | tail -1; }
ev() {  # run pref json
  [ -f "$3" ] || "$temper" eval --model "$(ckpt "$1")" --task compose --param seed=1 --param depth=3 --param cap=8 \
    --param eval_set=unseen --problems 300 --max-new 80 --preference "$2" --objectives correct,brevity --json "$3" > /dev/null 2>&1
}
for p in 100 75 50 25 0; do
  pref=$(python3 -c "print(f'{$p/100:.2f},{1-$p/100:.2f}')")
  ev "$out/sft" "$pref" "$out/sft/grid_$p.json"
  for s in $seeds; do
    ev "$out/$arm-s$s" "$pref" "$out/$arm-s$s/grid_$p.json"
    [ -d "$out/lin_$p-s$s" ] && ev "$out/lin_$p-s$s" "$pref" "$out/lin_$p-s$s/grid_$p.json"
  done
done
python3 - "$out" "$seeds" "$arm" <<'PY'
import json, os, statistics, sys
out, seeds, arm = sys.argv[1], sys.argv[2].split(), sys.argv[3]
def load(runs, p):
    rows = [json.load(open(f"{out}/{r}/grid_{p}.json")) for r in runs if os.path.exists(f"{out}/{r}/grid_{p}.json")]
    if not rows: return None
    m = lambda f: statistics.mean(f(r) for r in rows)
    sd = lambda f: statistics.stdev([f(r) for r in rows]) if len(rows) > 1 else 0.0
    return [m(lambda r: r["objectives"]["correct"]), m(lambda r: r["objectives"]["brevity"]), m(lambda r: r["welfare"]),
            sd(lambda r: r["welfare"]), len(rows)]
print(f"| preference (correct, brevity) | SFT: correct / brevity / GGF | {arm}: correct / brevity / GGF (sd) | linear at this preference: correct / brevity / GGF (sd) |")
print("|---|---|---|---|")
fronts = {"SFT": [], arm: []}
for p in (100, 75, 50, 25, 0):
    a, f, l = load(["sft"], p), load([f"{arm}-s{s}" for s in seeds], p), load([f"lin_{p}-s{s}" for s in seeds], p)
    fronts["SFT"].append((p, a[0], a[1]))
    fronts[arm].append((p, f[0], f[1]))
    lt = f"{l[0]:.3f} / {l[1]:.3f} / {l[2]:.4f} ({l[3]:.4f}, n={l[4]})" if l else "-"
    print(f"| ({p/100:.2f}, {1-p/100:.2f}) | {a[0]:.3f} / {a[1]:.3f} / {a[2]:.4f} | {f[0]:.3f} / {f[1]:.3f} / {f[2]:.4f} ({f[3]:.4f}, n={f[4]}) | {lt} |")
for name, pts in fronts.items():
    dom = [(x[0], y[0]) for x in pts for y in pts if x is not y and y[1] >= x[1] and y[2] >= x[2] and (y[1] > x[1] or y[2] > x[2])]
    print(f"\n{name}: points dominated by another of its points (pref x by pref y):", dom if dom else "none (mutually non-dominated)")
PY
