"""bench/answer_scoring.py: the judge-free exact-answer score (dates at the gold's grain, numbers as numbers, lists
as sets), token F1, and the paired bootstrap comparison."""

from __future__ import annotations

import pytest

from bench.answer_scoring import alternatives, appears, dates_of, exact, f1, gold_kind, numbers_of, paired


@pytest.mark.parametrize(("gold", "kind"), [
    ("19 January, 2023", "date"), ("March, 2023", "date"), ("2022", "date"), ("The week before 9 June 2023", "date"),
    ("3", "number"), ("nine months", "number"), ("$270", "number"), ("1 year and 5 months", "number"),
    ("a 70-200mm zoom lens", "number"), ("Cooking, skiing, hiking", "list"), ("Yes, it was.", "yes-no"),
    ("Contemporary", "text"), ("She tried to finish the previous one.", "text"), ("One.", "number"), ("He lost his job and decided to start his own business", "text"),
])
def test_what_a_gold_answer_is(gold: str, kind: str) -> None:
    assert gold_kind(gold) == kind


@pytest.mark.parametrize(("answer", "gold", "score"), [
    ("Jon lost his job on January 19, 2023.", "19 January, 2023", 1.0),
    ("2023-01-19", "19 January, 2023", 1.0),
    ("January 2023", "19 January, 2023", 0.0),  # coarser than the gold: not the answer
    ("2023-01-20", "19 January, 2023", 0.0),
    ("2023-03-16", "March, 2023", 1.0),  # at the gold's grain, the day does not matter
    ("April 2023", "March, 2023", 0.0),
    ("In 2022.", "2022", 1.0),
    ("Three.", "3", 1.0), ("one week", "1 week", 1.0), ("It took one day", "1 day.", 1.0), ("3 times", "three", 1.0), ("two", "3", 0.0),
    ("Nine months", "nine months", 1.0), ("9 years", "nine months", 0.0), ("18 months", "nine months", 0.0),
    ("about $270 more", "$270", 1.0), ("1,200 dollars", "1200", 1.0),
    ("I have been there 1 year and 5 months", "1 year and 5 months", 1.0), ("12 months", "1 year and 5 months", 0.0),
    ("hiking, cooking and skiing", "Cooking, skiing, hiking", 1.0), ("cooking and skiing", "Cooking, skiing, hiking", 0.0),
    ("Yes, he did.", "Yes, it was.", 1.0), ("No.", "Yes, it was.", 0.0),
    ("Contemporary dance", "Contemporary", 1.0), ("Ballet", "Contemporary", 0.0),
    ("22 days", "21 days. 22 days (including the last day) is also acceptable.", 1.0),
    ("10 days", "21 days. 22 days (including the last day) is also acceptable.", 0.0),
])
def test_exact_answers(answer: str, gold: str, score: float) -> None:
    assert exact(answer, gold) == score


def test_the_parts_it_is_made_of() -> None:
    assert dates_of("met on 12 Jan 2024, moved in March 2023, born 1990") == [(2024, 1, 12), (2023, 3, None), (1990, None, None)]
    assert sorted(numbers_of("twenty-one, 3.5 and a 70-200mm lens on 2024-01-12")) == [3.5, 21.0, 70.0, 200.0]  # a date is no number
    assert alternatives("Nostalgia") == ["Nostalgia"]


def test_f1_and_appears() -> None:
    assert f1("It was on 2024-01-12.", "12 January, 2024") == pytest.approx(0.4)
    assert appears("They love dancing a lot", "by dancing") and not appears("January 2024", "12 January, 2024")
    assert f1("", "x") == 0.0


def test_the_paired_comparison_is_seeded_and_its_interval_holds_the_mean() -> None:
    a = [1.0, 0.0, 1.0, 1.0, 0.5, 0.0, 1.0, 1.0]
    b = [0.0, 0.0, 1.0, 0.0, 0.5, 1.0, 0.0, 1.0]
    first, again = paired(a, b), paired(a, b)
    assert first == again and first.n == 8 and first.mean == pytest.approx(0.25)
    assert first.low <= first.mean <= first.high and first.low < 0.25 < first.high
    assert (first.better, first.worse, first.tied) == (3, 1, 4)
    same = paired(a, a)
    assert same.mean == same.low == same.high == 0.0 and same.tied == 8
    with pytest.raises(ValueError):
        paired([1.0], [])
