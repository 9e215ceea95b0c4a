"""Excerpts: a page's messages, lines or sentences that match the query, verbatim, with ``…`` for the rest.

An excerpt is the view between a page's line and its Detail node: what a small budget can afford of a long
page. A block of many short messages (a burst of chat lines) or a short question followed by a long reply is
then no longer all-or-nothing: the message that matches comes whole, the rest is marked as left out, and the
model can consult the page's id for everything.

Units. A page's content is its transcript (``user: …`` / ``assistant: …`` / tool rows, one message per row, a
message's own line breaks kept). A speaker's run of consecutive messages (a burst: one thought sent in
pieces) is one unit when it is short (:data:`UNIT_TOKENS`); otherwise each message is, when it is short; a
longer message is split into its lines, and a line that is still longer into its sentences. So a short user
message is kept whole, and a long reply contributes only its matching lines.

Choice. A unit's score is the sum of the weights (IDF, from the thread) of the distinct query terms it
contains. The options are nested: the best-scoring unit, the best two, ... — every proper subset of the page's
matching units in score order — each with its rendered text, its token cost and its *coverage*, the share of
the page it holds. A page that holds a share s of the query's weight (its *strength*) owes that share of its
value to its matching units, which split it by their scores; the rest is spread by tokens (a fact the query
does not name is as likely in any token). So a page that only shares a common word with the query is cut by
size, and one whose single message holds every query word is worth little more than that message. The budget weighs these options against a line and a Detail node
(:mod:`gateway.core.budget`). Same inputs, same output.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from gateway.core.lexical import terms

__all__ = ["ELLIPSIS", "UNIT_TOKENS", "ExcerptOption", "Unit", "excerpt_options", "line_coverage", "render_excerpt", "units_of"]

UNIT_TOKENS = 160  # a message up to this long is one unit (most user messages are; long replies are split)
ELLIPSIS = "…"

_MESSAGE_START = re.compile(r"^(?:(?:user|assistant|system|developer)(?: \([^)\n]*\))?(?::| →)|tool \S+ result:)")
_SENTENCE = re.compile(r"[^.!?。！？]+(?:[.!?。！？]+[\"')\]]*|$)\s*")


@dataclass(frozen=True)
class Unit:
    """One piece of a page: ``text`` verbatim; ``message`` its message's position; ``first`` whether it opens
    that message (so it carries the speaker); ``joiner`` what separates it from the unit before it in the
    content (a line break, or the space between two sentences of one line); ``speaker`` the message's prefix
    (``user:``), repeated before a unit cut from the middle of a message."""

    text: str
    tokens: int
    message: int
    first: bool
    joiner: str
    speaker: str


@dataclass(frozen=True)
class ExcerptOption:
    """One excerpt of a page: ``chosen`` unit positions (document order), the rendered ``text``, its ``tokens``
    and its ``coverage`` in (0, 1)."""

    chosen: tuple[int, ...]
    text: str
    tokens: int
    coverage: float


def _messages(content: str) -> list[list[str]]:
    messages: list[list[str]] = []
    for row in content.split("\n"):
        if not messages or _MESSAGE_START.match(row):
            messages.append([row])
        else:
            messages[-1].append(row)
    return messages


def _sentences(line: str) -> list[str]:
    parts = [m.group(0) for m in _SENTENCE.finditer(line) if m.group(0)]
    return parts if "".join(parts) == line else [line]


def _speaker(rows: Sequence[str]) -> str:
    match = _MESSAGE_START.match(rows[0])
    return match.group(0) if match else ""


def _message_units(rows: Sequence[str], index: int, count: Callable[[str], int]) -> list[Unit]:
    text = "\n".join(rows)
    speaker = _speaker(rows)
    tokens = count(text)
    if tokens <= UNIT_TOKENS:
        return [Unit(text, tokens, index, True, "\n", speaker)]
    units: list[Unit] = []
    for row_number, row in enumerate(rows):
        pieces = _sentences(row) if count(row) > UNIT_TOKENS else [row]
        for piece_number, piece in enumerate(pieces):
            first = row_number == 0 and piece_number == 0
            units.append(Unit(piece, count(piece), index, first, "\n" if piece_number == 0 else "", speaker))
    return units


def units_of(content: str, count: Callable[[str], int]) -> tuple[Unit, ...]:
    """The units of a page's ``content`` in document order (see the module docstring)."""
    messages = _messages(content)
    speakers = [_speaker(rows) for rows in messages]
    units: list[Unit] = []
    start = 0
    while start < len(messages):
        end = start + 1
        while end < len(messages) and speakers[end] == speakers[start] and speakers[start].endswith(":"):
            end += 1
        turn = "\n".join(row for rows in messages[start:end] for row in rows)
        tokens = count(turn) if end - start > 1 else UNIT_TOKENS + 1
        if tokens <= UNIT_TOKENS:  # a speaker's run of short messages is one turn: one thought sent in pieces
            units.append(Unit(turn, tokens, start, True, "\n", speakers[start]))
        else:
            for index in range(start, end):
                units.extend(_message_units(messages[index], index, count))
        start = end
    return tuple(units)


def _scores(units: Sequence[Unit], weights: Mapping[str, float]) -> tuple[list[float], float]:
    """Each unit's score, and the page's *strength*: the share of the query's weight its units hold at all."""
    found = [set(terms(unit.text)) & weights.keys() for unit in units]
    total = sum(weights.values())
    matched = set().union(*found) if found else set()
    strength = sum(weights[t] for t in matched) / total if total > 0 else 0.0
    return [sum(weights[t] for t in unit_terms) for unit_terms in found], strength


def render_excerpt(units: Sequence[Unit], chosen: Sequence[int]) -> str:
    """The chosen units verbatim in document order, ``…`` wherever units were left out: a row of its own for
    left-out messages, inline within a message. A unit cut from the middle of a message is preceded by its
    speaker, so every row still says who said it."""
    out: list[str] = []
    previous: int | None = None
    for position in sorted(set(chosen)):
        unit = units[position]
        start = 0 if previous is None else previous + 1
        if previous is not None and start == position:
            out.append(unit.joiner + unit.text)
            previous = position
            continue
        if out:
            out[-1] = out[-1].rstrip()
        if previous is not None and units[previous].message == unit.message:
            out.append(f" {ELLIPSIS} {unit.text}")
        else:
            skipped_messages = any(units[j].message != unit.message for j in range(start, position))
            row = unit.text if unit.first else f"{unit.speaker} {ELLIPSIS} {unit.text}".lstrip()
            out.append(("\n" if out else "") + (f"{ELLIPSIS}\n" if skipped_messages else "") + row)
        previous = position
    if previous is None:
        return ""
    text = "".join(out)
    if previous + 1 < len(units):
        following = units[previous + 1]
        text = text.rstrip() + (f" {ELLIPSIS}" if following.message == units[previous].message else f"\n{ELLIPSIS}")
    return text


def _body(unit: Unit) -> str:
    """A unit's text without its speaker: what a summary line quotes."""
    return unit.text[len(unit.speaker) :].strip() if unit.first else unit.text


def _coverage(scores: Sequence[float], strength: float, units: Sequence[Unit], inside: Sequence[int]) -> float:
    """The share of a page the units ``inside`` hold: as much of it as the page matches the query (its
    strength) goes by the query terms' weight they hold, the rest by their tokens."""
    total_tokens = sum(unit.tokens for unit in units)
    by_tokens = sum(units[i].tokens for i in inside) / total_tokens if total_tokens else 0.0
    total = sum(scores)
    by_match = sum(scores[i] for i in inside) / total if total > 0 else 0.0
    return min(max(strength * by_match + (1.0 - strength) * by_tokens, 0.0), 1.0)  # sums of floats may overshoot


def excerpt_options(
    units: Sequence[Unit], weights: Mapping[str, float], count: Callable[[str], int]
) -> tuple[ExcerptOption, ...]:
    """The nested excerpts of a page for a query whose terms weigh ``weights`` (see the module docstring):
    the top 1, 2, ... matching units, never all of the page's units (that is its Detail view). Empty when no
    unit matches or the page is a single unit."""
    scores, strength = _scores(units, weights)
    ranked = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: (-scores[i], i))
    options: list[ExcerptOption] = []
    for k in range(1, len(ranked) + 1):
        chosen = tuple(sorted(ranked[:k]))
        if len(chosen) == len(units):
            break
        text = render_excerpt(units, chosen)
        options.append(ExcerptOption(chosen, text, count(text), _coverage(scores, strength, units, chosen)))
    return tuple(options)


def line_coverage(units: Sequence[Unit], weights: Mapping[str, float], line: str) -> float:
    """The share of a page its background ``line`` holds, by the same measure as an excerpt's coverage: the
    units whose text is on the line verbatim."""
    scores, strength = _scores(units, weights)
    # verbatim only: a line collapses whitespace, which loses a message's line breaks (and a code block's shape)
    inside = [i for i, unit in enumerate(units) if _body(unit) in line]
    return _coverage(scores, strength, units, inside)
