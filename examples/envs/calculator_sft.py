"""SFT rows that teach a chat model to use the built-in calculator environment's tool ([env] kind = "calculator"):
word problems in the environment's style, each as two rows in TRL's conversational form (a final assistant turn
is the target): the tool call in Hermes/Qwen syntax, then the answer after the tool's result.

    python3 examples/envs/calculator_sft.py 400 > calc_sft.jsonl     # rows = 2 x problems

Each row also carries "index" (the environment draws its own problem for that index in the RL stage).
"""
import json
import random
import sys

SYSTEM = ("You solve arithmetic word problems. You have a calculator tool: call it with an arithmetic expression "
          "(whole numbers, + - * /, parentheses) and it returns the exact result. Use it for the arithmetic. When you "
          "know the answer, reply without a tool call and end your reply with the final number.")


def listing(xs):
    return ", ".join(map(str, xs[:-1])) + " and " + str(xs[-1]) if len(xs) > 1 else str(xs[0])


def operand(rng):
    d = rng.randint(4, 7)
    return rng.randint(10 ** (d - 1), 10 ** d - 1)


def problem(rng):
    kind, k, ctx = rng.randint(0, 2), rng.randint(3, 5), rng.randint(0, 2)
    xs = [operand(rng) for _ in range(k)]
    if kind == 0:
        t = [("A warehouse received ", " units in ", " deliveries. How many units did it receive in total?"),
             ("A website had ", " visitors on ", " days. How many visitors did it have over those days?"),
             ("A farm harvested ", " kilograms of grain from ", " fields. How many kilograms did it harvest in total?")][ctx]
        return t[0] + listing(xs) + t[1] + str(k) + t[2], " + ".join(map(str, xs)), sum(xs)
    if kind == 1:
        unit = ["dollars", "euros", "points"][ctx]
        q, expr, total = "An account holds %d %s. Then, in order:" % (xs[0], unit), str(xs[0]), xs[0]
        for i, x in enumerate(xs[1:], 1):
            withdraw = rng.randint(0, 1) == 1 and total >= x
            total += -x if withdraw else x
            expr += (" - " if withdraw else " + ") + str(x)
            sep = "" if i == 1 else (" and" if i + 1 == len(xs) else ",")
            q += sep + (" a withdrawal of " if withdraw else " a deposit of ") + "%d %s" % (x, unit)
        return q + ". How many %s does it hold at the end?" % unit, expr, total
    t = [("A factory filled ", " crates with ", " bottles"), ("A shop stacked ", " boxes with ", " pencils"),
         ("A builder loaded ", " trucks with ", " bricks")][ctx]
    thing = ["bottles", "pencils", "bricks"][ctx]
    q = t[0] + str(xs[0]) + t[1] + str(xs[1]) + t[2] + " each."
    if k == 3:
        q += " It also has %d loose %s." % (xs[2], thing)
    elif k > 3:
        q += " It also has %s loose %s in %d other places." % (listing(xs[2:]), thing, k - 2)
    expr = "%d * %d" % (xs[0], xs[1]) + "".join(" + %d" % x for x in xs[2:])
    return q + " How many %s are there in total?" % thing, expr, xs[0] * xs[1] + sum(xs[2:])


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    for i in range(n):
        q, expr, answer = problem(rng)
        assert eval(expr) == answer
        call = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "%s"}}\n</tool_call>' % expr
        first = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}]
        print(json.dumps({"index": i, "messages": first + [{"role": "assistant", "content": call}]}))
        print(json.dumps({"index": i, "messages": first + [{"role": "assistant", "content": call},
                                                          {"role": "tool", "content": str(answer)},
                                                          {"role": "assistant", "content": "The answer is %d." % answer}]}))


if __name__ == "__main__":
    main()
