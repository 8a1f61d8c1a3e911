#!/usr/bin/env python3
"""Write tests/data/chat_templates/renders.json: transformers' chat-template renders of real model
templates, and small Jinja2 snippets, for temper's Jinja interpreter (src/temper/text/jinja/).

Reference script only (Python is never part of the engine). Run from the repository root with the
pinned environment (tools/ref/requirements.txt: transformers 4.51.3, Jinja2 3.1.6) after
scripts/bootstrap has extracted llama.cpp's templates into .cache/llamacpp/templates/:

    .venv/bin/python tools/ref/make_chat_template_goldens.py

Renders go through transformers' own machinery: _compile_jinja_template (ImmutableSandboxedEnvironment,
trim_blocks, lstrip_blocks, loopcontrols, its tojson, raise_exception, strftime_now) and the
render call apply_chat_template makes (messages, tools, documents=None, add_generation_prompt,
the special tokens, extra kwargs). strftime_now's clock is pinned to 2024-07-26 12:00 (the tests pin
the same). A render that raises is recorded as {"error": <message>}: temper must refuse it too.

The template files are not committed (they are llama.cpp's copies of the models' templates);
renders.json keeps each one's sha256 so a changed cache is detected. Templates from
tests/data/tokenizer/*/tokenizer_config.json (SmolLM2's GGUF template, Qwen2's, Llama-3's) are
rendered too. No Gemma-3 template is in the cache (gemma-2 and gemma-4 are).
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

# name: (source, bos, eos); source "cache:<file>" or "tokenizer:<dir>".
MAIN = {
    "llama3.1": ("cache:meta-llama-Llama-3.1-8B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"),
    "llama3.2": ("cache:meta-llama-Llama-3.2-3B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"),
    "llama3.3": ("cache:meta-llama-Llama-3.3-70B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"),
    "qwen2.5": ("cache:Qwen-Qwen2.5-7B-Instruct.jinja", None, "<|im_end|>"),
    "qwen3": ("cache:Qwen-Qwen3-0.6B.jinja", None, "<|im_end|>"),
    "mistral-nemo": ("cache:mistralai-Mistral-Nemo-Instruct-2407.jinja", "<s>", "</s>"),
    "gemma2": ("cache:google-gemma-2-2b-it.jinja", "<bos>", "<eos>"),
    "phi3.5": ("cache:microsoft-Phi-3.5-mini-instruct.jinja", "<s>", "<|endoftext|>"),
    "smollm3": ("cache:HuggingFaceTB-SmolLM3-3B.jinja", None, "<|im_end|>"),
    "smollm2": ("tokenizer:smollm2", None, None),
    "qwen2": ("tokenizer:qwen2", None, None),
    "llama3": ("tokenizer:llama3", None, None),
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
                "days": {"type": "integer", "description": "Forecast days", "default": 1},
            },
            "required": ["city"],
        },
        "return": {"type": "string"},
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Current time — in a time zone (ünïcode).",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": []},
    },
}


def call(name, args, cid):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


CONVERSATIONS = {
    "single_user": [{"role": "user", "content": "Hello!"}],
    "with_system": [
        {"role": "system", "content": "You are terse.  "},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": " And 3+3? "},
    ],
    "no_system": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
    ],
    "unicode": [
        {"role": "user", "content": "héllo — 世界 🙂 \"quotes\" 'single' \\ back\tslash\nnew line  "},
        {"role": "assistant", "content": "\n  Réponse: {'a': 1} {{ not jinja }} {% raw %}\n"},
        {"role": "user", "content": "<|im_end|> is text here"},
    ],
    "tool_call": [
        {"role": "system", "content": "Use tools when needed."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [call("get_weather", {"city": "Paris", "unit": "celsius"},
                                                                   "abc123def")]},
        {"role": "tool", "tool_call_id": "abc123def", "name": "get_weather", "content": "22 degrees, sunny"},
        {"role": "assistant", "content": "It is 22°C and sunny in Paris."},
    ],
    "tool_dict_result": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [call("get_weather", {"city": "Oslo", "days": 2},
                                                                   "xyz987uvw")]},
        {"role": "tool", "tool_call_id": "xyz987uvw", "name": "get_weather",
         "content": {"temperature": 22.5, "unit": "celsius", "ok": True, "note": None, "it's": [1, 2.0]}},
    ],
    "two_tool_calls": [
        {"role": "user", "content": "Weather and time in Rome?"},
        {"role": "assistant", "content": "Checking both.", "tool_calls": [
            call("get_weather", {"city": "Rome"}, "call00001"), call("get_time", {"tz": "Europe/Rome"}, "call00002")]},
        {"role": "tool", "tool_call_id": "call00001", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call00002", "content": "14:05"},
        {"role": "assistant", "content": "Sunny, 14:05."},
        {"role": "user", "content": "Thanks"},
    ],
    "thinking": [
        {"role": "user", "content": "What is 6*7?"},
        {"role": "assistant", "content": "<think>\n6*7 = 42\n</think>\n\n42"},
        {"role": "user", "content": "And 7*8?"},
        {"role": "assistant", "content": "56", "reasoning_content": "7*8 is 56."},
    ],
    "thinking_last_user": [
        {"role": "system", "content": "Think step by step. /no_think"},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "<think>greeting</think>Hello!"},
        {"role": "user", "content": "<tool_response>x</tool_response>"},
    ],
    "system_only": [{"role": "system", "content": "Only a system message."}],
    "bad_alternation": [
        {"role": "user", "content": "one"},
        {"role": "user", "content": "two"},
    ],
}

TOOLS = {"tool_call": [WEATHER_TOOL], "tool_dict_result": [WEATHER_TOOL],
         "two_tool_calls": [WEATHER_TOOL, TIME_TOOL]}

# Extra kwargs per template (each also rendered without).
KWARGS = {
    "llama3.1": [{"date_string": "26 Jul 2024"}, {"tools_in_user_message": False}],
    "llama3.2": [{"date_string": "01 Jan 2025"}],
    "qwen3": [{"enable_thinking": False}, {"enable_thinking": True}],
    "smollm3": [{"enable_thinking": False}],
}

EXTRA_CONVERSATIONS = ["single_user", "with_system", "tool_call"]


def load_source(src):
    kind, path = src.split(":", 1)
    if kind == "cache":
        with open(os.path.join(CACHE, path), encoding="utf-8") as f:
            return f.read(), os.path.join(CACHE, path)
    with open(f"tests/data/tokenizer/{path}/tokenizer_config.json", encoding="utf-8") as f:
        cfg = json.load(f)
    return cfg["chat_template"], f"tests/data/tokenizer/{path}/tokenizer_config.json"


def render(template, messages, tools, add_gen, tokens, kwargs):
    """apply_chat_template's render call (tokenization_utils_base.py, 4.51.3)."""
    compiled = ctu._compile_jinja_template(template)
    template_kwargs = {**tokens, **kwargs}
    try:
        return {"text": compiled.render(messages=messages, tools=tools, documents=None,
                                        add_generation_prompt=add_gen, **template_kwargs)}
    except Exception as e:  # noqa: BLE001 - the golden records what the reference refuses
        return {"error": f"{type(e).__name__}: {e}"}


def template_entries(args):
    entries = {}
    for name, (src, bos, eos) in MAIN.items():
        source, path = load_source(src)
        if src.startswith("tokenizer:"):
            with open(path, encoding="utf-8") as f:
                cfg = json.load(f)
            bos, eos = cfg.get("bos_token"), cfg.get("eos_token")
        entries[name] = {"path": path, "bos_token": bos, "eos_token": eos, "main": True, "source": source}
    if args.extras:
        for fn in sorted(os.listdir(CACHE)):
            path = os.path.join(CACHE, fn)
            if not fn.endswith(".jinja") or any(e["path"] == path for e in entries.values()):
                continue
            with open(path, encoding="utf-8") as f:
                entries[fn[:-len(".jinja")]] = {"path": path, "bos_token": "<s>", "eos_token": "</s>", "main": False,
                                                "source": f.read()}
    for e in entries.values():
        e["sha256"] = hashlib.sha256(e["source"].encode("utf-8")).hexdigest()
    return entries


def renders_for(name, e):
    tokens = {k: v for k, v in (("bos_token", e["bos_token"]), ("eos_token", e["eos_token"])) if v is not None}
    convs = CONVERSATIONS if e["main"] else EXTRA_CONVERSATIONS
    out = []
    for conv in convs:
        gens = (True, False) if e["main"] else (True,)
        for kw in [{}] + (KWARGS.get(name, []) if e["main"] else []):
            for gen in gens:
                r = {"template": name, "conversation": conv, "add_generation_prompt": gen, "kwargs": kw,
                     "tools": conv in TOOLS}
                r.update(render(e["source"], CONVERSATIONS[conv], TOOLS.get(conv), gen, tokens, kw))
                out.append(r)
    return out


# Small templates for the interpreter's constructs: (template, variables).
SNIPPETS = [
    ("{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 2 ** 10 }}", {}),
    ("{{ 7 / 2 }}|{{ 4 / 2 }}|{{ 1.5 + 1 }}|{{ 0.1 + 0.2 }}|{{ 1e20 }}|{{ 1.0e-5 }}|{{ 123456789.0 * 10 }}", {}),
    ("{{ 2 ** -1 }}|{{ 10 ** 15 * 1.0 }}|{{ 10 ** 16 * 1.0 }}|{{ -0.0 }}|{{ 3.0 }}|{{ 1_000 }}", {}),
    ("{{ 'a' ~ 1 ~ none ~ true ~ 2.5 }}|{{ 'x' + 'y' }}|{{ [1] + [2, 3] }}|{{ 'ab' * 3 }}", {}),
    ("{{ true }}{{ True }}{{ false }}{{ none }}{{ None }}|{{ undefined_name }}|{{ [1, 'a', none, true, 2.0] }}", {}),
    ("{{ {'a': 1, 'b': [1, 2], 'c': {'d': none}} }}|{{ (1, 'x') }}|{{ (1,) }}|{{ {'q': \"it's\"} }}", {}),
    ("{{ \"a\\nb\\tc\\\\d\\'e\\\"f\\u00e9\\x41\" }}|{{ 'adjacent' 'strings' }}", {}),
    ("{% if a %}A{% elif b %}B{% else %}C{% endif %}{% if not a and b or c %}!{% endif %}", {"a": 0, "b": 1, "c": 0}),
    ("{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 1 == 1.0 }}{{ true == 1 }}{{ 'a' != 'b' }}{{ 'b' >= 'a' }}{{ [1,2] < [1,3] }}",
     {}),
    ("{{ 'ell' in 'hello' }}{{ 2 in [1, 2] }}{{ 'k' in {'k': 1} }}{{ 3 not in [1] }}{{ 'z' not in 'abc' }}", {}),
    ("{{ 'yes' if x else 'no' }}|{{ 'yes' if y }}|{{ x or 'd' }}|{{ y and 'd' }}|{{ y or '' }}|{{ x and y }}",
     {"x": 1, "y": 0}),
    ("{% for i in items %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
     "{{ loop.first }}{{ loop.last }}{{ loop.length }}[{{ loop.previtem }}|{{ loop.nextitem }}] {% endfor %}",
     {"items": ["a", "b", "c"]}),
    ("{% for i in range(10) if i is odd %}{{ i }}{{ loop.index }}/{{ loop.length }} {% else %}none{% endfor %}|"
     "{% for i in [] %}x{% else %}empty{% endfor %}", {}),
    ("{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}"
     "{% endfor %}|{{ range(3) | list }}|{{ range(1, 10, 3) | list }}|{{ range(5, 0, -2) | list }}", {}),
    ("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for k in d %}{{ k }}{% endfor %}|"
     "{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}|{% for c in 'hé' %}[{{ c }}]{% endfor %}",
     {"d": {"z": 1, "a": 2}}),
    ("{% for i in range(3) %}{% if i == 0 %}{% set x = 5 %}{% endif %}[{{ x }}]{% endfor %}|{{ x }}", {}),
    ("{% set x = 1 %}{% for i in range(3) %}[{{ x }}]{% set x = i + 10 %}({{ x }}){% endfor %}|{{ x }}", {}),
    ("{% set ns = namespace(n=0, items=[]) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"
     "|{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set s %}block {{ a }}{% endset %}[{{ s }}]", {}),
    ("{% set s | upper %}up {{ 1 }}{% endset %}{{ s }}|{% filter upper %}f{{ 'x' }}{% endfilter %}", {}),
    ("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} "
     "{{ greet(punct='.', name='C') }}", {}),
    ("{% macro m(a) %}{{ a }}{{ y }}{% endmacro %}{% set y = 3 %}{{ m(1) }}{% set y = 4 %}{{ m(2) }}", {}),
    ("{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}inside{% endcall %}", {}),
    ("{{ x is defined }}{{ y is undefined }}{{ none is none }}{{ 1 is number }}{{ 1 is integer }}{{ 1.0 is float }}"
     "{{ 's' is string }}{{ {} is mapping }}{{ [] is iterable }}{{ 's' is sequence }}{{ x is not none }}",
     {"x": 1}),
    ("{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}{{ 1 is eq 1 }}{{ 1 is ne 2 }}"
     "{{ true is true }}{{ 1 is true }}{{ false is false }}{{ true is boolean }}{{ range is callable }}"
     "{{ 2 is gt 1 }}{{ 2 is lt 1 }}{{ 'a' is in 'abc' }}{{ 'ab' is lower }}{{ 'AB' is upper }}", {}),
    ("{{ '  x y  ' | trim }}|{{ 'xxhixx' | trim('x') }}|{{ 'abc' | upper }}|{{ 'ÀBC' | lower }}|"
     "{{ 'hello wORLD-foo(bar' | title }}|{{ 'hELLO' | capitalize }}|{{ 'aaa' | replace('a', 'b', 2) }}", {}),
    ("{{ [1, 2, 3] | join(', ') }}|{{ 'abc' | join('-') }}|{{ [1, 2] | first }}|{{ [1, 2] | last }}|"
     "{{ 'héllo' | length }}|{{ {'a': 1} | count }}|{{ 'ab' | list }}|{{ {'a': 1, 'b': 2} | list }}", {}),
    ("{{ undefined_x | default('d') }}|{{ none | default('d') }}|{{ '' | default('d', true) }}|{{ 0 | d(5) }}|"
     "{{ 5 | string }}{{ '5' | int + 1 }}{{ '2.5' | float }}{{ 'x' | int }}{{ -3 | abs }}{{ 2.5 | round }}"
     "{{ 3.14159 | round(2) }}", {}),
    ("{{ d | items | list }}|{{ d | dictsort }}|{{ d | dictsort(reverse=true) }}|{{ d | tojson }}",
     {"d": {"b": 1, "A": 2, "c": 3}}),
    ("{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') }}|"
     "{{ ms | rejectattr('role', 'eq', 'user') | list | length }}|{{ ms | map(attribute='missing', default='?') | list }}"
     "|{{ ms | selectattr('flag') | list | length }}|{{ [1, 2, 3, 4] | select('even') | list }}|"
     "{{ [1, 0, 2] | reject | list }}|{{ ['a', 'b'] | map('upper') | list }}",
     {"ms": [{"role": "user", "content": "u1", "flag": True}, {"role": "assistant", "content": "a1"},
             {"role": "user", "content": "u2"}]}),
    ("{{ ['b', 'A', 'c', 'a'] | sort }}|{{ ['b', 'A', 'c'] | sort(case_sensitive=true) }}|{{ [3, 1, 2] | sort("
     "reverse=true) }}|{{ ms | sort(attribute='n') | map(attribute='n') | list }}|{{ ['a', 'A', 'b'] | unique | list }}"
     "|{{ [1, 2, 3] | reverse | list }}|{{ 'abc' | reverse }}|{{ [3, 1, 2] | max }}{{ [3, 1, 2] | min }}"
     "{{ [1, 2, 3] | sum }}", {"ms": [{"n": 2}, {"n": 1}, {"n": 3}]}),
    ("{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent(width='> ', blank=true) }}"
     "|{{ 'one two  three' | wordcount }}|[{{ 'ab' | center(7) }}]|{{ [1, 2, 3, 4, 5] | batch(2) | list }}|"
     "{{ '%s-%d' | format('a', 3) }}|{{ '<a&b>' | e }}|{{ 'x' | safe }}", {}),
    ("{{ v | tojson }}|{{ v | tojson(indent=2) }}|{{ v | tojson(sort_keys=true) }}|"
     "{{ v | tojson(separators=(',', ':')) }}|{{ 'é\"\\n\\u0001' | tojson }}|{{ 'é' | tojson(ensure_ascii=true) }}",
     {"v": {"b": [1, 2.5, None, True], "a": {"x": "y"}, "e": [], "f": {}}}),
    ("{{ '  a b  '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'xxaxx'.rstrip('x') }}|{{ 'a,b,,c'.split(',') }}|"
     "{{ ' a  b '.split() }}|{{ 'a,b,c'.split(',', 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ 'abc'.startswith('ab') }}"
     "{{ 'abc'.endswith(('x', 'c')) }}|{{ 'abc'.upper() }}{{ 'ABC'.lower() }}|{{ 'hello world'.title() }}|"
     "{{ 'a-b'.replace('-', '+') }}|{{ '{} and {}'.format(1, 'x') }}|{{ '-'.join(['a', 'b']) }}|"
     "{{ 'héllo'.find('l') }}{{ 'hello'.count('l') }}", {}),
    ("{{ d.get('a') }}{{ d.get('z') }}{{ d.get('z', 'dflt') }}|{{ d.keys() | list }}|{{ d.values() | list }}|"
     "{{ d.a }}{{ d['a'] }}|{{ d.missing is defined }}|{{ l[0] }}{{ l[-1] }}{{ l.0 }}|{{ l[5] is defined }}",
     {"d": {"a": 1, "b": 2}, "l": [10, 20, 30]}),
    ("{{ l[1:] }}|{{ l[:-1] }}|{{ l[::-1] }}|{{ l[::2] }}|{{ s[1:3] }}|{{ s[-2:] }}|{{ s[::-1] }}|{{ l[10:] }}",
     {"l": [1, 2, 3, 4], "s": "héllo"}),
    ("a  \n  {% if true %}\n    b\n  {% endif %}\n  c {{ 'x' }}  \n  {#- comment #}  d\n{%- if true -%}  e  {%- endif %}\n",
     {}),
    ("{% for i in [1, 2] %}\n  {{ i }}\n{% endfor %}\n{%+ if true %}kept{% endif +%}\nline\n  {# c #}\nafter", {}),
    ("{% raw %}{{ not rendered }} {% if %}{% endraw %}|{{- '  x  ' -}}  |  {{ 'y' }}\n", {}),
    ("{% generation %}gen {{ 1 }}{% endgeneration %}|{{ strftime_now('%d %b %Y %H:%M') }}", {}),
    ("{{ 'a' | safe + '<b>' }}|{{ '<b>' + 'a' | safe }}|{{ 'x' | safe ~ '<' }}|{{ '<' | e }}{{ '<' | e | e }}|"
     "{{ ('<p>' | safe).upper() }}{{ '<p>' | safe | upper + '&' }}", {}),
    ("{% if [] | select %}truthy{% endif %}|{{ none | selectattr('a') | list }}|{{ none | map('upper') | list }}|"
     "{{ [3, 1] | reverse | list }}|{{ {'a': 1}.items() | list }}|{{ (1, 2) == [1, 2] }}|{{ [1] | map('string') is "
     "sequence }}", {}),
    ("{% set d = {0: 'a', 512: 'b', 1.5: 'c', none: 'n', true: 't'} %}{{ d[512] }}{{ d[0] }}{{ d[1] }}{{ d[none] }}|"
     "{{ d }}|{{ d | tojson }}|{{ 512 in d }}{{ 1.0 in {1: 2} }}", {}),
    ("{% set n = {3: 'c', 1: 'a', 2: 'b'} %}{% for k, v in n | dictsort %}{{ k }}{{ v }}{% endfor %}|"
     "{{ '%s and %s' % ('a', 'b') }}|{{ '%d%%' % 5 }}", {}),
    ("{%- set x = 1 -%}\n  [{{ x }}]  \n  {# c #}\n\t{% if x %}\n  yes\n\t{%- endif %}\n{{- ' end' }}\n", {}),
    ("{{ 3 | round }}|{{ 2.5 | round }}|{{ 'ab1' is lower }}{{ '1' is lower }}{{ none is upper }}|{{ 2.5 is odd }}"
     "{{ 4.0 is even }}{{ 7.5 is divisibleby 2.5 }}|{{ [1, 2, 1].count(1) }}{{ [1, 2, 1].index(2) }}|"
     "{{ 'ab' % [] }}{{ 'ab' % {} }}|{{ (1, 2) in {'k': 1} }}|{{ (1, 2) * 2 }}", {}),
    ("{% if 5 | map('string') %}lazy{% endif %}|{% if 5 | batch(2) %}lazy{% endif %}|{{ nope | items | list }}|"
     "{{ [1, 2] | select | reverse }}|{{ {'a': 1} | items | reverse }}", {}),
    ("{{ [1] in {'k': 1} }}", {}),
    ("{{ 5 | map('string') | list }}", {}),
    ("{{ 'ab' % 1 }}", {}),
    ("{{ nope | int }}", {}),
    ("{{ [1, 2] | map('string') | length }}", {}),
    ("{{ [1] | map('string') | tojson }}", {}),
    ("{{ raise_exception('custom failure: ' ~ 42) }}", {}),
    ("{{ x.y.z }}", {}),
    ("{{ 1 + 'a' }}", {}),
    ("{{ [1, 2].append(3) }}", {}),
    ("{{ 1 // 0 }}", {}),
]


def snippets():
    out = []
    for src, variables in SNIPPETS:
        r = {"template": src, "vars": variables}
        try:
            r["text"] = ctu._compile_jinja_template(src).render(**variables)
        except Exception as e:  # noqa: BLE001
            r["error"] = f"{type(e).__name__}: {e}"
        out.append(r)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/chat_templates/renders.json")
    ap.add_argument("--no-extras", dest="extras", action="store_false",
                    help="only the main templates (not every other template in the cache)")
    args = ap.parse_args()
    entries = template_entries(args)
    renders = []
    for name, e in entries.items():
        renders.extend(renders_for(name, e))
    golden = {
        "generator": "tools/ref/make_chat_template_goldens.py",
        "versions": {"transformers": transformers.__version__, "jinja2": jinja2.__version__},
        "pinned_now": PINNED.isoformat(),
        "templates": {n: {k: e[k] for k in ("path", "sha256", "bos_token", "eos_token", "main")}
                      for n, e in entries.items()},
        "conversations": CONVERSATIONS,
        "tools": TOOLS,
        "renders": renders,
        "snippets": snippets(),
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n_err = sum("error" in r for r in renders)
    print(f"{args.out}: {len(entries)} templates, {len(renders)} renders ({n_err} refused), "
          f"{len(golden['snippets'])} snippets, {os.path.getsize(args.out)} bytes")


if __name__ == "__main__":
    main()
