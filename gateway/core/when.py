"""The days a question's own words point to: "10 days ago", "last Saturday", "in the past month", 上周五, 三天前.

:func:`gateway.core.lexical.drop_time_phrases` takes such phrases out of what is matched, since their words name a
date, not what was said. This module reads the date they name instead. A page that tells of an event is written on
the event's day or after it, so the span returned is the days on which the telling may have been written: from the
event's first possible day to its last plus :data:`TELLING_SLACK` (for days and weeks; what was done months or years
ago may be told any day since). A question that asks for a duration ("how many days ago did I…") names no date:
it has no count. Nor does a phrase next to a date written out, which is relative to that date.

The phrases and dates of each language are its table's (:mod:`gateway.core.languages`); this module only reads
them, the same way for every language.

Pure: the reference time is an argument.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from gateway.core.languages import LANGUAGES, Kind, Language

__all__ = ["TELLING_SLACK", "named_span"]

TELLING_SLACK = timedelta(days=1)  # an event is usually told the day it happens or the day after
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}


@dataclass(frozen=True, eq=False)  # one per language: equal when the same
class _Compiled:
    """A language's table with its patterns compiled."""

    language: Language
    script: re.Pattern[str] | None
    dates: tuple[re.Pattern[str], ...]
    in_month: re.Pattern[str] | None
    bound_before: re.Pattern[str] | None
    bound_after: re.Pattern[str] | None
    year: re.Pattern[str] | None
    phrases: tuple[tuple[Kind, re.Pattern[str]], ...]

    @classmethod
    def of(cls, language: Language) -> _Compiled:
        def compiled(pattern: str | None) -> re.Pattern[str] | None:
            return _compiled(pattern) if pattern is not None else None

        return cls(
            language, compiled(language.script), tuple(_compiled(p) for p in language.dates), compiled(language.in_month),
            compiled(language.bound_before), compiled(language.bound_after), compiled(language.year),
            tuple((kind, _compiled(p)) for kind, p in language.phrases),
        )  # fmt: skip


def _compiled(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled, case ignored where it has letters to ignore it in (it costs time on every character)."""
    letters = re.search(r"[A-Za-z]", re.sub(r"\\.|\(\?P?<\w+>|\(\?P=\w+\)", "", pattern)) is not None
    return re.compile(pattern, re.IGNORECASE if letters else 0)


_TABLES = tuple(_Compiled.of(language) for language in LANGUAGES)
# each kind of relative phrase, in the order kinds are looked for: every language's patterns of it
_BY_KIND = tuple((kind, tuple((table, p) for table in _TABLES for k, p in table.phrases if k is kind)) for kind in Kind)


_ANY_TEXT = [table for table in _TABLES if table.script is None]


def _tables(text: str) -> list[_Compiled]:
    """The tables of the languages ``text`` may be written in (a table of a script it does not hold matches none)."""
    if text.isascii():
        return _ANY_TEXT
    return [table for table in _TABLES if table.script is None or table.script.search(text) is not None]


def _number(word: str | None, language: Language) -> int:
    """A count, a day or a month as written (digits, a number word, a month's name); none written is one."""
    if not word:
        return 1
    word = word.lower()
    if word.isdigit():
        return int(word)
    if word in language.numbers:
        return language.numbers[word]
    return language.months.index(word[:3]) + 1


def _day(year: int | None, month: int, day: int, today: date) -> date | None:
    """The date, in the latest year not after ``today`` when the year is not written; None when there is none."""
    try:
        if year is not None:
            return date(year, month, day)
        found = date(today.year, month, day)
        return found if found <= today else date(today.year - 1, month, day)
    except ValueError:
        return None


def _written_day(match: re.Match[str], language: Language) -> tuple[int | None, int, int] | None:
    """(year, month, day) of a date written out; None for a d/m or m/d date where either could be the month."""
    groups = match.groupdict()
    year = int(groups["year"]) if groups.get("year") else None
    if "either" in groups:  # m/d/y, unless the first can only be a day; both 12 or less: no telling which
        first, second = int(groups["either"]), int(groups["other"])
        if (first <= 12) == (second <= 12):
            return None
        month, day = (first, second) if first <= 12 else (second, first)
        return year, month, day
    return year, _number(groups["month"], language), _number(groups["day"], language)


def _written(text: str, today: date, tables: list[_Compiled]) -> tuple[tuple[date, date] | None, bool]:
    """The span of the first date written out in ``text`` (a day, or a month), and whether there is one at all: a
    day's telling is written on the day or the next; a month's in the month or the day after. A date that bounds a
    period ("before April 10, 2023", 3月5日之前) names none."""
    found: list[tuple[int, tuple[date, date] | None]] = []
    for table in tables:
        for pattern in table.dates:
            for match in pattern.finditer(text):
                parts = _written_day(match, table.language)
                when = _day(*parts, today) if parts is not None else None
                bounded = (table.bound_before is not None and table.bound_before.search(text[: match.start()]) is not None) or (
                    table.bound_after is not None and table.bound_after.search(text[match.end() :]) is not None
                )
                found.append((match.start(), None if when is None or bounded else (when, when + TELLING_SLACK)))
    for table in tables:
        if table.in_month is None:
            continue
        for match in table.in_month.finditer(text):
            month = _number(match.group("month"), table.language)
            year = int(match.group("year")) if match.group("year") else None
            first = _day(year, month, 1, today)
            if first is not None:
                after = date(first.year + (month == 12), month % 12 + 1, 1)
                found.append((match.start(), (first, after - timedelta(days=1) + TELLING_SLACK)))
    if found:
        return min(found, key=lambda item: item[0])[1], True
    return None, any(table.year is not None and table.year.search(text) is not None for table in tables)


def _relative(kind: Kind, match: re.Match[str], language: Language, today: date) -> tuple[date, date]:
    """The span a relative phrase of ``kind`` names (see :class:`gateway.core.languages.Kind`)."""
    slack = TELLING_SLACK
    groups = match.groupdict()
    if kind is Kind.AGO:
        written = groups["count"] or ""
        count, unit = _number(written, language), language.units[groups["unit"].lower()]
        fuzzy = written.lower() in language.fuzzy
        back = timedelta(days=count * _UNIT_DAYS[unit])
        # "10 days ago" is that day; "two weeks ago" is said of a day a few days either side
        spread = timedelta(days=0 if unit == "day" and not fuzzy else _UNIT_DAYS[unit] // (2 if fuzzy else 4))
        if unit in ("month", "year"):  # something done months or years ago is told any time since
            return today - back - spread, today
        return today - back - spread, today - back + spread + slack
    if kind is Kind.LAST_WEEKDAY:
        weekday = language.weekdays[groups["weekday"].lower()]
        day = today - timedelta(days=(today.weekday() - weekday - 1) % 7 + 1)
        return day, day + slack
    if kind is Kind.WEEKDAY_LAST_WEEK:
        day = today - timedelta(days=today.weekday() + 7) + timedelta(days=language.weekdays[groups["weekday"]])
        return day, day + slack
    if kind is Kind.DAYS_BACK:
        day = today - timedelta(days=language.back[groups["back"].lower()])
        return day, day + slack
    if kind is Kind.LAST_PERIOD:
        period = language.periods[groups["period"].lower()]
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
    unit = language.units[groups["unit"].lower()]
    if kind is Kind.WITHIN:
        return today - timedelta(days=_number(groups.get("count"), language) * _UNIT_DAYS[unit]), today
    start = {"week": today - timedelta(days=today.weekday()), "month": today.replace(day=1),
             "year": today.replace(month=1, day=1)}[unit]  # fmt: skip
    return start, today


def named_span(text: str, now: datetime) -> tuple[date, date] | None:
    """The first and last day (inclusive, in ``now``'s calendar) on which a page telling what ``text`` asks about
    may have been written: from a date written out ("on 29 Dec 2023", "in August 2023", 3月5日: that day or month),
    else from the first time phrase in ``text`` that names a date relative to ``now`` (of the first :class:`Kind`
    found, in any language); ``None`` when it names none, only asks how long ago something was, bounds a period by
    a date ("before April 10, 2023") or writes only a year (the relative phrase is then relative to that date, not
    to now)."""
    today = now.date()
    tables = _tables(text)
    written, dated = _written(text, today, tables)
    if dated:
        return written
    every = len(tables) == len(_TABLES)
    for kind, patterns in _BY_KIND:
        for table, pattern in patterns:
            if (every or table in tables) and (match := pattern.search(text)):
                return _relative(kind, match, table.language, today)
    return None
