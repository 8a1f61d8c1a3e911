#!/usr/bin/env bash
# Reward programs through `temper train` (issue 34): the quickstart, shortened, with its arithmetic check rewritten
# as a Python reward program (examples/rewards/arithmetic_exact.py, 2 workers) trains exactly as with the builtin
# verifier: every metric but the program's reward/exact(/std), the final weights and the held-out accuracy are
# equal. Then failures: a worker that hangs on its first batch is killed after timeout_s and the run goes on (its
# samples scored on_failure and counted in reward_failures); a worker that cannot start stops the run before its
# first step, naming the command and its stderr.
# Usage: reward_program.sh TEMPER SOURCE_DIR
set -euo pipefail
temper=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$src"
common=(--threads 2 --set sft.steps=120 --set rl.steps=8 --set rl.prompts_per_step=8 --set rl.group_size=8
        --set eval.problems=200 --set eval.every=0 --set run.checkpoint_every=128 --set run.samples_every=1)
strip() {  # metrics without timings and without the program term's own metrics
  python3 - "$1" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(json.dumps({k: v for k, v in r.items() if not k.endswith(("_s", "tokens_per_s", "rss_mb"))
                      and not k.startswith("reward/")}, sort_keys=True))
PY
}

"$temper" train recipes/quickstart.toml --out "$work/builtin" "${common[@]}" 2> "$work/builtin.log"
{ cat recipes/quickstart.toml; cat <<'TOML'

[[reward]]
name = "exact"
program = ["python3", "examples/rewards/arithmetic_exact.py"]
workers = 2
TOML
} > "$work/program.toml"
"$temper" train "$work/program.toml" --out "$work/program" "${common[@]}" 2> "$work/program.log"
diff <(strip "$work/builtin/metrics.jsonl") <(strip "$work/program/metrics.jsonl") \
  || { echo "metrics differ between the builtin verifier and the reward program"; exit 1; }
cmp "$work/builtin/checkpoints/step-128/model.safetensors" "$work/program/checkpoints/step-128/model.safetensors" \
  || { echo "weights differ"; exit 1; }
grep -q '"reward/exact":' "$work/program/metrics.jsonl" || { echo "no reward/exact metric"; exit 1; }
grep -q '"rewards":{"exact":' "$work/program/samples.jsonl" || { echo "no per-term rewards in samples.jsonl"; exit 1; }
acc=$(grep -o 'at the end\.\|[0-9.]* at the end' "$work/program.log" | head -1)
echo "held-out accuracy with the program: $acc; builtin: $(grep -o '[0-9.]* at the end' "$work/builtin.log" | head -1)"

# A worker hanging on its first batch: killed after timeout_s, restarted, the run finishes.
{ cat recipes/quickstart.toml; cat <<TOML

[[reward]]
name = "flaky"
program = ["python3", "tests/reward/workers/fake_worker.py", "hang_once", "$work/hung"]
timeout_s = 1.0
on_failure = -1.0
TOML
} > "$work/hang.toml"
"$temper" train "$work/hang.toml" --out "$work/hang" --threads 2 --set sft.steps=0 --set rl.steps=2 \
  --set rl.prompts_per_step=2 --set rl.group_size=4 --set rl.dynamic_sampling=false --set eval.every=0 \
  --set eval.problems=8 2> "$work/hang.log"
grep -q "no answer within timeout_s = 1 s; killed" "$work/hang.log" || { cat "$work/hang.log"; exit 1; }
python3 - "$work/hang/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"reward_failures"' in l]
assert [r["reward_failures"] for r in rows] == [8.0, 8.0], [r["reward_failures"] for r in rows]
assert rows[0]["reward/flaky"] == -1.0 and rows[1]["reward/flaky"] >= 0, rows
PY

# A worker that cannot start: the run stops before its first step.
{ cat recipes/quickstart.toml; cat <<'TOML'

[[reward]]
name = "broken"
program = ["python3", "tests/reward/workers/fake_worker.py", "no_start"]
TOML
} > "$work/broken.toml"
if "$temper" train "$work/broken.toml" --out "$work/broken" --threads 2 2> "$work/broken.log"; then
  echo "a worker that cannot start should stop the run"; exit 1
fi
grep -q "reward 'broken' worker 0 (python3 tests/reward/workers/fake_worker.py no_start) closed its output before answering the greeting (exited with status 2); its stderr: fake_worker: cannot load my model" "$work/broken.log" \
  || { cat "$work/broken.log"; exit 1; }
test ! -e "$work/broken/metrics.jsonl"
echo REWARD_PROGRAM_OK
