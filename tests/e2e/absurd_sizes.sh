#!/usr/bin/env bash
# Absurd sizes are refused before anything is sized from them, naming the file or key and the field (once they grew
# memory for a minute and ended in "internal error: std::bad_alloc"): a config.json with num_hidden_layers = 10^9
# (temper info on the file and on its directory, temper train loading it), a recipe with eval.problems = 10^9 (before
# the run directory exists). A run that does run out of memory says so with a hint, exit 1 (here: 10^7 held-out
# problems under a 1.5 GB address-space limit). Each command has 60 s (the old code took minutes). Prints SIZES_OK.
set -uo pipefail
temper=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# refused CODE PATTERN ARGS...: the command exits with CODE and says PATTERN.
refused() {
  local code=$1 pattern=$2 out rc
  shift 2
  out=$(timeout 60 "$@" 2>&1)
  rc=$?
  [ "$rc" = "$code" ] || { echo "$*: exit $rc, expected $code:"; echo "$out"; exit 1; }
  grep -Eq -- "$pattern" <<<"$out" || { echo "$*: expected /$pattern/, got:"; echo "$out"; exit 1; }
}
mkdir -p "$work/absurd"
cat > "$work/absurd/config.json" <<'EOF'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 259, "hidden_size": 64,
 "num_hidden_layers": 1000000000, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 88,
 "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "tie_word_embeddings": true}
EOF
layers="config.json: num_hidden_layers = 1000000000: expected 1 to 1024"
refused 1 "^temper: error: .*$layers" "$temper" info "$work/absurd/config.json"
refused 1 "^temper: error: .*$layers" "$temper" info "$work/absurd"
refused 1 "$layers" "$temper" train --set "model.path=\"$work/absurd\"" --out "$work/run_model"
refused 1 "^temper: error: <built-in quickstart>: eval.problems = 1000000000: expected 1 to 10000000" \
  "$temper" train --set eval.problems=1000000000 --out "$work/run_eval"
[ ! -e "$work/run_eval" ] || { echo "a run directory was made for a refused recipe"; exit 1; }
refused 1 "rl.kv_memory_mb = 1000000000: expected 1 to 16777216" \
  "$temper" train --set rl.kv_memory_mb=1000000000 --out "$work/run_kv"
[ ! -e "$work/run_kv" ] || { echo "a run directory was made for a refused recipe"; exit 1; }
# Out of memory: a checkpoint to evaluate, then 10^7 problems (within the bound) in too little memory.
"$temper" train --set rl.steps=1 --set sft.steps=0 --set eval.problems=1 --set eval.max_new=4 --set rl.max_new=8 \
  --set rl.prompts_per_step=2 --set rl.group_size=2 --threads 1 --out "$work/ck" > "$work/ck.log" 2>&1 ||
  { echo "training the checkpoint failed:"; cat "$work/ck.log"; exit 1; }
refused 1 "^temper: out of memory: an allocation failed\. The memory plan .* or set model\.recompute = true" \
  bash -c "ulimit -v 1500000 && exec \"\$0\" eval --model \"\$1\" --problems 10000000 --threads 1" \
  "$temper" "$work/ck/checkpoints/step-1"
echo SIZES_OK
