#!/usr/bin/env python3
"""Synthetic users with latent styles for the Turing-RL experiment (spec methods-other section 2, CPU
miniature). Each user has a casing (lower, UPPER, Title), a pet word that opens most turns, a preferred
length (short: 2-3 topic words, long: 4-6) and a habitual ending (! ? ... .). A conversation item: the user's
3 earlier turns (random topics), the assistant's question on a topic, and the user's real next turn: the pet
word, then topic words drawn at random (one-to-many: many real turns are equally right), in the user's
casing and ending. The first-person reasoning names the topic. Writes train.jsonl and eval.jsonl (task
user_sim) with disjoint conversations; users are shared so per-user diversity can be measured.
Usage: make_data.py OUT_DIR [--users 8] [--train 6000] [--eval 400] [--seed 1]"""
import argparse, json, os, random

TOPICS = {
    "food": ("What did you eat today?", "pizza pasta soup salad rice bread cheese tacos noodles curry".split()),
    "music": ("What are you listening to?", "jazz rock drums piano songs album guitar concert band vinyl".split()),
    "travel": ("Where are you going next?", "train beach paris hotel flight island mountains road map tokyo".split()),
    "work": ("How is work going?", "meeting boss emails deadline project office coffee report desk team".split()),
    "pets": ("How are your pets?", "puppy kitten parrot hamster walks treats fish bunny leash vet".split()),
    "weather": ("How is the weather there?", "rain snow sunny windy cold storm clouds heat fog umbrella".split()),
    "games": ("Played anything fun lately?", "chess puzzle cards dice zelda tetris arcade level boss quest".split()),
    "books": ("Reading anything good?", "novel poems comics mystery library chapter author fantasy pages story".split()),
}
PETS = ["lol", "honestly", "hmm", "yay", "ugh", "tbh", "well", "omg"]
CASES = ["lower", "upper", "title"]
ENDS = ["!", "?", "...", "."]


def make_users(n, rng):
    users = []
    for u in range(n):
        users.append({"id": f"u{u}", "case": CASES[u % 3], "pet": PETS[u % len(PETS)], "long": u % 2 == 1, "end": ENDS[(u // 2) % 4]})
    return users


def turn(user, topic, rng):
    words = TOPICS[topic][1]
    k = rng.randint(4, 6) if user["long"] else rng.randint(2, 3)
    body = rng.sample(words, k)
    parts = ([user["pet"]] if rng.random() < 0.85 else []) + body
    s = " ".join(parts)
    if user["case"] == "upper":
        s = s.upper()
    elif user["case"] == "title":
        s = " ".join(w.capitalize() for w in s.split())
    return s + user["end"]


def item(user, rng, n):
    topic = rng.choice(list(TOPICS))
    history = [turn(user, rng.choice(list(TOPICS)), rng) for _ in range(3)]
    return {"id": f"{user['id']}-{n}", "user": user["id"], "history": history,
            "context": [{"role": "assistant", "content": TOPICS[topic][0]}],
            "reply": turn(user, topic, rng), "reasoning": f"about {topic}"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--users", type=int, default=8)
    ap.add_argument("--train", type=int, default=6000)
    ap.add_argument("--eval", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    users = make_users(a.users, rng)
    os.makedirs(a.out, exist_ok=True)
    for name, n in (("train", a.train), ("eval", a.eval)):
        tmp = os.path.join(a.out, name + ".jsonl.tmp")
        with open(tmp, "w") as f:
            for i in range(n):
                f.write(json.dumps(item(users[i % len(users)], rng, f"{name}{i}")) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(a.out, name + ".jsonl"))
    json.dump(users, open(os.path.join(a.out, "users.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
