#!/usr/bin/env bash
# Turing rewards through the CLI on the quickstart model and synthetic users (task user_sim): with the
# scripted judge and with the discriminator judge (fitted at the first step on the frozen starting weights, which the trainer holds without a KL term; saved in the checkpoint;
# and on character n-grams, features = "ngrams"), and the discriminator reward of [rl.discriminator] (its default KL term),
# every step reports the Turing metrics and rewards lie in [0, 0.9 x 4/6 + 0.1]; eval --samples-out
# writes every sample; recipes that cannot work are refused with the key named.
# Usage: turing.sh TEMPER
set -euo pipefail
temper=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "turing.sh: $*"; exit 1; }
python3 "$here/../../experiments/turing-users/make_data.py" "$work/data" --train 64 --eval 8
cat > "$work/recipe.toml" <<TOML
[model]
preset = "quickstart"
context = 384
[task]
name = "user_sim"
[task.params]
path = "$work/data/train.jsonl"
eval_path = "$work/data/eval.jsonl"
[rl]
steps = 2
prompts_per_step = 4
group_size = 2
max_new = 24
[rl.turing]
judge = "scripted"
[eval]
problems = 4
max_new = 24
TOML
"$temper" train "$work/recipe.toml" --out "$work/scripted" --threads 1 2> "$work/scripted.log" || fail "scripted judge: $(tail -3 "$work/scripted.log")"
"$temper" train "$work/recipe.toml" --out "$work/disc" --threads 1 --set rl.turing.judge='"discriminator"' --set rl.turing.samples=8 \
  2> "$work/disc.log" || fail "discriminator judge: $(tail -3 "$work/disc.log")"
"$temper" train "$work/recipe.toml" --out "$work/ngrams" --threads 1 --set rl.turing.judge='"discriminator"' --set rl.turing.samples=8 \
  --set rl.turing.features='"ngrams"' --set rl.turing.ngram_dim=64 2> "$work/ngrams.log" || fail "n-gram judge: $(tail -3 "$work/ngrams.log")"
# The discriminator reward (spec section 4) on the same task: the head's clipped logit is the reward, and with
# [rl.discriminator] KL-regularised RL at weight 1 on the raw reward is the default (the kl term is on at step 2).
grep -v -e '^\[rl.turing\]' -e '^judge = ' "$work/recipe.toml" > "$work/dreward.toml"
"$temper" train "$work/dreward.toml" --out "$work/dreward" --threads 1 \
  --set rl.discriminator.samples=8 --set rl.discriminator.features='"ngrams"' --set rl.discriminator.ngram_dim=64 \
  2> "$work/dreward.log" || fail "discriminator reward: $(tail -3 "$work/dreward.log")"
python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
train = [r for r in map(json.loads, open(f"{w}/dreward/metrics.jsonl")) if r["kind"] == "train"]
assert len(train) == 2, train
for r in train:
    assert "turing_reward_mean" not in r, r
    assert r["disc_fits"] == 1 and r["disc_fit_examples"] > 0, r
    assert -10 <= r["disc_reward_mean"] <= 10 and abs(r["reward_mean"] - r["disc_reward_mean"]) < 1e-9, r
assert train[1]["kl"] > 0, f"no KL term by default with [rl.discriminator]: {train[1]}"
scripted = [r for r in map(json.loads, open(f"{w}/scripted/metrics.jsonl")) if r["kind"] == "train"]
assert scripted[1]["kl"] == 0, f"a KL term without [rl.discriminator] or rl.kl_coef: {scripted[1]}"
PY
python3 - "$work" <<'PY'
import json, os, sys
w = sys.argv[1]
for run in ("scripted", "disc", "ngrams"):
    rows = [json.loads(l) for l in open(f"{w}/{run}/metrics.jsonl")]
    train = [r for r in rows if r["kind"] == "train"]
    assert len(train) == 2, (run, rows)
    for r in train:
        for k in ("turing_reward_mean", "turing_s_mean", "turing_judged_human", "turing_format_mean", "turing_length_penalty", "turing_hard_zero"):
            assert k in r, (run, k, r)
        assert 0 <= r["turing_reward_mean"] <= 0.9 * 4 / 6 + 0.1 + 1e-9, r
        assert 0 <= r["turing_hard_zero"] <= 1, r
        assert abs(r["reward_mean"] - r["turing_reward_mean"]) < 1e-9, r  # the Turing reward is the reward
    if run != "scripted":
        assert all("turing_judge_fit_accuracy" in r for r in train), train
        ck = sorted(os.listdir(f"{w}/{run}/checkpoints"))[-1]
        state = open(f"{w}/{run}/checkpoints/{ck}/trainer_state.json").read()
        assert "turing_judge" in state, f"the {run} judge is not in the checkpoint"
# the n-gram head reads 2 x 64 + 2 features: its saved weights say so
import re
ck = sorted(os.listdir(f"{w}/ngrams/checkpoints"))[-1]
assert re.search(r"(\\n|\n)130 ", open(f"{w}/ngrams/checkpoints/{ck}/trainer_state.json").read()), "no 130-feature head"
PY
ck=$(ls -d "$work"/scripted/checkpoints/step-* | tail -1)
"$temper" eval --model "$ck" --task user_sim --param path="$work/data/train.jsonl" --param eval_path="$work/data/eval.jsonl" \
  --problems 3 -k 2 --max-new 16 --samples-out "$work/samples.jsonl" --json "$work/eval.json" > /dev/null 2>&1 || fail "eval failed"
python3 - "$work" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/samples.jsonl")]
assert len(rows) == 6 and sorted(r["sample"] for r in rows) == [0, 0, 0, 1, 1, 1], rows
assert "reward_mean" in json.load(open(sys.argv[1] + "/eval.json"))
PY
refuse() {  # log-pattern, --set args...
  local pat=$1; shift
  if "$temper" train "$work/recipe.toml" --out "$work/bad" --threads 1 "$@" 2> "$work/bad.log"; then fail "not refused: $*"; fi
  grep -q "$pat" "$work/bad.log" || fail "no '$pat' in: $(tail -2 "$work/bad.log")"
}
refuse 'expected task.name = "user_sim"' --set task.name='"arithmetic"'
refuse 'rl.turing.judge' --set rl.turing.judge='"llm"'
refuse 'rl.turing.cap' --set rl.turing.cap=9
refuse "rl.fair.objectives: objective task:style: the task 'user_sim' names no reward entries" --set rl.fair.objectives='"correct,task:style"' \
  --set rl.turing.enabled=false
# [rl.turing] replaces the reward [rl.fair] combined (its hooks run after fair's): refused, both named.
refuse '\[rl.fair\] and \[rl.turing\] with judge = "scripted": one combines the task.s rewards, the other replaces' \
  --set rl.fair.objectives='"correct,brevity"'
refuse 'rl.turing.features' --set rl.turing.judge='"discriminator"' --set rl.turing.features='"bag"'
refuse 'rl.turing.ngram_dim' --set rl.turing.judge='"discriminator"' --set rl.turing.features='"ngrams"' --set rl.turing.ngram_dim=4
echo "turing.sh: ok"
