#!/usr/bin/env bash
# GraphPO on a `dataset` task through the CLI, as a new user starts it (issue 42 item 1): a dataset reports no
# reasoning states, so the default equivalence ("auto") merges its lines by the policy's hidden state at each line end
# (cosine >= rl.graphpo.similarity): steps per rollout > 1 and states merge (graphpo_merge_rate > 0). With a
# similarity nothing reaches, every step logs graphpo_nothing_merged = 1 and the run warns once; equivalence = "state"
# is refused before any step, naming the key.   Usage: graphpo_dataset.sh TEMPER. Prints GRAPHPO_DATASET_OK.
set -euo pipefail
source "$(dirname "$0")/dataset_run.sh"
e2e_start "$1"
sums_recipe '[rl.graphpo]'
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
