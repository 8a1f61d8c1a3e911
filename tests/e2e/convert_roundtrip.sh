#!/usr/bin/env bash
# temper convert between formats keeps the model: GGUF (Q4_1) -> HF (f32) -> GGUF (Q8_0) -> HF,
# and the top-1 token at every position of a fixed prompt stays the same. Also checks the tokenizer
# metadata travels GGUF -> GGUF (tokenize gives the same ids).
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
t1=$("$temper" tokenize --model "$gguf" --text "Hello, world! 123")
t2=$("$temper" tokenize --model "$tmp/q8_tok.gguf" --text "Hello, world! 123")
[ "$t1" = "$t2" ] || { echo "FAIL: tokenizer metadata lost in GGUF -> GGUF ($t1 vs $t2)"; exit 1; }
echo "ok"
