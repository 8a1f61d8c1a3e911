#!/usr/bin/env bash
# `temper flow spotlight` through the CLI on a small 2-D flow, explorers as real processes:
#  1. With barrier (a deterministic schedule), explorers SIGKILLed at steps 2 and 4 and replaced: the run's final
#     checkpoint tensors (policy, AdamW moments, the explorers' weight versions, the discriminator) equal those of
#     a run without kills; the kills show as 2 re-queued requests, 2 deaths, 0 dropped.
#  2. --stop-after 3 + --resume, and SIGTERM during the run + --resume: the same final tensors (the checkpoint
#     carries the next step's committed results, the bandit and the weight versions) and the same DG-RL counters
#     (compute, disc_fits, disc_accuracy: JSON state, which spotlight does not log as metrics); a checkpoint
#     without "compute" (written before spotlight saved it) resumes with compute 0.
#  3. time_join: the join from memory and from the checkpoint are both measured and logged (not compared).
#  4. explorers = 0 is the synchronous baseline (every group unexplored); a replay of the killed run's
#     schedule.jsonl without explorers gives its tensors again.
#  5. Refusals name the key: flow.spotlight.group against rl.grpo.group, an unknown [flow.spotlight] key.
#  6. The same on an image model (a 1-block DiT on 8x8 RGB shapes, the discriminator's reward on a small frozen CNN):
#     explorers SIGKILLed at steps 2 and 4 and replaced give the final tensors of the run without kills, and so do
#     --stop-after 3 + --resume and a replay of the killed run's schedule without explorers; explorers chose groups.
# Usage: cli_spotlight.sh TEMPER. Prints SPOTLIGHT_OK.
set -euo pipefail
temper=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; for f in "$work"/*.log; do echo "== $f"; tail -5 "$f"; done; exit 1; }
final() { ls "$1/checkpoints" | sort -t- -k2 -n | tail -1; }
same_tensors() {  # A B: the final checkpoints' tensors are equal
  local a b
  a=$(final "$1") b=$(final "$2")
  [ "$a" = "$b" ] || fail "final checkpoints $a vs $b"
  cmp -s "$1/checkpoints/$a/trainer_state.safetensors" "$2/checkpoints/$b/trainer_state.safetensors" ||
    fail "checkpoint tensors differ: $1 $2"
}
counters() {  # RUN: the DG-RL counters in the state of its final checkpoint (trainer_state.json, state at indent 4)
  grep -E '^    "(compute|disc_accuracy|disc_fits)": ' "$1/checkpoints/$(final "$1")/trainer_state.json" || true
}
same_counters() {  # A B: the final checkpoints' DG-RL counters are equal, compute counted (the discriminator's fit)
  local a b
  a=$(counters "$1") b=$(counters "$2")
  [ "$(grep -c . <<< "$a")" = 3 ] || fail "$1: expected compute, disc_accuracy, disc_fits in the state, got: $a"
  grep -q '"compute": [1-9]' <<< "$a" || fail "$1: compute not counted: $a"
  [ "$a" = "$b" ] || fail "DG-RL counters differ after resume: $1: $a; $2: $b"
}

"$temper" flow train --out "$work/base" --set model.hidden=32 --set model.depth=2 --set data.classes=4 \
  --set train.steps=60 --set train.batch=64 --set eval.every=60 --set eval.samples=200 --set eval.mmd_samples=100 \
  --set eval.steps=10 > "$work/base.log" 2>&1 || fail "train"
sp=(--set rl.base="$work/base" --set rl.steps=8 --set rl.sde.steps=6 --set rl.discriminator.samples=256
    --set rl.grpo.groups=4 --set flow.spotlight.group=4 --set flow.spotlight.seeds_per_class=12
    --set flow.spotlight.chunk=4 --set flow.spotlight.barrier=true --set flow.spotlight.min_request_s=0.004
    --set flow.spotlight.cost='"seeds"' --set eval.every=4 --set eval.samples=200 --set eval.mmd_samples=100
    --set eval.steps=10 --set rl.checkpoint_every=4)
kills=(--set 'flow.spotlight.kill_steps=[2,4]')
"$temper" flow spotlight --out "$work/a" "${sp[@]}" > "$work/a.log" 2>&1 || fail "run a"
"$temper" flow spotlight --out "$work/k" "${sp[@]}" "${kills[@]}" --set flow.spotlight.time_join=true \
  > "$work/k.log" 2>&1 || fail "run k"
same_tensors "$work/a" "$work/k"
grep -q "2 re-queued, 0 dropped" "$work/k.log" || fail "kills: expected 2 re-queued, 0 dropped"
grep -q "explorers 3 started, 2 died (2 killed)" "$work/k.log" || fail "kills: expected 3 explorers, 2 deaths"
grep -q '"kind":"reconfig","join_memory_s":[0-9.e-]*,"join_checkpoint_s":[0-9.e-]*' "$work/k/metrics.jsonl" ||
  fail "no reconfiguration timing"
grep -q '"step":8,"kind":"train".*"explored_groups":4' "$work/k/metrics.jsonl" || fail "step 8 not explored"
[ "$(wc -l < "$work/k/schedule.jsonl")" = 8 ] || fail "schedule.jsonl lines"

"$temper" flow spotlight --out "$work/s" "${sp[@]}" "${kills[@]}" --stop-after 3 > "$work/s.log" 2>&1 || fail "stop"
grep -q "stopped after step 3" "$work/s.log" || fail "no stop at 3"
cp -r "$work/s" "$work/o"  # below: as a checkpoint written before spotlight saved "compute"
"$temper" flow spotlight --resume "$work/s" > "$work/sr.log" 2>&1 || fail "resume"
same_tensors "$work/a" "$work/s"
same_counters "$work/a" "$work/s"
[ "$(wc -l < "$work/s/schedule.jsonl")" = 8 ] || fail "resumed schedule.jsonl lines"
cmp -s "$work/k/schedule.jsonl" "$work/s/schedule.jsonl" || fail "resumed schedule differs"
# A checkpoint without "compute" (before this counter was saved; checksums rewritten) resumes, compute from 0.
o3="$work/o/checkpoints/step-3"
grep -q '^    "compute": ' "$o3/trainer_state.json" || fail "step 3 state has no compute"
sed -i '/^    "compute": /d' "$o3/trainer_state.json"
(cd "$o3" && LC_ALL=C ls | grep -vx checksums.sha256 | xargs sha256sum > checksums.sha256)
"$temper" flow spotlight --resume "$work/o" > "$work/or.log" 2>&1 || fail "resume without compute"
same_tensors "$work/a" "$work/o"
grep -q '^    "compute": 0.0,' "$work/o/checkpoints/$(final "$work/o")/trainer_state.json" ||
  fail "resumed without compute: expected compute 0"

"$temper" flow spotlight --out "$work/t" "${sp[@]}" --set rl.steps=12 --set flow.spotlight.min_request_s=0.01 \
  > "$work/t.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  grep -q '"step":2,"kind":"train"' "$work/t/metrics.jsonl" 2>/dev/null && break
  sleep 0.02
done
kill -TERM "$pid"
wait "$pid" || fail "SIGTERM run exit status"
grep -q "stopped after step" "$work/t.log" || fail "SIGTERM did not stop the run early"
"$temper" flow spotlight --resume "$work/t" > "$work/tr.log" 2>&1 || fail "SIGTERM resume"
"$temper" flow spotlight --out "$work/u" "${sp[@]}" --set rl.steps=12 > "$work/u.log" 2>&1 || fail "run u"
same_tensors "$work/u" "$work/t"
same_counters "$work/u" "$work/t"

"$temper" flow spotlight --out "$work/r" "${sp[@]}" --set flow.spotlight.barrier=false \
  --set flow.spotlight.replay="$work/k/schedule.jsonl" > "$work/r.log" 2>&1 || fail "replay"
same_tensors "$work/k" "$work/r"
"$temper" flow spotlight --out "$work/z" "${sp[@]}" --set flow.spotlight.barrier=false \
  --set flow.spotlight.explorers=0 > "$work/z.log" 2>&1 || fail "explorers = 0"
grep -q '"step":8,"kind":"train".*"explored_groups":0' "$work/z/metrics.jsonl" || fail "baseline explored a group"

if "$temper" flow spotlight --out "$work/bad" "${sp[@]}" --set rl.grpo.group=8 > "$work/bad.log" 2>&1; then
  fail "group mismatch accepted"
fi
grep -q "flow.spotlight.group = 4 and rl.grpo.group = 8" "$work/bad.log" || fail "group mismatch message"
if "$temper" flow spotlight --out "$work/bad2" "${sp[@]}" --set flow.spotlight.explorer=2 > "$work/bad2.log" 2>&1; then
  fail "unknown key accepted"
fi
grep -q "flow.spotlight.explorer" "$work/bad2.log" || fail "unknown key message"

"$temper" flow train --out "$work/dit" --set data.kind='"shapes"' --set data.image=8 --set model.kind='"dit"' \
  --set model.hidden=32 --set model.depth=1 --set model.patch=4 --set model.heads=4 --set 'features.conv=[4]' \
  --set features.dim=8 --set 'features.hidden=[]' --set features.train_images=200 --set features.steps=20 \
  --set train.steps=60 --set train.batch=32 --set eval.every=60 --set eval.samples=100 --set eval.mmd_samples=50 \
  --set eval.steps=6 > "$work/dit.log" 2>&1 || fail "train the DiT"
grep -q "dit on images/shapes" "$work/dit.log" || fail "the image base is not a DiT"
di=(--set rl.base="$work/dit" --set rl.steps=6 --set rl.sde.steps=4 --set rl.lr=5e-5 --set rl.discriminator.samples=64
    --set rl.grpo.groups=3 --set flow.spotlight.group=4 --set flow.spotlight.seeds_per_class=12
    --set flow.spotlight.chunk=4 --set flow.spotlight.barrier=true --set flow.spotlight.min_request_s=0.004
    --set flow.spotlight.cost='"seeds"' --set eval.every=3 --set eval.samples=100 --set eval.mmd_samples=50
    --set eval.steps=6 --set rl.checkpoint_every=3)
"$temper" flow spotlight --out "$work/da" "${di[@]}" > "$work/da.log" 2>&1 || fail "DiT run a"
"$temper" flow spotlight --out "$work/dk" "${di[@]}" "${kills[@]}" > "$work/dk.log" 2>&1 || fail "DiT run k"
same_tensors "$work/da" "$work/dk"
grep -q "2 re-queued, 0 dropped" "$work/dk.log" || fail "DiT kills: expected 2 re-queued, 0 dropped"
grep -q "explorers 3 started, 2 died (2 killed)" "$work/dk.log" || fail "DiT kills: expected 3 explorers, 2 deaths"
grep -q '"step":6,"kind":"train".*"explored_groups":3' "$work/dk/metrics.jsonl" || fail "DiT step 6 not explored"
"$temper" flow spotlight --out "$work/ds" "${di[@]}" "${kills[@]}" --stop-after 3 > "$work/ds.log" 2>&1 ||
  fail "DiT stop"
grep -q "stopped after step 3" "$work/ds.log" || fail "DiT: no stop at 3"
"$temper" flow spotlight --resume "$work/ds" > "$work/dsr.log" 2>&1 || fail "DiT resume"
same_tensors "$work/da" "$work/ds"
"$temper" flow spotlight --out "$work/dr" "${di[@]}" --set flow.spotlight.barrier=false \
  --set flow.spotlight.replay="$work/dk/schedule.jsonl" > "$work/dr.log" 2>&1 || fail "DiT replay"
same_tensors "$work/dk" "$work/dr"
echo SPOTLIGHT_OK
