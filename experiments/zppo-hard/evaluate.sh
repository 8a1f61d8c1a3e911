#!/usr/bin/env bash
# After `experiments/run.sh zppo-hard SEEDS`: the pretrained student and each arm's final policy, greedy, on the
# held-out task family (two-operation chains, 100 problems of the arithmetic task's eval split), and a table of
# the training runs' own evaluations (the 64 trained hard questions, the 64 held-out hard ones) at the first and
# last step, mean +/- sd over seeds.
# Usage: experiments/zppo-hard/evaluate.sh [SEEDS] [TEMPER]
#   env OUT: the experiment's run folder, ARMS, BASE: the arms' starting model (default the pretrained GGUF)
set -euo pipefail
seeds=${1:-"1 2 3"}
temper=${2:-build/bin/temper}
out=${OUT:-runs/experiments/zppo-hard}
here=$(cd "$(dirname "$0")" && pwd)
arms=${ARMS:-$(cat "$here/arms")}
ckpt() { ls -d "$1"/checkpoints/step-* | sort -t- -k2 -n | tail -1; }
family() {  # model json
  [ -f "$2" ] || "$temper" eval --model "$1" --task arithmetic --param min_ops=2 --param max_ops=2 \
    --param max_operand=20 --problems 100 --max-new 96 --threads 2 --prompt-format chat \
    --system-prompt "You are a careful calculator." \
    --user-template "Calculate {question} and end with the line #### <number>." --json "$2" > /dev/null 2>&1
}
family "${BASE:-.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}" "$out/base_family.json"
for a in $arms; do for s in $seeds; do
  [ -d "$out/$a-s$s/checkpoints" ] && family "$(ckpt "$out/$a-s$s")" "$out/$a-s$s/family.json"
done; done
python3 - "$out" "$seeds" "$arms" <<'PY'
import json, os, statistics, sys
out, seeds, arms = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def acc(path): return json.load(open(path))["accuracy"]
def rows(run, kind):
    return [json.loads(l) for l in open(f"{out}/{run}/metrics.jsonl") if json.loads(l).get("kind") == kind]
def ms(xs): return f"{statistics.mean(xs):.3f} +/- {statistics.stdev(xs):.3f}" if len(xs) > 1 else f"{xs[0]:.3f}"
print("| metric (mean +/- sd over seeds) | " + " | ".join(arms) + " |")
print("|---|" + "---|" * len(arms))
cells = {}
for a in arms:
    runs = [f"{a}-s{s}" for s in seeds if os.path.exists(f"{out}/{a}-s{s}/metrics.jsonl")]
    ev = [rows(r, "eval") for r in runs]
    tr = [rows(r, "train") for r in runs]
    c = {}
    c["trained hard questions, greedy, start / end"] = f"{ms([e[0]['eval_accuracy'] for e in ev])} / {ms([e[-1]['eval_accuracy'] for e in ev])}"
    c["held-out hard questions, start / end"] = f"{ms([e[0]['heldout_accuracy'] for e in ev])} / {ms([e[-1]['heldout_accuracy'] for e in ev])}"
    fam = [acc(f"{out}/{r}/family.json") for r in runs if os.path.exists(f"{out}/{r}/family.json")]
    c["two-operation family, end (start %.2f)" % acc(f"{out}/base_family.json")] = ms(fam) if fam else "-"
    c["reward on the plain questions (mean over steps)"] = ms([statistics.mean(x["reward_mean"] for x in t) for t in tr])
    for k in ("zppo_all_wrong_frac", "zppo_bcq_acc", "zppo_ncq_acc", "zppo_injected"):
        v = [statistics.mean(x[k] for x in t if k in x) for t in tr if any(k in x for x in t)]
        c[f"{k} (mean over steps)"] = ms(v) if v else "-"
    c["seconds per step"] = ms([statistics.mean(x["step_s"] for x in t) for t in tr])
    c["seeds"] = str(len(runs))
    cells[a] = c
for k in cells[arms[0]]:
    print(f"| {k} | " + " | ".join(cells[a].get(k, "-") for a in arms) + " |")
PY
