"""A reward worker that misbehaves on purpose (tests/reward/test_program_reward.cpp): the mode is argv[1].

ok: reward = len(completion) / 10, components, info; hang: never answers a batch; crash: exits 3 on a batch after
writing to stderr; malformed: answers a batch with a line that is not JSON; wrong_count: one result too few;
slow_start: sleeps 1 s before its greeting; no_start: exits at once with an error on stderr; item_error: reports
an error for items whose completion contains "bad"; hang_once: hangs on the first batch of the first process
(marker file argv[2]), then answers.
"""
import json
import os
import sys
import time

mode = sys.argv[1]
if mode == "no_start":
    print("fake_worker: cannot load my model", file=sys.stderr)
    sys.exit(2)
if mode == "slow_start":
    time.sleep(1.0)
for line in sys.stdin:
    msg = json.loads(line)
    if msg["type"] == "hello":
        print(json.dumps({"ready": True}), flush=True)
        continue
    items = msg["items"]
    if mode == "hang" or (mode == "hang_once" and not os.path.exists(sys.argv[2])):
        if mode == "hang_once":
            open(sys.argv[2], "w").close()
        print("fake_worker: thinking forever", file=sys.stderr, flush=True)
        time.sleep(3600)
    if mode == "crash":
        print("fake_worker: Traceback: ZeroDivisionError", file=sys.stderr, flush=True)
        sys.exit(3)
    if mode == "malformed":
        print("this is not json", flush=True)
        continue
    results = []
    for it in items:
        if mode == "item_error" and "bad" in it["completion"]:
            results.append({"error": "cannot score this one"})
            continue
        results.append({"reward": len(it["completion"]) / 10.0, "components": {"len": len(it["completion"])},
                        "info": "step %d id %s" % (msg["step"], it["id"])})
    if mode == "wrong_count":
        results = results[:-1]
    print(json.dumps({"results": results}), flush=True)
