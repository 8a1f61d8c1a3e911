# Sourced by the e2e scripts that train on a `dataset` task through the CLI (curriculum_dataset.sh, dre_dataset.sh,
# graphpo_dataset.sh).
# e2e_start TEMPER: sets temper, a scratch folder work (removed on exit) and fail MESSAGE (prints it after the script's
#   name, exits 1).
# recipe_start PATH: prints a recipe's first lines, the quickstart preset on the dataset at PATH ([task.params] open).
# sums_recipe [SECTION...]: writes work/sums.jsonl (a+b= for a, b in 0-9; each solution states the sum, checks it, then
#   closes with "#### c") and work/recipe.toml on it: the quickstart preset, 150 SFT steps, 3 RL steps (8 prompts x 4),
#   10 eval problems, no checkpoints; each SECTION (TOML lines, the method's table) goes after [rl].
e2e_start() {
  temper=$1
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
}
fail() { echo "$(basename "$0"): $*"; exit 1; }
recipe_start() {
  cat <<TOML
[model]
preset = "quickstart"
[task]
name = "dataset"
[task.params]
path = "$1"
TOML
}
sums_recipe() {
  python3 - "$work/sums.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for a in range(10):
        for b in range(10):
            c = a + b
            f.write(json.dumps({"prompt": f"{a}+{b}=", "answer": str(c),
                                "solution": f"{a}+{b}={c}\ncheck {b}+{a}={c}\n#### {c}"}) + "\n")
PY
  { recipe_start "$work/sums.jsonl"; cat <<TOML; } > "$work/recipe.toml"
eval_fraction = 0.1
[sft]
steps = 150
batch = 32
lr = 3e-3
warmup = 10
[rl]
steps = 3
prompts_per_step = 8
group_size = 4
max_new = 40
$(printf '%s\n' "$@")
[eval]
every = 0
problems = 10
max_new = 40
[run]
checkpoint_every = 0
TOML
}
