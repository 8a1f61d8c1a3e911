"""Length penalty: 0 up to a target length, then negative, growing linearly past it (capped).

    reward = -min(max_penalty, (length - target) / scale)   when length > target, else 0

`length` counts the completion's characters (unit = chars) or whitespace-separated words (unit = words).
Parameters, from the command line (which wins) or the environment:
    --target N       LENGTH_TARGET       default 400
    --scale S        LENGTH_SCALE        default 400 (S units past the target cost 1)
    --max-penalty P  LENGTH_MAX_PENALTY  default 1
    --unit U         LENGTH_UNIT         chars (default) | words
The component "length" is the measured length (samples.jsonl shows it); a positive weight in the recipe keeps it
a penalty. Use it beside a correctness term so the model is not paid for saying nothing:

    [[reward]]
    name = "length"
    weight = 0.5
    program = ["python3", "examples/rewards/length_penalty.py", "--target", "200", "--unit", "words"]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from temper_reward import reward  # noqa: E402


def options(argv=None):
    env = os.environ
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--target", type=float, default=float(env.get("LENGTH_TARGET", 400)))
    ap.add_argument("--scale", type=float, default=float(env.get("LENGTH_SCALE", 400)))
    ap.add_argument("--max-penalty", type=float, default=float(env.get("LENGTH_MAX_PENALTY", 1)))
    ap.add_argument("--unit", choices=("chars", "words"), default=env.get("LENGTH_UNIT", "chars"))
    o = ap.parse_args(argv)
    if o.target < 0 or o.scale <= 0 or o.max_penalty < 0:
        ap.error("need target >= 0, scale > 0, max-penalty >= 0 (got %g, %g, %g)" % (o.target, o.scale, o.max_penalty))
    return o


OPT = options() if __name__ == "__main__" else options([])


def measure(text, unit):
    return len(text.split()) if unit == "words" else len(text)


@reward
def length_penalty(completion):
    n = measure(completion or "", OPT.unit)
    over = max(0.0, n - OPT.target)
    penalty = min(OPT.max_penalty, over / OPT.scale)
    return {"reward": -penalty if penalty > 0 else 0.0, "components": {"length": float(n)},
            "info": "%d %s, %g over the target" % (n, OPT.unit, over)}


if __name__ == "__main__":
    print("length_penalty: target %g %s, scale %g, max penalty %g" % (OPT.target, OPT.unit, OPT.scale,
                                                                    OPT.max_penalty), file=sys.stderr)
    length_penalty.serve()
