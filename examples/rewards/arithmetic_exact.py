"""The quickstart's arithmetic check as a reward program: the integer after the last "####" equals the answer.

Gives exactly the builtin arithmetic verifier's rewards (tests/e2e/reward_program.sh trains the quickstart with it).
"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from temper_reward import reward  # noqa: E402

INT = re.compile(r"^[+-]?[0-9]{1,18}$")


def final_answer(completion):
    at = completion.rfind("####")
    if at < 0:
        return None
    rest = completion[at + 4:].lstrip("#")
    return rest.split("\n", 1)[0].strip(" \t\r\f\v") or None


@reward
def arithmetic_exact(completion, answer):
    got = final_answer(completion)
    ok = got is not None and INT.match(got) is not None and int(got) == int(answer)
    return {"reward": 1.0 if ok else 0.0, "correct": ok}


if __name__ == "__main__":
    arithmetic_exact.serve()
