# shellcheck shell=bash
# What bench/flow_dgrl.sh (2-D data) and bench/flow_dgrl_images.sh (images) share; sourced by both.
#   fail MESSAGE                        print FAIL: MESSAGE and exit 1
#   dgrl_compute RUN                    the model row-evaluations of RUN's last train row (metrics.jsonl)
#   dgrl_table WORK "SEEDS" "COLS" FMT ["ARMS"]
#       one markdown row per arm: the mean +- sd over the seeds (FMT: the mean's printf format, e.g. %.4g) of the
#       last evaluation of WORK/ARM-SEED, for each metric in COLS ("-" where no seed logged it); the arm "base" is
#       the first evaluation of grpo-b1 (the base through the rl run's evaluation). No ARMS: base, then every
#       WORK/NAME-SEED directory's NAME, by method and then beta (NAME = METHOD-bBETA).

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

dgrl_compute() {
  grep '"kind":"train"' "$1/metrics.jsonl" | tail -1 | sed 's/.*"compute":\([0-9.e+]*\).*/\1/'
}

dgrl_table() {
  python3 - "$@" <<'PY'
import glob, json, os, statistics, sys
work, seeds, cols, fmt = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4]
arms = sys.argv[5].split() if len(sys.argv) > 5 else []
if not arms:
    names = {os.path.basename(p).rsplit("-", 1)[0] for p in glob.glob(work + "/*-*") if os.path.isdir(p)} - {"base"}
    arms = ["base"] + sorted(names, key=lambda a: (a.split("-b")[0], float(a.split("-b")[1]) if "-b" in a else 0))
def evals(d):
    return [r for r in map(json.loads, open(d + "/metrics.jsonl")) if r["kind"] == "eval"]
def cell(v):
    return (fmt + " +- %.2g") % (statistics.mean(v), statistics.pstdev(v)) if v else "-"
print("| arm | steps | " + " | ".join(cols) + " |")
print("|---|---|" + "---|" * len(cols))
for arm in arms:
    rows = []
    for s in seeds:
        d = f"{work}/{'grpo-b1' if arm == 'base' else arm}-{s}"
        if os.path.isdir(d):
            rows.append(evals(d)[0] if arm == "base" else evals(d)[-1])
    if not rows:
        continue
    print(f"| {arm} | {int(statistics.mean(r['step'] for r in rows))} | " +
          " | ".join(cell([r[k] for r in rows if k in r]) for k in cols) + " |")
PY
}
