#!/usr/bin/env bash
# `temper train` with [env]: the guessing game as an environment program (examples/envs/guess_env.py) on
# SmolLM2-135M-Instruct: conversations of several turns through the model's chat template, one GRPO step.
# Prints ENV_OK when the run finished with multi-turn episodes and no environment failure.
set -euo pipefail
temper=$1 gguf=$2 root=$3
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
cat > "$t/guess.toml" <<TOML
[model]
path = "$gguf"
[env]
kind = "program"
program = ["python3", "$root/examples/envs/guess_env.py"]
max_turns = 4
turn_max_new = 16
[env.params]
n = 10
[rl]
steps = 1
prompts_per_step = 2
group_size = 2
max_new = 200
temperature = 0.7
kv_memory_mb = 128
[run]
samples_every = 1
TOML
"$temper" train "$t/guess.toml" --out "$t/run" > "$t/log" 2>&1 || { cat "$t/log"; exit 1; }
m=$(cat "$t/run/metrics.jsonl")
turns=$(echo "$m" | grep -o '"env/turns":[0-9.]*' | head -1 | cut -d: -f2)
fails=$(echo "$m" | grep -o '"env/failures":[0-9.]*' | head -1 | cut -d: -f2)
echo "env/turns $turns env/failures $fails"
awk -v x="$turns" -v f="$fails" 'BEGIN { exit !(x >= 2 && f == 0) }' && grep -qF '\nuser\n' "$t/run/samples.jsonl" && echo ENV_OK
