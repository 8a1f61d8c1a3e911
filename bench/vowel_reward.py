# A reward program for timing RL on random-weight models (bench/qlora_rl_random.toml): the fraction of the
# completion's characters that are vowels, which varies across samples where a task's checker always gives 0.
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    if req["type"] == "hello":
        print(json.dumps({"ready": True}), flush=True)
        continue
    out = []
    for it in req["items"]:
        c = it["completion"]
        out.append(sum(ch in "aeiouAEIOU" for ch in c) / max(1, len(c)))
    print(json.dumps({"results": out}), flush=True)
