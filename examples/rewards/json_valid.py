"""JSON-validity reward: the completion is JSON, or holds a ```json (or plain ```) fenced block that is.

The text parsed is the first ```json block if there is one, else the first ``` block, else the whole completion
(trimmed). Required keys come from the row's column "required_keys" (a list, or a comma-separated string) or,
for every row, from --required-keys a,b,c / JSON_REQUIRED_KEYS; the row's wins.
    reward = 0                                          does not parse
           = 0.5 + 0.5 * (required keys present / required)   parses (1 when nothing is required)
Keys are looked up in a top-level object (a list or a scalar has none of them). Components: "parses" (0/1) and
"keys" (the share of required keys present, 1 when none are required).

    [[reward]]
    name = "json"
    program = ["python3", "examples/rewards/json_valid.py"]

    {"prompt": "Describe Paris as JSON with keys name and country.", "required_keys": ["name", "country"]}
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from temper_reward import reward  # noqa: E402

FENCE_JSON = re.compile(r"```[ \t]*json[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
FENCE_ANY = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)


def key_list(v):
    if v is None:
        return []
    if isinstance(v, str):
        return [k.strip() for k in v.split(",") if k.strip()]
    return [str(k) for k in v]


ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
ap.add_argument("--required-keys", default=os.environ.get("JSON_REQUIRED_KEYS", ""))
DEFAULT_KEYS = key_list(ap.parse_args(sys.argv[1:] if __name__ == "__main__" else []).required_keys)


def json_text(completion):
    m = FENCE_JSON.search(completion) or FENCE_ANY.search(completion)
    return (m.group(1) if m else completion).strip()


@reward
def json_valid(completion, required_keys=None):
    keys = key_list(required_keys) if required_keys is not None else DEFAULT_KEYS
    try:
        value = json.loads(json_text(completion or ""))
    except ValueError as e:
        return {"reward": 0.0, "components": {"parses": 0.0, "keys": 0.0}, "info": "not JSON: %s" % e}
    have = [k for k in keys if isinstance(value, dict) and k in value]
    share = len(have) / len(keys) if keys else 1.0
    missing = [k for k in keys if k not in have]
    return {"reward": 0.5 + 0.5 * share, "components": {"parses": 1.0, "keys": share},
            "info": "valid JSON" + ("; missing " + ", ".join(missing) if missing else "")}


if __name__ == "__main__":
    json_valid.serve()
