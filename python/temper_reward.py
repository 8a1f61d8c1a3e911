"""temper_reward: a temper reward program as a decorated Python function (standard library only, no install).

    # my_reward.py
    import sys; sys.path.insert(0, "/path/to/temper/python")   # or set PYTHONPATH
    from temper_reward import reward

    @reward
    def exact(completion, answer):
        return 1.0 if completion.strip().endswith(answer) else 0.0

    if __name__ == "__main__":
        exact.serve()

    # recipe.toml
    [[reward]]
    name = "exact"
    program = ["python3", "my_reward.py"]

The function is called once per sample. Its parameters are filled by name from the sample: `completion`,
`prompt`, `answer`, `messages`, `rubric`, `id`, `problem_id`, `step`, `row` (the dataset row with every column),
then any column of the row by its own name; `item` gets the whole sample as a dict; `**kwargs` gets every field.
A parameter the sample lacks is None unless it has a default. It returns a number (the reward) or a dict
{"reward": x, "components": {"name": x, ...}, "info": "text", "correct": bool}. An exception scores that sample
as failed (temper gives it the term's on_failure and counts it in reward_failures); the worker goes on.
`@reward(batch=True)` takes the list of samples and returns a list of results instead.

The protocol (JSON lines on stdin/stdout, recipes/README.md "Reward programs"):
    temper -> {"type": "hello", "protocol": 1, "name": ..., "worker": k, "workers": n}   worker -> {"ready": true}
    temper -> {"type": "score", "step": s, "items": [...]}                               worker -> {"results": [...]}
Write logs to stderr, never to stdout.

run_sandboxed(code, tests) runs Python code against assert statements in temper's sandbox (`temper sandbox`).
"""

import inspect
import json
import math
import os
import subprocess
import sys
import traceback

PROTOCOL = 1
_FIELDS = ("completion", "prompt", "answer", "messages", "rubric", "id", "problem_id", "step", "row")


class RewardFunction:
    """A reward function that can serve temper's protocol (serve()) or be called directly (for tests)."""

    def __init__(self, fn, batch=False):
        self.fn = fn
        self.batch = batch
        self.__name__ = getattr(fn, "__name__", "reward")
        self.__doc__ = getattr(fn, "__doc__", None)
        self._params = None if batch else inspect.signature(fn).parameters

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def _arguments(self, item):
        row = item.get("row") if isinstance(item.get("row"), dict) else {}
        kwargs = {}
        for name, p in self._params.items():
            if p.kind == inspect.Parameter.VAR_KEYWORD:
                for k, v in item.items():
                    kwargs.setdefault(k, v)
                continue
            if p.kind == inspect.Parameter.VAR_POSITIONAL:
                continue
            if name == "item":
                kwargs[name] = item
            elif name in item:
                kwargs[name] = item[name]
            elif name in row:
                kwargs[name] = row[name]
            elif p.default is inspect.Parameter.empty:
                kwargs[name] = None
        return kwargs

    def score_items(self, items):
        """The protocol's results for a list of samples."""
        if self.batch:
            try:
                got = list(self.fn(items))
                if len(got) != len(items):
                    raise ValueError("returned %d results for %d samples" % (len(got), len(items)))
            except Exception as e:  # the whole batch fails, the worker goes on
                _log_exception()
                return [{"error": _describe(e)} for _ in items]
            out = []
            for r in got:
                try:
                    out.append(_result(r))
                except Exception as e:  # that sample fails
                    _log_exception()
                    out.append({"error": _describe(e)})
            return out
        out = []
        for item in items:
            try:
                out.append(_result(self.fn(**self._arguments(item))))
            except Exception as e:
                _log_exception()
                out.append({"error": _describe(e)})
        return out

    def serve(self, stdin=None, stdout=None):
        """Answers temper's requests until stdin closes."""
        stdin = stdin or sys.stdin
        stdout = stdout or sys.stdout
        for line in stdin:
            if not line.strip():
                continue
            try:
                msg = json.loads(line)
            except ValueError as e:
                print("temper_reward: a request that is not JSON: %s" % e, file=sys.stderr)
                continue
            kind = msg.get("type")
            if kind == "hello":
                if msg.get("protocol") != PROTOCOL:
                    print("temper_reward: temper speaks protocol %r, this helper %d" % (msg.get("protocol"), PROTOCOL),
                          file=sys.stderr)
                reply = {"ready": True}
            elif kind == "score":
                items = msg.get("items", [])
                for it in items:
                    it.setdefault("step", msg.get("step"))
                reply = {"results": self.score_items(items)}
            else:
                reply = {"error": "unknown request type %r" % kind}
            try:
                text = json.dumps(reply, allow_nan=False, default=_not_json)
            except (TypeError, ValueError) as e:  # a NaN or an object that is not JSON: those samples fail
                _log_exception()
                n = len(reply.get("results", []))
                text = json.dumps({"results": [{"error": _describe(e)}] * n})
            stdout.write(text + "\n")
            stdout.flush()


def reward(fn=None, *, batch=False):
    """Decorator: @reward or @reward(batch=True)."""
    if fn is None:
        return lambda f: RewardFunction(f, batch=batch)
    return RewardFunction(fn, batch=batch)


def serve(fn, batch=False):
    """Serves a plain function (no decorator)."""
    (fn if isinstance(fn, RewardFunction) else RewardFunction(fn, batch=batch)).serve()


def run_sandboxed(code, tests, cpu_s=None, wall_s=None, memory_mb=None):
    """Runs `code` (Python source) then each assert statement of `tests` in temper's sandbox.

    Returns {"passed": k, "total": n, "error": str, "timed_out": bool}. Uses $TEMPER_BIN (set by temper for its
    reward workers), else `temper` on PATH."""
    limits = {k: v for k, v in (("cpu_s", cpu_s), ("wall_s", wall_s), ("memory_mb", memory_mb)) if v is not None}
    request = {"code": code, "tests": list(tests)}
    if limits:
        request["limits"] = limits
    binary = os.environ.get("TEMPER_BIN", "temper")
    proc = subprocess.run([binary, "sandbox"], input=json.dumps(request), capture_output=True, text=True)
    lines = [l for l in proc.stdout.splitlines() if l.strip()]
    if proc.returncode != 0 or not lines:
        raise RuntimeError("temper sandbox failed (exit %d): %s" % (proc.returncode, proc.stderr.strip()[-500:]))
    return json.loads(lines[-1])


def _result(r):
    if isinstance(r, bool):
        return {"reward": 1.0 if r else 0.0, "correct": r}
    if isinstance(r, (int, float)):
        return _reward_value(r)
    if isinstance(r, dict):
        if "reward" not in r and "error" not in r:
            raise ValueError("a result dict needs a 'reward' (got keys %s)" % sorted(r))
        if "reward" in r:  # checked here so that a bad value fails its sample, not the whole reply
            r = dict(r, reward=_reward_value(r["reward"]))
        if isinstance(r.get("components"), dict):
            r["components"] = {str(k): _reward_value(v, "component %r" % k) for k, v in r["components"].items()}
        elif "components" in r:
            raise TypeError("'components' must be a dict of numbers, got %s" % type(r["components"]).__name__)
        if "correct" in r and not isinstance(r["correct"], bool):
            raise TypeError("'correct' must be True or False, got %r" % (r["correct"],))
        return r
    raise TypeError("a reward function returns a number or a dict, got %s" % type(r).__name__)


def _reward_value(x, what="a reward"):
    if isinstance(x, bool):
        return 1.0 if x else 0.0
    if not isinstance(x, (int, float)):
        raise TypeError("%s must be a number, got %s %r" % (what, type(x).__name__, x))
    x = float(x)
    if not math.isfinite(x):
        raise ValueError("%s must be a finite number, got %r" % (what, x))
    return x


def _describe(e):
    return "%s: %s" % (type(e).__name__, e)


def _log_exception():
    traceback.print_exc(file=sys.stderr)
    sys.stderr.flush()


def _not_json(x):
    raise TypeError("a result holds %s, which is not JSON" % type(x).__name__)
