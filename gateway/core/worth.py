"""What showing part of a page is worth and what it costs: the terms the budget (:mod:`gateway.core.budget`) fills
the context in, and the outside bound (:mod:`gateway.core.outside`) bounds a page left out of it by.

Each page has a *priority*, a double decay of age and relevance (:func:`rank`),

    priority = (FLOOR + (1 - FLOOR) * relevance) * (AGE_FLOOR + (1 - AGE_FLOOR) * 0.5 ** (age / half_life))

(``relevance`` in [0, 1], ``age = now - timestamp`` clamped at 0, ``FLOOR`` = 0.1 so that a page no query word
names still has some chance of being needed, ``AGE_FLOOR`` = 0.8 so that age takes at most a fifth of it: in a
conversation that spans months a relevant old page must still beat a less relevant recent one).

A view of a page (a line, an :class:`Excerpt`, a node) costs its tokens and shows a share of the page, its
*coverage* (:func:`share_of`); it is worth ``priority ** RELEVANCE_POWER x coverage x`` the page's tokens (see
:data:`RELEVANCE_POWER`). A node costs its tags on top (``NODE_OVERHEAD``), the lines in
``<Background_Context>`` their element's tags (``BACKGROUND_OVERHEAD``) and one date line per day
(``DAY_OVERHEAD``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from gateway.core.pages import utc

__all__ = [
    "AGE_FLOOR",
    "BACKGROUND_OVERHEAD",
    "DAY_OVERHEAD",
    "DEFAULT_HALF_LIFE",
    "FLOOR",
    "MAP_OVERHEAD",
    "NODE_OVERHEAD",
    "RELEVANCE_POWER",
    "Excerpt",
    "rank",
    "rank_by_age",
    "share_of",
]

DEFAULT_HALF_LIFE = timedelta(hours=24)
FLOOR = 0.1
AGE_FLOOR = 0.8
NODE_OVERHEAD = 40
BACKGROUND_OVERHEAD = 10
DAY_OVERHEAD = 7  # the "YYYY-MM-DD:" line that heads a day's lines in <Background_Context> (cl100k)
MAP_OVERHEAD = 3  # the "other topics:" line that heads the thread's map in <Background_Context> (cl100k)
# A page's worth is priority ** RELEVANCE_POWER times what it shows. Relevance is a score normalised to the best
# page, not a probability: the chance that a page holds what is asked falls much faster than its score (a page
# scoring half the best is far less than half as likely to be the one). Measured on LoCoMo (2 conversations,
# recall @1k/2k/4k, before worth counted the page's size): power 1 0.578/0.763/0.885, 2 0.718/0.840/0.916,
# 3 0.736/0.864/0.919; with the size (4 conversations): power 1 0.730/0.835/0.895, 3 0.737/0.835/0.899,
# 6 0.737/0.837/0.900.
RELEVANCE_POWER = 3


@dataclass(frozen=True)
class Excerpt:
    """One excerpt option of a candidate: its entry's tokens (id included) and the share of the page it shows."""

    tokens: int
    coverage: float


def share_of(part: int, whole: int) -> float:
    """The coverage of ``part`` of a page's ``whole`` tokens (1 for an empty page)."""
    return 1.0 if whole <= 0 else min(part / whole, 1.0)


def rank(relevance: float, timestamp: datetime, now: datetime, half_life: timedelta = DEFAULT_HALF_LIFE) -> float:
    """A page's priority (the module docstring's double decay) from its relevance and (timezone-aware) timestamp:
    :func:`gateway.core.budget.priority` before any Candidate is made."""
    return rank_by_age((utc(now) - utc(timestamp)).total_seconds(), relevance, half_life.total_seconds())


def rank_by_age(age: float, relevance: float, half_life: float) -> float:
    """:func:`rank` of a page ``age`` seconds old (negative: from the future, taken as new), ``half_life`` in
    seconds: the same float, for a caller that has the ages in hand."""
    decay = AGE_FLOOR + (1.0 - AGE_FLOOR) * 0.5 ** (max(age, 0.0) / half_life)
    return float((FLOOR + (1.0 - FLOOR) * relevance) * decay)
