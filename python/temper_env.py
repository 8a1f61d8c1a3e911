"""temper_env: a temper environment program as a Python class (standard library only, no install).

    # my_env.py
    import sys; sys.path.insert(0, "/path/to/temper/python")   # or set PYTHONPATH
    import temper_env
    from temper_env import user, text, last_integer

    class Guess(temper_env.Env):
        def reset(self, row):                       # row: the dataset row, or {"index", "split", "seed"}
            self.secret = row.get("secret", 42)
            return [user("Guess my number between 1 and 100.")]      # or (messages, tools)

        def step(self, message):                    # message: the assistant's turn (an OpenAI message)
            g = last_integer(text(message))
            if g == self.secret:
                return "correct", 1.0, True         # (observations, reward, done)
            return ("higher" if g is not None and g < self.secret else "lower"), 0.0, False

    if __name__ == "__main__":
        temper_env.serve(Guess)

    # recipe.toml
    [env]
    program = ["python3", "my_env.py"]

One instance of the class per episode: temper_env creates it at reset (self.params, self.episode, self.worker and
self.workers are set before __init__ runs) and drops it at close (after calling its close()). reset(row) returns
the first messages: a list of messages (dicts {"role", "content"} or strings, which become user messages), a string,
a pair (messages, tools) with tools a list of OpenAI tool schemas (tool_schema() builds one), or a dict
{"messages": [...], "tools": [...]}. step(message) returns (observations, reward, done), (observations, reward,
done, extras) with extras a dict of "correct" (bool), "components" ({"name": number}) and "info" (text), or one
dict {"messages", "reward", "done", "correct", "components", "info"}. Observations are messages like reset's: role
"tool" answers a tool call (tool_result() builds one), role "user" anything else. The message passed to step may
hold "tool_calls" (read them with tool_calls()) and "parse_errors" (parse_errors(): the calls temper could not
parse; answer with an error observation the model can learn from). An exception fails that episode only (temper
counts it; the traceback goes to stderr); the worker goes on.

The protocol (JSON lines on stdin/stdout, recipes/README.md "Environment programs"):
    temper -> {"type": "hello", "protocol": 1, "name": ..., "worker": k, "workers": n, "params": {...}}
    worker -> {"ready": true}
    temper -> {"type": "reset", "episode": E, "row": {...}}        worker -> {"messages": [...], "tools": [...]}
    temper -> {"type": "step", "episode": E, "message": {...}}     worker -> {"messages": [...], "reward": x, "done": b}
    temper -> {"type": "close", "episode": E}                      worker -> {"ok": true}
Write logs to stderr, never to stdout.

Client mode ([env] mode = "client"): your agent drives the conversation with any OpenAI client against the
endpoint temper serves with the policy on loopback; temper records every token it samples and trains on them.

    class Solve(temper_env.Agent):
        def run(self, row, endpoint):               # endpoint: base_url, api_key, model; chat(); openai()
            client = endpoint.openai()              # the official client when installed (else endpoint.chat)
            r = client.chat.completions.create(model=endpoint.model, messages=[...], max_tokens=64)
            ...                                     # tool calls, more turns: as your agent does
            return 1.0                              # the episode's return, or {"reward", "correct", "info"}

    temper -> {"type": "run", "episode": E, "row": {...}, "base_url": U, "api_key": K, "model": M}
    worker -> {"reward": x, "correct"?: b, "components"?: {...}, "info"?: "text"}
"""

import json
import math
import re
import sys
import traceback

PROTOCOL = 1


class Env:
    """Subclass and define reset(row) and step(message); close() is optional."""

    params = {}  # the [env] params temper sent in its greeting
    episode = None  # this episode's id
    worker = 0
    workers = 1

    def reset(self, row):
        raise NotImplementedError("define reset(self, row) in your Env subclass")

    def step(self, message):
        raise NotImplementedError("define step(self, message) in your Env subclass")

    def close(self):
        pass

    @classmethod
    def serve(cls, stdin=None, stdout=None):
        serve(cls, stdin, stdout)


class Endpoint:
    """The OpenAI-compatible endpoint temper serves for one episode (client mode)."""

    def __init__(self, base_url, api_key, model):
        self.base_url, self.api_key, self.model = base_url, api_key, model

    def openai(self):
        """An openai.OpenAI client for this endpoint (the `openai` package must be installed)."""
        import openai  # noqa: PLC0415 (optional dependency)
        return openai.OpenAI(base_url=self.base_url, api_key=self.api_key, max_retries=0)

    def chat(self, messages, **kwargs):
        """POST /chat/completions with the standard library; returns the response as a dict."""
        import urllib.request  # noqa: PLC0415
        body = dict(kwargs, model=self.model, messages=messages)
        req = urllib.request.Request(self.base_url.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json",
                                              "Authorization": "Bearer " + self.api_key})
        with urllib.request.urlopen(req) as r:
            return json.loads(r.read())


class Agent:
    """Subclass and define run(row, endpoint) -> reward (client mode); close() is optional."""

    params = {}
    episode = None
    worker = 0
    workers = 1

    def run(self, row, endpoint):
        raise NotImplementedError("define run(self, row, endpoint) in your Agent subclass")

    def close(self):
        pass

    @classmethod
    def serve(cls, stdin=None, stdout=None):
        serve(cls, stdin, stdout)


def _run_reply(r):
    if isinstance(r, dict):
        out = dict(r)
    else:
        out = {"reward": r}
    reward = out.get("reward")
    if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward):
        raise ValueError("run() must return a finite number or a dict with \"reward\", got %r" % (reward,))
    out["reward"] = float(reward)
    return out


# Messages ------------------------------------------------------------------------------------------------------

def user(content):
    return {"role": "user", "content": str(content)}


def system(content):
    return {"role": "system", "content": str(content)}


def tool_result(call, content):
    """The tool message answering `call` (a dict from tool_calls())."""
    m = {"role": "tool"}
    if call.get("id"):
        m["tool_call_id"] = call["id"]
    m["name"] = call.get("name") or ""
    m["content"] = content if isinstance(content, str) else json.dumps(content)
    return m


def tool_schema(name, description, properties, required=None):
    """An OpenAI tool schema: properties maps argument names to JSON schemas ({"type": "string"}, ...)."""
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties,
                       "required": list(properties) if required is None else list(required)}}}


def text(message):
    """The message's content as text ('' for none)."""
    c = message.get("content") if isinstance(message, dict) else None
    if c is None:
        return ""
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "".join(p.get("text", "") for p in c if isinstance(p, dict) and p.get("type") == "text")
    return json.dumps(c)


def tool_calls(message):
    """The message's tool calls as dicts {"id", "name", "arguments", "error"}: arguments is a dict (parsed from JSON
    text when needed) or None, and then error says why."""
    out = []
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    for c in calls or []:
        if not isinstance(c, dict):
            continue
        fn = c.get("function") if isinstance(c.get("function"), dict) else c
        call = {"id": c.get("id") if isinstance(c.get("id"), str) else "",
                "name": fn.get("name") if isinstance(fn.get("name"), str) else "", "arguments": None, "error": None}
        args = fn.get("arguments")
        if args is None:
            call["arguments"] = {}
        elif isinstance(args, dict):
            call["arguments"] = args
        elif isinstance(args, str):
            try:
                parsed = json.loads(args)
            except ValueError:
                parsed = None
                call["error"] = "the arguments are not JSON: " + args[:120]
            if isinstance(parsed, dict):
                call["arguments"] = parsed
            elif call["error"] is None:
                call["error"] = "the arguments are not a JSON object: " + args[:120]
        else:
            call["error"] = "the arguments are not a JSON object: " + json.dumps(args)[:120]
        out.append(call)
    return out


def parse_errors(message):
    """Why temper could not parse some of the message's tool calls (empty: none failed)."""
    e = message.get("parse_errors") if isinstance(message, dict) else None
    if e is None:
        return []
    if not isinstance(e, list):
        return [e if isinstance(e, str) else json.dumps(e)]
    out = []
    for x in e:
        if isinstance(x, str):
            out.append(x)
        elif isinstance(x, dict) and isinstance(x.get("error"), str):
            out.append(x["error"])
        else:
            out.append(json.dumps(x))
    return out


_NUMBER = re.compile(r"(?:(?<![A-Za-z0-9_])-)?[0-9]+(?:,[0-9]{3}(?![0-9]))*(?:\.[0-9]+)?")


def last_number(s):
    """The last number in s, normalised as temper's built-ins do: "1,234" -> "1234", "007.50" -> "7.5", "-0" -> "0";
    None when there is none."""
    last = None
    for m in _NUMBER.finditer(s or ""):
        last = m.group(0)
    if last is None:
        return None
    neg = last.startswith("-")
    body = last[1:] if neg else last
    ip, _, frac = body.replace(",", "").partition(".")
    ip = ip.lstrip("0") or "0"
    frac = frac.rstrip("0")
    v = ip + ("." + frac if frac else "")
    return "-" + v if neg and v != "0" else v


def last_integer(s):
    """The last number in s when it is a whole number of at most 18 digits, else None."""
    n = last_number(s)
    if n is None or "." in n or len(n.lstrip("-")) > 18:
        return None
    return int(n)


# Serving -------------------------------------------------------------------------------------------------------

def _messages(x, what):
    if x is None:
        return []
    if isinstance(x, (str, dict)):
        x = [x]
    if not isinstance(x, (list, tuple)):
        raise TypeError("%s must be a list of messages, a message or a string, got %s" % (what, type(x).__name__))
    out = []
    for i, m in enumerate(x):
        if isinstance(m, str):
            m = user(m)
        if not isinstance(m, dict):
            raise TypeError("%s[%d] must be a dict {role, content} or a string, got %s" % (what, i, type(m).__name__))
        if not isinstance(m.get("role"), str) or not m["role"]:
            raise TypeError("%s[%d] needs a 'role' (a string)" % (what, i))
        if not isinstance(m.get("content"), str):
            raise TypeError("%s[%d]['content'] must be a string, got %r" % (what, i, m.get("content")))
        out.append(m)
    return out


def _extras(d, out, what):
    if d.get("correct") is not None:
        if not isinstance(d["correct"], bool):
            raise TypeError("%s: 'correct' must be True or False, got %r" % (what, d["correct"]))
        out["correct"] = d["correct"]
    if d.get("components") is not None:
        if not isinstance(d["components"], dict):
            raise TypeError("%s: 'components' must be a dict of numbers" % what)
        out["components"] = {str(k): _number(v, "%s: component %r" % (what, k)) for k, v in d["components"].items()}
    if d.get("info") is not None:
        out["info"] = d["info"] if isinstance(d["info"], str) else json.dumps(d["info"])
    return out


def _number(x, what):
    if isinstance(x, bool):
        return 1.0 if x else 0.0
    if not isinstance(x, (int, float)):
        raise TypeError("%s must be a number, got %s %r" % (what, type(x).__name__, x))
    x = float(x)
    if not math.isfinite(x):
        raise ValueError("%s must be a finite number, got %r" % (what, x))
    return x


def _reset_reply(r):
    tools = None
    if isinstance(r, dict) and "messages" in r:
        out = {"messages": _messages(r["messages"], "reset's messages")}
        tools = r.get("tools")
        _extras(r, out, "reset")
    elif isinstance(r, tuple):
        if len(r) != 2:
            raise TypeError("reset returns messages or (messages, tools), got a tuple of %d" % len(r))
        out = {"messages": _messages(r[0], "reset's messages")}
        tools = r[1]
    else:
        out = {"messages": _messages(r, "reset's messages")}
    if not out["messages"]:
        raise ValueError("reset must return at least one message")
    if tools is not None:
        if not isinstance(tools, (list, tuple)) or not all(isinstance(t, dict) for t in tools):
            raise TypeError("reset's tools must be a list of tool schemas (dicts)")
        out["tools"] = list(tools)
    return out


def _step_reply(r):
    if isinstance(r, dict):
        for k in ("reward", "done"):
            if k not in r:
                raise ValueError("step's dict needs %r (got keys %s)" % (k, sorted(r)))
        obs, reward, done, extras = r.get("messages"), r["reward"], r["done"], r
    elif isinstance(r, tuple) and len(r) in (3, 4):
        obs, reward, done = r[:3]
        extras = r[3] if len(r) == 4 and r[3] is not None else {}
        if not isinstance(extras, dict):
            raise TypeError("step's 4th value must be a dict of extras (correct, components, info)")
    else:
        raise TypeError("step returns (observations, reward, done[, extras]) or a dict, got %s" % type(r).__name__)
    if not isinstance(done, bool):
        if isinstance(done, int) and done in (0, 1):
            done = bool(done)
        else:
            raise TypeError("step's done must be True or False, got %r" % (done,))
    out = {"messages": _messages(obs, "step's observations"), "reward": _number(reward, "step's reward"),
           "done": done}
    return _extras(extras, out, "step")


def _describe(e):
    return "%s: %s" % (type(e).__name__, e)


def _log_exception():
    traceback.print_exc(file=sys.stderr)
    sys.stderr.flush()


def serve(env_class, stdin=None, stdout=None):
    """Answers temper's requests with one env_class instance per episode until stdin closes."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    hello = {"params": {}, "worker": 0, "workers": 1}
    episodes = {}
    for line in stdin:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError as e:
            print("temper_env: a request that is not JSON: %s" % e, file=sys.stderr)
            continue
        kind = msg.get("type")
        episode = msg.get("episode")
        try:
            if kind == "hello":
                if msg.get("protocol") != PROTOCOL:
                    print("temper_env: temper speaks protocol %r, this helper %d" % (msg.get("protocol"), PROTOCOL),
                          file=sys.stderr)
                hello = {"params": msg.get("params") or {}, "worker": msg.get("worker", 0),
                         "workers": msg.get("workers", 1)}
                reply = {"ready": True}
            elif kind == "reset":
                if episode in episodes:
                    raise ValueError("episode %r is already open" % episode)
                env = env_class.__new__(env_class)
                env.params, env.episode = hello["params"], episode
                env.worker, env.workers = hello["worker"], hello["workers"]
                env.__init__()
                reply = _reset_reply(env.reset(msg.get("row") or {}))
                episodes[episode] = env
            elif kind == "run":
                if episode in episodes:
                    raise ValueError("episode %r is already open" % episode)
                agent = env_class.__new__(env_class)
                agent.params, agent.episode = hello["params"], episode
                agent.worker, agent.workers = hello["worker"], hello["workers"]
                agent.__init__()
                episodes[episode] = agent
                endpoint = Endpoint(msg.get("base_url"), msg.get("api_key"), msg.get("model"))
                reply = _run_reply(agent.run(msg.get("row") or {}, endpoint))
            elif kind == "step":
                env = episodes.get(episode)
                if env is None:
                    raise KeyError("episode %r is not open (never reset, or closed)" % episode)
                reply = _step_reply(env.step(msg.get("message") or {}))
            elif kind == "close":
                env = episodes.pop(episode, None)
                if env is not None:
                    try:
                        env.close()
                    except Exception:
                        _log_exception()
                reply = {"ok": True}
            else:
                reply = {"error": "unknown request type %r" % kind}
            text_out = json.dumps(reply, allow_nan=False)
        except Exception as e:  # that episode fails, the worker goes on
            _log_exception()
            text_out = json.dumps({"error": _describe(e)})
        stdout.write(text_out + "\n")
        stdout.flush()
