#!/usr/bin/env bash
# llama.cpp peer for the rollout benchmark: builds llama.cpp's own benchmarks from source outside
# this repository and runs them on the SmolLM2-135M GGUF in F32, BF16 and Q4_0.
# Source: the PyPI sdist of llama-cpp-python (pinned below) vendors llama.cpp's full tree
# (vendor/llama.cpp, with tools/llama-bench and tools/batched-bench); pip fetches it, so this works
# where only PyPI is reachable. Nothing of it is committed: source, build and models live in
# .cache/peers/ (ignored). CPU only: -DGGML_NATIVE=ON, no CUDA, no curl.
#   bench/peers/llamacpp.sh build                 fetch + build llama-bench, llama-batched-bench, llama-quantize
#   bench/peers/llamacpp.sh models                F32/BF16/Q4_0 GGUFs from the bootstrap's Q4_1 file
#   bench/peers/llamacpp.sh run [THREADS] [PROMPT] [GEN] [BATCHES] [DTYPES]
#                                                 one JSON line per (dtype, batch), keys as `temper bench rollout --json`
#   bench/peers/llamacpp.sh available             exit 0 when built and the models exist
# Env: LLAMACPP_JOBS (build parallelism, default 1), PY (python for JSON, default .venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/../.."
version=0.3.16  # llama-cpp-python; its vendor/llama.cpp is the llama.cpp source we build
sha256=34ed0f9bd9431af045bb63d9324ae620ad0536653740e9bb163a2e1fcb973be6
root=.cache/peers
src=$root/llama_cpp_python-$version/vendor/llama.cpp
bld=$root/llama.cpp-build
bin=$bld/bin
models=$root/models
q41=.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
py=${PY:-.venv/bin/python}
jobs=${LLAMACPP_JOBS:-1}

build() {
  mkdir -p "$root"
  local sdist=$root/llama_cpp_python-$version.tar.gz
  if [ ! -f "$sdist" ]; then
    # --no-binary :all: makes pip fetch the sdist; it prepares metadata in an isolated env (scikit-build-core).
    .venv/bin/pip download --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$root"
  fi
  echo "$sha256  $sdist" | sha256sum -c -
  [ -d "$src" ] || tar -xzf "$sdist" -C "$root"
  cmake -S "$src" -B "$bld" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_CUDA=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DBUILD_SHARED_LIBS=OFF
  nice cmake --build "$bld" -j "$jobs" --target llama-bench llama-batched-bench llama-quantize
}

models() {
  [ -x "$bin/llama-quantize" ] || { echo "llamacpp.sh: build first" >&2; exit 1; }
  mkdir -p "$models"
  for t in F32 BF16 Q4_0; do
    local out=$models/SmolLM2-135M-Instruct.$t.gguf
    [ -f "$out" ] || "$bin/llama-quantize" --allow-requantize "$q41" "$out" "$t" 2 >/dev/null 2>&1
  done
}

available() {
  [ -x "$bin/llama-bench" ] && [ -x "$bin/llama-batched-bench" ] &&
    [ -f "$models/SmolLM2-135M-Instruct.F32.gguf" ] && [ -f "$models/SmolLM2-135M-Instruct.BF16.gguf" ]
}

run() {
  local threads=${1:-2} prompt=${2:-64} gen=${3:-32} batches=${4:-1,8,32,64} dtypes=${5:-F32,BF16,Q4_0}
  available || { echo "llamacpp.sh: not built (bench/peers/llamacpp.sh build && bench/peers/llamacpp.sh models)" >&2; exit 1; }
  local ctx=$(( (prompt + gen) * ${batches##*,} + 256 ))
  for t in ${dtypes//,/ }; do
    local m=$models/SmolLM2-135M-Instruct.$t.gguf
    [ -f "$m" ] || continue
    # Batch 1: llama-bench (pp = prompt processing, tg = token generation), 3 repetitions, JSON.
    local lb
    lb=$("$bin/llama-bench" -m "$m" -p "$prompt" -n "$gen" -t "$threads" -r 3 -o json 2>/dev/null)
    # Batch B: llama-batched-bench, B sequences each with its own prompt (no -pps prefix sharing), JSONL.
    local bb
    bb=$("$bin/llama-batched-bench" -m "$m" -c "$ctx" -b 2048 -ub 512 -npp "$prompt" -ntg "$gen" \
         -npl "$batches" -t "$threads" -tb "$threads" --output-format jsonl 2>/dev/null | grep '^{' || true)
    "$py" - "$t" "$threads" "$prompt" "$gen" "$lb" "$bb" <<'PY'
import json, sys
dtype, threads, prompt, gen, lb, bb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
base = {"engine": "llama.cpp", "shape": "smollm2-135m", "prompt_len": prompt, "gen_len": gen,
        "threads": threads, "dtype": dtype.lower()}
pp = tg = None
for r in json.loads(lb):
    if r.get("n_prompt") == prompt and r.get("n_gen") == 0: pp = r["avg_ts"]
    if r.get("n_prompt") == 0 and r.get("n_gen") == gen: tg = r["avg_ts"]
    build = r.get("build_commit", "?")
print(json.dumps({**base, "tool": "llama-bench", "build": build, "batch": 1,
                  "prefill_tokens_per_s": round(pp, 1), "decode_tokens_per_s": round(tg, 1)}))
for line in bb.splitlines():
    r = json.loads(line)
    print(json.dumps({**base, "tool": "llama-batched-bench", "build": build, "batch": r["pl"],
                      "prefill_tokens_per_s": round(r["speed_pp"], 1),
                      "decode_tokens_per_s": round(r["speed_tg"], 1)}))
PY
  done
}

case "${1:-}" in
  build) build ;;
  models) models ;;
  available) available ;;
  run) shift; run "$@" ;;
  *) sed -n '2,15p' "$0"; exit 2 ;;
esac
