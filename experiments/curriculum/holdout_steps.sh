#!/usr/bin/env bash
# Is the held-out skill ever learned by RL? For each seed, the holdout arm and the 4:1 arm (which saw
# the skill in SFT) answer the same 200 test compositions that use "sort" (greedy); steps.py counts,
# per skill, the steps executed correctly given the model's own earlier strings.
# Usage: experiments/curriculum/holdout_steps.sh [SEEDS] [TEMPER]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
seeds=${1:-"1 2 3"}
temper=${2:-build/bin/temper}
out=${OUT:-runs/curriculum}
for arm in holdout rl_novel_4-1; do
  files=()
  for s in $seeds; do
    ckpt=$(ls -d "$out/$s/$arm"/checkpoints/step-* | sort -t- -k2 -n | tail -1)
    f="$out/$s/$arm/samples_holdout_set.jsonl"
    [ -f "$f" ] || "$temper" eval --model "$ckpt" --task compose --param seed=1 --param cap=8 --param holdout=sort \
      --param eval_set=holdout --problems 200 --max-new 80 --json "$out/$s/$arm/eval_holdout_set.json" --samples-out "$f" > /dev/null 2>&1
    files+=("$f")
  done
  echo "$arm: $(python3 "$here/steps.py" 8 "${files[@]}")"
done
