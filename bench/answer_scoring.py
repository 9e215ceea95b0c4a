"""Judge-free scores of a short answer against a gold answer, and a paired comparison of two ways of answering.

* ``f1``: SQuAD-style token F1 (lower case, punctuation and articles removed), dates written any usual way made one
  token first ("12 January, 2024" == "2024-01-12").
* ``appears``: every content word of the gold is in the answer.
* ``exact``: 1.0 or 0.0, by what the gold is (:func:`gold_kind`):

  - a **date** (at a day's, a month's or a year's grain): some date of the answer falls on it, compared at the
    gold's grain ("March, 2023" is met by "2023-03-16"; "19 January, 2023" is not met by "January 2023");
  - a **number** (digits or number words, with or without a unit: "3", "Three.", "nine months", "$270",
    "1 year and 5 months"): every number of the gold is a number of the answer;
  - a **list** ("Cooking, skiing, hiking"): every item appears in the answer, in any order;
  - **yes / no**: the answer says the same;
  - else **text**: ``appears``.

``paired`` compares two ways question by question: the mean of the per-question differences and a percentile
bootstrap 95% interval of it (a fixed seed, so a report is reproducible).
"""

from __future__ import annotations

import random
import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Paired", "alternatives", "appears", "dates_of", "exact", "f1", "gold_kind", "normalize_dates", "numbers_of", "paired", "tokens"]

_MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december"]
_MONTH = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
_DATE_PATTERNS = [
    (re.compile(r"\b(\d{4})[-/](\d{1,2})[-/](\d{1,2})\b"), ("y", "m", "d")),
    (re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+(\d{{4}})\b", re.I), ("d", "M", "y")),
    (re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I), ("M", "d", "y")),
    (re.compile(rf"\b{_MONTH},?\s+(\d{{4}})\b", re.I), ("M", "y")),
]
_ISO = re.compile(r"^(\d{4})-(\d{2})(?:-(\d{2}))?$")
_YEAR = re.compile(r"\b(19\d{2}|20\d{2})\b")


def _month(name: str) -> int:
    return next(i for i, m in enumerate(_MONTHS, 1) if m.startswith(name.lower().rstrip(".")[:3]))


def normalize_dates(text: str) -> str:
    """Dates written in any of the usual ways become one token: 2024-01-12, or 2024-01 for a month."""
    for pattern, order in _DATE_PATTERNS:
        def iso(m: re.Match[str], order: tuple[str, ...] = order) -> str:
            parts = dict(zip(order, m.groups()))
            month = int(parts["m"]) if "m" in parts else _month(parts["M"])
            day = f"-{int(parts['d']):02d}" if "d" in parts else ""
            return f" {int(parts['y']):04d}-{month:02d}{day} "
        text = pattern.sub(iso, text)
    return text


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans({c: " " for c in string.punctuation if c != "-"})


def tokens(text: str) -> list[str]:
    text = normalize_dates(str(text)).lower().translate(_PUNCT)
    return [t.strip("-") for t in _ARTICLES.sub(" ", text).split() if t.strip("-")]


def f1(answer: str, gold: str) -> float:
    a, g = tokens(answer), tokens(gold)
    common = sum((Counter(a) & Counter(g)).values())
    if not a or not g or not common:
        return 0.0
    p, r = common / len(a), common / len(g)
    return 2 * p * r / (p + r)


_STOP = frozenset("a an the of on in at to and or is was were be by for from as with it its that this he she they his her their".split())


def appears(answer: str, gold: str) -> bool:
    needed = [t for t in tokens(gold) if t not in _STOP] or tokens(gold)
    have = set(tokens(answer))
    return bool(needed) and all(t in have for t in needed)


# --- dates, numbers, lists ---------------------------------------------------------------------------------------

Date = tuple[int, int | None, int | None]  # year, month, day (None: coarser grain)


def dates_of(text: str) -> list[Date]:
    """The dates written in ``text``, each at the grain it is written at; a bare year only where no fuller date
    holds it."""
    found: list[Date] = []
    rest = []
    for token in normalize_dates(str(text)).split():
        m = _ISO.match(token.strip(string.punctuation.replace("-", "")))
        if m:
            found.append((int(m.group(1)), int(m.group(2)), int(m.group(3)) if m.group(3) else None))
        else:
            rest.append(token)
    found += [(int(y), None, None) for y in _YEAR.findall(" ".join(rest))]
    return found


def _same_at(gold: Date, answer: Date) -> bool:
    """Whether ``answer`` falls on ``gold`` at the gold's grain (a coarser answer does not)."""
    for g, a in zip(gold, answer):
        if g is None:
            return True
        if a != g:
            return False
    return True


_UNITS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
          "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
          "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
          "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "once": 1, "twice": 2, "thrice": 3,
          "single": 1, "couple": 2, "dozen": 12}
_NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.])\d+(?:\.\d+)?")


def numbers_of(text: str) -> list[float]:
    """The numbers of ``text``: digits ("1,200", "3.5", "$270", "70-200mm" gives 70 and 200) and number words
    ("nine", "twenty-one", "twice"); dates are not numbers here."""
    plain = " ".join(t for t in normalize_dates(str(text)).split() if not _ISO.match(t.strip(string.punctuation.replace("-", ""))))
    out = [float(n.replace(",", "")) for n in _NUMBER.findall(plain)]
    words = re.findall(r"[a-z]+(?:-[a-z]+)?", plain.lower())
    for i, word in enumerate(words):
        parts = word.split("-")
        if word == "one" and len(words) > 3 and not (i + 1 < len(words) and _TIME_UNITS.fullmatch(words[i + 1])):
            continue  # "the previous one", "one of them": a pronoun, unless it counts time or is the whole answer
        if all(p in _UNITS for p in parts):
            out.append(float(sum(_UNITS[p] for p in parts)))
    return out


_TIME_UNITS = re.compile(r"\b(second|minute|hour|day|week|month|year)s?\b", re.I)


def _units(text: str) -> set[str]:
    return {u.lower() for u in _TIME_UNITS.findall(str(text))}


_YES_NO = re.compile(r"^\W*(yes|no)\b", re.I)
_LIST_SPLIT = re.compile(r"\s*(?:,|;|\band\b|\bor\b|&)\s*", re.I)


def _items(gold: str) -> list[str]:
    return [i for i in (s.strip(" .\"'") for s in _LIST_SPLIT.split(gold)) if i]


def gold_kind(gold: str) -> str:
    """What the gold answer is, for :func:`exact`: date, number, list, yes-no or text."""
    gold = str(gold).strip()
    if _YES_NO.match(gold):
        return "yes-no"
    if any(d[1] is not None for d in dates_of(gold)) or re.fullmatch(r"\W*(?:in\s+)?(19|20)\d{2}\W*", gold, re.I):
        return "date"
    words = [t for t in tokens(gold) if t not in _STOP]
    if numbers_of(gold) and len(words) <= 2 * len(numbers_of(gold)) + 2:
        return "number"
    if "," in gold and len(_items(gold)) >= 2:
        return "list"
    return "text"


_ALSO = re.compile(r"\.\s+(.+?)\s*\([^)]*\)\s*is also acceptable\.?\s*$", re.I)


def alternatives(gold: str) -> list[str]:
    """The gold and the answers it also accepts: LongMemEval writes "21 days. 22 days (including the last day) is
    also acceptable."."""
    gold = str(gold).strip()
    m = _ALSO.search(gold)
    return [gold[: m.start()].strip(), m.group(1).strip()] if m else [gold]


def exact(answer: str, gold: str) -> float:
    """1.0 when the answer gives the gold answer (or one it also accepts), judged by what the gold is (see the
    module docstring); else 0.0."""
    return max(_exact(answer, g) for g in alternatives(gold))


def _exact(answer: str, gold: str) -> float:
    kind = gold_kind(gold)
    if kind == "yes-no":
        said = _YES_NO.match(str(answer).strip())
        wanted = _YES_NO.match(str(gold).strip())
        return float(bool(said and wanted and said.group(1).lower() == wanted.group(1).lower()))
    if kind == "date":
        wanted_dates = dates_of(gold)
        given = dates_of(answer)
        return float(bool(wanted_dates) and all(any(_same_at(w, a) for a in given) for w in wanted_dates))
    if kind == "number":  # the numbers, and the units of time they count ("nine months" is not "9 years")
        given_numbers = set(numbers_of(answer))
        return float(all(n in given_numbers for n in numbers_of(gold)) and _units(gold) <= _units(answer))
    if kind == "list":
        return float(all(appears(answer, item) for item in _items(gold)))
    return float(appears(answer, gold))


# --- the paired comparison ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Paired:
    """Way A against way B on the same questions: the mean per-question difference (A - B), its bootstrap 95%
    interval, and how many questions A won, lost and tied (a difference within 0.05 is a tie)."""

    n: int
    mean: float
    low: float
    high: float
    better: int
    worse: int
    tied: int


def paired(a: Sequence[float], b: Sequence[float], *, resamples: int = 10_000, seed: int = 45) -> Paired:
    """The paired comparison of scores ``a`` and ``b`` (one per question, in the same order)."""
    if len(a) != len(b):
        raise ValueError(f"paired scores of different lengths: {len(a)} and {len(b)}")
    diffs = [x - y for x, y in zip(a, b)]
    n = len(diffs)
    if n == 0:
        return Paired(0, 0.0, 0.0, 0.0, 0, 0, 0)
    rng = random.Random(seed)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    low, high = means[int(0.025 * resamples)], means[min(int(0.975 * resamples), resamples - 1)]
    return Paired(n, sum(diffs) / n, low, high, sum(d > 0.05 for d in diffs), sum(d < -0.05 for d in diffs),
                  sum(abs(d) <= 0.05 for d in diffs))
