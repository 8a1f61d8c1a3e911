#!/usr/bin/env python3
"""Hard questions for the ZPPO experiment on SmolLM2 (experiments/zppo-hard): one-operation arithmetic (operands
to 20, + - *) asked as in the recipes, each sampled 8 times by the pretrained student at the training temperature
(0.7, up to 96 new tokens) with `temper eval`; a question none of whose samples is correct is hard (GRPO's group
on it is all wrong and its gradient zero). The task's questions repeat (240 problems are 112 distinct questions),
so a question asked twice had 16 samples. Writes train.jsonl (the first TRAIN hard questions: RL trains on them)
and heldout.jsonl (the next HELDOUT hard questions: never trained), task `dataset` rows with the prompt, the
answer and the gold solution as teacher_response, and mined.json (how many were sampled and found hard).
--model samples another student (experiments/zppo-warm: the pretrained one after a format fine-tune); --hash-line
writes the teacher's response as that student answers, "a op b=c" and "#### c".
Usage: make_data.py OUT_DIR [--problems 240] [--train 56] [--heldout 32] [--model PATH] [--hash-line] [--max-operand 20]
  (env TEMPER, default build/bin/temper)"""
import argparse, collections, json, os, subprocess, sys

MODEL = ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"
ASK = ["--prompt-format", "chat", "--system-prompt", "You are a careful calculator.",
       "--user-template", "Calculate {question} and end with the line #### <number>."]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--problems", type=int, default=240)
    ap.add_argument("--train", type=int, default=56)
    ap.add_argument("--heldout", type=int, default=32)
    ap.add_argument("--model", default=MODEL)
    ap.add_argument("--hash-line", action="store_true")
    ap.add_argument("--max-operand", type=int, default=20)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    samples = os.path.join(a.out, "mining_samples.jsonl")
    cmd = [os.environ.get("TEMPER", "build/bin/temper"), "eval", "--model", a.model, "--task", "arithmetic",
           "--param", "seed=11", "--param", "min_ops=1", "--param", "max_ops=1", "--param", f"max_operand={a.max_operand}",
           "--problems", str(a.problems), "-k", "8", "--temperature", "0.7", "--max-new", "96", "--seed", "5",
           "--threads", "2", "--samples-out", samples, "--json", os.path.join(a.out, "mining.json")] + ASK
    # The samples are written atomically by temper eval (present means complete) and reused only if they came from
    # the same command.
    stamp = os.path.join(a.out, "mining_command.json")
    if not (os.path.exists(samples) and os.path.exists(stamp) and json.load(open(stamp)) == cmd):
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        json.dump(cmd, open(stamp, "w"))
    correct, count, order, answer = collections.defaultdict(int), collections.defaultdict(int), [], {}
    for line in open(samples):
        r = json.loads(line)
        q = r["prompt"]
        if q not in answer:
            order.append(q)
            answer[q] = str(r["answer"])
        correct[q] += bool(r["correct"])
        count[q] += 1
    hard = [q for q in order if correct[q] == 0]
    need = a.train + a.heldout
    if len(hard) < need:
        sys.exit(f"make_data.py: only {len(hard)} of {len(order)} questions are hard, need {need}; raise --problems")

    def row(q):  # q is "a op b=": the gold solution the arithmetic task writes
        gold = f"{q}{answer[q]}" + (f"\n#### {answer[q]}" if a.hash_line else "")
        return {"prompt": q, "answer": answer[q], "teacher_response": gold}

    for name, qs in (("train", hard[:a.train]), ("heldout", hard[a.train:need])):
        with open(os.path.join(a.out, f"{name}.jsonl.tmp"), "w") as f:
            for q in qs:
                f.write(json.dumps(row(q)) + "\n")
        os.replace(os.path.join(a.out, f"{name}.jsonl.tmp"), os.path.join(a.out, f"{name}.jsonl"))
    ops = collections.Counter(next(c for c in "+-*" if c in q) for q in hard)
    json.dump({"model": a.model, "max_operand": a.max_operand, "sampled": len(order), "hard": len(hard), "hard_by_op": ops, "train": a.train, "heldout": a.heldout,
               "mean_sample_accuracy": sum(correct.values()) / sum(count.values())}, open(os.path.join(a.out, "mined.json"), "w"), indent=1)
    print(f"{len(hard)} of {len(order)} questions hard (no correct sample); by operation {dict(ops)}")


if __name__ == "__main__":
    main()
