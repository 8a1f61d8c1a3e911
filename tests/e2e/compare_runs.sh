# Sourced by the e2e scripts that compare two run directories bit for bit.
# strip RUN/metrics.jsonl: the rows without wall-clock dependent values.
# same A B [STEP]: metrics, samples, and the weights and optimiser state of checkpoint STEP (default 6).
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
  local step=${3:-6}
  diff <(strip "$1/metrics.jsonl") <(strip "$2/metrics.jsonl") > /dev/null || { echo "metrics differ: $1 vs $2"; diff <(strip "$1/metrics.jsonl") <(strip "$2/metrics.jsonl") | head -20; exit 1; }
  cmp "$1/checkpoints/step-$step/model.safetensors" "$2/checkpoints/step-$step/model.safetensors" || { echo "weights differ: $1 vs $2"; exit 1; }
  cmp "$1/checkpoints/step-$step/trainer_state.safetensors" "$2/checkpoints/step-$step/trainer_state.safetensors" || { echo "optimizer state differs: $1 vs $2"; exit 1; }
  cmp "$1/samples.jsonl" "$2/samples.jsonl" || { echo "samples differ: $1 vs $2"; exit 1; }
}
# same_but_comm A B: metrics (as strip leaves them, less the communication counters an MPI run adds: comm_*, ranks*)
# and samples equal: a run on explorer ranks against the explorer thread's.
no_comm() {
  strip "$1" | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    print(json.dumps({k: v for k, v in r.items() if not k.startswith(("comm_", "ranks"))}, sort_keys=True))'
}
same_but_comm() {
  diff <(no_comm "$1/metrics.jsonl") <(no_comm "$2/metrics.jsonl") > /dev/null ||
    { echo "explorer ranks: metrics differ"; diff <(no_comm "$1/metrics.jsonl") <(no_comm "$2/metrics.jsonl") | head; exit 1; }
  cmp "$1/samples.jsonl" "$2/samples.jsonl" || { echo "explorer ranks: samples differ"; exit 1; }
}
