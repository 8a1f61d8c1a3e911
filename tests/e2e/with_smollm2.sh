#!/usr/bin/env bash
# Runs a command with $GGUF set to the cached SmolLM2-135M-Instruct GGUF; exits 77 (CTest: skipped)
# when the bootstrap has not fetched it.
root=$(cd "$(dirname "$0")/../.." && pwd)
export GGUF=${TEMPER_SMOLLM2_GGUF:-$root/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -f "$GGUF" ] || { echo "skipped: $GGUF missing (run scripts/bootstrap)"; exit 77; }
exec bash -c "$1"
