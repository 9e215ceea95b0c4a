"""A question dated in Chinese raises the pages of the days it names as its English words do (gateway.service.router
reads the days from gateway.core.when, whose tables hold both languages)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from gateway.core.lexical import table_terms
from gateway.core.languages import CHINESE, ENGLISH
from gateway.service.router import PLACING_TERMS, TELLING_TERMS, _dated

TUESDAY = datetime(2023, 5, 30, 21, 0, tzinfo=timezone.utc)
# one page a day for the last two weeks, at noon; all alike but for their day
WRITTEN = [(TUESDAY - timedelta(days=d)).replace(hour=12).timestamp() for d in range(14, 0, -1)]
SCORES = np.full(len(WRITTEN), 0.5)


@pytest.mark.parametrize(
    ("chinese", "english", "days_back"),
    [("我昨天吃了什么？", "What did I eat yesterday?", 1), ("上周五我见了谁？", "Who did I meet last Friday?", 4),
     ("三天前我买了什么？", "What did I buy three days ago?", 3)],
)
def test_a_chinese_date_raises_the_pages_of_its_day_as_the_english_one_does(chinese: str, english: str, days_back: int) -> None:
    raised = _dated(SCORES, WRITTEN, chinese, TUESDAY)
    assert np.array_equal(raised, _dated(SCORES, WRITTEN, english, TUESDAY))
    top = [i for i, score in enumerate(raised) if score == raised.max()]
    day = (TUESDAY - timedelta(days=days_back)).replace(hour=12).timestamp()
    assert WRITTEN.index(day) in top and len(top) <= 2  # the day, or it and the next (a telling may come a day late)


def test_the_words_that_date_a_page_are_every_languages() -> None:
    assert set(table_terms(CHINESE.telling)) <= set(TELLING_TERMS) and set(table_terms(ENGLISH.telling)) <= set(TELLING_TERMS)
    assert {"昨天", "上周五", "yesterday", "friday"} <= set(PLACING_TERMS)
