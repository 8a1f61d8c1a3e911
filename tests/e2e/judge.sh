#!/usr/bin/env bash
# LLM-as-judge through the CLI: the quickstart policy on arithmetic, rewarded by SmolLM2-135M-Instruct (GGUF, run
# with with_smollm2.sh: $GGUF) as a [[reward]] judge beside the builtin verifier; one RL step; metrics.jsonl has
# reward/<name> for both terms and samples.jsonl the judge's judgements; a misspelt placeholder stops the run
# before the first step naming it; [rl.turing] judge = "model" loads the judge and runs a step.
# Usage: judge.sh TEMPER   (GGUF set)
set -euo pipefail
temper=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "judge.sh: $*"; exit 1; }
cat > "$work/recipe.toml" <<TOML
[model]
preset = "quickstart"
[task]
name = "arithmetic"
[task.params]
max_ops = 1
max_operand = 9
[sft]
steps = 0
[rl]
steps = 1
prompts_per_step = 2
group_size = 2
max_new = 8
[eval]
every = 0
problems = 2
max_new = 8
[run]
samples_every = 1

[[reward]]
name = "exact"
builtin = true
weight = 0.5

[[reward]]
name = "judge"
judge = { model = "$GGUF", template = "Question: {question}\nReference answer: {answer}\nStudent answer: {completion}\nIs the student answer correct? Reply with one word: correct or incorrect.", parse = "choice", labels = "correct,incorrect", max_new = 8 }
TOML
"$temper" train "$work/recipe.toml" --out "$work/run" --threads 2 2> "$work/log" || fail "train: $(tail -5 "$work/log")"
python3 - "$work/run" <<'PY'
import json, sys
run = sys.argv[1]
train = [r for r in map(json.loads, open(f"{run}/metrics.jsonl")) if r.get("kind") == "train"]
assert len(train) == 1, train
m = train[0]
for k in ("reward/exact", "reward/judge"):
    assert k in m, (k, sorted(m))
    assert 0 <= m[k] <= 1, (k, m[k])
samples = [json.loads(l) for l in open(f"{run}/samples.jsonl")]
assert any("judge: " in s.get("info", "") for s in samples), samples[:2]
print("reward/judge", m["reward/judge"], "reward/exact", m["reward/exact"], "failures", m.get("reward_failures"))
PY
# A misspelt placeholder: refused before the first step, naming it.
sed 's/{answer}/{gold}/' "$work/recipe.toml" > "$work/bad.toml"
if "$temper" train "$work/bad.toml" --out "$work/bad" --threads 2 2> "$work/bad.log"; then fail "a bad template was accepted"; fi
grep -q "unknown placeholder {gold}" "$work/bad.log" || fail "bad template: $(tail -3 "$work/bad.log")"
# [rl.turing] judge = "model" on synthetic users (the untrained policy's replies are mostly hard zeros: this checks
# that the judge model loads and the step runs).
here=$(cd "$(dirname "$0")" && pwd)
python3 "$here/../../experiments/turing-users/make_data.py" "$work/data" --train 16 --eval 4 > /dev/null
cat > "$work/turing.toml" <<TOML
[model]
preset = "quickstart"
context = 384
[task]
name = "user_sim"
[task.params]
path = "$work/data/train.jsonl"
eval_path = "$work/data/eval.jsonl"
[rl]
steps = 1
prompts_per_step = 2
group_size = 2
max_new = 24
[rl.turing]
judge = "model"
judge_model = "$GGUF"
judge_max_new = 8
[eval]
every = 0
problems = 2
max_new = 24
TOML
"$temper" train "$work/turing.toml" --out "$work/turing" --threads 2 2> "$work/turing.log" || fail "turing: $(tail -5 "$work/turing.log")"
grep -q '"turing_judge_failures"' "$work/turing/metrics.jsonl" || fail "turing: no turing_judge_failures in metrics.jsonl"
echo JUDGE_OK
