"""bench/answers.py's scoring: dates compared as dates, SQuAD-style token F1, gold words that must appear."""

from __future__ import annotations

import pytest

from bench.answers import appears, f1, normalize_dates


@pytest.mark.parametrize("text", ["12 January, 2024", "January 12, 2024", "2024-01-12", "12th of Jan 2024", "2024/1/12"])
def test_a_date_written_any_usual_way_is_one_token(text: str) -> None:
    assert normalize_dates(text).split() == ["2024-01-12"]


def test_a_month_and_year_is_its_own_token() -> None:
    assert normalize_dates("January, 2023").split() == ["2023-01"] and f1("January 2023", "January, 2023") == 1.0


def test_f1_and_appears() -> None:
    assert f1("It was on 2024-01-12.", "12 January, 2024") == pytest.approx(0.4)  # 1 of 4 answer tokens
    assert appears("It was on 2024-01-12.", "12 January, 2024")
    assert not appears("January 2024", "12 January, 2024") and f1("", "x") == 0.0 and f1("no overlap", "gold") == 0.0
    assert appears("They love dancing a lot", "by dancing")  # function words of the gold need not appear
