"""temper serve end to end with the official `openai` client (pinned in tools/ref/requirements-client.txt):
models list, chat completion (greedy output equal to `temper generate --greedy`), streaming (joined text
equal to the plain reply, greedy and seeded), n=2, logprobs with top_logprobs, a stop string,
/v1/completions (text and token ids, equal to `temper generate --raw --greedy`), concurrent requests
sharing engine steps, every error case (status and OpenAI's error JSON), and SIGTERM during an
in-flight request (it completes; the server exits 0).

    tests/serve/openai_client_test.py --temper build/bin/temper --model .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
Prints SERVE_OPENAI_OK at the end; any failed check raises.
"""
import argparse
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_process import ServeProcess  # noqa: E402

import openai  # noqa: E402

CHECKS = []


def check(name):
    def wrap(fn):
        CHECKS.append((name, fn))
        return fn
    return wrap


def raw(srv, method, path, body=None, headers=None):
    """(status, parsed JSON or text, headers) of a request outside the client (malformed bodies, methods)."""
    data = body if isinstance(body, (bytes, type(None))) else body.encode()
    req = urllib.request.Request(srv.url(path), data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            status, text, hdrs = r.status, r.read().decode(), r.headers
    except urllib.error.HTTPError as e:
        status, text, hdrs = e.code, e.read().decode(), e.headers
    try:
        return status, json.loads(text), hdrs
    except json.JSONDecodeError:
        return status, text, hdrs


def assert_error(status, body, want_status, want_code=None):
    assert status == want_status, f"status {status}, expected {want_status}: {body}"
    assert isinstance(body, dict) and "error" in body, f"not an OpenAI error: {body}"
    e = body["error"]
    assert set(e) >= {"message", "type", "param", "code"}, e
    assert isinstance(e["message"], str) and e["message"], e
    if want_code is not None:
        assert e["code"] == want_code, f"code {e['code']}, expected {want_code}: {e}"


def generate(args, prompt, max_new, raw_mode=False):
    cmd = [args.temper, "generate", "--model", args.model, "--prompt", prompt, "--greedy", "--max-new", str(max_new)]
    if raw_mode:
        cmd.append("--raw")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    assert out.endswith("\n"), repr(out)
    return out[:-1]


class Ctx:
    def __init__(self, args, srv):
        self.args = args
        self.srv = srv
        self.client = openai.OpenAI(base_url=srv.base_url, api_key="none", max_retries=0, timeout=300)
        self.model = srv.name


PROMPT = "Write two sentences about the ocean."


@check("models list")
def models(c):
    ids = [m.id for m in c.client.models.list().data]
    assert ids == [c.model], ids
    assert c.client.models.retrieve(c.model).id == c.model


@check("chat completion, greedy = temper generate --greedy")
def chat_greedy(c):
    r = c.client.chat.completions.create(model=c.model, messages=[{"role": "user", "content": PROMPT}],
                                         temperature=0, max_tokens=40)
    text = r.choices[0].message.content
    assert r.object == "chat.completion" and r.choices[0].message.role == "assistant"
    assert text, r
    assert r.choices[0].finish_reason in ("stop", "length"), r.choices[0].finish_reason
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    want = generate(c.args, PROMPT, 40)
    assert text == want, f"serve: {text!r}\ngenerate: {want!r}"
    c.greedy_text = text
    print(f"    greedy: {text!r} ({r.usage.completion_tokens} tokens, {r.choices[0].finish_reason})")


def stream_text(c, **kw):
    chunks = list(c.client.chat.completions.create(model=c.model, stream=True, **kw))
    text, finish, usage = {}, {}, None
    for ch in chunks:
        assert ch.object == "chat.completion.chunk"
        if ch.usage is not None:
            usage = ch.usage
        for choice in ch.choices:
            text.setdefault(choice.index, "")
            if choice.delta.content:
                text[choice.index] += choice.delta.content
            if choice.finish_reason:
                finish[choice.index] = choice.finish_reason
    return text, finish, usage


@check("streaming joins to the plain reply (greedy and seeded)")
def streaming(c):
    msgs = [{"role": "user", "content": PROMPT}]
    text, finish, usage = stream_text(c, messages=msgs, temperature=0, max_tokens=40,
                                      stream_options={"include_usage": True})
    assert text[0] == c.greedy_text, f"stream {text[0]!r} != plain {c.greedy_text!r}"
    assert finish[0] in ("stop", "length") and usage is not None and usage.completion_tokens > 0
    kw = dict(messages=[{"role": "user", "content": "Write a haiku about rivers."}], temperature=0.9, top_p=0.95,
              seed=1234, max_tokens=32)
    plain = c.client.chat.completions.create(model=c.model, **kw).choices[0].message.content
    streamed, _, _ = stream_text(c, **kw)
    assert streamed[0] == plain, f"seeded stream {streamed[0]!r} != plain {plain!r}"
    again = c.client.chat.completions.create(model=c.model, **kw).choices[0].message.content
    assert again == plain, "the same seed gives the same text"


@check("n=2")
def n2(c):
    r = c.client.chat.completions.create(model=c.model, messages=[{"role": "user", "content": "Name a color."}],
                                         n=2, temperature=1.0, seed=7, max_tokens=16)
    assert [ch.index for ch in r.choices] == [0, 1], r.choices
    assert all(ch.message.content is not None for ch in r.choices)
    text, finish, _ = stream_text(c, messages=[{"role": "user", "content": "Name a color."}], n=2, temperature=1.0,
                                  seed=7, max_tokens=16)
    assert [text[0], text[1]] == [ch.message.content for ch in r.choices], (text, r.choices)


@check("logprobs with top_logprobs")
def logprobs(c):
    r = c.client.chat.completions.create(model=c.model, messages=[{"role": "user", "content": PROMPT}],
                                         temperature=0, max_tokens=12, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) > 0
    for e in content:
        assert len(e.top_logprobs) == 3
        assert e.logprob <= 1e-6 and isinstance(e.bytes, list) and e.bytes, e
        # Greedy: the chosen token is the policy's most likely one, with the same log-prob.
        assert e.top_logprobs[0].token == e.token, (e.token, e.top_logprobs)
        assert abs(e.top_logprobs[0].logprob - e.logprob) < 1e-3, (e.logprob, e.top_logprobs[0].logprob)
        assert e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob >= e.top_logprobs[2].logprob
        assert sum(math.exp(t.logprob) for t in e.top_logprobs) <= 1 + 1e-4
    # logprobs alone: each token's log-prob, no top list.
    r = c.client.chat.completions.create(model=c.model, messages=[{"role": "user", "content": PROMPT}],
                                         temperature=0, max_tokens=6, logprobs=True)
    assert all(e.top_logprobs == [] for e in r.choices[0].logprobs.content)


@check("a stop string")
def stop_string(c):
    words = c.greedy_text.split()
    assert len(words) >= 3, c.greedy_text
    stop = " " + words[2]
    r = c.client.chat.completions.create(model=c.model, messages=[{"role": "user", "content": PROMPT}],
                                         temperature=0, max_tokens=40, stop=[stop])
    want = c.greedy_text[:c.greedy_text.index(stop)]
    assert r.choices[0].message.content == want, (r.choices[0].message.content, want)
    assert r.choices[0].finish_reason == "stop"
    text, finish, _ = stream_text(c, messages=[{"role": "user", "content": PROMPT}], temperature=0, max_tokens=40,
                                  stop=stop)
    assert text[0] == want and finish[0] == "stop", (text, finish)


@check("/v1/completions (text and token ids) = temper generate --raw --greedy")
def completions(c):
    prompt = "The three primary colors are"
    r = c.client.completions.create(model=c.model, prompt=prompt, temperature=0, max_tokens=12)
    assert r.object == "text_completion"
    want = generate(c.args, prompt, 12, raw_mode=True)
    assert r.choices[0].text == want, (r.choices[0].text, want)
    assert r.choices[0].finish_reason in ("stop", "length")
    ids = json.loads(subprocess.run([c.args.temper, "tokenize", "--model", c.args.model, "--text", prompt],
                                    check=True, capture_output=True, text=True).stdout)
    r2 = c.client.completions.create(model=c.model, prompt=ids, temperature=0, max_tokens=12, logprobs=2)
    assert r2.choices[0].text == want, (r2.choices[0].text, want)
    lp = r2.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) > 0
    assert all(len(t) <= 2 for t in lp.top_logprobs)
    streamed = "".join(ch.choices[0].text for ch in c.client.completions.create(
        model=c.model, prompt=prompt, temperature=0, max_tokens=12, stream=True) if ch.choices)
    assert streamed == want, (streamed, want)


def stats(c):
    return raw(c.srv, "GET", "/stats")[1]


@check("8 concurrent requests share engine steps")
def concurrency(c):
    kw = dict(model=c.model, prompt="Once upon a time, in a small village,", temperature=0, max_tokens=32)
    s0 = stats(c)["engine_steps"]
    one = c.client.completions.create(**kw)
    s1 = stats(c)["engine_steps"]
    out = [None] * 8
    barrier = threading.Barrier(8)

    def go(i):
        barrier.wait()
        out[i] = c.client.completions.create(**kw)
    ts = [threading.Thread(target=go, args=(i,)) for i in range(8)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    s2 = stats(c)["engine_steps"]
    steps_one, steps_eight = s1 - s0, s2 - s1
    print(f"    engine steps: one request {steps_one}, 8 concurrent {steps_eight} (8x one: {8 * steps_one})")
    assert all(o.choices[0].text == one.choices[0].text for o in out), "greedy: same text for the same prompt"
    assert steps_eight <= 2 * steps_one, (steps_one, steps_eight)


@check("each error case: status and OpenAI's error JSON")
def errors(c):
    cl = c.client
    msgs = [{"role": "user", "content": "hi"}]
    cases = [
        ("n=0", dict(n=0), 400, "invalid_value"),
        ("n too large", dict(n=1000), 400, "invalid_value"),
        ("max_tokens=0", dict(max_tokens=0), 400, "invalid_value"),
        ("max_tokens beyond the context", dict(max_tokens=10 ** 7), 400, "invalid_value"),
        ("temperature out of range", dict(temperature=5), 400, "invalid_value"),
        ("wrong type", dict(extra_body={"top_p": "high"}), 400, "invalid_type"),
        ("top_logprobs without logprobs", dict(top_logprobs=2), 400, "invalid_value"),
    ]
    for name, kw, status, code in cases:
        try:
            cl.chat.completions.create(model=c.model, messages=msgs, **kw)
            raise AssertionError(f"{name}: no error")
        except openai.APIStatusError as e:
            assert e.status_code == status, (name, e.status_code, e.body)
            assert isinstance(e.body, dict) and e.body.get("code") == code, (name, e.body)
            assert isinstance(e, openai.BadRequestError), (name, type(e))
    try:
        cl.chat.completions.create(model="no-such-model", messages=msgs)
        raise AssertionError("unknown model: no error")
    except openai.NotFoundError as e:
        assert e.body["code"] == "model_not_found", e.body
    try:
        cl.completions.create(model=c.model, prompt="word " * 9000, max_tokens=4)
        raise AssertionError("prompt too long: no error")
    except openai.BadRequestError as e:
        assert e.body["code"] == "context_length_exceeded", e.body
    assert_error(*raw(c.srv, "POST", "/v1/chat/completions", '{"model": "smol", "messages": [')[:2], 400, "invalid_json")
    assert_error(*raw(c.srv, "POST", "/v1/chat/completions", '{"model": "' + c.model + '", "messages": 3}')[:2], 400,
                 "invalid_type")
    big = json.dumps({"model": c.model, "prompt": "x" * (300 * 1024)})
    assert_error(*raw(c.srv, "POST", "/v1/completions", big)[:2], 413, "request_too_large")
    assert_error(*raw(c.srv, "GET", "/v1/nothing")[:2], 404, "unknown_url")
    st, body, hdrs = raw(c.srv, "GET", "/v1/chat/completions")
    assert_error(st, body, 405, "method_not_allowed")
    assert hdrs.get("Allow") == "POST", dict(hdrs)
    assert_error(*raw(c.srv, "DELETE", "/v1/models")[:2], 405, "method_not_allowed")
    # 429: --max-concurrency 8 is full with eight streams in flight.
    streams, opened = [], threading.Event()
    release = threading.Event()

    def hold():
        s = cl.chat.completions.create(model=c.model, messages=[{"role": "user", "content": "Count to one hundred."}],
                                       max_tokens=400, temperature=0, stream=True)
        streams.append(s)
        if len(streams) == 8:
            opened.set()
        release.wait(120)
        s.close()
    ts = [threading.Thread(target=hold) for _ in range(8)]
    [t.start() for t in ts]
    assert opened.wait(120), "8 streams did not open"
    try:
        cl.chat.completions.create(model=c.model, messages=msgs, max_tokens=2)
        raise AssertionError("a fifth request in flight: no 429")
    except openai.RateLimitError as e:
        assert e.status_code == 429 and e.body["code"] == "rate_limit_exceeded", e.body
    release.set()
    [t.join() for t in ts]
    deadline = time.time() + 60
    while stats(c)["in_flight"] != 0 and time.time() < deadline:
        time.sleep(0.1)
    assert stats(c)["in_flight"] == 0, "closed streams are no longer in flight"


def sigterm_check(c):
    """SIGTERM during an in-flight request: it completes (the same text as without the signal); the server
    exits 0 and accepts nothing more."""
    kw = dict(model=c.model, messages=[{"role": "user", "content": "Tell me a long story about a dragon."}],
              temperature=0, max_tokens=64)
    want = c.client.chat.completions.create(**kw).choices[0].message.content
    got = {"after": 0}
    first, sent = threading.Event(), threading.Event()

    def go():
        text, finish = "", None
        for ch in c.client.chat.completions.create(stream=True, **kw):
            for choice in ch.choices:
                text += choice.delta.content or ""
                finish = choice.finish_reason or finish
                if choice.delta.content:
                    first.set()
                    if sent.is_set():
                        got["after"] += 1
        got["text"], got["finish"] = text, finish
    t = threading.Thread(target=go)
    t.start()
    assert first.wait(120), "no first chunk"
    sent.set()
    rc = c.srv.stop(signal.SIGTERM)
    t.join(120)
    assert rc == 0, f"exit code {rc}"
    assert got["after"] > 0, "the request was not in flight when SIGTERM came"
    assert got.get("text") == want and got.get("finish") in ("stop", "length"), (got, want)
    try:
        urllib.request.urlopen(c.srv.url("/health"), timeout=5)
        raise AssertionError("still accepting after SIGTERM")
    except OSError:
        pass
    print(f"    SIGTERM: {got['after']} chunks of the in-flight stream came after it; it completed; exit code 0")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--temper", required=True)
    ap.add_argument("--model", required=True)
    args = ap.parse_args()
    srv = ServeProcess(args.temper, args.model, "--max-concurrency", "8", "--max-body-bytes", str(256 * 1024),
                       "--max-seqs", "8")
    ok = True
    c = Ctx(args, srv)
    try:
        for name, fn in CHECKS:
            t0 = time.time()
            fn(c)
            print(f"ok   {name} ({time.time() - t0:.1f} s)", flush=True)
        sigterm_check(c)
        print("ok   SIGTERM finishes the in-flight request and exits 0")
    except BaseException:
        ok = False
        srv.dump_log()
        raise
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
    if ok:
        print("SERVE_OPENAI_OK")


if __name__ == "__main__":
    main()
