#!/usr/bin/env bash
# `temper train` with [env] mode = "client": the user's agent (examples/agents/two_turn_agent.py, the official
# openai client from .venv-client when the bootstrap made it, else the standard library) talks to the policy
# through the loopback endpoint; two calls per episode stitched into one trajectory. Then the same agent under
# [rl.async]: with the explorer thread (its engine on the previous version serves the endpoint) and, under
# `mpirun -np 3`, with two explorer ranks (each serves its block of the round's episodes on its own loopback port;
# skipped where mpirun cannot start 3 ranks): every step's episodes all stitched, step 2 sampled one version back.
# Under [rl.async] the agent also logs which endpoint served each episode: the explorer thread serves a step's four
# episodes on one port; two explorer ranks serve one problem's two episodes each, on two different ports. Prints
# CLIENT_OK.
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
  echo "$m" | grep -q '"env/failures":0.0' && echo "$m" | grep -q '"env/refused_calls":4.0' || exit 1

# [rl.async]: 2 steps, each of 2 prompts x 2 episodes of 2 calls, every episode stitched and none failed; step 1
# sampled with version 0 (staleness 0), step 2 one version back.
async_ok() {  # RUN_DIR LABEL
  python3 - "$1/metrics.jsonl" "$2" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"kind":"train"' in l.replace(" ", "")]
got = [(r["env/episodes"], r["env/calls"], r["env/trajectories"], r["env/failures"], r["async_staleness"]) for r in rows]
want = [(4.0, 2.0, 1.0, 0.0, 0.0), (4.0, 2.0, 1.0, 0.0, 1.0)]
print(f"{sys.argv[2]}: (episodes, calls, trajectories, failures, staleness) per step {got}")
sys.exit(0 if got == want else 1)
PY
}
# The same agent, logging "episode base_url" per episode into the file its first argument names.
cat > "$t/logged_agent.py" <<PY
import sys
sys.path[:0] = ["$root/python", "$root/examples/agents"]
import temper_env, two_turn_agent
log = sys.argv[1]
class Logged(two_turn_agent.TwoTurns):
    def run(self, row, endpoint):
        with open(log, "a") as f:
            f.write(f"{self.episode} {endpoint.base_url}\n")
        return super().run(row, endpoint)
temper_env.serve(Logged)
PY
logged_recipe() {  # LOG: client.toml with the logging agent
  sed "s|^program = .*|program = [\"$py\", \"$t/logged_agent.py\", \"$1\"]|" "$t/client.toml"
}
# Which endpoint served which episode ("s<step>r<round>/<problem>/<member> URL" lines), per step: PORTS is 1 (one port
# for the step's episodes) or 2 (each problem's episodes on one port, the two problems on two different ports).
served_ok() {  # LOG PORTS LABEL
  python3 - "$@" <<'PY'
import collections, sys
lines = [l.split() for l in open(sys.argv[1]) if l.strip()]
want, label = int(sys.argv[2]), sys.argv[3]
steps = collections.defaultdict(lambda: collections.defaultdict(set))
for ep, url in lines:
    steps[ep.split("/")[0]][ep.split("/")[1]].add(url)
ok = len(lines) == 8 and len(steps) == 2
for step, problems in sorted(steps.items()):
    ports = set().union(*problems.values())
    print(f"{label}: {step}: problem -> endpoints {dict((p, sorted(u)) for p, u in sorted(problems.items()))}")
    ok = ok and len(problems) == 2 and all(len(u) == 1 for u in problems.values()) and len(ports) == want
sys.exit(0 if ok else 1)
PY
}
async=(--set rl.steps=2 --set rl.async.max_staleness=1 --threads 1)
logged_recipe "$t/thread.served" > "$t/thread.toml"
"$temper" train "$t/thread.toml" --out "$t/thread" "${async[@]}" > "$t/thread.log" 2>&1 || { cat "$t/thread.log"; exit 1; }
async_ok "$t/thread" "explorer thread" || exit 1
served_ok "$t/thread.served" 1 "explorer thread" || exit 1
rc=0
logged_recipe "$t/ranks.served" > "$t/ranks.toml"
"$(dirname "$0")/../dist/mpirun_n.sh" 3 "$temper" train "$t/ranks.toml" --out "$t/ranks" "${async[@]}" \
  --set rl.async.explorer_ranks=2 > "$t/ranks.log" 2>&1 || rc=$?
if [ "$rc" = 77 ]; then
  echo "two explorer ranks: skipped (mpirun cannot start 3 ranks here)"
elif [ "$rc" != 0 ]; then
  cat "$t/ranks.log"; exit 1
else
  grep -q "ranks 0-0 train, ranks 1-2 explore" "$t/ranks.log" || { cat "$t/ranks.log"; exit 1; }
  async_ok "$t/ranks" "two explorer ranks" || exit 1
  served_ok "$t/ranks.served" 2 "two explorer ranks" || exit 1
fi
echo CLIENT_OK
