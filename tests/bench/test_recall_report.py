"""--write-docs: each shape's marked section and its summary row are replaced, everything else is kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.baselines import Outcome
from bench.recall_report import SECTION_MARKERS, SUMMARY_HEAD, SUMMARY_MARKERS, answer_lines, write_docs

ORDER = ("LoCoMo", "Messaging variant of LoCoMo", "LongMemEval_S development questions")


def _doc() -> str:
    s_begin, s_end = SUMMARY_MARKERS
    parts = ["# Benchmarks", s_begin, *SUMMARY_HEAD, "| LoCoMo | 1 | old | old | old | old | 0 / 0 | then |",
             "| LongMemEval_S development questions | 2 | lme | lme | lme | lme | 0 / 0 | then |", s_end, "prose"]
    for name, (begin, end) in SECTION_MARKERS.items():
        parts += [f"## {name}", begin, f"old {name} results", end, f"notes on {name}"]
    return "\n".join(parts) + "\n"


def test_write_docs_replaces_only_the_shapes_run(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text(_doc(), encoding="utf-8")
    row = "| Messaging variant of LoCoMo | 3 | new | new | new | new | 0 / 0 | now |"
    write_docs(doc, {"messaging": "new messaging results"}, {"Messaging variant of LoCoMo": row}, ORDER)
    text = doc.read_text(encoding="utf-8")
    assert "new messaging results" in text and "old messaging results" not in text
    assert "old locomo results" in text and "old longmemeval results" in text
    assert "notes on messaging" in text and "prose" in text
    summary = text.split(SUMMARY_MARKERS[0])[1].split(SUMMARY_MARKERS[1])[0].strip().splitlines()
    assert summary[:2] == list(SUMMARY_HEAD)
    assert [line.split("|")[1].strip() for line in summary[2:]] == list(ORDER)
    assert summary[3] == row


def test_write_docs_refuses_a_file_without_the_markers(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="not found"):
        write_docs(doc, {"locomo": "results"}, {}, ORDER)
    assert doc.read_text(encoding="utf-8") == "# Benchmarks\n"


def test_a_replay_kept_by_replay_cache_gives_back_its_statistics() -> None:
    import json

    from bench.recall_report import GatewayStats, stats_from_json, stats_to_json

    stats = GatewayStats(replay_budget=2000, replay_requests=3, replay_s=1.5, replay_fit=[(10, 12), (20, 25)])
    stats.header_over["replay"] += 1
    stats.replay_forms["paged"] += 2
    stats.router_ms["conv"].append(3.0)
    stats.errors.append("500: boom")
    back = stats_from_json(json.loads(json.dumps(stats_to_json(stats))))
    assert back == stats and back.router_ms["new"] == []  # still a defaultdict


def test_answer_shown_is_reported_over_the_questions_that_can_be_checked() -> None:
    def out(budget: int, shown: bool | None) -> Outcome:
        return Outcome("c", "cat", budget, 1, (), ("e",), budget, answer_shown=shown)

    results = {"pcp gateway": [out(1000, True), out(1000, False), out(1000, None), out(2000, True), out(2000, True),
                               out(2000, None)],
               "recent turns": [out(1000, False), out(1000, False), out(1000, None), out(2000, True), out(2000, False),
                                out(2000, None)]}
    (line,) = answer_lines(results, (1000, 2000))
    assert "(2 questions whose gold answer" in line
    assert "pcp gateway 0.500 / 1.000; recent turns 0.000 / 0.500." in line
    assert answer_lines({"pcp gateway": [out(1000, None)]}, (1000,)) == []


def test_write_docs_puts_the_sections_and_the_summary_in_their_own_files(tmp_path: Path) -> None:
    text = _doc()
    results, summary = tmp_path / "benchmark-results.md", tmp_path / "benchmarks.md"
    s_begin, s_end = SUMMARY_MARKERS
    results.write_text(text.replace(text[text.index(s_begin):text.index(s_end) + len(s_end)], ""), encoding="utf-8")
    summary.write_text(f"# Benchmarks\n{s_begin}\n{SUMMARY_HEAD[0]}\n{SUMMARY_HEAD[1]}\n{s_end}\nmethod\n", encoding="utf-8")
    row = "| LoCoMo | 3 | new | new | new | new | 0 / 0 | now |"
    write_docs(results, {"locomo": "new locomo results"}, {"LoCoMo": row}, ORDER, summary_path=summary)
    assert "new locomo results" in results.read_text(encoding="utf-8") and s_begin not in results.read_text(encoding="utf-8")
    assert row in summary.read_text(encoding="utf-8") and "method" in summary.read_text(encoding="utf-8")


def test_write_docs_writes_neither_file_when_the_summary_markers_are_missing(tmp_path: Path) -> None:
    results, summary = tmp_path / "benchmark-results.md", tmp_path / "benchmarks.md"
    results.write_text(_doc(), encoding="utf-8")
    summary.write_text("# Benchmarks\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="not found"):
        write_docs(results, {"locomo": "new"}, {}, ORDER, summary_path=summary)
    assert results.read_text(encoding="utf-8") == _doc() and summary.read_text(encoding="utf-8") == "# Benchmarks\n"


def test_evidence_within_reach_is_named_by_its_page_or_a_container_above_it() -> None:
    from bench.evidence_recall import leaf_paths, within

    tree = [
        {"id": "c" * 10, "children": [{"id": "f" * 10, "children": [{"id": "a" * 10}, {"id": "b" * 10}]}]},
        {"id": "d" * 10},
    ]
    assert leaf_paths(tree) == {"a" * 10: ("c" * 10, "f" * 10), "b" * 10: ("c" * 10, "f" * 10), "d" * 10: ()}
    out = Outcome("conv", "1", 1000, 3, ("D1",), ("D2", "D3"), 900)
    holders = {"D2": {"a" * 10, "f" * 10}, "D3": {"d" * 10}}
    context = f'<PagedContext><Background_Context>other topics:\n[{"f" * 10}] pasta, sauce\n2026-01-01:\n[{"e" * 10}] …'
    assert within(out, holders, context) == 2  # D1 shown, D2 by its topic's entry; D3's page is not named
    assert within(out, holders, context + f'</Background_Context><Linear_Flow><Node id="{"d" * 10}" type="Original"') == 3
    assert within(out, holders, f"mentions {'f' * 10} in passing") == 1  # an id inside a sentence names nothing
