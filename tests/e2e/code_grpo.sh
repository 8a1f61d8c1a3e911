#!/usr/bin/env bash
# GRPO on the sandboxed `code` task through the CLI: the quickstart model learns four easy families (add_k,
# scale_list, reverse_string, repeat_string) by SFT on the gold fenced solutions, then GRPO with the share of hidden
# tests passed as reward; the held-out pass rate (eval_accuracy: every test passes) must rise from the SFT
# checkpoint (the eval at the last SFT step) to the end of GRPO. Slow (minutes on 2 cores): label slow.
# Usage: code_grpo.sh TEMPER [RL_STEPS]
set -euo pipefail
temper=$1
rl_steps=${2:-40}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/recipe.toml" <<TOML
[model]
preset = "quickstart"
seed = 0
[task]
name = "code"
[task.params]
seed = 1
families = "add_k,scale_list,reverse_string,repeat_string"
examples = 2
tests = 3
reward = "fraction"
[sft]
steps = 100
batch = 32
lr = 3e-3
warmup = 10
[rl]
steps = $rl_steps
prompts_per_step = 8
group_size = 8
max_new = 80
lr = 1e-4
warmup = 5
[eval]
every = 0
problems = 200
max_new = 80
[run]
checkpoint_every = 0
TOML
"$temper" train "$work/recipe.toml" --out "$work/run" --threads 2 2> "$work/log" || { tail -5 "$work/log"; exit 1; }
python3 - "$work/run/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
evals = [r for r in rows if r["kind"] == "eval"]
sft_steps = sum(1 for r in rows if r["kind"] == "sft")
after_sft = [r for r in evals if r["step"] == sft_steps][0]["eval_accuracy"]
end = evals[-1]["eval_accuracy"]
train = [r for r in rows if r["kind"] == "train"]
print("code_grpo.sh: held-out pass rate %.3f after SFT (step %d) -> %.3f after %d GRPO steps; reward_mean first 5 %.3f, last 5 %.3f; reward failures %d"
      % (after_sft, sft_steps, end, len(train), sum(r["reward_mean"] for r in train[:5]) / 5,
         sum(r["reward_mean"] for r in train[-5:]) / 5, sum(r["reward_failures"] for r in train)))
assert end > after_sft, "the pass rate did not rise under GRPO"
print("CODE_GRPO_OK")
PY
