"""Whose words a question asks about: the user's alone (a question in the first person, `query_source`), or the side
of the participants it names (`participants`, `named_side`), so that a page's excerpts and coverage weigh that side's
messages (:mod:`gateway.core.excerpt`) and the router reads the vectors of that side's words."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from types import MappingProxyType

from gateway.core.labels import NAME_PAGES, NAME_RATIO, NAME_SHARE
from gateway.core.lexical import terms

__all__ = ["NAMED", "named_side", "participants", "query_source"]

_FIRST_PERSON = frozenset("i me my mine myself i'm i've i'd i'll".split())
_SECOND_PERSON = frozenset("you your yours yourself you're you've you'd you'll".split())
_HOW_TO = re.compile(r"\bhow (?:do|did|can|could|should|would) i\b|\bhow to\b", re.IGNORECASE)
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)


def query_source(query: str) -> str | None:
    """Whose messages can hold what ``query`` asks about: ``"user"`` when it asks about the user alone (it speaks
    in the first person and never addresses the assistant: "which lens did I buy?"), since facts about the user
    come from the user's own messages — an assistant's reply only elaborates on them, and when it repeats the
    query's words (advice on lenses) it holds none of the answer; ``None`` (anyone's) otherwise: a question about
    what the assistant said ("which sealant did you recommend?"), about third parties, or about how to do
    something ("how did I fix the import error?"), whose answer is the assistant's instructions."""
    if _HOW_TO.search(query):
        return None
    found = {w.lower().replace("’", "'") for w in _WORD.findall(query)}
    return "user" if found & _FIRST_PERSON and not found & _SECOND_PERSON else None


NAMED = re.compile(r"\b[A-Z][a-z]+\b")  # a word that may name someone


def participants(
    query: str, said: Callable[[str], tuple[int, int]], pages: int, words: Callable[[], tuple[int, int]],
    labelled: Mapping[str, str] = MappingProxyType({}),
) -> dict[str, str]:
    """The participants ``query`` names ("what did Caroline paint?"): each name, case-folded, with its side, ``"user"``
    or ``"assistant"``, whose messages hold what it asks about (:func:`named_side`). A name that labels one side's
    lines (``labelled``: a case-folded word to its role, `gateway.core.labels.speakers`) names that side; any other
    is learnt from who says it — a participant is called by name by the other and almost never by themselves (a
    nickname too). ``said(term)`` gives the pages where the user says ``term`` and those where only the others do;
    ``pages`` is the thread's page count; ``words()`` how many words the user and the others say in the thread.

    A side that says more says every word more often: an assistant whose replies are seven times as long as the
    user's messages says "life" (of "Spiritual Life") in 34 pages to the user's 2, "St" (of "St. Mary's") in 10
    to 1. So a name is said :data:`NAME_RATIO` times as often as by the other side, in pages and per word said,
    with one mention more on each side: a side that never says a word may yet, and "Tanqueray", the author of a
    treatise the assistant quoted in 6 pages and the user never named, is not the user's name. Between two people
    who talk about as much (LoCoMo) each other's names come out 15 to 250 times as frequent, a nickname said in 7
    pages 8 times, a friend one of them names 9 times; "life", "St" and "Tanqueray" 1.7, 0.7 and 1.0 times."""
    least = max(NAME_PAGES, NAME_SHARE * pages)
    found: dict[str, str] = {}
    counted: list[tuple[int, int]] = []
    for name in dict.fromkeys(word.casefold() for word in NAMED.findall(query)):
        if name in labelled:
            found[name] = labelled[name]
            continue
        found_terms = terms(name)
        if not found_terms:
            continue
        by_user, by_others = said(found_terms[0])
        if by_others >= least and by_user * NAME_RATIO <= by_others:
            side, speaker, hearer = "user", by_others, by_user  # the others call the user by it
        elif by_user >= least and by_others * NAME_RATIO <= by_user:
            side, speaker, hearer = "assistant", by_user, by_others
        else:
            continue
        if not counted:  # only for a word one side says often: most questions name none
            counted.append(words())
        user_words, others_words = counted[0]
        speaker_words, hearer_words = (others_words, user_words) if side == "user" else (user_words, others_words)
        # a side that never says the word is not evidence that it never would: one more mention on each side
        if (speaker + 1) * hearer_words >= NAME_RATIO * (hearer + 1) * speaker_words:
            found[name] = side
    return found


def named_side(named: Mapping[str, str]) -> str | None:
    """The side a question about the participants ``named`` (:func:`participants`) is about: theirs when they are all
    of one side; ``None`` (anyone's) for both sides, or none."""
    sides = set(named.values())
    return sides.pop() if len(sides) == 1 else None
