"""SFT rows for the built-in guessing environment ([env] kind = "guess"): games played with a weak strategy, a
random guess inside the range the feedback left (not the midpoint), one row per assistant turn in TRL's
conversational form. SFT teaches the format and to stay inside the range; GRPO can then shorten the games.

    python3 examples/envs/guess_sft.py 200 16 > runs/guess_sft.jsonl     # games, n
"""
import json
import random
import sys


def main():
    games = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    prompt = "I'm thinking of a number between 1 and %d. Guess it; I'll say higher or lower." % n
    for i in range(games):
        secret, lo, hi = rng.randint(1, n), 1, n
        history = [{"role": "user", "content": prompt}]
        while True:
            g = rng.randint(lo, hi)
            turn = {"role": "assistant", "content": "My guess is %d." % g}
            print(json.dumps({"index": i, "messages": history + [turn]}))
            if g == secret:
                break
            reply = "higher" if g < secret else "lower"
            lo, hi = (g + 1, hi) if g < secret else (lo, g - 1)
            history = history + [turn, {"role": "user", "content": reply}]


if __name__ == "__main__":
    main()
