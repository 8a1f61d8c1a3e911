#!/usr/bin/env bash
# [lora] base = "int4" (QLoRA), "nf4" and "bf16" on the quickstart (3 SFT + 3 RL steps, KL to the base): the base's
# block products are held only in 4 bits / bf16 (model/frozen_base.h); checkpoints hold the adapters in PEFT's format
# (recording the base: temper_lora_base) and their moments, no model weights; stop + resume re-quantises the base from
# the model and is bitwise equal to one go; temper convert --merge-lora merges an int4 run's adapter into the
# dequantised base (not into the f32 weights), an nf4 run's into its own (not int4's, not the f32 weights); what a held base cannot do is refused naming
# the keys, before the run directory exists. Usage: train_qlora.sh TEMPER. Prints QLORA_OK.
set -euo pipefail
temper=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/compare_runs.sh"
common=(--threads 2 --set sft.steps=3 --set rl.steps=3 --set rl.prompts_per_step=4 --set rl.group_size=4
        --set rl.dynamic_sampling=false --set rl.max_new=16 --set eval.problems=8 --set eval.max_new=16
        --set eval.every=0 --set sft.batch=8 --set run.checkpoint_every=1 --set run.keep_last=10 --set run.samples_every=1
        --set lora.rank=4 --set lora.alpha=8 --set lora.targets=q,v,down --set rl.kl_coef=0.05 --set lora.base=int4)
"$temper" train --out "$work/full" "${common[@]}" 2> "$work/full.log"
ck="$work/full/checkpoints/step-6"
test -f "$ck/adapter_model.safetensors" && test ! -e "$ck/model.safetensors"
python3 - "$ck/adapter_config.json" "$work/full/metrics.jsonl" "$work/full/config.toml" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
assert c["peft_type"] == "LORA" and c["r"] == 4 and c["temper_lora_base"] == "int4", c
rl = [json.loads(l) for l in open(sys.argv[2]) if '"kind":"train"' in l]
assert rl and all(r["kl"] > 0 for r in rl), rl  # the policy (base + adapters) moved off the int4 base
assert 'base = "int4"' in open(sys.argv[3]).read()
PY
# Stop after step 4 and resume: the base quantised again from the same weights, every bit of the run the same.
"$temper" train --out "$work/stop" "${common[@]}" --stop-after 4 2> "$work/stop.log"
"$temper" train --resume "$work/stop" --threads 2 2>> "$work/stop.log"
diff <(strip "$work/full/metrics.jsonl") <(strip "$work/stop/metrics.jsonl") > /dev/null || { echo "metrics differ"; exit 1; }
cmp "$ck/adapter_model.safetensors" "$work/stop/checkpoints/step-6/adapter_model.safetensors"
cmp "$ck/trainer_state.safetensors" "$work/stop/checkpoints/step-6/trainer_state.safetensors"
# A bf16 base trains too, and its adapter says so.
"$temper" train --out "$work/bf16" "${common[@]}" --set lora.base=bf16 --set sft.steps=2 --set rl.steps=1 \
  2> "$work/bf16.log"
grep -q '"temper_lora_base": "bf16"' "$work/bf16/checkpoints/step-3/adapter_config.json"
# So does an nf4 base (QLoRA's NormalFloat, kernels/nf4.h).
"$temper" train --out "$work/nf4" "${common[@]}" --set lora.base=nf4 --set sft.steps=2 --set rl.steps=1 \
  2> "$work/nf4.log"
grep -q '"temper_lora_base": "nf4"' "$work/nf4/checkpoints/step-3/adapter_config.json"
# A run that starts from the int4 run's adapter (lora.init) on the int4 base: its first RL step's KL is the
# adapter's distance from the base (> 0), not a fresh adapter's 0.
"$temper" train --out "$work/init" "${common[@]}" --set sft.steps=0 --set rl.steps=1 --set lora.init="\"$ck\"" \
  2> "$work/init.log"
python3 - "$work/init/metrics.jsonl" <<'PY'
import json, sys
rl = [json.loads(l) for l in open(sys.argv[1]) if '"kind":"train"' in l]
assert rl and rl[0]["kl"] > 0, rl
PY
# An int4-trained adapter is not continued on a bf16 base.
if "$temper" train --out "$work/mix" "${common[@]}" --set sft.steps=0 --set rl.steps=1 --set lora.base=bf16 \
  --set lora.init="\"$ck\"" 2> "$work/mix.log"; then echo "an int4 adapter ran on a bf16 base"; exit 1; fi
grep -q 'was trained on a int4 base; the recipe.s is bf16' "$work/mix.log" || { cat "$work/mix.log"; exit 1; }
# Refusals before the run directory exists.
refused() {  # expected-message-pattern recipe-overrides...
  local want=$1; shift
  if "$temper" train --out "$work/bad" "${common[@]}" "$@" 2> "$work/bad.log"; then
    echo "accepted: $*"; exit 1; fi
  grep -q "$want" "$work/bad.log" || { echo "refusal of $* does not say: $want"; cat "$work/bad.log"; exit 1; }
  test ! -e "$work/bad"
}
refused "'lora.base' must be one of f32, bf16, int4, nf4, got 'fp4'" --set lora.base=fp4
refused 'lora.base = "int4": a held base too' --set model.device=cuda
refused 'with lora.base = "int4" it has no f32 weights to quantise' --set rl.speculative.enabled=true
# An int4 run on a saved model, then temper convert --merge-lora: merged into the dequantised base. The same adapter
# without its base field merges into the f32 weights: other logits (the quantisation's share).
"$temper" train --out "$work/base" --threads 2 --set sft.steps=1 --set rl.steps=0 --set eval.every=0 2> /dev/null
"$temper" train --out "$work/lb" --threads 2 --set model.path="\"$work/base/checkpoints/step-1\"" --set sft.steps=2 \
  --set rl.steps=0 --set eval.every=0 --set lora.rank=4 --set sft.lr=1e-2 --set lora.base=int4 2> "$work/lb.log"
adapter="$work/lb/checkpoints/step-2"
"$temper" convert "$work/base/checkpoints/step-1" "$work/merged" --merge-lora "$adapter" 2> /dev/null
mkdir "$work/as_f32"
cp "$adapter/adapter_model.safetensors" "$work/as_f32/"
python3 - "$adapter/adapter_config.json" "$work/as_f32/adapter_config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
del c["temper_lora_base"]
json.dump(c, open(sys.argv[2], "w"))
PY
"$temper" convert "$work/base/checkpoints/step-1" "$work/merged_f32" --merge-lora "$work/as_f32" 2> /dev/null
a=$("$temper" logits --model "$work/base/checkpoints/step-1" --ids 1,2,3 --full 2> /dev/null)
b=$("$temper" logits --model "$work/merged" --ids 1,2,3 --full 2> /dev/null)
c=$("$temper" logits --model "$work/merged_f32" --ids 1,2,3 --full 2> /dev/null)
[ "$a" != "$b" ] || { echo "the merged model's logits equal the base's"; exit 1; }
[ "$b" != "$c" ] || { echo "merging into the int4 base gave the f32 merge's logits"; exit 1; }
# The same on an nf4 base: the nf4 run's adapter merged into the nf4-dequantised base. The same adapter recorded as
# trained on an int4 base, or on none (the f32 weights), merges to other logits: the merge used the nf4 values.
"$temper" train --out "$work/lb4" --threads 2 --set model.path="\"$work/base/checkpoints/step-1\"" --set sft.steps=2 \
  --set rl.steps=0 --set eval.every=0 --set lora.rank=4 --set sft.lr=1e-2 --set lora.base=nf4 2> "$work/lb4.log"
adapter4="$work/lb4/checkpoints/step-2"
grep -q '"temper_lora_base": "nf4"' "$adapter4/adapter_config.json"
"$temper" convert "$work/base/checkpoints/step-1" "$work/merged_nf4" --merge-lora "$adapter4" 2> /dev/null
for as in int4 f32; do
  mkdir "$work/nf4_as_$as"
  cp "$adapter4/adapter_model.safetensors" "$work/nf4_as_$as/"
  python3 - "$adapter4/adapter_config.json" "$work/nf4_as_$as/adapter_config.json" "$as" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
if sys.argv[3] == "f32":
    del c["temper_lora_base"]
else:
    c["temper_lora_base"] = sys.argv[3]
json.dump(c, open(sys.argv[2], "w"))
PY
  "$temper" convert "$work/base/checkpoints/step-1" "$work/merged_nf4_as_$as" --merge-lora "$work/nf4_as_$as" \
    2> /dev/null
done
d=$("$temper" logits --model "$work/merged_nf4" --ids 1,2,3 --full 2> /dev/null)
e=$("$temper" logits --model "$work/merged_nf4_as_int4" --ids 1,2,3 --full 2> /dev/null)
f=$("$temper" logits --model "$work/merged_nf4_as_f32" --ids 1,2,3 --full 2> /dev/null)
[ "$d" != "$a" ] || { echo "the nf4 merge's logits equal the base's"; exit 1; }
[ "$d" != "$e" ] || { echo "merging into the nf4 base gave the int4 merge's logits"; exit 1; }
[ "$d" != "$f" ] || { echo "merging into the nf4 base gave the f32 merge's logits"; exit 1; }
[ "$e" != "$f" ] || { echo "the nf4 adapter merged as int4 gave the f32 merge's logits"; exit 1; }
# Data-parallel ranks each hold the base they read from model.path: a rank whose file differs is refused naming it
# (mpirun, each rank in its own directory where the relative path "m" is another model; the same model runs).
if command -v mpirun > /dev/null && timeout 60 "$(dirname "$0")/../dist/mpirun2.sh" true > /dev/null 2>&1; then
  "$temper" train --out "$work/base2" --threads 2 --set sft.steps=2 --set rl.steps=0 --set eval.every=0 2> /dev/null
  mkdir -p "$work/r0" "$work/r1" "$work/r1same"
  ln -s "$work/base/checkpoints/step-1" "$work/r0/m"
  ln -s "$work/base2/checkpoints/step-2" "$work/r1/m"
  ln -s "$work/base/checkpoints/step-1" "$work/r1same/m"
  ranks() {  # rank 1's directory, then the run's settings
    local r1=$1 bin; shift
    bin=$(realpath "$temper")
    "$(dirname "$0")/../dist/mpirun_n.sh" 1 --wdir "$work/r0" "$bin" train --threads 1 "$@" : \
      -np 1 --wdir "$r1" "$bin" train --threads 1 "$@"
  }
  dp=(--set model.path='"m"' --set sft.steps=1 --set rl.steps=0 --set eval.every=0 --set lora.rank=4
      --set lora.base=int4)
  ranks "$work/r1same" --out "$work/dp_same" "${dp[@]}" > /dev/null 2> "$work/dp_same.log" \
    || { cat "$work/dp_same.log"; exit 1; }
  if ranks "$work/r1" --out "$work/dp_diff" "${dp[@]}" > /dev/null 2> "$work/dp_diff.log"; then
    echo "ranks holding different int4 bases trained"; exit 1; fi
  grep -q 'the int4 base read from model.path = m on rank(s) 1 differs from rank 0' "$work/dp_diff.log" \
    || { cat "$work/dp_diff.log"; exit 1; }
  # An [rl.async] explorer rank is sent only the adapters: its base is compared too (rank 1 explores here).
  explore=(--set rl.steps=1 --set sft.steps=0 --set rl.async.max_staleness=1 --set rl.async.explorer_ranks=1)
  if ranks "$work/r1" --out "$work/ex_diff" "${dp[@]}" "${explore[@]}" > /dev/null 2> "$work/ex_diff.log"; then
    echo "an explorer rank holding another int4 base ran"; exit 1; fi
  grep -q 'the int4 base read from model.path = m on rank(s) 1 differs from rank 0' "$work/ex_diff.log" \
    || { cat "$work/ex_diff.log"; exit 1; }
fi
echo QLORA_OK
