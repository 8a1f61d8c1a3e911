"""Exact-match math reward: a faithful port of temper's builtin math checker (src/temper/reward/math_answer.cpp,
the `dataset` task's verifier), so a recipe can start from it and change what it needs.

Extraction, the first that finds something of: the text after the last "####" (rest of that line), the last
well-formed \\boxed{...} / \\fbox{...} (or "\\boxed 5"), the text after the last "answer is". No "last number in
the text" fallback. Equivalence: both sides parse as one number (commas in groups of 3, sign, decimals, exponent,
a/b, \\frac{a}{b}, \\dfrac, \\frac34, a trailing %, '$', \\text{..}, "x = 5", "18 dollars") and agree within a
relative 1e-6 ("50%" also equals 0.5); otherwise their normalised texts are equal. Reward 1 or 0, `correct` the
same, `info` the extracted answer. tests/reward/test_example_rewards.cpp checks it against the C++ on 1000
completions.

Everything here is ASCII-only on purpose (whitespace, letters, digits, lowercasing), as the C++ works on bytes.

    [[reward]]
    name = "math"
    program = ["python3", "examples/rewards/math_exact.py"]
"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from temper_reward import reward  # noqa: E402

SPACE = " \t\n\r\f\v"
REL_TOL = 1e-6
ABS_TOL = 0.0
PERCENT_AS_FRACTION = True


def is_space(c):
    return c in SPACE and c != ""


def is_digit(c):
    return "0" <= c <= "9" and c != ""


def is_alpha(c):
    return ("a" <= c <= "z" or "A" <= c <= "Z") and c != ""


def trim(s):
    return s.strip(SPACE)


def ascii_lower(s):
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in s)


def match_brace(s, open_at):
    """Index one past the '}' matching the '{' at open_at, or None."""
    depth = 0
    for i in range(open_at, len(s)):
        c = s[i]
        if c == "{":
            depth += 1
        if c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def unwrap_text_commands(s):
    """"\\text{ cm}" -> "  cm" for the wrapper commands that only carry text."""
    for c in ("\\textbf", "\\textrm", "\\text", "\\mathrm", "\\mbox"):
        p = s.find(c)
        while p != -1:
            open_at = p + len(c)
            if open_at >= len(s) or s[open_at] != "{":
                p = s.find(c, open_at)
                continue
            end = match_brace(s, open_at)
            if end is None:
                break
            inner = " " + s[open_at + 1:end - 1]
            s = s[:p] + inner + s[end:]
            p = s.find(c, p)
    return s


def clean(text):
    """Shared cleanup before number parsing and text comparison."""
    s = trim(text)
    s = s.replace("\u2212", "-")  # minus sign
    s = s.replace("\\$", "")
    s = s.replace("$", "")
    s = s.replace("\\%", "%")
    for sp in ("\\!", "\\,", "\\;", "\\:", "\\left", "\\right", "\\displaystyle"):
        s = s.replace(sp, "")
    s = s.replace("\\ ", " ")
    s = unwrap_text_commands(s)
    v = trim(s)
    while v and v[-1] == ".":
        v = trim(v[:-1])
    if len(v) >= 2 and v[0] == "{" and match_brace(v, 0) == len(v):  # "{5}" -> "5"
        v = trim(v[1:-1])
    if len(v) >= 3 and is_alpha(v[0]):  # "x = 5" -> "5"
        i = 1
        while i < len(v) and is_space(v[i]):
            i += 1
        if i < len(v) and v[i] == "=" and (i + 1 >= len(v) or v[i + 1] != "="):
            v = trim(v[i + 1:])
    return v


def parse_plain(s):
    """Optional sign, digits with optional thousands commas (groups of exactly 3), fraction, exponent; or None."""
    s = trim(s)
    i, n = 0, len(s)
    num = ""
    if i < n and s[i] in "+-":
        if s[i] == "-":
            num += "-"
        i += 1
    int_start = i
    while i < n and is_digit(s[i]):
        num += s[i]
        i += 1
    first_group = i - int_start
    int_digits = first_group
    if i < n and s[i] == ",":
        if first_group < 1 or first_group > 3:
            return None
        while i < n and s[i] == ",":
            i += 1
            for _ in range(3):
                if i >= n or not is_digit(s[i]):
                    return None
                num += s[i]
                i += 1
            int_digits += 3
            if i < n and is_digit(s[i]):
                return None
    frac_digits = 0
    if i < n and s[i] == ".":
        num += "."
        i += 1
        while i < n and is_digit(s[i]):
            num += s[i]
            i += 1
            frac_digits += 1
    if int_digits + frac_digits == 0:
        return None
    if i < n and s[i] in "eE":
        num += s[i]
        i += 1
        if i < n and s[i] in "+-":
            num += s[i]
            i += 1
        e0 = i
        while i < n and is_digit(s[i]):
            num += s[i]
            i += 1
        if i == e0:
            return None
    if i != n:
        return None
    v = float(num)
    return v if math.isfinite(v) else None


def parse_frac_args(s):
    """"{3}{4}" or "34" (LaTeX shorthand \\frac34) after \\frac."""
    s = trim(s)
    if s and s[0] == "{":
        e1 = match_brace(s, 0)
        if e1 is None:
            return None
        a = s[1:e1 - 1]
        rest = trim(s[e1:])
        if not rest or rest[0] != "{" or match_brace(rest, 0) != len(rest):
            return None
        b = rest[1:-1]
    elif len(s) == 2 and is_digit(s[0]) and is_digit(s[1]):
        a, b = s[0], s[1]
    else:
        return None
    na, nb = parse_plain(a), parse_plain(b)
    if na is None or nb is None or nb == 0:
        return None
    return na / nb


def parse_value(s):
    s = trim(s)
    v = parse_plain(s)
    if v is not None:
        return v
    sign = 1.0
    t = s
    if t and t[0] in "+-":
        sign = -1.0 if t[0] == "-" else 1.0
        t = trim(t[1:])
    for cmd in ("\\dfrac", "\\tfrac", "\\frac"):
        if t.startswith(cmd):
            v = parse_frac_args(t[len(cmd):])
            return None if v is None else sign * v
    slash = t.find("/")
    if slash != -1 and t.find("/", slash + 1) == -1:
        a, b = parse_plain(t[:slash]), parse_plain(t[slash + 1:])
        if a is not None and b is not None and b != 0:
            return sign * a / b
    return None


def parse_number_cleaned(s, allow_unit):
    """(value, percent) or None."""
    s = trim(s)
    percent = False
    if s and s[-1] == "%":
        percent = True
        s = trim(s[:-1])
    v = parse_value(s)
    if v is not None:
        return v, percent
    # "18 dollars", "5  cm" (from 5\text{ cm}): a number, then only words.
    sp = min([k for k in (s.find(" "), s.find("\t")) if k != -1], default=-1)
    if allow_unit and not percent and sp != -1:
        rest = trim(s[sp:])
        if rest and all(is_alpha(c) or is_space(c) for c in rest):
            return parse_number_cleaned(s[:sp], False)
    return None


def parse_math_number(s):
    return parse_number_cleaned(clean(s), True)


def normalize_answer_text(s):
    return ascii_lower("".join(c for c in clean(s) if not is_space(c)))


def close(a, b):
    if a == b:
        return True
    d = abs(a - b)
    return d <= ABS_TOL or d <= REL_TOL * max(abs(a), abs(b))


def math_answers_equal(a, b):
    na, nb = parse_math_number(a), parse_math_number(b)
    if na is not None and nb is not None:
        if close(na[0], nb[0]):  # "50%" == "50" == "50.0"
            return True
        if not PERCENT_AS_FRACTION or na[1] == nb[1]:
            return False
        return close(na[0] / 100, nb[0]) if na[1] else close(na[0], nb[0] / 100)
    ta = normalize_answer_text(a)
    return ta != "" and ta == normalize_answer_text(b)


def extract_gsm8k(text):
    p = text.rfind("####")
    if p == -1:
        return None
    q = p + 4
    while q < len(text) and text[q] == "#":
        q += 1
    e = text.find("\n", q)
    rest = trim(text[q:] if e == -1 else text[q:e])
    return rest or None


def brace_ends(s):
    """Every '{' of s mapped to the position after its matching '}' (absent: unclosed), in one pass."""
    end, stack = {}, []
    for i, c in enumerate(s):
        if c == "{":
            stack.append(i)
        elif c == "}" and stack:
            end[stack.pop()] = i + 1
    return end


def extract_boxed(text):
    hits = []
    for cmd in ("\\boxed", "\\fbox"):
        p = text.find(cmd)
        while p != -1:
            hits.append((p, len(cmd)))
            p = text.find(cmd, p + 1)
    if not hits:
        return None
    hits.sort(key=lambda h: -h[0])
    ends = brace_ends(text)
    for pos, n in hits:
        i = pos + n
        while i < len(text) and text[i] == " ":
            i += 1
        if i < len(text) and text[i] == "{":
            end = ends.get(i)
            if end is None:
                continue
            inner = trim(text[i + 1:end - 1])
            if inner:
                return inner
        elif i > pos + n:  # "\boxed 5"
            e = i
            while e < len(text) and not is_space(text[e]) and text[e] != "$":
                e += 1
            if e > i:
                return text[i:e]
    return None


def extract_answer_is(text):
    p = ascii_lower(text).rfind("answer is")
    if p == -1:
        return None
    rest = text[p + 9:]
    e = rest.find("\n")
    if e != -1:
        rest = rest[:e]
    b = extract_boxed(rest)
    if b is not None:
        return b
    dot = rest.find(". ")
    if dot != -1:
        rest = rest[:dot]
    rest = trim(rest)
    while rest and (rest[0] in ":*" or is_space(rest[0])):
        rest = rest[1:]
    while rest and (rest[-1] in ".*" or is_space(rest[-1])):
        rest = rest[:-1]
    return rest or None


def extract_math_answer(text):
    for extract in (extract_gsm8k, extract_boxed, extract_answer_is):
        a = extract(text)
        if a is not None:
            return a
    return None


@reward
def math_exact(completion, answer):
    got = extract_math_answer(completion or "")
    ok = got is not None and bool(answer) and math_answers_equal(got, answer)
    return {"reward": 1.0 if ok else 0.0, "correct": ok, "info": "no answer" if got is None else "answer: " + got}


if __name__ == "__main__":
    math_exact.serve()
