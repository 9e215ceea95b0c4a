"""The days a question's own words point to: "10 days ago", "last Saturday", "in the past month".

:func:`gateway.core.lexical.drop_time_phrases` takes such phrases out of what is matched, since their words name a
date, not what was said. This module reads the date they name instead. A page that tells of an event is written on
the event's day or after it, so the span returned is the days on which the telling may have been written: from the
event's first possible day to its last plus :data:`TELLING_SLACK` (for days and weeks; what was done months or years
ago may be told any day since). A question that asks for a duration ("how many days ago did I…") names no date:
it has no count. Nor does a phrase next to a date written out, which is relative to that date.

Pure: the reference time is an argument.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

__all__ = ["TELLING_SLACK", "named_span"]

TELLING_SLACK = timedelta(days=1)  # an event is usually told the day it happens or the day after

_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a few": 3, "few": 3, "several": 4,
}
_COUNT = r"(\d{1,3}|a couple of|a few|few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_UNIT = r"(day|week|month|year)s?"
_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_AGO = re.compile(rf"\b{_COUNT} {_UNIT} (?:ago|back|earlier)\b", re.I)
_LAST_DAY = re.compile(rf"\blast ({'|'.join(_DAYS)})\b", re.I)
_LAST_PERIOD = re.compile(r"\blast (weekend|week|month|night)\b(?! of\b)", re.I)
_WITHIN = re.compile(rf"\b(?:past|last) (?:{_COUNT} )?{_UNIT}\b(?! of\b)", re.I)
_THIS = re.compile(r"\bthis (week|month|year)\b", re.I)
_YESTERDAY = re.compile(r"\b(the day before )?yesterday\b", re.I)
# a date written out ("before April 10, 2023", "as mentioned on 6 November", "in 2022"): the phrase is then
# relative to that date, not to now
_ABSOLUTE = re.compile(
    r"\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?"
    r"|nov(?:ember)?|dec(?:ember)?)\b\.? ?(?:\d{1,2}\b|\d{4}\b)|\b\d{1,2}(?:st|nd|rd|th)? (?:of )?(?:jan|feb|mar|apr|may|jun"
    r"|jul|aug|sep|oct|nov|dec)[a-z]*\b|\b(?:19|20)\d\d\b|\b\d{1,4}[/-]\d{1,2}[/-]\d{1,4}\b",
    re.I,
)
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}


def _count(word: str | None) -> int:
    if not word:
        return 1
    word = word.lower()
    return int(word) if word.isdigit() else _NUMBERS[word]


def named_span(text: str, now: datetime) -> tuple[date, date] | None:
    """The first and last day (inclusive, in ``now``'s calendar) on which a page telling what ``text`` asks about
    may have been written, from the first time phrase in ``text`` that names a date relative to ``now``; ``None``
    when it names none, only asks how long ago something was, or also writes a date out ("last week, as mentioned
    on November 6, 2023": relative to that date)."""
    if _ABSOLUTE.search(text):
        return None
    today = now.date()
    slack = TELLING_SLACK
    if match := _AGO.search(text):
        count, unit = _count(match.group(1)), match.group(2).lower()
        fuzzy = match.group(1).lower() in ("a couple of", "a few", "few", "several")
        back = timedelta(days=count * _UNIT_DAYS[unit])
        # "10 days ago" is that day; "two weeks ago" is said of a day a few days either side
        spread = timedelta(days=0 if unit == "day" and not fuzzy else _UNIT_DAYS[unit] // (2 if fuzzy else 4))
        if unit in ("month", "year"):  # something done months or years ago is told any time since
            return today - back - spread, today
        return today - back - spread, today - back + spread + slack
    if match := _LAST_DAY.search(text):
        weekday = _DAYS.index(match.group(1).lower())
        day = today - timedelta(days=(today.weekday() - weekday - 1) % 7 + 1)
        return day, day + slack
    if match := _YESTERDAY.search(text):
        day = today - timedelta(days=2 if match.group(1) else 1)
        return day, day + slack
    if match := _LAST_PERIOD.search(text):
        period = match.group(1).lower()
        if period == "night":
            return today - timedelta(days=1), today
        if period == "weekend":
            saturday = today - timedelta(days=(today.weekday() - 5) % 7 + (7 if today.weekday() >= 5 else 0))
            return saturday, saturday + timedelta(days=1) + slack
        if period == "week":
            monday = today - timedelta(days=today.weekday() + 7)
            return monday, monday + timedelta(days=6) + slack
        first = (today.replace(day=1) - timedelta(days=1)).replace(day=1)
        return first, today.replace(day=1) - timedelta(days=1) + slack
    if match := _WITHIN.search(text):
        return today - timedelta(days=_count(match.group(1)) * _UNIT_DAYS[match.group(2).lower()]), today
    if match := _THIS.search(text):
        unit = match.group(1).lower()
        start = {"week": today - timedelta(days=today.weekday()), "month": today.replace(day=1),
                 "year": today.replace(month=1, day=1)}[unit]
        return start, today
    return None
