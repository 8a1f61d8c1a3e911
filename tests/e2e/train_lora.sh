#!/usr/bin/env bash
# [lora] on the quickstart (3 SFT + 3 RL steps, KL to the base): only the adapters train (1.9% of the parameters);
# checkpoints hold them in PEFT's format (no model weights); stop + resume is bitwise equal to one go; a PEFT adapter
# directory starts a run (lora.init); a mismatched [lora] and bad targets are refused naming the key; temper convert
# --merge-lora merges a run's adapter into its base.
# Usage: train_lora.sh TEMPER. Prints LORA_OK.
set -euo pipefail
temper=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/compare_runs.sh"
common=(--threads 2 --set sft.steps=3 --set rl.steps=3 --set rl.prompts_per_step=4 --set rl.group_size=4
        --set rl.dynamic_sampling=false --set rl.max_new=16 --set eval.problems=8 --set eval.max_new=16
        --set eval.every=0 --set sft.batch=8 --set run.checkpoint_every=1 --set run.keep_last=10 --set run.samples_every=1
        --set lora.rank=4 --set lora.alpha=8 --set lora.targets=q,v,down --set rl.kl_coef=0.05)
"$temper" train --out "$work/full" "${common[@]}" 2> "$work/full.log"
grep -q "LoRA r=4 alpha=8 on 3 product(s) per layer: 15360 trainable parameters" "$work/full.log"
ck="$work/full/checkpoints/step-6"
test -f "$ck/adapter_config.json" && test -f "$ck/adapter_model.safetensors" && test ! -e "$ck/model.safetensors"
python3 - "$ck/adapter_config.json" "$work/full/metrics.jsonl" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
assert c["peft_type"] == "LORA" and c["r"] == 4 and c["lora_alpha"] == 8, c
assert sorted(c["target_modules"]) == ["down_proj", "q_proj", "v_proj"], c
rl = [json.loads(l) for l in open(sys.argv[2]) if '"kind":"train"' in l]
assert rl and all(r["kl"] > 0 for r in rl), rl  # the policy (base + adapters trained in SFT) moved off the base
PY
"$temper" train --out "$work/stop" "${common[@]}" --stop-after 4 2> "$work/stop.log"
"$temper" train --resume "$work/stop" --threads 2 2>> "$work/stop.log"
diff <(strip "$work/full/metrics.jsonl") <(strip "$work/stop/metrics.jsonl") > /dev/null || { echo "metrics differ"; exit 1; }
cmp "$ck/adapter_model.safetensors" "$work/stop/checkpoints/step-6/adapter_model.safetensors"
cmp "$ck/trainer_state.safetensors" "$work/stop/checkpoints/step-6/trainer_state.safetensors"
# A run starting from that adapter (PEFT directory): loaded, named in the log.
"$temper" train --out "$work/init" "${common[@]}" --set sft.steps=0 --set rl.steps=1 --set lora.init="\"$ck\"" \
  2> "$work/init.log"
grep -q "from $ck" "$work/init.log"
# Refusals before the run directory exists.
if "$temper" train --out "$work/bad" "${common[@]}" --set lora.init="\"$ck\"" --set lora.rank=8 2> "$work/bad.log"; then
  echo "a mismatched [lora] was accepted"; exit 1; fi
grep -q "lora.init = .* holds adapters of rank 4" "$work/bad.log"
if "$temper" train --out "$work/bad" "${common[@]}" --set lora.targets=q,embed 2> "$work/bad.log"; then
  echo "a bad target was accepted"; exit 1; fi
grep -q "lora.targets: 'embed' is not one of q, k, v, o, gate, up, down" "$work/bad.log"
test ! -e "$work/bad"
# A LoRA run on a saved model, then temper convert --merge-lora: the merged model's logits differ from the base's
# (numerics of the merge against peft: tests/model/test_lora, slow peft_lora_vs_peft).
"$temper" train --out "$work/base" --threads 2 --set sft.steps=1 --set rl.steps=0 --set eval.every=0 2> /dev/null
"$temper" train --out "$work/lb" --threads 2 --set model.path="\"$work/base/checkpoints/step-1\"" --set sft.steps=2 \
  --set rl.steps=0 --set eval.every=0 --set lora.rank=4 --set sft.lr=1e-2 2> "$work/lb.log"
"$temper" convert "$work/base/checkpoints/step-1" "$work/merged" --merge-lora "$work/lb/checkpoints/step-2" 2> /dev/null
test -f "$work/merged/model.safetensors"
a=$("$temper" logits --model "$work/base/checkpoints/step-1" --ids 1,2,3 --full 2> /dev/null)
b=$("$temper" logits --model "$work/merged" --ids 1,2,3 --full 2> /dev/null)
[ "$a" != "$b" ] || { echo "the merged model's logits equal the base's"; exit 1; }
echo LORA_OK
