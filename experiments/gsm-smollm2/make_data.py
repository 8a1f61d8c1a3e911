#!/usr/bin/env python3
"""GSM8K-style word problems for the SmolLM2-135M method runs (experiments/gsm-smollm2): short multi-step problems
about everyday quantities with whole-number answers, each with a worked solution ending in "#### <answer>" (GSM8K's
format; the dataset task reads the answer from that line). Seven families of templates; one, `rates` (speed x time,
pay per hour), is held out entirely: it never appears in train or eval and measures transfer to an unseen kind of
problem. Each row declares the operations it uses as `modules` and its number of steps as `difficulty`.

Writes OUT/train.jsonl, OUT/eval.jsonl (same families as train, disjoint questions) and OUT/heldout.jsonl (the held-out
family), rows {"id", "family", "prompt", "answer", "solution", "difficulty", "modules"}, and OUT/summary.json.
Deterministic: the same seed gives the same files byte for byte (random.Random, whose integer draws are stable).
Usage: make_data.py OUT_DIR [--seed 1] [--train 4000] [--eval 200] [--heldout 200]"""
import argparse, json, os, random

NAMES = ["Mia", "Tom", "Ava", "Leo", "Zoe", "Sam", "Ivy", "Max", "Eli", "Nora", "Ben", "Lily", "Omar", "Ruby", "Finn"]
THINGS = [("apple", "apples"), ("pencil", "pencils"), ("sticker", "stickers"), ("marble", "marbles"),
          ("cookie", "cookies"), ("card", "cards"), ("shell", "shells"), ("book", "books")]
ITEMS = [("notebook", "notebooks"), ("pen", "pens"), ("toy car", "toy cars"), ("cupcake", "cupcakes"),
         ("ticket", "tickets"), ("plant", "plants")]


def count(n, one, many):  # "1 apple", "3 apples"
    return f"{n} {one if n == 1 else many}"


def shopping(r):  # n items at p each, plus one more item: total cost
    who, (one, many), (one2, _) = r.choice(NAMES), r.choice(ITEMS), r.choice(ITEMS)
    while one2 == one:
        one2 = r.choice(ITEMS)[0]
    n, p, q = r.randint(2, 9), r.randint(2, 12), r.randint(1, 15)
    a = n * p
    text = f"{who} buys {n} {many} for ${p} each and a {one2} for ${q}. How many dollars does {who} spend in all?"
    sol = f"The {many} cost {n} * {p} = {a} dollars.\nIn all {who} spends {a} + {q} = {a + q} dollars."
    return text, a + q, sol, ["multiply", "add"]


def change(r):  # n items at p each, paid with a bill: change
    who, (one, many) = r.choice(NAMES), r.choice(ITEMS)
    n, p = r.randint(2, 6), r.randint(2, 9)
    cost = n * p
    bill = next(b for b in (10, 20, 50, 100) if b > cost)
    text = f"{who} buys {n} {many} that cost ${p} each and pays with a ${bill} bill. How much change does {who} get?"
    sol = f"The {many} cost {n} * {p} = {cost} dollars.\nThe change is {bill} - {cost} = {bill - cost} dollars."
    return text, bill - cost, sol, ["multiply", "subtract"]


def sharing(r):  # has x, gives away g, shares the rest among k friends
    who, (one, many) = r.choice(NAMES), r.choice(THINGS)
    k, each, g = r.randint(2, 6), r.randint(2, 9), r.randint(1, 12)
    x = k * each + g
    text = (f"{who} has {x} {many}. {who} gives {count(g, one, many)} to a sister and shares the rest equally among {k} friends. "
            f"How many {many} does each friend get?")
    sol = f"After giving some away {who} has {x} - {g} = {x - g} {many}.\nEach friend gets {x - g} / {k} = {each} {many}."
    return text, each, sol, ["subtract", "divide"]


def ages(r):  # older by d now, age in y years
    who, other = r.sample(NAMES, 2)
    a, d, y = r.randint(4, 15), r.randint(2, 9), r.randint(2, 10)
    text = f"{who} is {a} years old. {other} is {d} years older than {who}. How old will {other} be in {y} years?"
    sol = f"{other} is {a} + {d} = {a + d} years old now.\nIn {y} years {other} will be {a + d} + {y} = {a + d + y}."
    return text, a + d + y, sol, ["add"]


def boxes(r):  # b boxes of s, plus loose, minus used
    who, (one, many) = r.choice(NAMES), r.choice(THINGS)
    b, s, loose = r.randint(2, 8), r.randint(3, 12), r.randint(1, 9)
    tot = b * s + loose
    used = r.randint(1, tot - 1)
    text = (f"{who} has {b} boxes with {s} {many} in each box and {count(loose, 'more ' + one, 'more ' + many)} on the table. "
            f"{who} uses {count(used, one, many)}. How many {many} are left?")
    sol = (f"The boxes hold {b} * {s} = {b * s} {many}.\nWith the ones on the table there are {b * s} + {loose} = {tot}."
           f"\nAfter using {used} there are {tot} - {used} = {tot - used} left.")
    return text, tot - used, sol, ["multiply", "add", "subtract"]


def reading(r):  # p pages a day for d days, then more: pages left in a book
    who = r.choice(NAMES)
    p, d = r.randint(3, 15), r.randint(2, 7)
    read = p * d
    total = read + r.randint(5, 60)
    text = (f"{who}'s book has {total} pages. {who} reads {p} pages every day for {d} days. "
            f"How many pages are left to read?")
    sol = f"{who} reads {p} * {d} = {read} pages.\nThere are {total} - {read} = {total - read} pages left."
    return text, total - read, sol, ["multiply", "subtract"]


def rates(r):  # held-out family: two legs at a rate for a time, or pay per hour
    who = r.choice(NAMES)
    s1, t1, s2, t2 = r.randint(2, 12) * 5, r.randint(1, 4), r.randint(2, 12) * 5, r.randint(1, 4)
    if r.random() < 0.5:
        a, b = s1 * t1, s2 * t2
        text = (f"{who} drives at {s1} miles per hour for {count(t1, 'hour', 'hours')} and then at {s2} miles per hour "
                f"for {count(t2, 'hour', 'hours')}. "
                f"How many miles does {who} drive?")
        sol = (f"First {who} drives {s1} * {t1} = {a} miles.\nThen {s2} * {t2} = {b} miles.\n"
               f"In all {a} + {b} = {a + b} miles.")
        return text, a + b, sol, ["multiply", "add"]
    w, h, spent = r.randint(5, 15), r.randint(2, 8), r.randint(1, 20)
    spent = min(spent, w * h - 1)
    text = f"{who} earns ${w} per hour and works {count(h, 'hour', 'hours')}. Then {who} spends ${spent}. How many dollars are left?"
    sol = f"{who} earns {w} * {h} = {w * h} dollars.\nAfter spending {who} has {w * h} - {spent} = {w * h - spent} dollars."
    return text, w * h - spent, sol, ["multiply", "subtract"]


TRAIN_FAMILIES = [shopping, change, sharing, ages, boxes, reading]
HELDOUT_FAMILY = rates


def draw(r, families, count, seen, split):
    rows = []
    while len(rows) < count:
        f = families[len(rows) % len(families)]  # balanced over families
        text, answer, sol, modules = f(r)
        if text in seen:
            continue
        seen.add(text)
        rows.append({"id": f"{split}-{len(rows)}", "family": f.__name__, "prompt": text, "answer": str(answer),
                     "solution": f"{sol}\n#### {answer}", "difficulty": sol.count("\n") + 1, "modules": modules})
    return rows


def write_atomic(path, rows):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        for row in rows:
            f.write(json.dumps(row, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--train", type=int, default=4000)
    ap.add_argument("--eval", type=int, default=200)
    ap.add_argument("--heldout", type=int, default=200)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    r, seen = random.Random(a.seed), set()
    splits = {"eval": draw(r, TRAIN_FAMILIES, a.eval, seen, "eval"),
              "heldout": draw(r, [HELDOUT_FAMILY], a.heldout, seen, "heldout"),
              "train": draw(r, TRAIN_FAMILIES, a.train, seen, "train")}
    for name, rows in splits.items():
        write_atomic(os.path.join(a.out, name + ".jsonl"), rows)
    summary = {name: len(rows) for name, rows in splits.items()}
    summary["families"] = [f.__name__ for f in TRAIN_FAMILIES]
    summary["heldout_family"] = HELDOUT_FAMILY.__name__
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
