#!/usr/bin/env bash
# DRE on a `dataset` task through the CLI, as a new user starts it (issue 42 item 1): a JSONL of sums whose gold
# solutions state the answer, check it, then close with "#### c"; SFT teaches the quickstart model that habit, and
# RL with [rl.dre] detector = "gsm8k" edits correct rollouts at the line that first states the answer (dre_edits > 0,
# tokens saved). Without a detector the recipe is refused before any step, naming rl.dre.detector, with no run
# directory left behind.   Usage: dre_dataset.sh TEMPER. Prints DRE_DATASET_OK.
set -euo pipefail
source "$(dirname "$0")/dataset_run.sh"
e2e_start "$1"
sums_recipe '[rl.dre]' 'min_tail = 4'

if "$temper" train "$work/recipe.toml" --out "$work/refused" --threads 2 2> "$work/refused.log"; then
  fail "DRE on a dataset without rl.dre.detector was not refused"
fi
grep -q "rl.dre.detector: task 'dataset' has no answer detector of its own" "$work/refused.log" \
  || fail "no refusal naming rl.dre.detector: $(tail -2 "$work/refused.log")"
test ! -e "$work/refused" || fail "a refused recipe left a run directory"

# 400 SFT steps (the shared recipe's 150 leave the model unsure what follows a forced "#### " without the check line
# before it: 2 of 80 forks wrote the answer there after a rounding change in the attention forward, 31 of 96 at 400).
"$temper" train "$work/recipe.toml" --out "$work/run" --threads 2 --set rl.dre.detector='"gsm8k"' --set sft.steps=400 \
  2> "$work/run.log" \
  || fail "the run failed: $(tail -3 "$work/run.log")"
python3 - "$work/run/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
rows = [r for r in rows if r.get("kind") == "train"]
assert len(rows) == 3, rows
edits = sum(r["dre_edits"] for r in rows)
saved = max(r["dre_saved_tokens_mean"] for r in rows)
over = max(r["dre_overthink_correct"] for r in rows)
print(f"dre on a dataset: {edits:.0f} edits over 3 steps, up to {saved:.1f} tokens saved per edit, overthinking ratio of correct rollouts up to {over:.3f}")
assert edits > 0 and saved > 0 and over > 0, rows
PY
echo "DRE_DATASET_OK"
