#!/usr/bin/env bash
# temper vs PyTorch per architecture (issue 36): training and decode tokens/s of each family's ~0.5B built-in
# shape, the PyTorch peer built from the same shape's config.json (`temper bench train --print-config`,
# bench/peers/hf_shape.py), same batch, sequence, threads and dtype, one family after the other.
#   bench/compare_archs.sh [SHAPES] [BATCH] [SEQ] [THREADS] [STEPS]
#     defaults: all 7 families, 4 x 256, 2 threads, 3 timed steps (+1 warm-up); SHAPES comma-separated
# Training: each engine's median step (of STEPS) -> batch x seq / median s. Decode: temper's rollout engine
# (`temper bench rollout`: the fastest of >= 2 pairs of 1- and GEN-token runs) vs transformers' generate
# (bench/peers/torch_generate.py --impl generate, sampling, the family's own cache: the best of 3 runs in one
# process), batch DECODE_BATCH, prompt PROMPT, GEN tokens. Parameter counts of both models are checked equal.
# Env: DTYPES (default f32; f32,bf16 for both), DECODE_BATCH (8), PROMPT (64), GEN (32), RESULTS (a JSONL file
# the rows are appended to; default a temporary one), TABLE_ONLY=1 (print the table of RESULTS, run nothing).
# On a shared machine run one family per build-lock hold:
#   flock /tmp/temper-build.lock env RESULTS=archs.jsonl bench/compare_archs.sh gemma2-0.5b
set -euo pipefail
cd "$(dirname "$0")/.."
shapes=${1:-llama3.2-0.5b,qwen2.5-0.5b,qwen3-0.6b,mistral-0.5b,gemma2-0.5b,gemma3-0.5b,phi3-0.5b}
batch=${2:-4}; seq=${3:-256}; threads=${4:-2}; steps=${5:-3}
dtypes=${DTYPES:-f32}; dbatch=${DECODE_BATCH:-8}; prompt=${PROMPT:-64}; gen=${GEN:-32}
temper=${TEMPER:-build/bin/temper}
py=.venv/bin/python
export OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads
results=${RESULTS:-$(mktemp --suffix .jsonl)}
cfgdir=$(mktemp -d); trap 'rm -rf "$cfgdir"' EXIT

busy_ticks() {  # CPU ticks the whole machine spent busy so far (user, nice, system, irq, softirq, steal)
  local a; read -r -a a < /proc/stat; echo $(( a[1] + a[2] + a[3] + a[6] + a[7] + a[8] ))
}
wait_idle() {  # until both CPUs were >= 90% idle for 3 s (at most IDLE_WAIT_S, default 60 s), so a run starts on a quiet machine
  local k b e n=$(nproc) hz=$(getconf CLK_TCK)
  for k in $(seq 1 $(( ${IDLE_WAIT_S:-60} / 3 ))); do
    b=$(busy_ticks); sleep 3; e=$(busy_ticks)
    [ $(( (e - b) * 100 )) -le $(( 10 * 3 * hz * n )) ] && return
  done
  echo "compare_archs: machine still busy after ${IDLE_WAIT_S:-60} s; measuring anyway (see others_cpu_pct)" >&2
}
tag_py='
import json, sys
what, ticks, hz, n, wall, user, sys_s, params = sys.argv[1:9]
busy = int(ticks) / int(hz)
others = max(0.0, busy - float(user) - float(sys_s)) / (float(wall) * int(n)) * 100
for line in sys.stdin:
    if line.startswith("{"):
        r = json.loads(line)
        r.setdefault("params", int(params))
        r.update(what=what, wall_s=float(wall), others_cpu_pct=round(others, 1))
        print(json.dumps(r))
'
measure() {  # measure WHAT CMD...: run CMD on a quiet machine, append its JSON lines tagged with what and with
  # others_cpu_pct: the share of the machine's CPU time other processes took while CMD ran (its own excluded)
  local what=$1; shift
  wait_idle
  local b0 t=$cfgdir/time out=$cfgdir/out
  b0=$(busy_ticks)
  /usr/bin/time -f "%e %U %S" -o "$t" "$@" > "$out"
  "$py" -c "$tag_py" "$what" "$(( $(busy_ticks) - b0 ))" "$(getconf CLK_TCK)" "$(nproc)" $(tail -n 1 "$t") \
    "$params" < "$out" | tee -a "$results"
}

run_family() {  # run_family SHAPE: every measurement of one family, JSON lines appended to $results
  local s=$1 cfg=$cfgdir/$1.json dtype params
  "$temper" bench train --shape "$s" --print-config > "$cfg"
  params=$("$temper" info "$cfg" | sed -n 's/^parameters: \([0-9]*\).*/\1/p')
  echo "$s: $params parameters; $(uptime)" >&2
  for dtype in ${dtypes//,/ }; do
    measure train "$temper" bench train --shape "$s" --batch "$batch" --seq "$seq" --threads "$threads" \
      --dtype "$dtype" --steps "$steps" --warmup 1 --json
    measure train "$py" bench/peers/torch_train.py --config "$cfg" --batch "$batch" --seq "$seq" \
      --threads "$threads" --dtype "$dtype" --steps "$steps" --warmup 1 --json
    measure decode "$temper" bench rollout --shape "$s" --batch "$dbatch" --prompt-len "$prompt" --gen-len "$gen" \
      --threads "$threads" --dtype "$dtype" --json
    measure decode "$py" bench/peers/torch_generate.py --config "$cfg" --impl generate \
      --batch "$dbatch,$dbatch,$dbatch" --prompt-len "$prompt" --gen-len "$gen" --threads "$threads" --dtype "$dtype"
  done
}

if [ "${TABLE_ONLY:-0}" != 1 ]; then
  for s in ${shapes//,/ }; do run_family "$s"; done
  echo "results: $results" >&2
fi

"$py" - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
cells = {}  # (shape, dtype) -> medians / bests per engine, parameter counts, others' CPU share
for r in rows:
    c = cells.setdefault((r["shape"], r["dtype"]), {"train": {}, "decode": {}, "params": {}, "others": []})
    e = r["engine"]
    c["params"][e] = r["params"]
    c["others"].append(r.get("others_cpu_pct", 0.0))
    if r["what"] == "train":
        c["train"][e] = r["batch"] * r["seq"] / statistics.median(r["step_s"])
    else:
        c["decode"][e] = max(c["decode"].get(e, 0.0), r["decode_tokens_per_s"])  # PyTorch: best of its runs
print("| shape | dtype | params | train temper | train PyTorch | ratio | decode temper | decode PyTorch | ratio "
      "| others' CPU (max) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for (shape, dtype), c in cells.items():
    p = c["params"]
    if len(set(p.values())) > 1:
        sys.exit(f"{shape}: parameter counts differ: {p}")
    def col(what):
        t, q = c[what].get("temper"), c[what].get("pytorch")
        f = lambda v: f"{v:.1f}" if v else "-"
        return f"{f(t)} | {f(q)} | " + (f"**{t / q:.2f}x**" if t and q else "-")
    n = next(iter(p.values()), 0)
    print(f"| {shape} | {dtype} | {n / 1e6:.1f}M | {col('train')} | {col('decode')} | {max(c['others']):.1f}% |")
PY
