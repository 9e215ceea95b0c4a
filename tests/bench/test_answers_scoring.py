"""bench/answers.py's scoring: dates compared as dates, SQuAD-style token F1, gold words that must appear."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.answers import MARKERS, appears, f1, main, normalize_dates, write_docs
from bench.baselines import squash
from bench.datasets import LOCOMO_DATA, LONGMEMEVAL_DATA, REALTALK_DATA

# the question set reads the benchmark data in place (../shared/data), which a checkout elsewhere does not have
needs_data = pytest.mark.skipif(not all(p.exists() for p in (LOCOMO_DATA, LONGMEMEVAL_DATA, REALTALK_DATA)),
                                reason=f"the benchmark data is not in {LOCOMO_DATA.parent}")


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


def test_write_docs_replaces_only_the_marked_run(tmp_path: Path) -> None:
    doc = tmp_path / "real-model.md"
    doc.write_text(f"# Answers\n\nwhat was learnt\n\n{MARKERS[0]}\nold run\n{MARKERS[1]}\n\nthe suite\n", encoding="utf-8")
    write_docs(doc, "new run")
    assert doc.read_text(encoding="utf-8") == f"# Answers\n\nwhat was learnt\n\n{MARKERS[0]}\nnew run\n{MARKERS[1]}\n\nthe suite\n"
    doc.write_text("# Answers, no markers\n", encoding="utf-8")
    with pytest.raises(SystemExit):
        write_docs(doc, "new run")
    assert doc.read_text(encoding="utf-8") == "# Answers, no markers\n"


@pytest.mark.parametrize("content", [None, "# Answers, no markers\n"], ids=["missing", "unmarked"])
def test_write_docs_to_a_page_it_cannot_write_stops_before_asking(tmp_path: Path, content: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    doc = tmp_path / "real-model.md"
    if content is not None:
        doc.write_text(content, encoding="utf-8")
    with pytest.raises(SystemExit) as stopped:
        main(["--write-docs", "--docs", str(doc), "--llama-url", "http://127.0.0.1:9"])  # no server: it must not get that far
    assert stopped.value.code == 2 and "nothing was asked" in capsys.readouterr().err


@needs_data
def test_the_question_set_is_fixed_and_stratified_by_shape_and_kind() -> None:
    from collections import Counter

    from bench.answer_set import KINDS, question_set

    items = question_set(60)
    assert [it.key for it in items] == [it.key for it in question_set(60)] and len({it.key for it in items}) == 60
    assert Counter(it.shape for it in items) == {"locomo": 16, "messaging": 14, "realtalk": 15, "longmemeval": 15}
    for shape, kinds in KINDS.items():
        assert {it.question.category for it in items if it.shape == shape} == set(kinds)
        assert len({it.thread for it in items if it.shape == shape}) == 1  # a shape's questions share one thread
    asked = {it.question.id for it in items if it.shape == "locomo"}
    assert not asked & {it.question.id for it in items if it.shape == "messaging"}
    assert len({it.question.category for it in items if it.shape == "longmemeval"}) >= 5 and all(it.gold for it in items)


@needs_data
def test_the_report_pairs_each_way_with_the_gateway_question_by_question() -> None:
    from bench.answer_set import question_set
    from bench.answers import Result, comparisons, summary

    items = question_set(8, ["locomo"])
    results = [Result("gateway-2000", it, it.gold, 100, 1.0, 2 if i == 0 else 1, consults=1 if i == 0 else 0) for i, it in enumerate(items)]
    results += [Result("bm25-2000", it, "no idea" if i < 4 else it.gold, 200, 1.0) for i, it in enumerate(items)]
    table = comparisons(results, ["gateway-2000", "bm25-2000"])
    row = next(line for line in table.splitlines() if line.startswith("| gateway-2000 vs bm25-2000"))
    assert "| 8 | +0.500 [" in row and "| 4 / 0 / 4 |" in row and "| 50.0% |" in row
    line = next(line for line in summary(results, ["gateway-2000"], items).splitlines() if line.startswith("| gateway-2000"))
    assert line.startswith("| gateway-2000 | 8/8 | 1.000 | 1.000 | 8/8 |") and line.endswith("| 1.12 | 1 | 1 | 0 |")


@needs_data
def test_a_saved_run_comes_back_as_ways_of_its_own_and_standings_count_consults(tmp_path: Path) -> None:
    import json

    from bench.answer_set import question_set
    from bench.answers import Result, comparisons, earlier, standings

    items = question_set(4, ["locomo"])
    before = [Result("gateway-2000", it, "no idea", 90, 1.0, standing="by id") for it in items]
    saved = tmp_path / "before.jsonl"
    saved.write_text("".join(json.dumps(r.saved()) + "\n" for r in before), encoding="utf-8")
    loaded = earlier(saved, "base", items[:3])
    assert [r.way for r in loaded] == ["gateway-2000@base"] * 3 and [r.standing for r in loaded] == ["by id"] * 3
    now = [Result("gateway-2000", it, it.gold, 100, 1.0, 2, consults=1 if i < 2 else 0, standing=("by id", "shown")[i % 2])
           for i, it in enumerate(items)]
    row = next(line for line in comparisons([*now, *loaded], ["gateway-2000", "gateway-2000@base"]).splitlines()
               if line.startswith("| gateway-2000 vs gateway-2000@base"))
    assert "| 3 | +1.000 [" in row
    table = standings(now, ["gateway-2000"])
    assert "| gateway-2000 | by id | 2 | 1.000 | 1 | 1 |" in table and "| gateway-2000 | shown | 2 | 1.000 | 1 | 1 |" in table


@needs_data
def test_a_saved_run_is_reported_without_asking_anything(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from bench.answer_set import question_set
    from bench.answers import Result

    items = question_set(4, ["locomo"])
    saved = tmp_path / "run.jsonl"
    rows = [Result("gateway-2000", it, it.gold, 100, 1.0, standing="shown") for it in items[:3]]
    rows += [Result("bm25-2000", it, "no idea", 90, 1.0) for it in items[:3]]
    saved.write_text("".join(json.dumps(r.saved()) + "\n" for r in rows), encoding="utf-8")
    doc = tmp_path / "real-model.md"
    doc.write_text(f"{MARKERS[0]}\n{MARKERS[1]}\n", encoding="utf-8")
    assert main(["--questions", "4", "--shapes", "locomo", "--report", str(saved), "--write-docs", "--docs", str(doc)]) == 0
    text = doc.read_text(encoding="utf-8")
    assert "| gateway-2000 | 3/3 | 1.000 |" in text and "| gateway-2000 vs bm25-2000 | 3 | +1.000 [" in text
    assert "| gateway-2000 | shown | 3 | 1.000 | 0 | 0 |" in text and "the report of a saved run" in text


def test_bm25_chunks_as_sent_are_labelled_as_the_client_sends_them() -> None:
    """The answer benchmark's BM25 chunks hold no name the gateway is not given: a LoCoMo message (its name in the
    dataset, not in its text) is labelled by its role; a message written with its names keeps them."""
    from bench.baselines import chunk_text
    from bench.datasets import Turn

    plain = Turn("D1:1", "Gina", "user", "I opened my store today.", 0, 0)
    named = Turn("D1:2", "Jon", "assistant", "Jon: Congrats!", 0, 1)
    assert chunk_text([plain, named]) == "Gina: I opened my store today.\nJon: Congrats!"
    assert chunk_text([plain, named], as_sent=True) == "user: I opened my store today.\nJon: Congrats!"


def test_what_a_context_shows_of_a_page_ends_at_the_next_entry_heading_or_node() -> None:
    from bench.answers import in_view

    context = squash(
        '<Background_Context>2023-05-29:\n[75b1babb5c] user: Which store? assistant: … 4. Nostalgia - an online store …\n'
        '[457b429ce6] user: thanks\n2023-06-01:\n[83d9b7e169] user: more</Background_Context><Linear_Flow>'
        '<Node id="fcf8d9ea22" type="Original" view="Detail"><Content>Jaipur Rugs</Content></Node></Linear_Flow>'
    )
    assert in_view(context, "75b1babb5c").strip() == "user: Which store? assistant: … 4. Nostalgia - an online store …"
    assert in_view(context, "457b429ce6").strip() == "user: thanks"
    assert in_view(context, "83d9b7e169").strip() == "user: more"
    assert "Jaipur Rugs" in in_view(context, "fcf8d9ea22") and "more" not in in_view(context, "fcf8d9ea22")
    assert in_view(context, "0000000000") == ""
