#!/usr/bin/env bash
# temper convert between formats keeps the model and its tokenizer: GGUF (Q4_1) -> HF (f32) ->
# GGUF (Q8_0), and GGUF -> GGUF: the top-1 token at every position of a fixed prompt and the ids of
# a hostile string stay the same in every copy.
#   convert_roundtrip.sh TEMPER GGUF
set -euo pipefail
temper=$1; gguf=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ids=1,504,3,9,260,1345,314,253,2734,30,198,42
"$temper" convert "$gguf" "$tmp/hf" 2>/dev/null
"$temper" convert "$tmp/hf" "$tmp/q8.gguf" --dtype q8_0 2>/dev/null
"$temper" convert "$gguf" "$tmp/q8_tok.gguf" --dtype q8_0 2>/dev/null
a=$("$temper" logits --model "$gguf" --ids $ids 2>/dev/null)
b=$("$temper" logits --model "$tmp/hf" --ids $ids 2>/dev/null)
c=$("$temper" logits --model "$tmp/q8.gguf" --ids $ids 2>/dev/null)
echo "gguf: $a"; echo "hf:   $b"; echo "q8:   $c"
[ "$a" = "$b" ] || { echo "FAIL: HF export changed the logits' top-1"; exit 1; }
[ "$a" = "$c" ] || { echo "FAIL: Q8_0 GGUF export changed the top-1"; exit 1; }
text=$'Hello, world! 12345 \xf0\x9f\x9a\x80 <|im_start|>user\n  caf\xc3\xa9\t\xe4\xbd\xa0\xe5\xa5\xbd'
t1=$("$temper" tokenize --model "$gguf" --text "$text")
for m in "$tmp/q8_tok.gguf" "$tmp/hf" "$tmp/q8.gguf"; do
  t2=$("$temper" tokenize --model "$m" --text "$text")
  [ "$t1" = "$t2" ] || { echo "FAIL: tokenizer changed in $m ($t1 vs $t2)"; exit 1; }
done
[ -f "$tmp/hf/tokenizer.json" ] && [ -f "$tmp/hf/tokenizer_config.json" ] || { echo "FAIL: HF export has no tokenizer files"; exit 1; }
echo "ROUNDTRIP_OK"
