"""The words of each language that lexical matching and dating treat apart, as data: one :class:`Language` per
language, the same fields for every one, read by the code of :mod:`gateway.core.lexical`, :mod:`gateway.core.when`
and the router; that code has no branch per language. A text is matched with every language's table at once: a
pattern or word of one language does not occur in another's text (their scripts differ), so adding a table leaves
what the others match as it was.

A table's words are as a text writes them. Words of a language written without spaces (Chinese) are each one word
of its segmenter's dictionary (tests/adapters/test_segmenter.py holds them so), so a table word is also a term.

Dating (:mod:`gateway.core.when`): ``dates`` are the patterns of a date written out, with the groups ``day``,
``month`` (a number or a month's name) and ``year``; ``in_month`` a month named without a day; ``bound_before`` /
``bound_after`` what, written just before or after such a date, makes it a period's bound rather than a day;
``year`` a year written alone. ``phrases`` are the relative phrases, each with its :class:`Kind` (what its groups
mean is said there); ``numbers``, ``units``, ``weekdays`` and ``back`` turn their groups into numbers, units of
time, weekdays (Monday 0) and days back. ``time_phrases`` are the phrases that date a question, left out of what it
is matched on.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["CHINESE", "ENGLISH", "LANGUAGES", "Kind", "Language"]


class Kind(enum.Enum):
    """How a relative phrase names its days, in the order they are looked for: the first kind found decides.

    AGO: ``count`` (optional: one) ``unit`` back from today. LAST_WEEKDAY: the last ``weekday`` before today
    ("last Friday"). WEEKDAY_LAST_WEEK: ``weekday`` of the calendar week before this one (上周五). DAYS_BACK: the day
    ``back`` days before today ("yesterday", 今天). LAST_PERIOD: the calendar ``period`` before this one (night,
    weekend, week, month). WITHIN: the ``count`` (optional: one) ``unit`` up to today ("in the past month").
    THIS: this calendar ``unit`` up to today."""

    AGO = "ago"
    LAST_WEEKDAY = "last weekday"
    WEEKDAY_LAST_WEEK = "weekday of last week"
    DAYS_BACK = "days back"
    LAST_PERIOD = "last period"
    WITHIN = "within"
    THIS = "this"


@dataclass(frozen=True)
class Language:
    """One language's table (see the module docstring)."""

    name: str
    script: str | None  # a character class: the table applies to a text holding one of them (None: to every text)
    stopwords: frozenset[str]  # words that tell no page apart
    low_information: frozenset[str]  # with the stopwords: the words of a reply with no content of its own
    time_phrases: str  # a regular expression (case ignored): the phrases that date a question
    telling: tuple[str, ...]  # the words with which a page tells of an event of its own day or the day before
    placing: tuple[str, ...]  # the words that place an event in time
    durations: tuple[str, ...]  # units of time: a duration's words
    asks_duration: str  # a question asking how long a state has lasted until now
    asks_when: str  # a question asking when something happened
    dates: tuple[str, ...] = ()
    in_month: str | None = None
    bound_before: str | None = None
    bound_after: str | None = None
    year: str | None = None
    phrases: tuple[tuple[Kind, str], ...] = ()
    numbers: Mapping[str, int] = field(default_factory=dict)
    fuzzy: frozenset[str] = frozenset()  # counts said loosely ("a few"): a span a few days either side
    units: Mapping[str, str] = field(default_factory=dict)  # -> day, week, month, year
    weekdays: Mapping[str, int] = field(default_factory=dict)
    back: Mapping[str, int] = field(default_factory=dict)
    periods: Mapping[str, str] = field(default_factory=dict)  # -> night, weekend, week, month
    months: tuple[str, ...] = ()  # the months' names, by their first three letters


# --- English ----------------------------------------------------------------------------------------------

_EN_COUNT = r"(?:\d{1,3}|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|a couple of|a few|few|several|many)"
_EN_UNIT = r"(?:days?|weeks?|months?|years?)"
_EN_DAYS = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_EN_COUNTED = r"(?P<count>\d{1,3}|a couple of|a few|few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_EN_UNIT_GROUP = r"(?P<unit>day|week|month|year)s?"
_EN_MONTH = (r"(?P<month>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
             r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?")
_EN_ORDINAL = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"

ENGLISH = Language(
    name="en",
    script=None,
    stopwords=frozenset(
        """a about above after again against all also am an and any are as at be because been before being below
        between both but by can could did do does doing down during each few for from further had has have having he
        her here hers him his how i if in into is it its itself just me more most my myself no nor not now of off on
        once only or other our ours out over own same she should so some such than that the their theirs them then
        there these they this those through to too under until up very was we were what when where which while who
        whom why will with would you your yours yourself user assistant tool ok okay yes yeah oh really please thanks
        thank s t don didn doesn isn wasn aren weren i'm it's that's""".split()
    ),
    low_information=frozenset(
        """continue go on next then and more again what else so still it that this fails failed broke broken
        error works work doesn't does not why how yes no ok okay please keep going do same fix try sure great good
        cool nice perfect fine right alright got it gotcha understood sounds makes sense thx ty""".split()
    ),
    time_phrases=(
        rf"\b(?:(?:in|over|during|within) )?(?:the )?(?:past|last) (?:{_EN_COUNT} )?{_EN_UNIT}\b"  # in the past month
        rf"|\b{_EN_COUNT} {_EN_UNIT} (?:ago|back|earlier)\b"  # two weeks ago, how many days ago
        rf"|\blast (?:week|weekend|month|year|night|{_EN_DAYS})\b|\bthis (?:week|month|year)\b"
        r"|\b(?:the day before )?yesterday\b"
    ),
    telling=("today", "tonight", "yesterday"),
    placing=("yesterday", "today", "tonight", "ago", "last", "week", "weekend", "month", "year", "monday", "tuesday",
             "wednesday", "thursday", "friday", "saturday", "sunday"),
    durations=("minutes", "hours", "days", "weeks", "months", "years", "decades"),
    asks_duration=r"\bhow long (?:have|has)\b",
    asks_when=r"\bwhen (?:did|was|were)\b",
    # a date written out ("on 29 Dec 2023", "the 10th of February 2024", "January 6, 2024", "14.01.2024",
    # "2024-01-14", "01/14/2024"); the last, m/d or d/m, only where one of them can only be the day
    dates=(
        rf"\b{_EN_ORDINAL} (?:of )?{_EN_MONTH},? ?(?P<year>\d{{4}})?\b",
        rf"\b{_EN_MONTH} {_EN_ORDINAL}\b(?!:),? ?(?P<year>\d{{4}})?\b",
        r"\b(?P<day>\d{1,2})\.(?P<month>\d{1,2})\.(?P<year>\d{4})\b",
        r"\b(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})\b",
        r"\b(?P<either>\d{1,2})/(?P<other>\d{1,2})/(?P<year>\d{4})\b",
    ),
    in_month=rf"\b(?:in|of|during) (?:early |late |mid-?)?{_EN_MONTH}(?: (?P<year>\d{{4}}))?\b",
    bound_before=r"\b(?:before|after|since|until|till|by|prior to)\s+(?:the\s+)?$",
    year=r"\b(?:19|20)\d\d\b",
    phrases=(
        (Kind.AGO, rf"\b{_EN_COUNTED} {_EN_UNIT_GROUP} (?:ago|back|earlier)\b"),
        (Kind.LAST_WEEKDAY, rf"\blast (?P<weekday>monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b"),
        (Kind.DAYS_BACK, r"\b(?P<back>(?:the day before )?yesterday)\b"),
        (Kind.LAST_PERIOD, r"\blast (?P<period>weekend|week|month|night)\b(?! of\b)"),
        (Kind.WITHIN, rf"\b(?:past|last) (?:{_EN_COUNTED} )?{_EN_UNIT_GROUP}\b(?! of\b)"),
        (Kind.THIS, r"\bthis (?P<unit>week|month|year)\b"),
    ),
    numbers={"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
             "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a few": 3, "few": 3, "several": 4},
    fuzzy=frozenset({"a couple of", "a few", "few", "several"}),
    units={"day": "day", "week": "week", "month": "month", "year": "year"},
    weekdays={d: i for i, d in enumerate(("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))},
    back={"yesterday": 1, "the day before yesterday": 2},
    periods={"night": "night", "weekend": "weekend", "week": "week", "month": "month"},
    months=("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
)


# --- Chinese ----------------------------------------------------------------------------------------------

_ZH_DIGITS = "一二三四五六七八九"
_ZH_NUMBERS = {
    **{d: i for i, d in enumerate(_ZH_DIGITS, 1)},
    "两": 2, "十": 10,
    **{f"十{d}": 10 + i for i, d in enumerate(_ZH_DIGITS, 1)},
    **{f"{t}十": 10 * j for j, t in enumerate(_ZH_DIGITS, 1) if j > 1},
    **{f"{t}十{d}": 10 * j + i for j, t in enumerate(_ZH_DIGITS, 1) if j > 1 for i, d in enumerate(_ZH_DIGITS, 1)},
    "几": 3, "好几": 4, "一两": 2, "两三": 3, "三四": 4,
}  # fmt: skip
_ZH_NUMBER = r"\d{1,3}|[一二三四五六七八九十两几]{1,3}|好几"
_ZH_COUNT = rf"(?P<count>{_ZH_NUMBER})"
_ZH_UNIT = r"(?P<unit>天|日|个?(?:星期|礼拜)|周|个月|年)"
_ZH_WEEKDAY = r"(?P<weekday>[一二三四五六日天])"
_ZH_DAY = r"(?P<day>\d{1,2}|[一二三]?十[一二三四五六七八九]?|[一二三四五六七八九])"
_ZH_MONTH = r"(?P<month>\d{1,2}|十[一二]?|[一二三四五六七八九])"

CHINESE = Language(
    name="zh",
    script="[\u3400-\u4dbf\u4e00-\u9fff]",
    stopwords=frozenset(
        """的 了 着 过 是 在 和 与 跟 及 也 都 就 才 又 还 再 很 太 挺 真 最 更 吗 呢 吧 啊 呀 哦 哈 嘛 么 啦 嗯 喔 哇 欸
        我 你 您 他 她 它 我们 你们 他们 她们 它们 咱们 自己 大家 这 那 这个 那个 这些 那些 这里 那里 这样 那样 这么 那么
        什么 怎么 怎样 怎么样 哪 哪个 哪些 哪里 哪儿 谁 多少 几 为什么 如何 是否 是不是 有没有 有 没有 没 不 别 一个 一些 一下
        个 把 被 给 对 向 从 到 为 以 让 比 于 而 但 但是 可是 不过 因为 所以 如果 虽然 然后 或者 还是 而且 并且 就是 只是
        也是 还有 已经 一直 一起 可以 可能 应该 需要 要 会 能 想 得 地 之 其 该 此 些 上 下 里 中 吧 请 谢谢 用户 助手""".split()
    ),
    low_information=frozenset(
        """继续 接着 接着说 然后 然后呢 还有 还有呢 下一步 下一个 再来 再说 说下去 后来 后来呢 之后呢 那么 所以呢 结果呢
        好 好的 好吧 好啊 行 行吧 可以 对 对的 是的 嗯 嗯嗯 哦 噢 啊 明白 明白了 懂了 知道了 了解 收到 清楚了 没问题
        谢谢 谢了 多谢 感谢 太好了 不错 很好 棒 完美 厉害 真棒 不行 还是不行 不对 还是 错了 出错 报错 出错了 坏了 失败
        失败了 没用 不管用 怎么办 为什么 怎么回事 什么意思 为啥 试试 再试 再试试 重试 修一下 改一下 一样 同样 也是""".split()
    ),
    time_phrases=(
        rf"(?:大前天|前天|昨天|昨日|昨晚|今天|今日|今晚|今早|今天早上|今天上午|今天下午|今天晚上)"
        rf"|(?:上个?(?:周|星期|礼拜)[一二三四五六日天末]?|上个?月|去年|今年|本周|这周|这个?星期|这个?礼拜|这个月|本月)"
        rf"|(?:最近|过去|近)(?:{_ZH_NUMBER})?(?:天|日|个?(?:星期|礼拜)|周|个月|年)"
        rf"|(?:{_ZH_NUMBER})(?:天|日|个?(?:星期|礼拜)|周|个月|年)(?:之?前|以前)|前(?:几|两|三)天"
        rf"|(?:(?:19|20)\d\d年)?(?:\d{{1,2}}|十[一二]?|[一二三四五六七八九])月(?:\d{{1,2}}|[一二三]?十[一二三四五六七八九]?|[一二三四五六七八九])[日号]"
    ),
    telling=("今天", "今晚", "昨天", "昨晚"),
    placing=("昨天", "昨晚", "今天", "今晚", "前天", "上周", "上周末", "周末", "上个月", "去年", "星期一", "星期二",
             "星期三", "星期四", "星期五", "星期六", "星期天", "周一", "周二", "周三", "周四", "周五", "周六", "周日",
             "上周二", "上周三", "上周四", "上周五", "上周日"),
    durations=("分钟", "小时", "天", "星期", "月", "年", "半年", "一年", "两年", "三年", "四年", "五年", "十年", "几年", "多年",
               "两天", "三天", "几天", "一周", "两周"),
    asks_duration=r"多久了|多长时间了|多少年了|几年了|多少天了|几个月了",
    asks_when=r"什么时候|哪天|哪一天|几号|何时|哪个月|哪一年",
    dates=(rf"(?:(?P<year>(?:19|20)\d\d)年)?{_ZH_MONTH}月{_ZH_DAY}[日号]",
           r"(?P<year>\d{4})/(?P<month>\d{1,2})/(?P<day>\d{1,2})(?!\d)"),
    in_month=rf"(?:(?P<year>(?:19|20)\d\d)年)?{_ZH_MONTH}月份?(?![\d一二三四五六七八九十]*[日号])",
    bound_after=r"^\s*(?:之前|以前|前|之后|以后|后|以来|起|为止)",
    year=r"(?:19|20)\d\d年",
    phrases=(
        (Kind.AGO, rf"{_ZH_COUNT}{_ZH_UNIT}(?:之?前|以前)"),
        (Kind.AGO, r"前(?P<count>几|两|三)(?P<unit>天)"),
        (Kind.WEEKDAY_LAST_WEEK, rf"上个?(?:周|星期|礼拜){_ZH_WEEKDAY}"),
        (Kind.DAYS_BACK, r"(?P<back>大前天|前天|昨天|昨日|昨晚|今天|今日|今晚|今早)"),
        (Kind.LAST_PERIOD, r"(?P<period>上个?(?:周|星期|礼拜)末|上个?(?:周|星期|礼拜)|上个?月)(?![一二三四五六日天])"),
        (Kind.WITHIN, rf"(?:最近|过去|近)(?:{_ZH_COUNT})?{_ZH_UNIT}"),
        (Kind.WITHIN, r"(?P<unit>去年)"),
        (Kind.THIS, r"(?P<unit>本周|这周|这个?星期|这个?礼拜|这个月|本月|今年)"),
    ),
    numbers=_ZH_NUMBERS,
    fuzzy=frozenset({"几", "好几", "一两", "两三", "三四"}),
    units={"天": "day", "日": "day", "周": "week", "星期": "week", "礼拜": "week", "个星期": "week", "个礼拜": "week",
           "个月": "month", "年": "year", "去年": "year", "本周": "week", "这周": "week", "这星期": "week",
           "这个星期": "week", "这礼拜": "week", "这个礼拜": "week", "这个月": "month", "本月": "month", "今年": "year"},
    weekdays={"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6},
    back={"大前天": 3, "前天": 2, "昨天": 1, "昨日": 1, "昨晚": 1, "今天": 0, "今日": 0, "今晚": 0, "今早": 0},
    periods={"上周末": "weekend", "上个周末": "weekend", "上星期末": "weekend", "上个星期末": "weekend", "上礼拜末": "weekend",
             "上个礼拜末": "weekend", "上周": "week", "上个周": "week", "上星期": "week", "上个星期": "week", "上礼拜": "week",
             "上个礼拜": "week", "上月": "month", "上个月": "month"},
)

LANGUAGES = (ENGLISH, CHINESE)
