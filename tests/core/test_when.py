"""The days a question's time phrase points to (gateway.core.when)."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from gateway.core.when import named_span

SATURDAY = datetime(2023, 3, 25, 18, 26, tzinfo=timezone.utc)
TUESDAY = datetime(2023, 5, 30, 9, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("text", "now", "span"),
    [
        # a count of days back is that day, and the day after it (an event is told the day it happens or the next)
        ("What kitchen appliance did I buy 10 days ago?", SATURDAY, (date(2023, 3, 15), date(2023, 3, 16))),
        ("what did I cook three days back", SATURDAY, (date(2023, 3, 22), date(2023, 3, 23))),
        # weeks and months are said of a day a few days either side
        ("What gardening did I do two weeks ago?", SATURDAY, (date(2023, 3, 10), date(2023, 3, 13))),
        ("Where did I go a month ago?", TUESDAY, (date(2023, 4, 23), date(2023, 5, 30))),  # told any day since
        ("Where did I move from 4 years ago?", TUESDAY, (date(2019, 3, 1), date(2023, 5, 30))),
        ("a couple of weeks ago", TUESDAY, (date(2023, 5, 13), date(2023, 5, 20))),
        # a named weekday is the last one before today, a week back when today is that day
        ("Who came to the concert last Saturday?", SATURDAY, (date(2023, 3, 18), date(2023, 3, 19))),
        ("Who came to the concert last Saturday?", TUESDAY, (date(2023, 5, 27), date(2023, 5, 28))),
        ("What did I eat yesterday?", TUESDAY, (date(2023, 5, 29), date(2023, 5, 30))),
        ("the day before yesterday", TUESDAY, (date(2023, 5, 28), date(2023, 5, 29))),
        # calendar periods before this one
        ("What cocktail did I try last weekend?", TUESDAY, (date(2023, 5, 27), date(2023, 5, 29))),
        ("What cocktail did I try last weekend?", SATURDAY, (date(2023, 3, 18), date(2023, 3, 20))),
        ("How far did I jog last week?", TUESDAY, (date(2023, 5, 22), date(2023, 5, 29))),
        ("Which books did I finish last month?", TUESDAY, (date(2023, 4, 1), date(2023, 5, 1))),
        # spans that end today
        ("Which store did I spend most at in the past month?", TUESDAY, (date(2023, 4, 30), date(2023, 5, 30))),
        ("How many pieces of jewelry did I get in the last two months?", TUESDAY, (date(2023, 3, 31), date(2023, 5, 30))),
        ("What have I read this week?", TUESDAY, (date(2023, 5, 29), date(2023, 5, 30))),
    ],
)
def test_a_time_phrase_names_the_days_its_telling_was_written(text: str, now: datetime, span: tuple[date, date]) -> None:
    assert named_span(text, now) == span


@pytest.mark.parametrize(
    "text",
    [
        "How many days ago did I meet Emma?",  # asks for the date: no count, no date named
        "Which lens did I buy for my camera?",
        "What is the weekly plan for next week?",
        "Remind me what the last step was",
        # a date that bounds a period names no day; a relative phrase next to a date is relative to that date
        "What did Maria do last weekend before April 10, 2023?",
        "Did Vanessa take the introversion test before December 23rd, 2023?",
        "What did I do last week in 2021?",
        # a day and month that could be either way round
        "What happened on 03/04/2023?",
    ],
)
def test_a_question_that_names_no_date_has_no_span(text: str) -> None:
    assert named_span(text, TUESDAY) is None


@pytest.mark.parametrize(
    ("text", "span"),
    [
        # a day written out is the day its telling was written, or the day after
        ("What did Joanna finish last Friday on 23 January, 2022?", (date(2022, 1, 23), date(2022, 1, 24))),
        ("What was Tim's writing issue last week, as mentioned on November 6, 2023?", (date(2023, 11, 6), date(2023, 11, 7))),
        ("What kind of pasta did Kate make on 29 Dec 2023?", (date(2023, 12, 29), date(2023, 12, 30))),
        ("What did Kevin do on 14.01.2023?", (date(2023, 1, 14), date(2023, 1, 15))),
        ("Where is Paola going on the 10th of February 2023?", (date(2023, 2, 10), date(2023, 2, 11))),
        ("What movie did we watch on the 31 of December 2022?", (date(2022, 12, 31), date(2023, 1, 1))),
        ("What did I note on 2023-05-02?", (date(2023, 5, 2), date(2023, 5, 3))),
        ("What did I eat on 5/13/2023?", (date(2023, 5, 13), date(2023, 5, 14))),
        # without a year: the latest such day up to today
        ("What did we talk about on May 2nd?", (date(2023, 5, 2), date(2023, 5, 3))),
        ("What did we talk about on June 2nd?", (date(2022, 6, 2), date(2022, 6, 3))),
        # a month written out is its days
        ("Which country was Jolene in during the last week of August 2022?", (date(2022, 8, 1), date(2022, 9, 1))),
        ("What books did I start in January?", (date(2023, 1, 1), date(2023, 2, 1))),
    ],
)
def test_a_date_written_out_names_the_days_its_telling_was_written(text: str, span: tuple[date, date]) -> None:
    assert named_span(text, TUESDAY) == span


@pytest.mark.parametrize(
    ("chinese", "english", "now"),
    [
        # a question in Chinese names the days its English words name
        ("我昨天吃了什么？", "What did I eat yesterday?", TUESDAY),
        ("前天我做了什么菜？", "What did I cook the day before yesterday?", TUESDAY),
        ("上周五谁来听音乐会了？", "Who came to the concert last Friday?", TUESDAY),
        ("三天前我做了什么菜", "what did I cook three days back", SATURDAY),
        ("10天前我买了什么厨房电器？", "What kitchen appliance did I buy 10 days ago?", SATURDAY),
        ("两周前我在花园里做了什么？", "What gardening did I do two weeks ago?", SATURDAY),
        ("去年我去了哪里？", "Where did I go in the last year?", TUESDAY),
        ("上周末我喝了什么鸡尾酒？", "What cocktail did I try last weekend?", TUESDAY),
        ("上周我跑了多远？", "How far did I jog last week?", TUESDAY),
        ("上个月我读完了哪些书？", "Which books did I finish last month?", TUESDAY),
        ("最近两个月我买了几件首饰？", "How many pieces of jewelry did I get in the last two months?", TUESDAY),
        ("这周我读了什么？", "What have I read this week?", TUESDAY),
        ("5月2日我们聊了什么？", "What did we talk about on May 2nd?", TUESDAY),
        ("2022年12月29日凯特做了什么意大利面？", "What kind of pasta did Kate make on 29 Dec 2023?".replace("2023", "2022"), TUESDAY),
        ("一月份我开始读哪些书？", "What books did I start in January?", TUESDAY),
    ],
)
def test_a_chinese_time_phrase_names_the_days_its_english_one_does(chinese: str, english: str, now: datetime) -> None:
    assert named_span(chinese, now) == named_span(english, now) is not None


def test_chinese_phrases_english_has_no_words_for() -> None:
    assert named_span("我今天说了什么？", TUESDAY) == (date(2023, 5, 30), date(2023, 5, 31))
    assert named_span("三月五号那天我做了什么？", TUESDAY) == (date(2023, 3, 5), date(2023, 3, 6))
    # 上周五 is Friday of the week before this one: on a Saturday, eight days back (yesterday is 昨天)
    assert named_span("上周五我去了哪里？", SATURDAY) == (date(2023, 3, 17), date(2023, 3, 18))


@pytest.mark.parametrize("text", ["我有3个月的假期", "3月5日之前我做了什么？", "2021年我住在哪里？", "我住在3号楼", "你什么时候有空？"])
def test_a_chinese_question_that_names_no_date_has_no_span(text: str) -> None:
    assert named_span(text, TUESDAY) is None


def test_a_day_that_does_not_exist_and_last_night_name_what_they_can() -> None:
    assert named_span("2月30日我做了什么？", TUESDAY) is None  # no such day: no day named, and no other phrase used
    assert named_span("What did I eat last night?", TUESDAY) == (date(2023, 5, 29), date(2023, 5, 30))
    assert named_span("我昨晚吃了什么？", TUESDAY) == named_span("What did I eat last night?", TUESDAY)
