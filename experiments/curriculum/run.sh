#!/usr/bin/env bash
# The curriculum experiment: for each seed, the arms of the spec at one budget (800 optimiser steps):
#   sft_only        SFT for the whole budget (ratio 1:0)
#   rl_novel_R      SFT then RL on novel compositions (the RL set), SFT:RL = R in {1:1, 2:1, 4:1, 8:1}
#   rl_atomic       SFT then RL on atomic (depth-1) tasks, 4:1
#   holdout         4:1 with the skill "sort" kept out of SFT (it stays in the RL set)
# then evaluates each final checkpoint (greedy, 200 problems) on the seen, unseen and deeper (depth 4)
# sets, and the holdout arm also on the held-out skill's compositions. Results: runs/curriculum/<seed>/<arm>/
# eval_<set>.json; summarize.py writes the table and plots.
# Usage: experiments/curriculum/run.sh [SEEDS] [TEMPER]   (e.g. "1 2 3")
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
seeds=${1:-"1 2 3"}
temper=${2:-build/bin/temper}
out=${OUT:-runs/curriculum}
arms=${ARMS:-"rl_novel_4:1 sft_only rl_atomic rl_novel_1:1 rl_novel_2:1 rl_novel_8:1 holdout"}
for seed in $seeds; do
  for arm in $arms; do
    dir="$out/$seed/${arm/:/-}"
    [ -f "$dir/eval_deeper.json" ] && continue
    rm -rf "$dir"; mkdir -p "$(dirname "$dir")"
    set=(--set model.seed=$seed)
    case $arm in
      sft_only) set+=(--set curriculum.ratio='"1:0"') ;;
      rl_novel_*) set+=(--set curriculum.ratio="\"${arm#rl_novel_}\"") ;;
      rl_atomic) set+=(--set curriculum.rl_set='"atomic"') ;;
      holdout) set+=(--set task.params.holdout='"sort"' --set curriculum.require_coverage=false) ;;
    esac
    "$temper" train "$here/base.toml" --out "$dir" "${set[@]}" 2> "$dir.log" || { echo "$arm seed $seed failed"; tail -3 "$dir.log"; exit 1; }
    ckpt=$(ls -d "$dir"/checkpoints/step-* | sort -t- -k2 -n | tail -1)
    sets="seen unseen deeper"
    params=(--param seed=1 --param cap=8)
    if [ "$arm" = holdout ]; then sets="holdout $sets"; params+=(--param holdout=sort); fi
    for s in $sets; do
      "$temper" eval --model "$ckpt" --task compose "${params[@]}" --param eval_set=$s --problems 200 --max-new 80 \
        --json "$dir/eval_$s.json" --samples-out "$dir/samples_$s.jsonl" 2>> "$dir.log"
    done
    echo "seed $seed $arm: $(python3 -c "import json,sys; print(' '.join(f'{s}={json.load(open(\"$dir/eval_\"+s+\".json\"))[\"accuracy\"]:.3f}' for s in '$sets'.split()))")"
  done
done
