#!/usr/bin/env bash
# [curriculum] on a `dataset` task whose rows declare their modules (issue 42 item 1): rows carry "modules" (the atomic
# skills they use) and "set" ("sft": single skills, "rl": compositions); the run prints the budget split and the SFT
# set's coverage of the file's modules, writes curriculum.json, and trains the SFT steps on the sft rows, then the RL
# steps on the rl rows. A file whose rows declare no modules is refused before any step, naming the file and the
# field 'modules', with no run directory left behind.   Usage: curriculum_dataset.sh TEMPER. Prints CURRICULUM_DATASET_OK.
set -euo pipefail
source "$(dirname "$0")/dataset_run.sh"
e2e_start "$1"
python3 - "$work" <<'PY'
import itertools, json, sys
ops = {"rev": lambda s: s[::-1], "dup": lambda s: s + s, "sort": lambda s: "".join(sorted(s))}
words = ["".join(p) for p in itertools.permutations("abcd", 3)]
def row(word, steps, s):
    out = word
    lines = []
    for op in steps:
        out = ops[op](out)
        lines.append(f"{op}={out}")
    return {"prompt": word + "|" + "|".join(steps) + "=", "answer": out, "modules": list(steps), "set": s,
            "solution": "\n".join(lines) + f"\n#### {out}"}
with open(sys.argv[1] + "/rows.jsonl", "w") as f, open(sys.argv[1] + "/eval.jsonl", "w") as g, \
     open(sys.argv[1] + "/plain.jsonl", "w") as h:
    for i, w in enumerate(words):
        for op in ops:
            f.write(json.dumps(row(w, [op], "sft")) + "\n")
        f.write(json.dumps(row(w, ["rev", "sort"] if i % 2 else ["sort", "dup"], "rl")) + "\n")
        if i < 4:
            g.write(json.dumps(row(w, ["dup", "rev"], "rl")) + "\n")
        h.write(json.dumps({"prompt": w + "|rev=", "answer": w[::-1]}) + "\n")
PY
{ recipe_start "$work/rows.jsonl"; cat <<TOML; } > "$work/recipe.toml"
eval_path = "$work/eval.jsonl"
[curriculum]
total = 48
[sft]
batch = 8
[rl]
prompts_per_step = 4
group_size = 2
max_new = 16
[eval]
problems = 4
max_new = 16
[run]
checkpoint_every = 0
samples_every = 1
TOML
"$temper" train "$work/recipe.toml" --out "$work/run" --threads 2 2> "$work/run.log" || fail "the run failed: $(tail -3 "$work/run.log")"
grep -q "curriculum 4:1 in prompts over 48: SFT 5 steps (40 prompts, 5 optimiser steps), RL 2 steps (8 prompts, 2 optimiser steps)" \
  "$work/run.log" || fail "no budget line: $(grep curriculum "$work/run.log")"
grep -q "SFT set 'sft' covers 3/3 modules over 40 problems: dup=13 rev=14 sort=13" "$work/run.log" \
  || fail "no coverage line: $(grep covers "$work/run.log")"
python3 - "$work/run" <<'PY'
import json, sys
c = json.load(open(sys.argv[1] + "/curriculum.json"))
assert c["sft"]["steps"] == 5 and c["rl"]["steps"] == 2 and c["rl"]["set"] == "rl", c
assert c["coverage"]["missing"] == [] and c["coverage"]["modules"] == {"dup": 13, "rev": 14, "sort": 13}, c
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
assert [r["kind"] for r in rows if r["kind"] != "eval"] == ["sft"] * 5 + ["train"] * 2, rows
# The RL stage drew the rl rows (compositions: "|" twice in the prompt), the SFT stage never did.
rl = [json.loads(l) for l in open(sys.argv[1] + "/samples.jsonl")]
assert len(rl) == 8 and all(s["prompt"].count("|") == 2 for s in rl), rl[:2]
PY
if "$temper" train "$work/recipe.toml" --out "$work/plain" --threads 2 --set task.params.path="\"$work/plain.jsonl\"" \
  --set task.params.eval_path="\"$work/plain.jsonl\"" 2> "$work/plain.log"; then
  fail "a curriculum over rows without modules was not refused"
fi
grep -q "$work/plain.jsonl: no row has the field 'modules'" "$work/plain.log" || fail "no refusal naming the file: $(tail -2 "$work/plain.log")"
test ! -e "$work/plain" || fail "a refused recipe left a run directory"
echo "CURRICULUM_DATASET_OK"
