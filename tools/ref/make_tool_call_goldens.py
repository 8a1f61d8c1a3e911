#!/usr/bin/env python3
"""Write tests/data/tool_calls/goldens.json: transformers' renders of conversations with assistant
tool calls, for temper's tool-call parser and continuation renderer (src/temper/text/tool_calls.h,
chat_delta.h).

Reference script only. Run from the repository root with the pinned environment (transformers
4.51.3, Jinja2 3.1.6) after scripts/bootstrap has extracted llama.cpp's templates into
.cache/llamacpp/templates/:

    .venv/bin/python tools/ref/make_tool_call_goldens.py

Each case is what a model generated in an assistant turn in its own tool-call syntax (`generated`,
without the end-of-turn marker), the assistant message that text stands for (`message`, written
here by hand in transformers' convention: function.arguments a dict), the history before it and the
messages after it (tool results, a user turn). Renders go through transformers' own
_compile_jinja_template and the render call apply_chat_template makes (as
make_chat_template_goldens.py; strftime_now pinned to 2024-07-26 12:00):
  prompt          render(history, add_generation_prompt=True)
  with_assistant  render(history + [message], False)
  full            render(history + [message] + after, True)
(each stored as an edit of the render before it: see "keep"/"add" in main)
and two facts temper's tests assert too:
  turn_is_generated  with_assistant == prompt + generated + eos + whitespace (the sampled tokens are
                     the training render of the turn)
  full_is_append     full starts with with_assistant (the continuation is an append)
"""
import argparse
import datetime as real_datetime
import hashlib
import json
import os

import jinja2
import transformers
import transformers.utils.chat_template_utils as ctu

PINNED = real_datetime.datetime(2024, 7, 26, 12, 0, 0)


class _PinnedDatetime(real_datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return PINNED


ctu.datetime = _PinnedDatetime

CACHE = ".cache/llamacpp/templates"

# name: (cache file, bos, eos): eos is the end-of-turn the model stops on.
TEMPLATES = {
    "qwen2.5": ("Qwen-Qwen2.5-7B-Instruct.jinja", None, "<|im_end|>"),
    "qwen3": ("Qwen-Qwen3-0.6B.jinja", None, "<|im_end|>"),
    "hermes3": ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "<|begin_of_text|>", "<|im_end|>"),
    "llama3.1": ("meta-llama-Llama-3.1-8B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"),
    "llama3.2": ("meta-llama-Llama-3.2-3B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"),
    "mistral-nemo": ("mistralai-Mistral-Nemo-Instruct-2407.jinja", "<s>", "</s>"),
    "mistral-small-3.2": ("Mistral-Small-3.2-24B-Instruct-2506.jinja", "<s>", "</s>"),
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Current time in a time zone.",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string", "description": "IANA zone"}},
                       "required": ["tz"]},
    },
}
TOOLS = [WEATHER_TOOL, TIME_TOOL]


def call(cid, name, args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def assistant(content, *calls):
    m = {"role": "assistant", "content": content}
    if calls:
        m["tool_calls"] = list(calls)
    return m


def tool(cid, name, content):
    return {"role": "tool", "content": content, "tool_call_id": cid, "name": name}


SYSTEM = {"role": "system", "content": "Use tools when needed."}
ASK_PARIS = {"role": "user", "content": "Weather in Paris?"}
ASK_ROME = {"role": "user", "content": "Weather and time in Rome?"}
THANKS = {"role": "user", "content": "Thanks!"}
PARIS = {"city": "Paris", "unit": "celsius"}

HERMES_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>'
HERMES_TWO = ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>\n'
              '<tool_call>\n{"name": "get_time", "arguments": {"tz": "Europe/Rome"}}\n</tool_call>')
TWO_CALLS = [call("call_1", "get_weather", {"city": "Rome"}), call("call_2", "get_time", {"tz": "Europe/Rome"})]
TWO_RESULTS = [tool("call_1", "get_weather", "sunny, 24 degrees"), tool("call_2", "get_time", "14:05")]
ANSWER = "It is 22°C and sunny in Paris."
PARIS_DONE = [SYSTEM, ASK_PARIS, assistant("", call("call_1", "get_weather", PARIS)),
              tool("call_1", "get_weather", "22 degrees, sunny")]


def case(name, template, history, generated, message, after, kwargs=None):
    return {"template": template, "name": name, "kwargs": kwargs or {}, "history": history,
            "generated": generated, "message": message, "after": after}


CASES = [
    # Qwen2.5: content, then "\n<tool_call>..." per call.
    case("call", "qwen2.5", [SYSTEM, ASK_PARIS], HERMES_CALL, assistant("", call("call_1", "get_weather", PARIS)),
         [tool("call_1", "get_weather", "22 degrees, sunny")]),
    case("content_two_calls", "qwen2.5", [SYSTEM, ASK_ROME], "Checking both.\n" + HERMES_TWO,
         assistant("Checking both.", *TWO_CALLS), TWO_RESULTS),
    case("answer", "qwen2.5", PARIS_DONE, ANSWER, assistant(ANSWER), [THANKS]),
    # Qwen3: a last assistant turn renders its <think> block; a non-last one only when it has reasoning.
    case("think_call", "qwen3", [SYSTEM, ASK_PARIS],
         "<think>\nThe user wants the weather in Paris.\n</think>\n\n" + HERMES_CALL,
         assistant("<think>\nThe user wants the weather in Paris.\n</think>", call("call_1", "get_weather", PARIS)),
         [tool("call_1", "get_weather", "22 degrees, sunny")]),
    case("think_content_two_calls", "qwen3", [SYSTEM, ASK_ROME],
         "<think>\nTwo tools.\n</think>\n\nChecking both.\n" + HERMES_TWO,
         assistant("<think>\nTwo tools.\n</think>\n\nChecking both.", *TWO_CALLS), TWO_RESULTS),
    case("no_think_call", "qwen3", [SYSTEM, ASK_PARIS], HERMES_CALL, assistant("", call("call_1", "get_weather", PARIS)),
         [tool("call_1", "get_weather", "22 degrees, sunny")], {"enable_thinking": False}),
    case("think_answer_then_user", "qwen3", PARIS_DONE, "<think>\nDone.\n</think>\n\n" + ANSWER,
         assistant("<think>\nDone.\n</think>\n\n" + ANSWER), [THANKS]),
    # Hermes-3: needs tools; drops an assistant's content when it has tool calls.
    case("call", "hermes3", [ASK_PARIS], HERMES_CALL, assistant("", call("call_1", "get_weather", PARIS)),
         [tool("call_1", "get_weather", "22 degrees, sunny")]),
    case("two_calls", "hermes3", [ASK_ROME], HERMES_TWO, assistant("", *TWO_CALLS), TWO_RESULTS),
    case("content_call", "hermes3", [ASK_PARIS], "Let me check.\n" + HERMES_CALL,
         assistant("Let me check.", call("call_1", "get_weather", PARIS)),
         [tool("call_1", "get_weather", "22 degrees, sunny")]),
    case("answer", "hermes3", PARIS_DONE, ANSWER, assistant(ANSWER), [THANKS]),
    # Llama-3.1/3.2: {"name", "parameters"}; one call per turn; tool results as ipython turns.
    case("call", "llama3.1", [SYSTEM, ASK_PARIS], '{"name": "get_weather", "parameters": {"city": "Paris", '
         '"unit": "celsius"}}', assistant("", call("call_1", "get_weather", PARIS)),
         [tool("call_1", "get_weather", "22 degrees, sunny")]),
    case("python_tag_call", "llama3.1", [SYSTEM, ASK_PARIS], '<|python_tag|>{"name": "get_weather", "parameters": '
         '{"city": "Paris", "unit": "celsius"}}', assistant("", call("call_1", "get_weather", PARIS)),
         [tool("call_1", "get_weather", "22 degrees, sunny")]),
    case("answer", "llama3.1", PARIS_DONE, ANSWER, assistant(ANSWER), [THANKS]),
    case("call", "llama3.2", [ASK_PARIS], '{"name": "get_weather", "parameters": {"city": "Paris", '
         '"unit": "celsius"}}', assistant("", call("call_1", "get_weather", PARIS)),
         [tool("call_1", "get_weather", "22 degrees, sunny")]),
    # Mistral: ids of 9 alphanumerics.
    case("call", "mistral-nemo", [ASK_PARIS], '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", '
         '"unit": "celsius"}, "id": "abc123def"}]', assistant("", call("abc123def", "get_weather", PARIS)),
         [tool("abc123def", "get_weather", "22 degrees, sunny")]),
    case("call_id", "mistral-small-3.2", [ASK_PARIS], '[TOOL_CALLS]get_weather[CALL_ID]abc123def[ARGS]{"city": '
         '"Paris", "unit": "celsius"}', assistant("", call("abc123def", "get_weather", PARIS)),
         [tool("abc123def", "get_weather", "22 degrees, sunny")]),
    case("no_id", "mistral-small-3.2", [ASK_PARIS], '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "unit": '
         '"celsius"}', assistant("", call("call00001", "get_weather", PARIS)),
         [tool("call00001", "get_weather", "22 degrees, sunny")]),
]


def render(template, messages, add_gen, tokens, kwargs):
    """apply_chat_template's render call (tokenization_utils_base.py, 4.51.3)."""
    compiled = ctu._compile_jinja_template(template)
    try:
        return {"text": compiled.render(messages=messages, tools=TOOLS, documents=None,
                                        add_generation_prompt=add_gen, **tokens, **kwargs)}
    except Exception as e:  # noqa: BLE001 - the golden records what the reference refuses
        return {"error": f"{type(e).__name__}: {e}"}


def edit(base, text):
    b, t = base.encode(), text.encode()
    n = len(os.path.commonprefix([b, t]))
    while 0 < n < len(t) and t[n] & 0xC0 == 0x80:
        n -= 1  # never split a UTF-8 character
    return {"keep": n, "add": t[n:].decode()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/data/tool_calls/goldens.json")
    args = ap.parse_args()
    templates, sources = {}, {}
    for name, (fn, bos, eos) in TEMPLATES.items():
        path = os.path.join(CACHE, fn)
        with open(path, encoding="utf-8") as f:
            sources[name] = f.read()
        templates[name] = {"path": path, "sha256": hashlib.sha256(sources[name].encode()).hexdigest(),
                           "bos_token": bos, "eos_token": eos}
    out_cases = []
    for c in CASES:
        t = templates[c["template"]]
        tokens = {k: v for k, v in (("bos_token", t["bos_token"]), ("eos_token", t["eos_token"])) if v}
        src, kw = sources[c["template"]], c["kwargs"]
        prompt = render(src, c["history"], True, tokens, kw)
        with_assistant = render(src, c["history"] + [c["message"]], False, tokens, kw)
        full = render(src, c["history"] + [c["message"]] + c["after"], True, tokens, kw)
        r = {"prompt": prompt, "with_assistant": with_assistant, "full": full}
        assert all("text" in v for v in r.values()), (c["template"], c["name"], r)
        turn = prompt["text"] + c["generated"] + t["eos_token"]
        wa = with_assistant["text"]
        c = dict(c, renders={k: v["text"] for k, v in r.items()},
                 turn_is_generated=wa.startswith(turn) and wa[len(turn):].strip() == "",
                 full_is_append=full["text"].startswith(wa))
        out_cases.append(c)
    # Stored as edits: {"keep": k, "add": s} is base[:k] + s in UTF-8 bytes, the base of a prompt its
    # template's "preamble" (its first case's prompt), of with_assistant the prompt, of full with_assistant.
    for name, t in templates.items():
        t["preamble"] = next(c["renders"]["prompt"] for c in out_cases if c["template"] == name)
    for c in out_cases:
        r = c["renders"]
        c["renders"] = {"prompt": edit(templates[c["template"]]["preamble"], r["prompt"]),
                        "with_assistant": edit(r["prompt"], r["with_assistant"]),
                        "full": edit(r["with_assistant"], r["full"])}
    golden = {
        "generator": "tools/ref/make_tool_call_goldens.py",
        "versions": {"transformers": transformers.__version__, "jinja2": jinja2.__version__},
        "pinned_now": PINNED.isoformat(),
        "templates": templates,
        "tools": TOOLS,
        "cases": out_cases,
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=1)
        f.write("\n")
    for c in out_cases:
        print(f"{c['template']:18} {c['name']:24} turn_is_generated={c['turn_is_generated']!s:5} "
              f"full_is_append={c['full_is_append']}")
    print(f"{args.out}: {len(out_cases)} cases, {os.path.getsize(args.out)} bytes")


if __name__ == "__main__":
    main()
