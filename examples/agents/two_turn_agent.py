"""A client-mode agent ([env] mode = "client"): the user's own loop, talking to the policy through any OpenAI
client. It asks for a number, then for another one, and is rewarded when the second reply holds a digit.
Uses the official `openai` client when it is installed (TEMPER_AGENT_CLIENT=stdlib forces the standard library).

    [env]
    kind = "program"
    mode = "client"
    program = ["python3", "examples/agents/two_turn_agent.py"]
"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import temper_env  # noqa: E402


def ask(endpoint, messages, max_tokens):
    if os.environ.get("TEMPER_AGENT_CLIENT") != "stdlib":
        try:
            client = endpoint.openai()
        except ImportError:
            client = None
        if client is not None:
            r = client.chat.completions.create(model=endpoint.model, messages=messages, max_tokens=max_tokens)
            return r.choices[0].message.content or ""
    r = endpoint.chat(messages, max_tokens=max_tokens)
    return r["choices"][0]["message"]["content"] or ""


def bad_key_status(endpoint):
    """What the endpoint answers a key that is not this episode's (401 expected)."""
    import urllib.error
    import urllib.request
    import json
    req = urllib.request.Request(endpoint.base_url + "/chat/completions",
                                 data=json.dumps({"model": endpoint.model, "max_tokens": 4,
                                                  "messages": [{"role": "user", "content": "x"}]}).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer wrong"})
    try:
        urllib.request.urlopen(req)
        return 200
    except urllib.error.HTTPError as e:
        return e.code


class TwoTurns(temper_env.Agent):
    def run(self, row, endpoint):
        messages = [{"role": "user", "content": "Say a number between 1 and 9."}]
        first = ask(endpoint, messages, 12)
        messages += [{"role": "assistant", "content": first}, {"role": "user", "content": "Now another one."}]
        second = ask(endpoint, messages, 12)
        got = re.search(r"[0-9]", second) is not None
        return {"reward": 1.0 if got else 0.0, "correct": got,
                "components": {"bad_key_status": bad_key_status(endpoint)}}


if __name__ == "__main__":
    temper_env.serve(TwoTurns)
