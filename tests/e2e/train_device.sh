#!/usr/bin/env bash
# `temper train --device` through the device code path on any machine: the quickstart, shortened, with
# --device mirror (a DeviceModel that is a second CPU copy: model/mirror_device.h) equals the plain
# CPU run bit for bit (metrics without timings, samples, final weights, optimiser state), also when
# stopped inside RL and resumed (moments pulled from and pushed to the device through checkpoints),
# and with bf16 GEMMs and a KL reference model (attached to the device as well).
# Usage: train_device.sh TEMPER
set -euo pipefail
temper=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(--threads 2 --set sft.steps=3 --set rl.steps=3 --set rl.prompts_per_step=4 --set rl.group_size=4
        --set rl.max_new=16 --set eval.problems=8 --set eval.max_new=16 --set eval.every=3 --set sft.batch=8
        --set run.checkpoint_every=1 --set run.keep_last=10 --set run.samples_every=1)
strip() {
  python3 - "$1" <<'PY'
import json, sys
timing = ("_s", "tokens_per_s", "rss_mb")
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(json.dumps({k: v for k, v in r.items() if not k.endswith(timing)}, sort_keys=True))
PY
}
same() {
  diff <(strip "$1/metrics.jsonl") <(strip "$2/metrics.jsonl") > /dev/null || { echo "metrics differ: $1 vs $2"; diff <(strip "$1/metrics.jsonl") <(strip "$2/metrics.jsonl") | head -20; exit 1; }
  cmp "$1/checkpoints/step-6/model.safetensors" "$2/checkpoints/step-6/model.safetensors" || { echo "weights differ: $1 vs $2"; exit 1; }
  cmp "$1/checkpoints/step-6/trainer_state.safetensors" "$2/checkpoints/step-6/trainer_state.safetensors" || { echo "optimizer state differs: $1 vs $2"; exit 1; }
  cmp "$1/samples.jsonl" "$2/samples.jsonl" || { echo "samples differ: $1 vs $2"; exit 1; }
}
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
echo DEVICE_OK
