#!/usr/bin/env bash
# Slow (ctest -L slow, ~10 min on 2 cores): SmolLM2-135M-Instruct learns to use the calculator environment's tool.
# recipes/smollm2-calculator-tools.toml (60 SFT steps on tool-call conversations, then GRPO against the built-in
# calculator), then the checkpoint measured with the tool and without it (env.params.tool = false), 4 steps of 16
# episodes each at lr 1e-12, on problems of 4-7 digit numbers. Prints TOOLS_OK when the tool is used and solves
# at least half the problems and the same model without it solves at most 5%.
set -euo pipefail
temper=$1 gguf=$2 root=$3
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
cd "$t"
mkdir -p runs
python3 "$root/examples/envs/calculator_sft.py" 400 > runs/calc_sft.jsonl
sed "s#\.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf#$gguf#" "$root/recipes/smollm2-calculator-tools.toml" > calc.toml
"$temper" train calc.toml --out runs/calc > train.log 2>&1 || { tail -20 train.log; exit 1; }
solved() {  # mean env/solved over a run's steps
  grep -o '"env/solved":[0-9.]*' "$1/metrics.jsonl" | cut -d: -f2 | awk '{s += $1; n++} END {printf "%.4f", s / n}'
}
for tool in true false; do
  cat > "eval_$tool.toml" <<TOML
[model]
path = "runs/calc/checkpoints/step-75"
[env]
kind = "calculator"
tool_format = "hermes"
max_turns = 3
turn_max_new = 64
[env.params]
tool = $tool
seed = 7
[rl]
steps = 4
prompts_per_step = 4
group_size = 4
max_new = 256
temperature = 0.7
lr = 1e-12
kv_memory_mb = 256
TOML
  "$temper" train "eval_$tool.toml" --out "runs/eval_$tool" > "eval_$tool.log" 2>&1 || { tail -20 "eval_$tool.log"; exit 1; }
done
with=$(solved runs/eval_true) without=$(solved runs/eval_false) rl=$(solved runs/calc)
echo "solved with the tool $with, without $without (RL stage mean $rl)"
awk -v a="$with" -v b="$without" 'BEGIN { exit !(a >= 0.5 && b <= 0.05) }' && echo TOOLS_OK
