#!/usr/bin/env bash
# After `experiments/run.sh rcsd-rubric SEEDS`: greedy on 500 held-out problems (no rubric in the prompt) for
# SFT-Init and each arm's final checkpoint: correctness, rubric satisfaction (exactly one right check line,
# answer correct), mean count of the keyword, and the proxy reward; prints a markdown table (mean over seeds).
# Usage: experiments/rcsd-rubric/evaluate.sh [SEEDS] [TEMPER]
set -euo pipefail
seeds=${1:-"1 2 3"}
temper=${2:-build/bin/temper}
out=${OUT:-runs/experiments/rcsd-rubric}
last() { ls -d "$1"/checkpoints/step-* | sort -t- -k2 -n | tail -1; }
ev() {  # run-dir
  [ -f "$1/heldout.json" ] || "$temper" eval --model "$(last "$1")" --task rubric_proxy --param seed=1 --problems 500 --max-new 48 \
    --objectives correct,task:1,task:2 --json "$1/heldout.json" > /dev/null 2>&1
}
ev "$out/sft"
for s in $seeds; do for arm in grpo rcsd rcsd_frozen rcsd_rkl; do ev "$out/$arm-s$s"; done; done
python3 - "$out" "$seeds" <<'PY'
import json, statistics, sys
out, seeds = sys.argv[1], sys.argv[2].split()
def row(runs):
    js = [json.load(open(f"{r}/heldout.json")) for r in runs]
    m = lambda k: statistics.mean(j["objectives"][k] for j in js)
    sd = lambda k: statistics.pstdev(j["objectives"][k] for j in js) if len(js) > 1 else 0.0
    c, rub, kw = m("correct"), m("task:1"), m("task:2")
    proxy = statistics.mean(j["reward_mean"] for j in js)
    return f"{c:.3f} | {rub:.3f} ± {sd('task:1'):.3f} | {kw:.2f} ± {sd('task:2'):.2f} | {proxy:.3f}"
print("| policy | correct | rubric satisfied | 'check' per answer | proxy reward |")
print("|---|---|---|---|---|")
print(f"| SFT-Init | {row([out + '/sft'])} |")
for arm in ("grpo", "rcsd", "rcsd_frozen", "rcsd_rkl"):
    print(f"| {arm} ({len(seeds)} seeds) | {row([f'{out}/{arm}-s{s}' for s in seeds])} |")
PY
