#!/usr/bin/env bash
# `temper train --device` through the device code path on any machine: the quickstart, shortened, with
# --device mirror (a DeviceModel that is a second CPU copy: model/mirror_device.h) equals the plain
# CPU run bit for bit (metrics without timings, samples, final weights, optimiser state), also when
# stopped inside RL and resumed (moments pulled from and pushed to the device through checkpoints),
# with bf16 GEMMs and a KL reference model (attached to the device as well), and with speculative rollouts.
# Usage: train_device.sh TEMPER
set -euo pipefail
temper=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(--threads 2 --set sft.steps=3 --set rl.steps=3 --set rl.prompts_per_step=4 --set rl.group_size=4
        --set rl.max_new=16 --set eval.problems=8 --set eval.max_new=16 --set eval.every=3 --set sft.batch=8
        --set run.checkpoint_every=1 --set run.keep_last=10 --set run.samples_every=1)
source "$(dirname "$0")/compare_runs.sh"
"$temper" train --out "$work/cpu" "${common[@]}" 2> "$work/cpu.log"
"$temper" train --out "$work/mirror" --device mirror "${common[@]}" 2> "$work/mirror.log"
grep -q "model on mirror" "$work/mirror.log" || { echo "the mirror device was not attached"; cat "$work/mirror.log"; exit 1; }
same "$work/cpu" "$work/mirror"
"$temper" train --out "$work/resumed" --device mirror "${common[@]}" --stop-after 5 2> "$work/resumed.log"
"$temper" train --resume "$work/resumed" --threads 2 2>> "$work/resumed.log"
grep -c "model on mirror" "$work/resumed.log" | grep -q 2 || { echo "the resumed run left the device"; exit 1; }
same "$work/cpu" "$work/resumed"
# bf16 GEMMs (the device follows the host's precision) and a KL reference (on the device too).
extra=(--set model.precision='"bf16"' --set rl.kl_coef=0.05)
"$temper" train --out "$work/cpu16" "${common[@]}" "${extra[@]}" 2> "$work/cpu16.log"
"$temper" train --out "$work/mirror16" --device mirror "${common[@]}" "${extra[@]}" 2> "$work/mirror16.log"
same "$work/cpu16" "$work/mirror16"
# Speculative rollouts (EfficientRollout): the 4-bit drafter's passes go to the device too, over its KV blocks; its
# head over the 64 tokens sampled most often so far.
spec=(--set rl.speculative.toggle='"always"' --set rl.speculative.ladder='[2, 3]' --set rl.speculative.vocab=64)
"$temper" train --out "$work/cpuspec" "${common[@]}" "${spec[@]}" 2> "$work/cpuspec.log"
"$temper" train --out "$work/mirrorspec" --device mirror "${common[@]}" "${spec[@]}" 2> "$work/mirrorspec.log"
grep -q '"spec_accept_rate"' "$work/mirrorspec/metrics.jsonl" || { echo "no speculative rollouts on the device"; exit 1; }
grep -q '"spec_vocab_coverage"' "$work/mirrorspec/metrics.jsonl" || { echo "no vocabulary subset on the device"; exit 1; }
same "$work/cpuspec" "$work/mirrorspec"
echo DEVICE_OK
