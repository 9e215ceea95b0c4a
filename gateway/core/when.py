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
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTH = (r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
          r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?")
_ORDINAL = r"(\d{1,2})(?:st|nd|rd|th)?"
# a date written out ("on 29 Dec 2023", "the 10th of February 2024", "January 6, 2024", "14.01.2024", "2024-01-14",
# "in August 2023"); one that follows "before", "after", "since" or "until" bounds a period rather than naming a day
_DAY_MONTH = re.compile(rf"\b{_ORDINAL} (?:of )?{_MONTH},? ?(\d{{4}})?\b", re.I)
_MONTH_DAY = re.compile(rf"\b{_MONTH} {_ORDINAL}\b(?!:),? ?(\d{{4}})?\b", re.I)
_DOTTED = re.compile(r"\b(\d{1,2})\.(\d{1,2})\.(\d{4})\b")
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_SLASHED = re.compile(r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b")
_IN_MONTH = re.compile(rf"\b(?:in|of|during) (?:early |late |mid-?)?{_MONTH}(?: (\d{{4}}))?\b", re.I)
_BOUND = re.compile(r"\b(?:before|after|since|until|till|by|prior to)\s+(?:the\s+)?$", re.I)
_YEAR = re.compile(r"\b(?:19|20)\d\d\b")
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}


def _count(word: str | None) -> int:
    if not word:
        return 1
    word = word.lower()
    return int(word) if word.isdigit() else _NUMBERS[word]


def _month(name: str) -> int:
    return _MONTHS.index(name[:3].lower()) + 1


def _day(year: int | None, month: int, day: int, today: date) -> date | None:
    """The date, in the latest year not after ``today`` when the year is not written; None when there is none."""
    try:
        if year is not None:
            return date(year, month, day)
        found = date(today.year, month, day)
        return found if found <= today else date(today.year - 1, month, day)
    except ValueError:
        return None


def _written(text: str, today: date) -> tuple[tuple[date, date] | None, bool]:
    """The span of the first date written out in ``text`` (a day, or a month), and whether there is one at all: a
    day's telling is written on the day or the next; a month's in the month or the day after. A date that bounds a
    period ("before April 10, 2023") names none."""
    found: list[tuple[int, tuple[date, date] | None]] = []
    for pattern, order in ((_DAY_MONTH, "dmy"), (_MONTH_DAY, "mdy"), (_DOTTED, "dmy"), (_ISO, "ymd"), (_SLASHED, "slash")):
        for match in pattern.finditer(text):
            a, b, c = match.groups()
            if order == "dmy" and pattern is _DAY_MONTH:
                day, month, year = int(a), _month(b), int(c) if c else None
            elif order == "mdy":
                month, day, year = _month(a), int(b), int(c) if c else None
            elif order == "dmy":
                day, month, year = int(a), int(b), int(c)
            elif order == "ymd":
                year, month, day = int(a), int(b), int(c)
            else:  # m/d/y, unless the first can only be a day; both 12 or less: no telling which
                first, second, year = int(a), int(b), int(c)
                if (first <= 12) == (second <= 12):
                    found.append((match.start(), None))
                    continue
                month, day = (first, second) if first <= 12 else (second, first)
            when = _day(year, month, day, today)
            bounded = _BOUND.search(text[: match.start()]) is not None
            found.append((match.start(), None if when is None or bounded else (when, when + TELLING_SLACK)))
    for match in _IN_MONTH.finditer(text):
        month, year = _month(match.group(1)), int(match.group(2)) if match.group(2) else None
        opening = _day(year, month, 1, today)
        if opening is not None:
            after = date(opening.year + (month == 12), month % 12 + 1, 1)
            found.append((match.start(), (opening, after - timedelta(days=1) + TELLING_SLACK)))
    if found:
        return min(found, key=lambda item: item[0])[1], True
    return None, _YEAR.search(text) is not None


def named_span(text: str, now: datetime) -> tuple[date, date] | None:
    """The first and last day (inclusive, in ``now``'s calendar) on which a page telling what ``text`` asks about
    may have been written: from a date written out ("on 29 Dec 2023", "in August 2023": that day or month), else
    from the first time phrase in ``text`` that names a date relative to ``now``; ``None`` when it names none, only
    asks how long ago something was, bounds a period by a date ("before April 10, 2023") or writes only a year
    (the relative phrase is then relative to that date, not to now)."""
    today = now.date()
    written, dated = _written(text, today)
    if dated:
        return written
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
