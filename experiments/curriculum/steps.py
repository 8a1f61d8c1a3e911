#!/usr/bin/env python3
"""Per-skill step accuracy of compose samples (temper eval --samples-out): a step counts as executed
when the model's line for it names the prompt's skill and routing and its string equals that skill
through that routing applied to the model's own earlier strings (so an earlier mistake does not count
against a later step). Mirrors src/temper/tasks/compose.cpp (alphabet "abcdef", cap from argv).
Usage: steps.py CAP SAMPLES.jsonl [...]  -> one JSON line: skill -> [executed, steps]"""
import json, sys

AB = "abcdef"


def skill(s, x):
    if s == "rev": return x[::-1]
    if s == "rotl": return x[1:] + x[:1]
    if s == "swap":
        y = list(x)
        for i in range(0, len(y) - 1, 2): y[i], y[i + 1] = y[i + 1], y[i]
        return "".join(y)
    if s == "repl": return x.replace(AB[0], AB[1])
    if s == "dupf": return x[:1] + x
    if s == "dropl": return x[:-1] if len(x) > 1 else x
    if s == "sort": return "".join(sorted(x, key=AB.find))
    if s == "shift": return "".join(AB[(AB.find(c) + 1) % len(AB)] if c in AB else c for c in x)
    raise ValueError(s)


def step(s, r, ys, cap):
    prev = ys[-1]
    if r == "prev": out = skill(s, prev)
    elif r == "orig": out = skill(s, ys[0])
    elif r == "cat": out = skill(s, (ys[-2] if len(ys) >= 2 else ys[0]) + prev)
    elif r == "half":
        h = max(1, len(prev) // 2)
        out = skill(s, prev[:h]) + prev[h:]
    else: raise ValueError(r)
    return out[:cap]


cap = int(sys.argv[1])
stats = {}
for path in sys.argv[2:]:
    for line in open(path):
        j = json.loads(line)
        body = j["prompt"][:-1].split("|")
        x, steps = body[0], [tuple(t.split(":")) for t in body[1:]]
        lines = [l for l in j["completion"].split("\n") if "=" in l and not l.startswith("####")]
        ys = [x]
        for k, (s, r) in enumerate(steps):
            ok = False
            if k < len(lines):
                head, _, val = lines[k].partition("=")
                ok = head.strip() == f"{s}:{r}" and val.strip() == step(s, r, ys, cap)
                ys.append(val.strip())
            e = stats.setdefault(s, [0, 0])
            e[0] += ok
            e[1] += 1
print(json.dumps(stats, sort_keys=True))
