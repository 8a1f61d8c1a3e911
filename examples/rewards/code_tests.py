"""Code reward: the completion's Python code against the row's unit tests, in temper's sandbox.

The code is the first ```python (or ```py, or plain ```) fenced block of the completion, else the whole
completion. The tests are the row's column "tests": a list of Python statements, usually asserts, run one by one
after the code in the code's namespace (e.g. ["assert add(2, 3) == 5", "assert add(-1, 1) == 0"]). A row
without tests fails that sample (the term's on_failure). The sandbox is `temper sandbox` ($TEMPER_BIN, which
temper sets for its workers): no network, a fresh tmpfs, rlimits; a hostile completion scores 0 and the run
goes on.
    reward = tests passed / tests            (CODE_ALL_PASS=1 or --all-pass: 1 if all pass, else 0)
Components "passed" and "total"; info the sandbox's first error (a failing assert, an exception, a timeout).
Limits (seconds, MB): --cpu-s / CODE_CPU_S, --wall-s / CODE_WALL_S, --memory-mb / CODE_MEMORY_MB (the sandbox's
defaults when unset).

    [[reward]]
    name = "tests"
    program = ["python3", "examples/rewards/code_tests.py"]
    workers = 4
    timeout_s = 120

    {"prompt": "Write add(a, b) returning a + b.", "tests": ["assert add(2, 3) == 5", "assert add(-1, 1) == 0"]}
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from temper_reward import reward, run_sandboxed  # noqa: E402

FENCE_PY = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
FENCE_ANY = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)


def _env_float(name):
    v = os.environ.get(name)
    return float(v) if v else None


ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
ap.add_argument("--all-pass", action="store_true", default=os.environ.get("CODE_ALL_PASS", "") not in ("", "0"))
ap.add_argument("--cpu-s", type=float, default=_env_float("CODE_CPU_S"))
ap.add_argument("--wall-s", type=float, default=_env_float("CODE_WALL_S"))
ap.add_argument("--memory-mb", type=int, default=_env_float("CODE_MEMORY_MB"))
OPT = ap.parse_args(sys.argv[1:] if __name__ == "__main__" else [])


def code_of(completion):
    m = FENCE_PY.search(completion) or FENCE_ANY.search(completion)
    return m.group(1) if m else completion


@reward
def code_tests(completion, tests):
    if isinstance(tests, str):
        tests = [tests]
    if not tests:
        raise ValueError("the row has no 'tests' column (a list of assert statements)")
    memory_mb = int(OPT.memory_mb) if OPT.memory_mb is not None else None
    out = run_sandboxed(code_of(completion or ""), tests, cpu_s=OPT.cpu_s, wall_s=OPT.wall_s, memory_mb=memory_mb)
    passed, total = int(out.get("passed", 0)), int(out.get("total", len(tests)))
    ok = total > 0 and passed == total
    value = (1.0 if ok else 0.0) if OPT.all_pass else (passed / total if total else 0.0)
    info = "%d/%d passed" % (passed, total)
    if out.get("timed_out"):
        info += "; timed out"
    if out.get("error"):
        info += "; " + str(out["error"])[:300]
    return {"reward": value, "components": {"passed": float(passed), "total": float(total)}, "info": info,
            "correct": ok}


if __name__ == "__main__":
    code_tests.serve()
