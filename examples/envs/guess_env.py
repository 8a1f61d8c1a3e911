"""The guessing game as an environment program: the built-in "guess" environment's rules in Python.

    [env]
    program = ["python3", "examples/envs/guess_env.py"]
    params = { n = 100 }

The user thinks of a secret integer in [1, n]; each assistant turn's last integer is its guess, answered "higher",
"lower" or "correct" (reward 1, done); a turn without one gets "Please answer with a number.". The secret is the
row's "secret" when it has one (then the transcripts equal the built-in's, tests/env/test_env.cpp), else drawn from
the row's (seed, split, index) with Python's random (not the built-in's Philox draw).
"""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import temper_env  # noqa: E402
from temper_env import last_integer, text, user  # noqa: E402


class Guess(temper_env.Env):
    def reset(self, row):
        n = self.params.get("n", 100)
        if not isinstance(n, int) or isinstance(n, bool) or not 2 <= n <= 10**9:
            raise ValueError("param n must be an integer in [2, 1000000000], got %r" % (n,))
        if "secret" in row:
            s = row["secret"]
            if not isinstance(s, int) or isinstance(s, bool) or not 1 <= s <= n:
                raise ValueError("row.secret must be an integer in [1, %d], got %r" % (n, s))
            self.secret = s
        else:
            rng = random.Random("%s/%s/%s" % (row.get("seed", 0), row.get("split", "train"), row.get("index", 0)))
            self.secret = rng.randint(1, n)
        self.turns = 0
        return [user("I'm thinking of a number between 1 and %d. Guess it; I'll say higher or lower." % n)]

    def step(self, message):
        self.turns += 1
        g = last_integer(text(message))
        if g is None:
            return "Please answer with a number.", 0.0, False
        if g < self.secret:
            return "higher", 0.0, False
        if g > self.secret:
            return "lower", 0.0, False
        return "correct", 1.0, True, {"correct": True, "components": {"turns": self.turns}}


if __name__ == "__main__":
    temper_env.serve(Guess)
