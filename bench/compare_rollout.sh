#!/usr/bin/env bash
# Rollout (batched generation) side by side on this machine, same shape and threads: temper's rollout
# engine, plain PyTorch with a KV cache (bench/peers/torch_generate.py) and llama.cpp's own benchmarks
# (bench/peers/llamacpp.sh, built from source in .cache/peers/). Decode tokens/s at each batch, f32 and
# bf16 (llama.cpp also Q4_0), then temper's prefix sharing (G samples per prompt, one prefill) against
# the same sequences as independent prompts. Prints every JSON line, then one table. Used by `make bench`.
# A peer that is not available is skipped with a message. On a shared machine, REPEAT=3 runs the whole
# round (all engines, all batches) 3 times, interleaved, and the table keeps each configuration's best.
#   bench/compare_rollout.sh [THREADS] [PROMPT] [GEN] [BATCHES]     (defaults: 2 64 32 1,8,32,64)
# WAIT_IDLE=1 waits before every run until the CPUs were >= 90% idle for 5 s (up to 10 min; the wait
# and the load are printed), so that other jobs on a shared machine do not land in a measurement.
# Env: TEMPER (default build/bin/temper), REPEAT (default 1), WAIT_IDLE (default 0), LLAMACPP_BUILD=1
# builds llama.cpp first.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}; prompt=${2:-64}; gen=${3:-32}; batches=${4:-1,8,32,64}
temper=${TEMPER:-build/bin/temper}
py=.venv/bin/python
export OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads
out=$(mktemp); trap 'rm -f "$out"' EXIT
idle_pct() {  # percent of CPU time idle over the next 5 s
  local a b; read -r -a a < /proc/stat; sleep 5; read -r -a b < /proc/stat
  local t=0 i=$(( b[4] + b[5] - a[4] - a[5] )) k
  for k in 1 2 3 4 5 6 7 8; do t=$(( t + b[k] - a[k] )); done
  echo $(( 100 * i / (t > 0 ? t : 1) ))
}
quiet() {  # quiet CMD...: with WAIT_IDLE=1, run CMD once the machine is idle
  if [ "${WAIT_IDLE:-0}" = 1 ]; then
    local k p
    for k in $(seq 1 120); do p=$(idle_pct); [ "$p" -ge 90 ] && break; done
    echo "idle ${p}% after $((k * 5)) s; $(uptime)" >&2
  fi
  "$@"
}
echo "load before: $(uptime)"
have_torch=0; [ -x "$py" ] && "$py" -c 'import torch, transformers' 2>/dev/null && have_torch=1
[ $have_torch = 1 ] || echo "compare_rollout: skipping PyTorch (no .venv with torch; run scripts/bootstrap --python)"
if [ "${LLAMACPP_BUILD:-0}" = 1 ] && ! bench/peers/llamacpp.sh available; then
  bench/peers/llamacpp.sh build && bench/peers/llamacpp.sh models
fi
have_llama=0; bench/peers/llamacpp.sh available && have_llama=1
[ $have_llama = 1 ] || echo "compare_rollout: skipping llama.cpp (not built: bench/peers/llamacpp.sh build &&" \
  "bench/peers/llamacpp.sh models, or LLAMACPP_BUILD=1 make bench; needs PyPI for the llama-cpp-python sdist)"

for round in $(seq 1 "${REPEAT:-1}"); do
echo "round $round: $(uptime)"
for dtype in f32 bf16; do
  for b in ${batches//,/ }; do
    quiet "$temper" bench rollout --shape smollm2-135m --batch "$b" --prompt-len "$prompt" --gen-len "$gen" \
      --threads "$threads" --dtype "$dtype" --json | tee -a "$out"
    if [ $have_torch = 1 ]; then
      quiet "$py" bench/peers/torch_generate.py --shape smollm2-135m --batch "$b" --prompt-len "$prompt" \
        --gen-len "$gen" --threads "$threads" --dtype "$dtype" | tee -a "$out" || echo "compare_rollout: PyTorch run failed"
    fi
  done
done
if [ $have_llama = 1 ]; then
  for t in F32 BF16 Q4_0; do
    quiet bench/peers/llamacpp.sh run "$threads" "$prompt" "$gen" "$batches" "$t" | tee -a "$out" ||
      echo "compare_rollout: llama.cpp $t run failed"
  done
fi
done

# Prefix sharing: 8 prompts x G=8 samples, prompt 256: prefill once per prompt vs 64 independent prompts.
quiet "$temper" bench rollout --shape smollm2-135m --batch 8 --group 8 --prompt-len 256 --gen-len 8 \
  --threads "$threads" --dtype f32 --json | tee -a "$out"
echo "load after: $(uptime)"

[ -x "$py" ] || py=python3
"$py" - "$out" "$batches" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
batches = [int(b) for b in sys.argv[2].split(",")]
def name(r):
    if r["engine"] == "pytorch": return f"PyTorch {r['torch'].split('+')[0]} ({r['impl']})"
    if r.get("tool") == "llama-bench": return "llama.cpp (llama-bench)"
    return r["engine"]
tables = {"decode": {}, "prefill": {}}
for r in rows:
    if "group" in r: continue
    for what in tables:
        cell = tables[what].setdefault((name(r), r["dtype"]), {})
        cell[r["batch"]] = max(cell.get(r["batch"], 0.0), r[f"{what}_tokens_per_s"])  # best of the rounds
table = tables["decode"]
order = sorted(table, key=lambda k: (k[1] not in ("f32",), k[1], k[0] != "temper", k[0]))
for what, tab in tables.items():
    print(f"| {what} tokens/s | " + " | ".join(f"batch {b}" for b in batches) + " |")
    print("|---" * (len(batches) + 1) + "|")
    for k in order:
        print(f"| {k[0]} {k[1]} | " + " | ".join(f"{tab[k][b]:.1f}" if b in tab[k] else "-" for b in batches) + " |")
    print()
print("decode ratios:")
for d in ("f32", "bf16"):
    t = table.get(("temper", d))
    if not t: continue
    for k in order:
        if k[0] == "temper" or k[1] not in (d, d.upper()): continue
        print(f"temper {d} / {k[0]} {k[1]}: " +
              "  ".join(f"b{b} {t[b] / table[k][b]:.2f}x" for b in batches if b in t and b in table[k]))
for r in rows:
    if "group" in r:
        g = r["prefix_sharing"]
        print(f"\nprefix sharing ({r['prompts']} prompts x G={r['group']}, prompt {r['prompt_len']}, {r['dtype']}): "
              f"prefill tokens computed {g['shared_prefill_tokens_computed']} vs {g['independent_prefill_tokens_computed']} "
              f"independent ({g['prefill_tokens_ratio']}x less); prefill {g['shared_prefill_s']} s vs "
              f"{g['independent_prefill_s']} s ({g['prefill_time_ratio']}x faster)")
PY
