#!/usr/bin/env bash
# The SFT -> RL curriculum through the CLI on the quickstart model (a recipe with [curriculum]): the budget split and the SFT
# stage's module coverage are printed before training and written to curriculum.json, and the run
# trains exactly those steps on the two sets; a held-out skill the SFT stage never shows stops the
# run (named) unless require_coverage = false; steps given beside [curriculum] are refused.
# Usage: curriculum.sh TEMPER
set -euo pipefail
temper=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/recipe.toml" <<'TOML'
[task]
name = "compose"
[curriculum]
total = 96
[sft]
batch = 16
[rl]
prompts_per_step = 4
group_size = 2
max_new = 8
[eval]
problems = 4
max_new = 8
TOML
common=("$work/recipe.toml" --threads 1)
fail() { echo "curriculum.sh: $*"; exit 1; }

"$temper" train --out "$work/ok" "${common[@]}" 2> "$work/ok.log" || fail "the run failed: $(tail -3 "$work/ok.log")"
grep -q "curriculum 4:1 in prompts over 96: SFT 5 steps (80 prompts, 5 optimiser steps), RL 4 steps (16 prompts, 4 optimiser steps)" "$work/ok.log" \
  || fail "no budget line"
grep -q "SFT set 'sft' covers 12/12 modules over 80 problems" "$work/ok.log" || fail "no coverage line"
python3 - "$work/ok" <<'PY'
import json, sys
c = json.load(open(sys.argv[1] + "/curriculum.json"))
assert c["ratio"] == [4, 1] and c["sft"]["steps"] == 5 and c["rl"]["steps"] == 4 and c["rl"]["set"] == "rl", c
assert c["coverage"]["missing"] == [] and c["coverage"]["problems"] == 80 and len(c["coverage"]["modules"]) == 12, c
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
assert [r["kind"] for r in rows if r["kind"] != "eval"] == ["sft"] * 5 + ["train"] * 4, rows
PY

# A held-out skill: refused by default, trained with require_coverage = false (coverage reports it).
if "$temper" train --out "$work/held" "${common[@]}" --set task.params.holdout='"sort"' 2> "$work/held.log"; then
  fail "a run whose SFT stage never shows 'sort' was not refused"
fi
grep -q "never shows module(s) sort in its 80 problems" "$work/held.log" || fail "no coverage error: $(tail -2 "$work/held.log")"
"$temper" train --out "$work/held2" "${common[@]}" --set task.params.holdout='"sort"' --set curriculum.require_coverage=false \
  2> "$work/held2.log" || fail "require_coverage = false did not train"
grep -q "covers 11/12 modules over 80 problems.*never shown: sort" "$work/held2.log" || fail "no coverage report of the held-out skill"

if "$temper" train --out "$work/conflict" "${common[@]}" --set sft.steps=3 2> "$work/conflict.log"; then fail "sft.steps beside [curriculum] was accepted"; fi
grep -q "remove sft.steps" "$work/conflict.log" || fail "no conflict message"
echo "curriculum.sh: all checks passed"
