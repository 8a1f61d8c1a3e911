#!/usr/bin/env bash
# `temper flow` through the CLI on a small 2-D flow: train, rl (grpo and rwfm with a refit), sample, eval.
#  1. A run stopped with --stop-after and resumed equals the uninterrupted run bit for bit: metrics.jsonl and
#     the final checkpoint's tensors (model, AdamW moments, base, discriminator, pool) and state.
#  2. The run directory holds config.toml, report.html with the sample PNGs, and the metrics an evaluation logs.
#  3. temper flow sample writes a PNG and a CSV of the asked size; temper flow eval prints FD and MMD.
#  4. Bad recipes are refused naming the key: an unknown model kind, rl.base missing.
# Usage: flow_resume.sh TEMPER. Prints FLOW_OK.
set -euo pipefail
temper=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; for f in "$work"/*.log; do echo "== $f"; tail -5 "$f"; done; exit 1; }
small=(--threads 2 --set model.hidden=32 --set model.depth=2 --set eval.samples=200 --set eval.mmd_samples=100
       --set eval.steps=10)
train=("${small[@]}" --set train.steps=40 --set train.batch=64 --set eval.every=20 --set train.checkpoint_every=20)
same_run() {  # A B: metrics and the last checkpoint's tensors and state equal
  cmp -s "$1/metrics.jsonl" "$2/metrics.jsonl" || fail "metrics differ: $1 $2"
  local last
  last=$(ls "$1/checkpoints" | sort -t- -k2 -n | tail -1)
  cmp -s "$1/checkpoints/$last/trainer_state.safetensors" "$2/checkpoints/$last/trainer_state.safetensors" ||
    fail "checkpoint tensors differ: $1 $2 ($last)"
  cmp -s "$1/checkpoints/$last/trainer_state.json" "$2/checkpoints/$last/trainer_state.json" ||
    fail "checkpoint state differs: $1 $2 ($last)"
}

"$temper" flow train --out "$work/base" "${train[@]}" > "$work/base.log" 2>&1 || fail "train"
"$temper" flow train --out "$work/base2" "${train[@]}" --stop-after 25 > "$work/base2.log" 2>&1 || fail "train stop"
grep -q "stopped after step 25" "$work/base2.log" || fail "no stop at 25"
"$temper" flow train --resume "$work/base2" --threads 2 > "$work/base2r.log" 2>&1 || fail "train resume"
same_run "$work/base" "$work/base2"
for f in config.toml report.html images/samples-step-20.png images/samples-step-40.png; do
  [ -s "$work/base/$f" ] || fail "missing $f"
done
grep -q '"kind":"eval".*"fd":.*"mmd":.*"precision":.*"recall":.*"tv":' "$work/base/metrics.jsonl" || fail "eval metrics"
grep -q 'data:image/png;base64' "$work/base/report.html" || fail "report without images"

rl=(--threads 2 --set eval.samples=200 --set eval.mmd_samples=100 --set eval.steps=10 --set rl.sde.steps=6
    --set rl.discriminator.samples=256 --set rl.grpo.groups=4 --set rl.grpo.group=4 --set rl.steps=6
    --set eval.every=3 --set rl.checkpoint_every=2 --set rl.pool=256 --set rl.batch=64)
for method in grpo rwfm; do
  extra=(--set rl.base="$work/base" --set rl.method=$method --set rl.discriminator.refit_every=3)
  "$temper" flow rl --out "$work/$method" "${rl[@]}" "${extra[@]}" > "$work/$method.log" 2>&1 || fail "$method"
  "$temper" flow rl --out "$work/${method}2" "${rl[@]}" "${extra[@]}" --stop-after 4 > "$work/${method}2.log" 2>&1 ||
    fail "$method stop"
  "$temper" flow rl --resume "$work/${method}2" --threads 2 > "$work/${method}2r.log" 2>&1 || fail "$method resume"
  same_run "$work/$method" "$work/${method}2"
  grep -q '"step":0,"kind":"eval".*"disc_ratio_corr"' "$work/$method/metrics.jsonl" || fail "$method: step-0 eval"
  grep -q '"step":6,"kind":"train".*"disc_fits":2' "$work/$method/metrics.jsonl" || fail "$method: the refit"
done
grep -q '"kl":' "$work/grpo/metrics.jsonl" || fail "grpo logs no KL"

"$temper" flow sample "$work/grpo" --out "$work/s.png" -n 100 > "$work/sample.log" 2>&1 || fail "sample png"
[ -s "$work/s.png" ] || fail "no png"
"$temper" flow sample "$work/base" --out "$work/s.csv" -n 50 --sampler sde --steps 8 >> "$work/sample.log" 2>&1 ||
  fail "sample csv"
[ "$(wc -l < "$work/s.csv")" = 50 ] || fail "csv rows"
"$temper" flow eval "$work/base" -n 200 --steps 10 > "$work/eval.json" 2> "$work/eval.log" || fail "eval"
grep -q '"fd":' "$work/eval.json" && grep -q '"mmd":' "$work/eval.json" || fail "eval json"

if "$temper" flow train --out "$work/bad" --set model.kind=unet > "$work/bad.log" 2>&1; then fail "unet accepted"; fi
grep -q "model.kind" "$work/bad.log" || fail "bad kind message"
[ ! -e "$work/bad" ] || fail "a refused recipe left a directory"
if "$temper" flow rl --out "$work/bad2" --set rl.base= > "$work/bad2.log" 2>&1; then fail "no base accepted"; fi
grep -q "rl.base" "$work/bad2.log" || fail "rl.base message"
echo FLOW_OK
