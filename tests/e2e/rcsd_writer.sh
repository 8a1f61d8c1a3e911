#!/usr/bin/env bash
# RCSD's rubric writer through the CLI: the quickstart policy on four dataset rows (one with a rubric of its own),
# [rl.rcsd] rubric_writer = SmolLM2-135M-Instruct (GGUF, run with with_smollm2.sh: $GGUF), 2 RL steps that each draw
# every row. The writer is asked once, at step 1, for the three rows without a rubric; metrics show rubrics written
# and rollouts scored with one; --stop-after 1 then --resume equals the uninterrupted run (metrics.jsonl without
# timings, samples, weights) and the resumed run does not ask the writer again (the rubrics are in the checkpoint).
# Usage: rcsd_writer.sh TEMPER   (GGUF set)
set -euo pipefail
temper=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "rcsd_writer.sh: $*"; exit 1; }
source "$(dirname "$0")/compare_runs.sh"
cat > "$work/rows.jsonl" <<'JSONL'
{"id": "add", "prompt": "2+3=", "answer": "5"}
{"id": "sub", "prompt": "9-4=", "answer": "5"}
{"id": "mul", "prompt": "3*3=", "answer": "9"}
{"id": "own", "prompt": "7+1=", "answer": "8", "rubric": "States 8 and nothing else."}
JSONL
cat > "$work/recipe.toml" <<TOML
[model]
preset = "quickstart"
context = 512
[task]
name = "dataset"
[task.params]
path = "$work/rows.jsonl"
[sft]
steps = 0
[rl]
steps = 2
prompts_per_step = 4
group_size = 2
max_new = 8
dynamic_sampling = false
[rl.rcsd]
rubric_writer = "$GGUF"
rubric_max_new = 24
[eval]
every = 0
problems = 1
[run]
checkpoint_every = 1
keep_last = 5
samples_every = 1
TOML
asks() { grep -c "rubric_writer asked for" "$1" || true; }
"$temper" train "$work/recipe.toml" --out "$work/full" --threads 2 2> "$work/full.log" || fail "train: $(tail -5 "$work/full.log")"
grep -q "rubric_writer asked for 3 rubrics" "$work/full.log" || fail "the writer was not asked for 3: $(grep rcsd "$work/full.log")"
[ "$(asks "$work/full.log")" = 1 ] || fail "the writer was asked more than once: $(grep rcsd "$work/full.log")"
python3 - "$work/full" <<'PY'
import json, sys
run = sys.argv[1]
train = [r for r in map(json.loads, open(f"{run}/metrics.jsonl")) if r.get("kind") == "train"]
assert len(train) == 2, train
for m in train:
    assert 1 <= m["rcsd_rubrics_written"] <= 3, m
    assert m["rcsd_rubric_frac"] > 0, m
assert train[0]["rcsd_rubrics_written"] == train[1]["rcsd_rubrics_written"], train
state = json.load(open(f"{run}/checkpoints/step-2/trainer_state.json"))["methods"]["rcsd"]
written = json.loads(state)["written"]
assert sorted(written) == ["add", "mul", "sub"], written
print("rcsd_rubrics_written", train[0]["rcsd_rubrics_written"], "rcsd_rubric_frac",
      [m["rcsd_rubric_frac"] for m in train])
PY
"$temper" train "$work/recipe.toml" --out "$work/stop" --threads 2 --stop-after 1 2> "$work/stop.log" ||
  fail "stop: $(tail -5 "$work/stop.log")"
grep -q "stopped (--stop-after) after step 1" "$work/stop.log" || fail "no stop after step 1: $(tail -3 "$work/stop.log")"
"$temper" train --resume "$work/stop" --threads 2 2> "$work/resume.log" || fail "resume: $(tail -5 "$work/resume.log")"
[ "$(asks "$work/resume.log")" = 0 ] || fail "the resumed run asked the writer again: $(grep rcsd "$work/resume.log")"
same "$work/full" "$work/stop" 2
echo RCSD_WRITER_OK
