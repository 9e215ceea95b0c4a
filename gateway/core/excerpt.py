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

Choice. A unit *holds* the query terms it mentions, each weighing its IDF in the thread; a unit also takes half of
the weight the unit before it holds: the answer to a matching message is often the message after it, its reply or
the next line of its burst, in words of its own. The options are nested: the units that hold (or take) the most
query weight first, then those that only mention query terms without holding them (another role's, for a question
about one role, :func:`gateway.core.asked.query_source`) — every proper subset of the page's matching units in that
order — and last the page whole (every unit, nothing left out: a Detail node's text without the node's tags, so a
page worth showing whole costs only its own tokens), each with its rendered text, its token cost and its *coverage*,
the share of the page it holds. A page that holds a share s of the query's weight (its *strength*) owes that share
of its value to the query terms its units hold, and a set of units holds the part of it whose terms they hold; the
rest is spread by tokens (a fact the query does not name is as likely in any token — of the user's messages alone,
for a question about the user). So a page that only shares a common word with the query is cut by size, and one
whose single message holds every query word is worth little more than that message. The budget weighs these options
against a line and a Detail node (:mod:`gateway.core.budget`). Same inputs, same output.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

from gateway.core.labels import line_heads, named_sides, without_role, written_once
from gateway.core.lexical import terms
from gateway.core.tokens import count_joined

__all__ = [
    "ELLIPSIS",
    "OTHERS_SHARE",
    "UNIT_TOKENS",
    "ExcerptOption",
    "Unit",
    "excerpt_options",
    "labelled",
    "leading_options",
    "line_coverage",
    "names_sides",
    "render_excerpt",
    "sentences",
    "shown_content",
    "speaking_share",
    "units_of",
    "whole_page",
]

EXACT_OPTIONS = 8  # excerpts of up to this many units are counted exactly (see excerpt_options)
UNIT_TOKENS = 160  # a message up to this long is one unit (most user messages are; long replies are split)
NEXT_SHARE = 0.5  # the share of a unit's query weight the unit after it takes (on real chats +0.024 recall at 2k)
ELLIPSIS = "…"
_NOTHING: frozenset[str] = frozenset()

_MESSAGE_START = re.compile(r"^(?:(?:user|assistant|system|developer)(?: \([^)\n]*\))?(?::| →)|tool \S+ result:)")
_SENTENCE = re.compile(r"[^.!?。！？]+(?:[.!?。！？]+[\"')\]]*|$)\s*")


class Unit(NamedTuple):
    """One piece of a page: ``text`` verbatim; ``message`` its message's position; ``first`` whether it opens
    that message (so it carries the speaker); ``joiner`` what separates it from the unit before it in the
    content (a line break, or the space between two sentences of one line); ``speaker`` who says it as the
    message shows it (``user:``, ``user: Emi:``, or ``Emi:`` where names stand for the roles:
    `gateway.core.labels.named_sides`), repeated before a unit cut from the middle of a message; ``side`` the
    message's role prefix as stored (``user:``), whose words a question about one side asks for; ``terms`` its
    distinct terms, sorted, computed once with the unit (units are cached per page, so scoring a query never re-reads
    their text). A named tuple, its terms a tuple: a long thread's pages read from the store make tens of thousands
    a second, and a process keeps thousands of pages' units (a tuple of a unit's ~8 terms is a fifth of a frozenset's
    bytes: a long reply's units take 15.6 KB in memory, not 29.5, and load in half the time); a query intersects
    its own terms with them."""

    text: str
    tokens: int
    message: int
    first: bool
    joiner: str
    speaker: str
    side: str
    terms: tuple[str, ...]

    @classmethod
    def of(cls, text: str, tokens: int, message: int, first: bool, joiner: str, speaker: str, side: str) -> Unit:
        return cls(text, tokens, message, first, joiner, speaker, side, tuple(sorted(set(terms(text)))))


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


def sentences(text: str) -> list[str]:
    """``text``'s sentences, line by line, stripped (empty ones left out)."""
    return [piece.strip() for line in text.split("\n") for piece in _sentences(line) if piece.strip()]


def _speaker(rows: Sequence[str]) -> str:
    match = _MESSAGE_START.match(rows[0])
    return match.group(0) if match else ""


def _head(row: str, speaker: str) -> str:
    """Who says a message, as its first row shows it: the role prefix and the label heads after it (``user: Emi:``),
    repeated before a unit entered in the middle of the message."""
    heads = line_heads(row)
    return row[: heads[-1][1]].rstrip() if heads and speaker.endswith(":") else speaker


def _message_units(rows: Sequence[str], index: int, speaker: str, side: str, count: Callable[[str], int]) -> list[Unit]:
    text = "\n".join(rows)
    tokens = count(text)
    if tokens <= UNIT_TOKENS:
        return [Unit.of(text, tokens, index, True, "\n", speaker, side)]
    units: list[Unit] = []
    for row_number, row in enumerate(rows):
        row_tokens = tokens if len(rows) == 1 else count(row)  # (each text counted once: a long reply's are many)
        pieces = _sentences(row) if row_tokens > UNIT_TOKENS else [row]
        for piece_number, piece in enumerate(pieces):
            first = row_number == 0 and piece_number == 0
            piece_tokens = row_tokens if piece == row else count(piece)
            units.append(Unit.of(piece, piece_tokens, index, first, "\n" if piece_number == 0 else "", speaker, side))
    return units


def names_sides(content: str) -> bool:
    """Whether a page's transcript ``content`` is a chat whose names stand for its two sides
    (`gateway.core.labels.named_sides` of its messages' first rows): its rows are then shown without role prefixes."""
    return named_sides([rows[0] for rows in _messages(content)])


def _by_name(row: str, names: Mapping[str, str]) -> str:
    """``row`` opened by its side's name (``Gina: …``) where it opens with a named side's role prefix and no label
    of its own (`gateway.core.labels.side_names`)."""
    role, colon, rest = row.partition(": ")
    name = names.get(role) if colon else None
    return f"{name}: {rest}" if name is not None and not line_heads(row) else row


def _unroled(messages: Sequence[Sequence[str]]) -> list[list[str]]:
    """A chat's ``messages`` (rows) whose names stand for its two sides, without the role prefix before each name."""
    return [[without_role(rows[0]), *rows[1:]] for rows in messages]


def labelled(content: str) -> bool:
    """Whether every message of a page's transcript ``content`` opens with a label of its own after its role prefix
    (``user: Emi: …``): its lines say who speaks already, by the names the chat itself uses. One message that opens
    with ``Week 6:`` or ``Note:`` does not make a chat labelled."""
    return all(line_heads(rows[0]) for rows in _messages(content)) if content else False


def units_of(content: str, count: Callable[[str], int], names: Mapping[str, str] = MappingProxyType({})) -> tuple[Unit, ...]:
    """The units of a page's ``content`` in document order (see the module docstring), their rows as shown: a
    speaker's label written once per run (`gateway.core.labels.written_once`), and no role prefix before the names
    of a chat whose names stand for its two sides (`gateway.core.labels.named_sides`); in a chat whose sides are known
    by the names they call each other (``names``: role to name, `gateway.core.labels.side_names`), each message
    opened by its side's name instead of its role. A unit's terms are its text's as stored: who speaks is not what
    is said."""
    messages = _messages(content)
    speakers = [_speaker(rows) for rows in messages]
    if named_sides([rows[0] for rows in messages]):
        messages = _unroled(messages)
    elif names:
        return tuple(_named_unit(unit, names, count) for unit in units_of(content, count))
    heads = [_head(rows[0], speaker) for rows, speaker in zip(messages, speakers)]
    shown = iter(written_once(row for rows in messages for row in rows))
    messages = [[next(shown) for _ in rows] for rows in messages]
    units: list[Unit] = []
    start = 0
    while start < len(messages):
        end = start + 1
        while end < len(messages) and speakers[end] == speakers[start] and speakers[start].endswith(":"):
            end += 1
        turn = "\n".join(row for rows in messages[start:end] for row in rows)
        tokens = count(turn) if end - start > 1 else UNIT_TOKENS + 1
        if tokens <= UNIT_TOKENS:  # a speaker's run of short messages is one turn: one thought sent in pieces
            units.append(Unit.of(turn, tokens, start, True, "\n", heads[start], speakers[start]))
        else:
            for index in range(start, end):
                units.extend(_message_units(messages[index], index, heads[index], speakers[index], count))
        start = end
    return tuple(units)


def shown_content(content: str, names: Mapping[str, str] = MappingProxyType({})) -> str:
    """A page's transcript ``content`` whole, as its excerpts show its rows (:func:`units_of`): a chat whose names
    stand for its two sides without the role prefixes before them, its labels written once per run; a chat whose
    sides are known by ``names``, each message opened by its side's name. Anything else as stored. A Detail node and
    a Consult's result then speak of the same people as the lines and excerpts of the context they open."""
    messages = _messages(content)
    if named_sides([rows[0] for rows in messages]):
        return "\n".join(written_once(row for rows in _unroled(messages) for row in rows))
    if not names:
        return content
    return "\n".join(_by_name(row, names) for row in written_once(content.split("\n")))


def _named_unit(unit: Unit, names: Mapping[str, str], count: Callable[[str], int]) -> Unit:
    """``unit`` as shown where the sides are known by ``names`` (see :func:`units_of`): its rows and the speaker
    repeated before it opened by the name, its tokens those of that text, its terms unchanged."""
    text = "\n".join(_by_name(row, names) for row in unit.text.split("\n"))
    role = unit.speaker[:-1] if unit.speaker.endswith(":") else ""
    speaker = f"{names[role]}:" if role in names else unit.speaker
    if text == unit.text and speaker == unit.speaker:
        return unit
    return unit._replace(text=text, tokens=count(text) if text != unit.text else unit.tokens, speaker=speaker)


def _held(
    units: Sequence[Unit], weights: Mapping[str, float], source: str | None = None
) -> tuple[list[frozenset[str]], float]:
    """The query terms each unit holds (those it mentions), and the page's *strength*: the share of the query's
    weight its units hold at all. With ``source`` (a role, see :func:`gateway.core.asked.query_source`), only that
    role's units hold terms: the others only repeat or elaborate what the query is about."""
    query = frozenset(weights)
    held = [query.intersection(unit.terms) if source is None or unit.side.startswith(source) else _NOTHING
            for unit in units]
    total = sum(weights.values())
    return held, (sum(weights[t] for t in frozenset().union(*held)) / total if total > 0 else 0.0)


def render_excerpt(units: Sequence[Unit], chosen: Sequence[int]) -> str:
    """The chosen units verbatim in document order, ``…`` wherever units were left out: a row of its own for
    left-out messages, inline within a message. A unit cut from the middle of a message is preceded by its
    speaker, so every row still says who said it."""
    return "".join(_excerpt_parts(units, chosen))


def _excerpt_parts(units: Sequence[Unit], chosen: Sequence[int]) -> list[str]:
    """:func:`render_excerpt`'s text in the parts it is written in, a unit (with what leads into it) each: what
    :func:`gateway.core.tokens.count_joined` counts apart, so that the nested excerpts of a page count a unit once."""
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
            row = _entered(unit)
            out.append(("\n" if out else "") + (f"{ELLIPSIS}\n" if skipped_messages else "") + row)
        previous = position
    if previous is not None and previous + 1 < len(units):
        following = units[previous + 1]
        _rstrip(out)
        out.append(f" {ELLIPSIS}" if following.message == units[previous].message else f"\n{ELLIPSIS}")
    return out


def _rstrip(parts: list[str]) -> None:
    """``parts`` as ``"".join(parts).rstrip()`` would leave them."""
    while parts and not parts[-1].rstrip():
        parts.pop()
    if parts:
        parts[-1] = parts[-1].rstrip()


def _entered(unit: Unit) -> str:
    """A unit shown after a gap: with its speaker, which a unit that continues a run or a message does not write."""
    if not unit.first:
        return f"{unit.speaker} {ELLIPSIS} {unit.text}".lstrip()
    return unit.text if unit.text.startswith(unit.speaker) else f"{unit.speaker} {unit.text}".lstrip()


def _body(unit: Unit) -> str:
    """A unit's text without its speaker: what a summary line quotes."""
    return unit.text[len(unit.speaker) :].strip() if unit.first and unit.text.startswith(unit.speaker) else unit.text


def _coverage(
    held: Sequence[frozenset[str]], weights: Mapping[str, float], strength: float, units: Sequence[Unit], inside: Sequence[int],
    source: str | None = None,
) -> float:
    """The share of a page the units ``inside`` hold: as much of it as the page matches the query (its
    strength) goes by the weight of the query terms they hold, the rest by their tokens — with ``source``, by
    the tokens of that role's units, the others' together worth :data:`OTHERS_SHARE` of theirs (a fact about the
    user is in the user's words, seldom in a reply's: the page whole is then worth little more than the user's
    messages, and the budget shows more pages instead, until it has room to spare)."""
    return _coverer(held, weights, strength, units, source)(inside)


def _coverer(
    held: Sequence[frozenset[str]], weights: Mapping[str, float], strength: float, units: Sequence[Unit], source: str | None,
    reach: Sequence[float] | None = None,
) -> Callable[[Sequence[int]], float]:
    """:func:`_coverage` of any units of the page, what does not depend on which worked out once (``reach``:
    :func:`_reach`'s, when it is at hand): a page's nested excerpts are many sets of one page's units."""
    share = _weights(units, source)
    tokens = [unit.tokens * w for unit, w in zip(units, share)]
    total_tokens = sum(tokens)
    reach = _reach(held, weights, units, source) if reach is None else reach
    every = sum(reach)

    def coverage(inside: Sequence[int]) -> float:
        by_tokens = sum(tokens[i] for i in inside) / total_tokens if total_tokens else 0.0
        by_match = sum(reach[i] for i in inside) / every if every > 0 else 0.0
        return min(max(strength * by_match + (1.0 - strength) * by_tokens, 0.0), 1.0)  # sums of floats may overshoot

    return coverage


OTHERS_SHARE = 0.1  # what the others' words in a page are worth, together, next to one participant's, to a question about them


def _order(units: Sequence[Unit], weights: Mapping[str, float], reach: Sequence[float]) -> list[int]:
    """The matching units in the order excerpts take them: the most query weight held or reached (``reach``, by
    :func:`_reach`) first, then the units that only repeat query terms, by the weight they repeat (ties: the
    earlier unit)."""
    query = frozenset(weights)
    own = [sum(weights[t] for t in query.intersection(unit.terms)) for unit in units]
    return sorted((i for i in range(len(units)) if own[i] > 0 or reach[i] > 0), key=lambda i: (-reach[i], -own[i], i))


def _reach(held: Sequence[frozenset[str]], weights: Mapping[str, float], units: Sequence[Unit], source: str | None) -> list[float]:
    """The query weight each unit holds, and :data:`NEXT_SHARE` of what the unit before it holds: the answer to a
    matching message is often the message that follows it (its reply, the next line of its burst), which need not
    say the query's words. With ``source`` (see :func:`gateway.core.asked.query_source`), only that role's units
    take a share."""
    own = [sum(weights[t] for t in found) for found in held]
    return [w + (NEXT_SHARE * own[i - 1] if i and (source is None or units[i].side.startswith(source)) else 0.0)
            for i, w in enumerate(own)]


def _estimate(units: Sequence[Unit], chosen: Sequence[int]) -> int:
    """An excerpt's tokens from its units' own counts and what :func:`render_excerpt` puts between them (a line
    break; an ``…`` for a gap; the speaker again where a message is entered in the middle). It errs high by a
    few per cent on long excerpts: the budget measures the real rendering and never goes over."""
    tokens = 0
    previous: int | None = None
    for position in chosen:
        unit = units[position]
        tokens += unit.tokens + 1
        if previous is None or position != previous + 1:
            tokens += 2 + (0 if unit.first or (previous is not None and units[previous].message == unit.message) else 4)
        previous = position
    return tokens + (2 if previous is not None and previous + 1 < len(units) else 0)


def excerpt_options(
    units: Sequence[Unit], weights: Mapping[str, float], count: Callable[[str], int], source: str | None = None
) -> tuple[ExcerptOption, ...]:
    """The nested excerpts of a page for a query whose terms weigh ``weights`` (see the module docstring):
    the top 1, 2, ... matching units while they leave some unit out and are shorter than the page, then the
    page whole (coverage 1, its size estimated). Empty when no unit matches or the page is a single unit.

    The :data:`EXACT_OPTIONS` smallest are counted exactly; larger ones are estimated (:func:`_estimate`): the
    tokenizer runs on at most that many excerpts of a page, however many of a long reply's lines match.
    ``source``: see :func:`gateway.core.asked.query_source`."""
    held, strength = _held(units, weights, source)
    reach = _reach(held, weights, units, source)
    ranked = _order(units, weights, reach)
    coverage = _coverer(held, weights, strength, units, source, reach)
    whole = sum(unit.tokens for unit in units)
    options: list[ExcerptOption] = []
    for k in range(1, len(ranked) + 1):
        chosen = tuple(sorted(ranked[:k]))
        if len(chosen) == len(units):
            break
        parts = _excerpt_parts(units, chosen)
        tokens = count_joined(parts, count) if k <= EXACT_OPTIONS else _estimate(units, chosen)
        if tokens >= whole:
            break
        options.append(ExcerptOption(chosen, "".join(parts), tokens, coverage(chosen)))
    return (*options, *whole_page(units)) if options else ()


def whole_page(units: Sequence[Unit]) -> tuple[ExcerptOption, ...]:
    """The page whole as an excerpt (coverage 1, its size estimated): a Detail node's text without the node's tags,
    so that a page shown whole in its entry costs only its own tokens. Empty for a single unit."""
    everything = tuple(range(len(units)))
    return (ExcerptOption(everything, render_excerpt(units, everything), _estimate(units, everything), 1.0),) if len(units) > 1 else ()


def leading_options(units: Sequence[Unit], count: Callable[[str], int]) -> tuple[ExcerptOption, ...]:
    """A page's opening units, one more at a time, then the page whole: what a turn that continues the page wants
    of it when the page cannot be shown whole, whatever the query matches (the question, and as much of its answer
    as fits). Coverage is the share of the page's tokens shown. Counted as :func:`excerpt_options` counts (the
    :data:`EXACT_OPTIONS` smallest exactly). Empty for a single unit."""
    if len(units) < 2:
        return ()
    whole = sum(unit.tokens for unit in units)
    options: list[ExcerptOption] = []
    for k in range(1, len(units)):
        chosen = tuple(range(k))
        parts = _excerpt_parts(units, chosen)
        tokens = count_joined(parts, count) if k <= EXACT_OPTIONS else _estimate(units, chosen)
        if tokens >= whole:
            break
        options.append(ExcerptOption(chosen, "".join(parts), tokens, sum(units[i].tokens for i in chosen) / whole if whole else 0.0))
    return (*options, *whole_page(units))


def _weights(units: Sequence[Unit], source: str | None) -> list[float]:
    """What each unit's tokens count for in a page's coverage: 1; with ``source``, 1 for that role's units, and the
    others' together :data:`OTHERS_SHARE` of theirs however long they talk (all 1 when that role says nothing)."""
    if source is None:
        return [1.0] * len(units)
    mine = [unit.side.startswith(source) for unit in units]
    own = sum(unit.tokens for unit, m in zip(units, mine) if m)
    others = sum(unit.tokens for unit, m in zip(units, mine) if not m)
    if not own:
        return [1.0] * len(units)
    other = OTHERS_SHARE * own / others if others else 0.0
    return [1.0 if m else other for m in mine]


def speaking_share(units: Sequence[Unit], source: str | None) -> float:
    """The share of a page's tokens that can hold what a query asks: with ``source``, that role's units' and
    :data:`OTHERS_SHARE` of that for the others' (a question about the user is answered by the user's words,
    however long the replies around them); else all."""
    total = sum(unit.tokens for unit in units)
    if source is None or not total:
        return 1.0
    return min(sum(unit.tokens * w for unit, w in zip(units, _weights(units, source))) / total, 1.0)


def line_coverage(units: Sequence[Unit], weights: Mapping[str, float], line: str, source: str | None = None) -> float:
    """The share of a page its background ``line`` holds, by the same measure as an excerpt's coverage: the
    units whose text is on the line verbatim."""
    held, strength = _held(units, weights, source)
    # verbatim only: a line collapses whitespace, which loses a message's line breaks (and a code block's shape)
    inside = [i for i, unit in enumerate(units) if _body(unit) in line]
    return _coverage(held, weights, strength, units, inside, source)
