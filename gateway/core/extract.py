"""The deterministic, extractive manifest: a summary and keyword clusters computed from a block's own text.

This is the fallback when no summarizer model answers (DESIGN §5). Contract: the summary keeps facts rather than
paraphrasing them — the user's message and the final reply verbatim when each fits a generous cap, else their
leading whole sentences (whitespace collapsed); a word is cut only when a single sentence is longer than the cap,
and a cut is marked with ``…``. Same input, same output.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from types import MappingProxyType

from gateway.core.blocks import Block
from gateway.core.excerpt import labelled, names_sides

__all__ = ["USER_CAP", "REPLY_CAP", "extract_clusters", "extractive_summary", "lead_text"]

USER_CAP = 1200
REPLY_CAP = 1200
_ELLIPSIS = "…"

_SENTENCE_END = re.compile(r"(?<=[.!?。！？;；])\s+|(?<=[。！？])")
_WORD = re.compile(r"[^\W\d_][\w\-]*\w|[^\W\d_]")
_STOPWORDS = frozenset(
    """
    about above after again against all also and any are aren because been before being below between both but
    can cannot could did does doing don down during each few for from further had has have having her here hers
    herself him himself his how however into its itself just let like made make may might more most much must
    myself nor not now off once only other ought our ours ourselves out over own same she should some such than
    that the their theirs them themselves then there these they this those through too under until upon use used
    using very was were what when where which while who whom why will with would you your yours yourself
    yourselves please thanks thank okay yes get got one two want need know think see sure well really still
    user assistant tool
    """.split()
)


def _squash(text: str) -> str:
    return " ".join(text.split())


def lead_text(text: str, cap: int) -> str:
    """The leading whole sentences of ``text`` (whitespace collapsed) that fit in ``cap`` characters.

    When the text is longer, ``…`` marks the omission; a first sentence longer than ``cap`` is cut at the last
    word boundary before it.
    """
    flat = _squash(text)
    if len(flat) <= cap:
        return flat
    ends = [m.start() for m in _SENTENCE_END.finditer(flat, 0, cap + 1) if 0 < m.start() <= cap]
    if ends:
        kept = flat[: ends[-1]]
    else:
        head = flat[:cap]
        space = head.rfind(" ")
        kept = head[:space] if space > cap // 2 else head
    return kept.rstrip() + " " + _ELLIPSIS


def _kept(text: str, cap: int) -> str:
    """``text`` itself when it fits ``cap`` (verbatim: a fact is never reworded), else its lead."""
    return text if len(text) <= cap else lead_text(text, cap)


def extractive_summary(block: Block, names: Mapping[str, str] = MappingProxyType({})) -> str:
    """A fact-keeping summary of ``block``: ``User: …`` / ``Tools used: …`` / ``Assistant: …`` lines; where each
    side's messages open with its own name (a chat between two people: `gateway.core.excerpt.names_sides`, decided on
    the page's text as its excerpts are), the name alone says who speaks (``Vanessa: …`` / ``Nebraas: …``); where the
    thread's sides are known by the names they call each other (``names``, `gateway.core.labels.side_names`), those
    names open the lines instead of the roles (``Jon: …`` / ``Gina: …``)."""
    if not block.tool_names and names_sides(block.text):
        user, assistant = "", ""
    elif not block.tool_names and names and not labelled(block.text):
        user, assistant = f"{names['user']}: ", f"{names['assistant']}: "
    else:
        user, assistant = "User: ", "Assistant: "
    lines: list[str] = []
    if block.anchor_text.strip():
        lines.append(user + _kept(block.anchor_text, USER_CAP))
    if block.tool_names:
        lines.append("Tools used: " + ", ".join(dict.fromkeys(block.tool_names)))
    if block.reply_text.strip():
        lines.append(assistant + _kept(block.reply_text, REPLY_CAP))
    return "\n".join(lines) if lines else "(empty exchange)"


def extract_clusters(text: str, *, emphasis: str = "", limit: int = 8) -> tuple[str, ...]:
    """Up to ``limit`` lower-case keywords of ``text``, most frequent first.

    Words in ``emphasis`` (the user's message) count double. Ties keep first-appearance order; stop words and
    words shorter than three characters are skipped.
    """
    counts: Counter[str] = Counter()
    first_seen: dict[str, int] = {}
    for weight, source in ((2, emphasis), (1, text)):
        for match in _WORD.finditer(source):
            word = match.group().lower()
            if len(word) < 3 or len(word) > 40 or word in _STOPWORDS:
                continue
            counts[word] += weight
            first_seen.setdefault(word, len(first_seen))
    ranked = sorted(counts, key=lambda word: (-counts[word], first_seen[word]))
    return tuple(ranked[:limit])
