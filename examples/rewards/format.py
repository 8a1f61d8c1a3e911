"""Format reward: does the completion show its work and then state one final answer in a form a checker reads?

Two accepted forms: reasoning lines then a last line "#### <answer>" (GSM8K), or reasoning with the answer in
\\boxed{<answer>} (MATH). Four checks, each a component in [0, 1]; the reward is their mean:
  answer     a final answer is there: a "####" line with text after it, or a non-empty \\boxed{...}
  reasoning  there is some other text before it (at least one non-empty line before the "####" line; for
             \\boxed, at least one word outside the box)
  last       nothing follows the answer (the "####" line is the last non-empty line; after the box at most
             '$', '.', ')' or ']' and whitespace)
  single     exactly one answer ("####" once, or \\boxed once)
Without an answer every component is 0. "####" wins when both forms are present. Correctness is not judged:
pair it with an exact-match term (math_exact.py), e.g. weight 0.2 here and 1.0 there.

    [[reward]]
    name = "format"
    weight = 0.2
    program = ["python3", "examples/rewards/format.py"]
"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from temper_reward import reward  # noqa: E402

CHECKS = ("answer", "reasoning", "last", "single")


def _gsm8k(lines):
    idx = [i for i, l in enumerate(lines) if l.lstrip().startswith("####")]
    if not idx:
        return None
    k = idx[-1]
    answer = lines[k].lstrip().lstrip("#").strip()
    return {
        "answer": bool(answer),
        "reasoning": any(l.strip() for l in lines[:k]),
        "last": not any(l.strip() for l in lines[k + 1:]),
        "single": len(idx) == 1,
    }


def _boxed(text):
    starts = [m.start() for m in re.finditer(r"\\boxed\s*\{", text)]
    if not starts:
        return None
    s = starts[-1]
    open_at = text.index("{", s)
    depth, end = 0, None
    for i in range(open_at, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            end = i + 1
            break
    if end is None:
        return {"answer": False, "reasoning": False, "last": False, "single": False}
    outside = text[:s] + " " + text[end:]
    return {
        "answer": bool(text[open_at + 1:end - 1].strip()),
        "reasoning": re.search(r"[A-Za-z0-9]", re.sub(r"\\[A-Za-z]+", "", outside)) is not None,
        "last": re.fullmatch(r"[\s$.)\]]*", text[end:]) is not None,
        "single": len(starts) == 1,
    }


def format_checks(text):
    got = _gsm8k(text.split("\n")) or _boxed(text)
    if not got or not got["answer"]:
        return {c: 0.0 for c in CHECKS}
    return {c: 1.0 if got[c] else 0.0 for c in CHECKS}


@reward
def format_reward(completion):
    comps = format_checks(completion or "")
    failed = [c for c in CHECKS if comps[c] == 0]
    return {"reward": sum(comps.values()) / len(CHECKS), "components": comps,
            "info": "format ok" if not failed else "missing: " + ", ".join(failed)}


if __name__ == "__main__":
    format_reward.serve()
