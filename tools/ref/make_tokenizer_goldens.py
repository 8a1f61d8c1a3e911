#!/usr/bin/env python3
"""Write the tokenizer and chat-template goldens for temper's text tests (tests/data/tokenizer/).

Reference script only (Python is never part of the engine). Run from the repository root with
the pinned environment (tools/ref/requirements.txt: tokenizers 0.21.4, transformers 4.51.3,
gguf 0.17.1, Jinja2 3.1.6):

    .venv/bin/python tools/ref/make_tokenizer_goldens.py
    .venv/bin/python tools/ref/make_tokenizer_goldens.py --out /tmp/tok   # elsewhere

It writes

    corpus.json                   the hostile corpus (~70 strings) + a longer generated text
    smollm2/tokenizer.json        SmolLM2-135M-Instruct's tokenizer (from the GGUF, see below)
    smollm2/tokenizer_config.json bos/eos/pad/unk, add_bos_token=false, chat_template (GGUF's)
    gpt2/ llama3/ qwen2/          small byte-level BPE tokenizers trained here with each family's
                                  exact pre-tokenizer configuration (tokenizer.json, tokenizer_config.json)
    llama2/ mistral/ gemma/       small SentencePiece-style BPE tokenizers (byte_fallback, <0xAB> tokens,
                                  merges generated from scores as transformers' LlamaConverter does) in
                                  each family's pipeline (see SPM below)
    llama2_gguf/ phi3_gguf/       goldens only (ids and decodes; no tokenizer.json: the vocabularies are
                                  not committed) of the real Llama-2 and Phi-3 vocabularies, converted by
                                  transformers from llama.cpp's vocabulary GGUFs (.cache/llamacpp/vocab,
                                  scripts/bootstrap); the tests rebuild them from the GGUF
    <name>/golden.json            for every corpus string: ids (add_special_tokens=False), decode(ids),
                                  decode(ids, skip_special_tokens=True); ids with add_special_tokens=True
                                  for a few strings
    chat.json                     transformers' apply_chat_template renders (SmolLM2, Qwen2, Llama-3
                                  templates) for fixed conversations, and SmolLM2's ids of two renders

SmolLM2. transformers 4.51 builds a fast tokenizer from the GGUF (gguf_file=...), but its GGUF
converter loses two things of the real SmolLM2 tokenizer.json: the Digits(individual_digits=true)
pre-tokenizer step (llama.cpp's pre "smollm" keeps it: a \\p{N} split before the GPT-2 regex)
and add_bos_token=false (the converter adds a TemplateProcessing that prepends <|im_start|>).
We keep the converter's vocabulary and merges (checked equal to the GGUF's tokenizer.ggml.tokens /
merges / token_type) and restore the real configuration: pre_tokenizer Sequence[Digits(individual),
ByteLevel(add_prefix_space=false, use_regex=true)], ByteLevel decoder and post-processor, no
normalizer. Merges are stored in the "a b" string form (the trained tokenizers keep the [a, b]
list form that tokenizers 0.21 writes, so both forms are exercised).

SPM. The trained SentencePiece-style fixtures take each family's tokenizer.json pipeline from
transformers' convert_slow_tokenizer.py: llama2 (LlamaConverter, legacy: normalizer
Sequence[Prepend("▁"), Replace(" ", "▁")], no pre-tokenizer, decoder Sequence[Replace("▁", " "),
ByteFallback, Fuse, Strip(" ", 1, 0)]), mistral (the non-legacy conversion of newer Mistral/Llama
files: no normalizer, Metaspace(prepend_scheme="first", split=false) pre-tokenizer and decoder), gemma
(GemmaConverter: normalizer Replace(" ", "▁"), pre-tokenizer Split(" ", MergedWithPrevious), decoder
Sequence[Replace, ByteFallback, Fuse]). A BpeTrainer learns the pieces from the training text with
every non-Latin character removed, so those characters take the byte fallback; then the vocabulary gets SentencePiece's
layout (specials, the 256 <0xAB> byte tokens, pieces with score -id) and the merges are regenerated
from the scores by transformers' generate_merges, as for a real SentencePiece model.
Llama-2 (llama2_gguf): transformers' GGUF converter (AutoTokenizer.from_pretrained(gguf_file=...)) as it
is: it builds the real Llama-2 pipeline. Phi-3 (phi3_gguf): its GGUF converter (GGUFPhi3Converter)
drops the normalizer and byte_fallback (spaces vanish), so we keep its vocabulary and merges and restore
the real Phi-3 tokenizer.json pipeline, which is Llama-2's (Prepend + Replace, byte_fallback, fuse_unk,
unk <unk>).

All goldens are computed by the `tokenizers` library (Tokenizer.from_file on the files written
here), never by transformers' Python-side post-processing (no clean_up_tokenization_spaces).
Training is deterministic (fixed generated corpus); the script checks that a second training run
gives the same tokenizer.json.
"""

import argparse
import hashlib
import json
import os
import random
import sys

import gguf
import jinja2
import tokenizers
import transformers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

PINNED = {"tokenizers": "0.21.4", "transformers": "4.51.3", "gguf": "0.17.1", "jinja2": "3.1.6"}

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GGUF_PATH = os.path.join(ROOT, ".cache", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
VOCAB_DIR = os.path.join(ROOT, ".cache", "llamacpp", "vocab")
SPM_SPACE = "\u2581"

# Pre-tokenizer regexes exactly as the models' tokenizer.json files carry them (and as
# llama.cpp's llama-vocab.cpp quotes them as "original regex from tokenizer.json").
REGEX_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
REGEX_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
REGEX_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# ---------------------------------------------------------------------------------------------
# The hostile corpus.
HOSTILE = [
    "",
    " ",
    "   ",
    "a",
    "Hello world",
    "Hello, World! How are you?",
    "  leading spaces",
    "trailing spaces   ",
    "multiple   internal    spaces",
    "tabs\tand\ttabs\t\t\tend",
    "Tab\tthen  two  spaces\t \t",
    "line1\nline2\n\nline4\n",
    "\n",
    "\r\n",
    "windows\r\nline\r\nendings\r\n",
    "\n\n\n   \n\t \n",
    "   \t  \n  x",
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 fa\u00e7ade \u00c5ngstr\u00f6m",
    "e\u0301 combining acute, a\u0308, n\u0303o, \u0301 lone mark",
    "Zalgo: Z\u0351\u0361a\u036bl\u0350g\u0350o\u0334",
    "\u00dcn\u00efc\u00f6d\u00e9 \u00c0\u00c9\u00ce\u00d5\u00dc \u00df \u1e9e \ufb01 ligature",
    "\U0001F600",
    "Emoji: \U0001F600\U0001F44D\U0001F3FD \u2764\ufe0f \U0001F389\U0001F389\U0001F389",
    "ZWJ: \U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466 \U0001F469\U0001F3FD\u200d\U0001F4BB "
    "\U0001F3F3\ufe0f\u200d\U0001F308",
    "Flags: \U0001F1FA\U0001F1F8\U0001F1EF\U0001F1F5\U0001F1EB\U0001F1F7\U0001F1E9\U0001F1EA",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01\u8fd9\u662f\u4e00\u4e2a\u6d4b\u8bd5\u3002",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3068\u30ab\u30bf\u30ab\u30ca \u30fc",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8\uc785\ub2c8\ub2e4",
    "\u0420\u043e\u0441\u0441\u0438\u044f \u0438 \u0423\u043a\u0440\u0430\u0457\u043d\u0430, "
    "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
    "mixed RTL: abc \u05e9\u05dc\u05d5\u05dd 123 \u0645\u0631\u062d\u0628\u0627!",
    "12345678",
    "3.14159",
    "1,000,000",
    "Numbers 12345 and 3.14159 and 1,000,000 and 007 and 1e-9",
    "\u0663\u0664\u0665 Arabic-Indic digits, \u00bd \u00b2 \u216b \U0001D7D8\U0001D7D9\U0001D7DA",
    "def foo(x):\n    return x ** 2\n\nclass Bar:\n\tpass\n",
    "int main(int argc, char** argv) {\n    printf(\"%d\\n\", argc);\n    return 0;\n}\n",
    "    indented = [1, 2, 3]  # comment",
    "if (a&&b||!c) { x+=1; y<<=2; } // done;;",
    "https://example.com/path?query=1&b=two#frag",
    "email: someone@example.org, path: /usr/local/bin/",
    "don't",
    "I'M SURE THEY'LL SAY IT'S FINE",
    "they'll we've you're she'd it's I'm",
    "'s 't 're 've 'm 'll 'd",
    "rock 'n' roll ''quotes'' \u2019curly\u2019 apostrophes",
    "it'\u017f ok, \u212a kelvin",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "text<|endoftext|>more text",
    "<|im_start|><|im_end|><|im_start|>",
    "partial <|im_start tokens <|im_end|",
    " <|im_start|> spaced <|im_end|> ",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    "a <mask> b\t<mask>c<mask>",
    "call [user-tok] and[user-tok]x",
    "<tool_call>{\"name\": \"f\"}</tool_call>",
    "\ufffd replacement char",
    "zero\u200bwidth\u200bspace",
    "nbsp\u00a0here and ideographic\u3000space and nel\u0085x",
    "\u2028line sep\u2029para sep",
    "a\u0000b control \u0001\u001f chars",
    "ctrl\u0004\u0006\u0004x \u0013y",
    "!!!???...---",
    "Punctuation!!! ??? ... --- (parens) [brackets] {braces}",
    "MiXeD CaSe WoRdS and ALLCAPS",
    "supercalifragilisticexpialidocious aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "=" * 100,
    "\u2211 \u222b \u221a \u221e \u2260 \u2264 \u2265 \u2200 \u2203 \U0001D538\U0001D539\u2102",
]

# Strings whose ids with add_special_tokens=True are also recorded.
WITH_SPECIAL = ["", "Hello world", "<|im_start|>user\nhi<|im_end|>\n"]
# Strings also encoded with special tokens NOT recognised in the text (tokenizers'
# encode_special_tokens=True, transformers' split_special_tokens=True; temper's parse_special=false):
# special added tokens become plain text, non-special added tokens still match.
NO_PARSE_SPECIAL = ["<|im_start|>user\nhi<|im_end|>\n", "text<|endoftext|>more text", "a <mask> b\t<mask>c<mask>",
                    "<tool_call>{\"name\": \"f\"}</tool_call>", "call [user-tok] and[user-tok]x",
                    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"]

WORDS = ("the of and to in is was for on that with as by at from it an be this are or have not but had "
         "his they she her which you one were all we can there been has more if will would their what "
         "about when so no other into than time some could them only new also these two may first then "
         "do any like my now over such our man me even most made after many before must through back "
         "years where much your way down should because each just those people how too little state good "
         "very make world still own see men work long get here between both life being under never day "
         "same another know while last might us great old year off come since against go came right used "
         "take three model token merge train loss reward policy gradient value sample batch learning rate "
         "function return class import string number value error tokenizer encode decode").split()
FOREIGN = ["caf\u00e9", "na\u00efve", "\u00fcber", "stra\u00dfe", "gar\u00e7on", "se\u00f1or", "\u0436\u0438\u0437\u043d\u044c",
           "\u043c\u0438\u0440", "\u03ba\u03cc\u03c3\u03bc\u03bf\u03c2", "\u4e16\u754c", "\u6570\u636e", "\u5b66\u4e60",
           "\u65e5\u672c\u8a9e", "\u30c6\u30b9\u30c8", "\ud55c\uad6d\uc5b4", "\u0633\u0644\u0627\u0645",
           "\u05e9\u05dc\u05d5\u05dd", "\u0928\u092e\u0938\u094d\u0924\u0947", "\U0001F600", "\U0001F44D\U0001F3FD",
           "\u2764\ufe0f", "\U0001F1EB\U0001F1F7", "\U0001F468\u200d\U0001F4BB"]
CONTRACTIONS = ["don't", "can't", "it's", "I'm", "they'll", "we've", "you're", "she'd", "DON'T", "IT'S"]
CODE = [
    "def {n}(x, y):\n    return x {op} y\n",
    "for (int i = 0; i < {k}; ++i) {{\n    sum += a[i] {op} b[i];\n}}\n",
    "    if {n} is None:\n        raise ValueError(\"bad {n}\")\n",
    "\tconst auto {n} = std::vector<int>{{{k}, {k2}}};\n",
    "x_{k} = {n}[{k}:{k2}]  # slice\n",
]


def make_text(seed, n_chars):
    """Deterministic varied text: prose, numbers, code, non-Latin scripts, emoji, odd whitespace."""
    rng = random.Random(seed)
    out = []
    total = 0
    while total < n_chars:
        kind = rng.random()
        if kind < 0.45:
            n = rng.randint(5, 18)
            ws = [rng.choice(WORDS) for _ in range(n)]
            if rng.random() < 0.3:
                ws[rng.randrange(n)] = rng.choice(CONTRACTIONS)
            if rng.random() < 0.3:
                ws[rng.randrange(n)] = rng.choice(FOREIGN)
            if rng.random() < 0.2:
                ws[rng.randrange(n)] = str(rng.randint(0, 10 ** rng.randint(1, 9)))
            s = " ".join(ws)
            s = s[0].upper() + s[1:] + rng.choice([".", ".", "!", "?", ",", ";", ":"])
            s += rng.choice([" ", " ", "\n", "\n\n", "  ", "\t", "\r\n"])
        elif kind < 0.6:
            t = rng.choice(CODE)
            s = t.format(n=rng.choice(WORDS), op=rng.choice(["+", "-", "*", "/", "**", "%", "//"]),
                         k=rng.randint(0, 999), k2=rng.randint(0, 99999))
        elif kind < 0.7:
            s = " ".join(rng.choice(FOREIGN) for _ in range(rng.randint(2, 8))) + rng.choice(["\u3002", ". ", "\n"])
        elif kind < 0.8:
            s = rng.choice(["{}.{}".format(rng.randint(0, 9999), rng.randint(0, 99999)),
                            "{:,}".format(rng.randint(0, 10 ** 9)), "{}%".format(rng.randint(0, 100)),
                            "${}".format(rng.randint(1, 500)), "{}-{}-{}".format(rng.randint(1990, 2030),
                                                                              rng.randint(1, 12), rng.randint(1, 28))])
            s += rng.choice([" ", "\n", ", "])
        elif kind < 0.9:
            s = rng.choice(HOSTILE) + rng.choice([" ", "\n"])
        else:
            s = "https://{}.{}/{}?id={}".format(rng.choice(WORDS), rng.choice(["com", "org", "io"]),
                                                rng.choice(WORDS), rng.randint(0, 9999)) + "\n"
        out.append(s)
        total += len(s)
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Chat templates.
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
QWEN2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

CONVERSATIONS = {
    "with_system": [
        {"role": "system", "content": "You are a terse assistant. Answer in one line."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4."},
        {"role": "user", "content": "  And 3+3? Reply with \"six\" \U0001F642\n"},
    ],
    "no_system": [
        {"role": "user", "content": "Hello!"},
        {"role": "assistant", "content": "Hi there. How can I help?"},
        {"role": "user", "content": "Tell me a joke about \U0001F40D and \u65e5\u672c.\n\nKeep it short."},
    ],
    "single_user": [
        {"role": "user", "content": "hi"},
    ],
}


# ---------------------------------------------------------------------------------------------
def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def byte_level_post(add_bos=None):
    bl = processors.ByteLevel(trim_offsets=False)
    if add_bos is None:
        return bl
    name, tid = add_bos
    tp = processors.TemplateProcessing(single=f"{name} $A", pair=f"{name} $A {name} $B",
                                       special_tokens=[(name, tid)])
    return processors.Sequence([bl, tp])


def train_tokenizer(pre, vocab_size, specials, lines):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(lines, trainer)
    return tok


def build_trained(name, lines):
    """One small tokenizer per pre-tokenizer family; returns (Tokenizer, tokenizer_config dict)."""
    if name == "gpt2":
        tok = train_tokenizer(pre_tokenizers.ByteLevel(add_prefix_space=False), 1500, ["<|endoftext|>"], lines)
        tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True, normalized=False)])
        tok.add_tokens([AddedToken("[user-tok]", special=False, normalized=False),
                        AddedToken("single", single_word=True, special=False, normalized=True)])
        tok.post_processor = byte_level_post()
        cfg = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>",
               "add_bos_token": False}
    elif name == "llama3":
        pre = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(REGEX_LLAMA3), behavior="isolated", invert=False),
                                       pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        tok = train_tokenizer(pre, 2000, [], lines)
        specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                    "<|reserved_special_token_1|>", "<|start_header_id|>", "<|end_header_id|>",
                    "<|reserved_special_token_2|>", "<|eot_id|>"]
        tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
        tok.post_processor = byte_level_post(("<|begin_of_text|>", tok.token_to_id("<|begin_of_text|>")))
        # Real Llama-3 tokenizer.json files set ignore_merges (llama.cpp does the same for pre llama3).
        j = json.loads(tok.to_str())
        j["model"]["ignore_merges"] = True
        tok = Tokenizer.from_str(json.dumps(j))
        cfg = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "chat_template": LLAMA3_TEMPLATE}
    elif name == "qwen2":
        pre = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(REGEX_QWEN2), behavior="isolated", invert=False),
                                       pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        tok = train_tokenizer(pre, 1800, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], lines)
        # Qwen2.5 ships <tool_call> as a non-special added token.
        tok.add_tokens([AddedToken("<tool_call>", special=False, normalized=False),
                        AddedToken("</tool_call>", special=False, normalized=False)])
        tok.post_processor = byte_level_post()
        cfg = {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
               "add_bos_token": False, "chat_template": QWEN2_TEMPLATE}
    else:
        raise ValueError(name)
    return tok, cfg


def build_smollm2():
    from transformers import AutoTokenizer
    d, f = os.path.split(GGUF_PATH)
    hf = AutoTokenizer.from_pretrained(d, gguf_file=f)
    j = json.loads(hf.backend_tokenizer.to_str())
    j["normalizer"] = None
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
    j["post_processor"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}
    j["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    j["model"]["byte_fallback"] = False
    j["model"]["merges"] = [a + " " + b for a, b in j["model"]["merges"]]

    # Cross-check against the GGUF's own tokenizer metadata.
    r = gguf.GGUFReader(GGUF_PATH)
    gtok = r.fields["tokenizer.ggml.tokens"].contents()
    gmerges = r.fields["tokenizer.ggml.merges"].contents()
    gtypes = r.fields["tokenizer.ggml.token_type"].contents()
    vocab = j["model"]["vocab"]
    by_id = sorted(vocab.items(), key=lambda kv: kv[1])
    assert [t for t, _ in by_id] == gtok, "GGUF tokens differ from the converted vocab"
    assert [i for _, i in by_id] == list(range(len(gtok)))
    assert j["model"]["merges"] == gmerges, "GGUF merges differ"
    special_ids = {a["id"] for a in j["added_tokens"] if a["special"]}
    assert special_ids == {i for i, t in enumerate(gtypes) if t == 3}, "GGUF control tokens differ"
    # SmolLM2's vocabulary lacks 21 of the 256 byte symbols (0xC0, 0xC1, 0xF1, 0xF2, 0xF5-0xFF, which
    # valid UTF-8 of assigned code points never or hardly uses, and the controls 0x04 0x06 0x13 0x14
    # 0x16 0x1D): such bytes become the unk token (<|endoftext|>, fused). The corpus has a case.
    b2u = bytes_to_unicode()
    missing = sorted(b for b, c in b2u.items() if c not in vocab)
    assert missing == [0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1, 0xF1, 0xF2] + list(range(0xF5, 0x100)), missing
    template = r.fields["tokenizer.chat_template"].contents()
    cfg = {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "pad_token": "<|im_end|>",
           "unk_token": "<|endoftext|>", "add_bos_token": bool(r.fields["tokenizer.ggml.add_bos_token"].contents()),
           "chat_template": template}
    assert gtok[r.fields["tokenizer.ggml.bos_token_id"].contents()] == cfg["bos_token"]
    assert gtok[r.fields["tokenizer.ggml.eos_token_id"].contents()] == cfg["eos_token"]
    assert r.fields["tokenizer.ggml.pre"].contents() == "smollm"
    return Tokenizer.from_str(json.dumps(j, ensure_ascii=False)), json.dumps(j, ensure_ascii=False,
                                                                             separators=(",", ":")), cfg


# ---------------------------------------------------------------------------------------------
# SentencePiece-style BPE.
def spm_pipeline(family):
    """(normalizer, pre_tokenizer, decoder) JSON of a family, as transformers' converters write them."""
    replace_dec = {"type": "Replace", "pattern": {"String": SPM_SPACE}, "content": " "}
    if family == "llama2":
        return ({"type": "Sequence", "normalizers": [
                    {"type": "Prepend", "prepend": SPM_SPACE},
                    {"type": "Replace", "pattern": {"String": " "}, "content": SPM_SPACE}]},
                None,
                {"type": "Sequence", "decoders": [replace_dec, {"type": "ByteFallback"}, {"type": "Fuse"},
                                                  {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})
    if family == "mistral":
        ms = {"type": "Metaspace", "replacement": SPM_SPACE, "prepend_scheme": "first", "split": False}
        return None, ms, dict(ms)
    if family == "gemma":
        return ({"type": "Replace", "pattern": {"String": " "}, "content": SPM_SPACE},
                {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": False},
                {"type": "Sequence", "decoders": [replace_dec, {"type": "ByteFallback"}, {"type": "Fuse"}]})
    raise ValueError(family)


SPM_FAMILIES = {
    # name: (specials first in the vocabulary, specials added after it, non-special added tokens, bos, eos, unk)
    "llama2": (["<unk>", "<s>", "</s>"], ["<|endoftext|>"], [], "<s>", "</s>", "<unk>"),
    "mistral": (["<unk>", "<s>", "</s>", "[INST]", "[/INST]"], ["<|im_start|>", "<|im_end|>"], [], "<s>", "</s>",
                "<unk>"),
    "gemma": (["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>"], [],
              ["[user-tok]"], "<bos>", "<eos>", "<unk>"),
}


SPM_VARIANTS = {
    # name: (golden key, pre_tokenizer, decoder or None to keep)
    "mistral": ("metaspace_always_split",
                {"type": "Metaspace", "replacement": SPM_SPACE, "prepend_scheme": "always", "split": True},
                {"type": "Metaspace", "replacement": SPM_SPACE, "prepend_scheme": "always", "split": True}),
    "gemma": ("merged_splits",
              {"type": "Sequence", "pretokenizers": [
                  {"type": "Split", "pattern": {"Regex": "[0-9]"}, "behavior": "MergedWithNext", "invert": False},
                  {"type": "Split", "pattern": {"String": SPM_SPACE}, "behavior": "MergedWithPrevious",
                   "invert": False}]},
              None),
}


def with_pipeline(j, family):
    normalizer, pre, decoder = spm_pipeline(family)
    j["normalizer"], j["pre_tokenizer"], j["decoder"] = normalizer, pre, decoder
    return j


def build_spm_trained(family, lines):
    """A SentencePiece-style BPE in the family's pipeline; returns (Tokenizer, tokenizer_config dict)."""
    from transformers.convert_slow_tokenizer import generate_merges
    first, later, user, bos, eos, unk = SPM_FAMILIES[family]
    byte_tokens = ["<0x%02X>" % b for b in range(256)]
    tok = Tokenizer(models.BPE(unk_token=unk, byte_fallback=True, fuse_unk=True))
    tok = Tokenizer.from_str(json.dumps(with_pipeline(json.loads(tok.to_str()), family)))
    trainer = trainers.BpeTrainer(vocab_size=1500, min_frequency=2, special_tokens=first + byte_tokens,
                                  show_progress=False)
    # Latin script only (limit_alphabet breaks frequency ties in hash order): the rest takes the byte fallback.
    tok.train_from_iterator(["".join(c for c in line if ord(c) < 0x250) for line in lines], trainer)
    j = json.loads(tok.to_str())
    vocab = j["model"]["vocab"]
    n_fixed = len(first) + 256
    assert all(vocab[t] == i for i, t in enumerate(first + byte_tokens))
    scores = {t: (0.0 if i < n_fixed else -float(i)) for t, i in vocab.items()}
    j["model"]["merges"] = [list(m) for m in generate_merges(vocab, scores)]
    j["model"].update({"unk_token": unk, "fuse_unk": True, "byte_fallback": True})
    j["added_tokens"] = [a for a in j["added_tokens"] if a["content"] in first]
    bos_id = vocab[bos]
    j["post_processor"] = {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}}}
    tok = Tokenizer.from_str(json.dumps(j, ensure_ascii=False))
    if later:
        tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in later])
    if user:
        tok.add_tokens([AddedToken(s, special=False, normalized=False) for s in user])
    cfg = {"bos_token": bos, "eos_token": eos, "unk_token": unk, "add_bos_token": True, "add_eos_token": False}
    return tok, cfg


def sha256_of(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def build_spm_gguf(name):
    """The real Llama-2 / Phi-3 vocabularies as transformers converts llama.cpp's vocabulary GGUFs."""
    from transformers import AutoTokenizer
    fname = {"llama2_gguf": "ggml-vocab-llama-spm.gguf", "phi3_gguf": "ggml-vocab-phi-3.gguf"}[name]
    hf = AutoTokenizer.from_pretrained(VOCAB_DIR, gguf_file=fname)
    j = json.loads(hf.backend_tokenizer.to_str())
    if name == "phi3_gguf":
        assert j["normalizer"] is None and j["model"]["byte_fallback"] is False  # GGUFPhi3Converter's
        with_pipeline(j, "llama2")
        j["model"]["byte_fallback"] = True
        j["model"]["fuse_unk"] = True
        j["model"]["unk_token"] = "<unk>"
    else:
        assert j["normalizer"] == spm_pipeline("llama2")[0] and j["pre_tokenizer"] is None
    r = gguf.GGUFReader(os.path.join(VOCAB_DIR, fname))
    gtok = r.fields["tokenizer.ggml.tokens"].contents()
    by_id = sorted(j["model"]["vocab"].items(), key=lambda kv: kv[1])
    assert [t for t, _ in by_id] == gtok, "GGUF tokens differ from the converted vocab"
    return Tokenizer.from_str(json.dumps(j, ensure_ascii=False)), {"gguf": fname,
                                                                    "sha256": sha256_of(os.path.join(VOCAB_DIR, fname))}


def write_spm(out, long_text, lines):
    sizes = {}
    for name in ["llama2", "mistral", "gemma"]:
        tok, cfg = build_spm_trained(name, lines)
        again, _ = build_spm_trained(name, lines)
        assert tok.to_str() == again.to_str(), f"{name}: training is not deterministic"
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        tok.save(os.path.join(d, "tokenizer.json"), pretty=False)
        write_json(os.path.join(d, "tokenizer_config.json"), cfg)
        ref = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        g = goldens(ref, HOSTILE, long_text)
        if name in SPM_VARIANTS:
            # The same tokenizer with other pre-tokenizer/decoder options (the test makes the same
            # change to the JSON): ids and decode of the first 40 corpus strings and a few with tokens.
            key, pre, dec = SPM_VARIANTS[name]
            j = json.loads(ref.to_str())
            j["pre_tokenizer"] = pre
            if dec is not None:
                j["decoder"] = dec
            v = Tokenizer.from_str(json.dumps(j))
            texts = HOSTILE[:40] + ["x<|im_start|> y<|im_end|>", "[user-tok] a  b", "123 4 5678"]
            g[key] = [{"text": t, "ids": v.encode(t, add_special_tokens=False).ids,
                       "decoded": v.decode(v.encode(t, add_special_tokens=False).ids, skip_special_tokens=False)} for t in texts]
        write_json(os.path.join(d, "golden.json"), g)
        sizes[name] = ref.get_vocab_size()
    for name in ["llama2_gguf", "phi3_gguf"]:
        if not os.path.isdir(VOCAB_DIR):
            print(f"warning: {VOCAB_DIR} absent (scripts/bootstrap); {name} goldens not regenerated", file=sys.stderr)
            continue
        tok, source = build_spm_gguf(name)
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        g = goldens(tok, HOSTILE, long_text)
        g["source"] = source
        write_json(os.path.join(d, "golden.json"), g)
        sizes[name] = tok.get_vocab_size()
    return sizes


def goldens(tok, corpus, long_text):
    cases = []
    for s in corpus + [long_text]:
        ids = tok.encode(s, add_special_tokens=False).ids
        cases.append({"ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False),
                      "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)})
    with_special = [{"text": s, "ids": tok.encode(s, add_special_tokens=True).ids} for s in WITH_SPECIAL]
    tok.encode_special_tokens = True
    no_parse = [{"text": s, "ids": tok.encode(s, add_special_tokens=False).ids} for s in NO_PARSE_SPECIAL]
    tok.encode_special_tokens = False
    return {"cases": cases, "with_special": with_special, "no_parse_special": no_parse}


def render(template, conv, add_gen, bos_token="", eos_token=""):
    """transformers' own renderer (the one apply_chat_template uses)."""
    from transformers import PreTrainedTokenizerFast
    t = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()), bos_token=bos_token or None,
                                eos_token=eos_token or None)
    t.chat_template = template
    return t.apply_chat_template(conv, tokenize=False, add_generation_prompt=add_gen)


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=True, indent=None, separators=(",", ":"))
        f.write("\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "tokenizer"))
    ap.add_argument("--only-spm", action="store_true", help="write only the SentencePiece-style goldens")
    args = ap.parse_args()
    for k, v in PINNED.items():
        have = {"tokenizers": tokenizers.__version__, "transformers": transformers.__version__,
                "gguf": getattr(gguf, "__version__", None) or v, "jinja2": jinja2.__version__}[k]
        if have != v:
            print(f"warning: {k} {have} != pinned {v}", file=sys.stderr)
    out = args.out
    os.makedirs(out, exist_ok=True)

    train_text = make_text(seed=1, n_chars=300_000)
    lines = train_text.splitlines(keepends=True)
    long_text = make_text(seed=2, n_chars=12_000)
    if args.only_spm:
        print(f"vocab sizes {write_spm(out, long_text, lines)}")
        return
    write_json(os.path.join(out, "corpus.json"), {
        "generator": "tools/ref/make_tokenizer_goldens.py", "versions": PINNED,
        "cases": HOSTILE, "long_text": long_text, "with_special": WITH_SPECIAL})

    sizes = {}
    for name in ["gpt2", "llama3", "qwen2"]:
        tok, cfg = build_trained(name, lines)
        again, _ = build_trained(name, lines)
        assert tok.to_str() == again.to_str(), f"{name}: training is not deterministic"
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        tok.save(os.path.join(d, "tokenizer.json"), pretty=False)
        write_json(os.path.join(d, "tokenizer_config.json"), cfg)
        ref = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        g = goldens(ref, HOSTILE, long_text)
        if name == "gpt2":
            # The same tokenizer with ByteLevel(add_prefix_space=true) (the test makes this change to
            # the JSON itself): a space is prepended to every pre-tokenizer piece not starting with one.
            j = json.loads(ref.to_str())
            j["pre_tokenizer"]["add_prefix_space"] = True
            ps = Tokenizer.from_str(json.dumps(j))
            g["add_prefix_space"] = [{"text": s, "ids": ps.encode(s, add_special_tokens=False).ids}
                                     for s in HOSTILE[:12] + ["a <mask> b\t<mask>c<mask>", "x<|endoftext|>y"]]
        write_json(os.path.join(d, "golden.json"), g)
        sizes[name] = ref.get_vocab_size()

    smol = None
    if os.path.exists(GGUF_PATH):
        _, text, cfg = build_smollm2()
        d = os.path.join(out, "smollm2")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
            f.write(text)
        write_json(os.path.join(d, "tokenizer_config.json"), cfg)
        smol = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        write_json(os.path.join(d, "golden.json"), goldens(smol, HOSTILE, long_text))
        sizes["smollm2"] = smol.get_vocab_size()
    else:
        print(f"warning: {GGUF_PATH} absent; smollm2 goldens not regenerated", file=sys.stderr)

    sizes.update(write_spm(out, long_text, lines))

    # Chat templates.
    with open(os.path.join(out, "smollm2", "tokenizer_config.json"), encoding="utf-8") as f:
        smol_template = json.load(f)["chat_template"]
    templates = {"smollm2": (smol_template, "<|im_start|>", "<|im_end|>"),
                 "qwen2": (QWEN2_TEMPLATE, "", "<|im_end|>"),
                 "llama3": (LLAMA3_TEMPLATE, "<|begin_of_text|>", "<|eot_id|>")}
    renders = []
    for tname, (tmpl, bos, eos) in templates.items():
        for cname, conv in CONVERSATIONS.items():
            for gen in (True, False):
                text = render(tmpl, conv, gen, bos, eos)
                entry = {"template": tname, "conversation": cname, "add_generation_prompt": gen, "text": text}
                if tname == "smollm2" and smol is not None and gen:
                    entry["smollm2_ids"] = smol.encode(text, add_special_tokens=False).ids
                renders.append(entry)
    write_json(os.path.join(out, "chat.json"), {
        "generator": "tools/ref/make_tokenizer_goldens.py", "versions": PINNED,
        "templates": {k: {"template": v[0], "bos_token": v[1], "eos_token": v[2]} for k, v in templates.items()},
        "conversations": CONVERSATIONS, "renders": renders})

    total = 0
    for dp, _, fs in os.walk(out):
        for fn in sorted(fs):
            p = os.path.join(dp, fn)
            total += os.path.getsize(p)
            h = hashlib.sha256(open(p, "rb").read()).hexdigest()[:12]
            print(f"{os.path.relpath(p, out):32s} {os.path.getsize(p):>9,d} B  sha256 {h}")
    print(f"total {total:,d} B; vocab sizes {sizes}")


if __name__ == "__main__":
    main()
