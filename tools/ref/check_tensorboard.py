#!/usr/bin/env python3
"""Checks temper's TensorBoard event files with tensorboard itself (pinned in requirements.txt).

Runs tests/report/write_tb_events (a run that crashes after step 10 and resumes from step 6, written
through metrics.jsonl + TensorBoard sinks), then reads the directory with tensorboard's EventAccumulator
(CRC-checked TFRecord reader, protobuf Event parsing, SessionLog START purge) and asserts the tags, steps
and values equal those of metrics.jsonl (float32 rounding; null = NaN), with the stale steps 7-10 of
the first file dropped.

    .venv/bin/python tools/ref/check_tensorboard.py --writer build/tests/write_tb_events
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--writer", required=True, help="path of the write_tb_events helper")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = os.path.join(tmp, "run")
        subprocess.run([args.writer, run], check=True)
        files = sorted(f for f in os.listdir(run) if "tfevents" in f)
        assert files == ["events.out.tfevents.1000.testhost", "events.out.tfevents.1001.testhost"], files

        want = {}  # tag -> {step: value}, from metrics.jsonl
        with open(os.path.join(run, "metrics.jsonl")) as f:
            for line in f:
                row = json.loads(line)
                for k, v in row.items():
                    if k in ("step", "kind"):
                        continue
                    want.setdefault(f"{row['kind']}/{k}", {})[row["step"]] = math.nan if v is None else v

        acc = EventAccumulator(run, size_guidance={"scalars": 0})
        acc.Reload()
        tags = sorted(acc.Tags()["scalars"])
        assert tags == sorted(want), (tags, sorted(want))
        assert tags == ["eval/eval_accuracy", "sft/loss", "train/kl", "train/loss", "train/reward_mean"], tags
        checked = 0
        for tag in tags:
            events = acc.Scalars(tag)
            steps = [e.step for e in events]
            assert steps == sorted(want[tag]), (tag, steps, sorted(want[tag]))
            for e in events:
                w = np.float32(want[tag][e.step])
                if math.isnan(w):
                    assert math.isnan(e.value), (tag, e.step, e.value)
                else:
                    assert np.float32(e.value) == w, (tag, e.step, e.value, w)
                checked += 1
        rm = {e.step: e.value for e in acc.Scalars("train/reward_mean")}
        assert list(rm) == list(range(1, 13)), list(rm)
        assert abs(rm[6] - 0.6) < 1e-6 and abs(rm[7] - 1.7) < 1e-6, rm  # step 7 from the resumed file only
        assert [e.step for e in acc.Scalars("eval/eval_accuracy")] == [5, 10]
        assert abs(acc.Scalars("eval/eval_accuracy")[1].value - 1.5) < 1e-6
        assert acc.Scalars("train/loss")[0].wall_time == 1000.0
        print(f"TENSORBOARD_OK {len(tags)} tags, {checked} scalars match metrics.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
