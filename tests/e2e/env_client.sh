#!/usr/bin/env bash
# `temper train` with [env] mode = "client": the user's agent (examples/agents/two_turn_agent.py, the official
# openai client from .venv-client when the bootstrap made it, else the standard library) talks to the policy
# through the loopback endpoint; two calls per episode stitched into one trajectory. Prints CLIENT_OK.
set -euo pipefail
temper=$1 gguf=$2 root=$3
py=python3
[ -x "$root/.venv-client/bin/python" ] && py="$root/.venv-client/bin/python"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
cat > "$t/client.toml" <<TOML
[model]
path = "$gguf"
[env]
kind = "program"
mode = "client"
program = ["$py", "$root/examples/agents/two_turn_agent.py"]
workers = 2
threads = 2
timeout_s = 300
[rl]
steps = 1
prompts_per_step = 2
group_size = 2
max_new = 64
temperature = 0.7
kv_memory_mb = 128
TOML
"$temper" train "$t/client.toml" --out "$t/run" > "$t/log" 2>&1 || { cat "$t/log"; exit 1; }
m=$(cat "$t/run/metrics.jsonl")
for k in calls trajectories failures refused_calls; do
  printf '%s=%s ' "$k" "$(echo "$m" | grep -o "\"env/$k\":[0-9.]*" | head -1 | cut -d: -f2)"
done
echo "($py)"
echo "$m" | grep -q '"env/calls":2.0' && echo "$m" | grep -q '"env/trajectories":1.0' &&
  echo "$m" | grep -q '"env/failures":0.0' && echo "$m" | grep -q '"env/refused_calls":4.0' && echo CLIENT_OK
