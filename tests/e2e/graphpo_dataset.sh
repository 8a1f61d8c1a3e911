#!/usr/bin/env bash
# GraphPO on a `dataset` task through the CLI, as a new user starts it (issue 42 item 1): a dataset reports no
# reasoning states, so the default equivalence ("auto") merges its lines by the policy's hidden state at each line end
# (cosine >= rl.graphpo.similarity): steps per rollout > 1 and states merge (graphpo_merge_rate > 0). With a
# similarity nothing reaches, every step logs graphpo_nothing_merged = 1 and the run warns once; equivalence = "state"
# is refused before any step, naming the key.   Usage: graphpo_dataset.sh TEMPER. Prints GRAPHPO_DATASET_OK.
set -euo pipefail
temper=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "graphpo_dataset.sh: $*"; exit 1; }
python3 - "$work/sums.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for a in range(10):
        for b in range(10):
            c = a + b
            f.write(json.dumps({"prompt": f"{a}+{b}=", "answer": str(c),
                                "solution": f"{a}+{b}={c}\ncheck {b}+{a}={c}\n#### {c}"}) + "\n")
PY
cat > "$work/recipe.toml" <<TOML
[model]
preset = "quickstart"
[task]
name = "dataset"
[task.params]
path = "$work/sums.jsonl"
eval_fraction = 0.1
[sft]
steps = 150
batch = 32
lr = 3e-3
warmup = 10
[rl]
steps = 3
prompts_per_step = 8
group_size = 4
max_new = 40
[rl.graphpo]
[eval]
every = 0
problems = 10
max_new = 40
[run]
checkpoint_every = 0
TOML
common=("$work/recipe.toml" --threads 2)
"$temper" train "${common[@]}" --out "$work/run" 2> "$work/run.log" || fail "the run failed: $(tail -3 "$work/run.log")"
"$temper" train "${common[@]}" --out "$work/strict" --set rl.graphpo.similarity=1.0 2> "$work/strict.log" \
  || fail "the strict run failed: $(tail -3 "$work/strict.log")"
python3 - "$work/run/metrics.jsonl" "$work/strict/metrics.jsonl" <<'PY'
import json, sys
def train(p):
    return [r for r in map(json.loads, open(p)) if r.get("kind") == "train"]
run, strict = train(sys.argv[1]), train(sys.argv[2])
assert len(run) == 3 and len(strict) == 3, (run, strict)
rate = [r["graphpo_merge_rate"] for r in run]
steps = [r["graphpo_steps_per_rollout"] for r in run]
print("graphpo on a dataset: merge rate per step", [round(x, 3) for x in rate], "steps per rollout",
      [round(x, 2) for x in steps])
assert all(x > 0 for x in rate) and all(s > 1 for s in steps), run
assert all(r["graphpo_nothing_merged"] == 0 for r in run), run
assert all(r["graphpo_nothing_merged"] == 1 and r["graphpo_merge_rate"] == 0 for r in strict), strict
PY
grep -q "nothing merged" "$work/run.log" && fail "a run that merged warned"
test "$(grep -c "graphpo: nothing merged in a step" "$work/strict.log")" = 1 || fail "expected one warning: $(grep -c graphpo "$work/strict.log")"
if "$temper" train "${common[@]}" --out "$work/state" --set rl.graphpo.equivalence='"state"' 2> "$work/state.log"; then
  fail "equivalence = \"state\" on a dataset was not refused"
fi
grep -q "rl.graphpo.equivalence = \"state\": task 'dataset' reports no reasoning states" "$work/state.log" \
  || fail "no refusal naming the key: $(tail -1 "$work/state.log")"
test ! -e "$work/state" || fail "a refused recipe left a run directory"
echo "GRAPHPO_DATASET_OK"
