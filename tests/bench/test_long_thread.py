"""The long-thread benchmark's thread (histories joined, sessions de-duplicated, in date order, evidence always in),
its report, and its quick mode end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import long_thread
from bench.datasets import LONGMEMEVAL_DATA
from bench.long_thread import body_of, build_thread, messages_of
from bench.long_thread_report import MARKERS, SUMMARY_MARKERS, Step, table, write_docs


def session(tag: str, exchanges: int, answer: bool = False) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for n in range(exchanges):
        user: dict[str, Any] = {"role": "user", "content": f"{tag} question {n}"}
        if answer and n == 0:
            user["has_answer"] = True
        turns += [user, {"role": "assistant", "content": f"{tag} reply {n}"}]
    return turns


def history(qid: str, sessions: list[tuple[str, str, list[dict[str, Any]]]], date: str = "2023/06/01 (Thu) 10:00") -> dict[str, Any]:
    return {"question_id": qid, "question_type": "multi-session", "question": f"what about {qid}?", "answer": "x",
            "question_date": date, "haystack_dates": [d for d, _, _ in sessions],
            "haystack_session_ids": [s for _, s, _ in sessions], "haystack_sessions": [t for _, _, t in sessions]}


ITEMS = [
    history("q1", [("2023/05/03 (Wed) 10:00", "filler-a", session("a", 3)),
                   ("2023/05/01 (Mon) 10:00", "answer-1", session("one", 2, answer=True)),
                   ("2023/05/02 (Tue) 10:00", "shared", session("s", 4))]),
    history("q2", [("2023/05/02 (Tue) 10:00", "shared", session("s", 4)),
                   ("2023/05/05 (Fri) 10:00", "filler-b", session("b", 3)),
                   ("2023/05/04 (Thu) 10:00", "answer-2", session("two", 1, answer=True))], "2023/06/02 (Fri) 10:00"),
    history("q3_abs", [("2023/05/06 (Sat) 10:00", "filler-c", session("c", 2))]),
]


def test_the_thread_joins_histories_by_session_id_in_date_order() -> None:
    conv = build_thread(ITEMS, 100)
    ids = [turns[0].id.split(":")[0] for _, turns in conv.sessions]
    assert ids == ["answer-1", "shared", "filler-a", "answer-2", "filler-b", "filler-c"]  # "shared" once, by date
    assert [q.id for q in conv.questions] == ["q1", "q2"]  # the abstention question has no evidence
    assert conv.questions[0].evidence == ("answer-1:0",)
    assert conv.evidence["answer-2:0"].texts == ("two question 0",)
    assert conv.question_time.isoformat() >= "2023-06-02"
    assert sum(1 for m in messages_of(conv) if m["role"] == "user") == 2 + 4 + 3 + 1 + 3 + 2


def test_a_step_takes_each_history_s_evidence_then_its_fillers_until_it_is_reached() -> None:
    conv = build_thread(ITEMS, 5)  # q1's answer (2), then its first filler in file order (3): 5, then no more
    assert [turns[0].id.split(":")[0] for _, turns in conv.sessions] == ["answer-1", "filler-a"]
    assert [q.id for q in conv.questions] == ["q1"]


def test_a_body_is_the_history_and_the_question() -> None:
    history_json = json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])[1:-1].encode()
    body = json.loads(body_of(history_json, "and now?", stream=True))
    assert body["stream"] is True and body["model"] == long_thread.MODEL
    assert body["messages"][-1] == {"role": "user", "content": "and now?"} and len(body["messages"]) == 3


def step(exchanges: int, cpu: float) -> Step:
    return Step(exchanges, 2 * exchanges, 400 * exchanges, pages=exchanges + 10, questions=3, ingest_s=10.0,
                ingest_cpu_s=8.0, drain_s=2.0, cpu_ms=[cpu, cpu + 2, cpu + 10], wall_ms=[50.0, 60.0, 70.0],
                decode_ms=[1.0, 2.0, 3.0], read_ms=[cpu / 10, cpu / 10], first_token_ms=[40.0], redis_used_per_page=9000.0,
                redis_keys_per_page=8000.0, rss_mb=400.0,
                recall={"gateway@2000": 0.9, "bm25@2000": 0.6, "gateway@4000": 1.0, "bm25@4000": 0.7},
                map_named=[1.0, 2 / 3, 1.0], map_topics=9)


def test_the_report_writes_its_sections_and_plot(tmp_path: Path) -> None:
    steps = [step(600, 30.0), step(10_000, 40.0)]
    steps[1].rss_start_mb = 300.0  # 100 MB over 10,010 pages; the first step's start was not measured
    assert "| 10,000 | 4,000,000 |" in table(steps) and table(steps).count("| 8.0 of 9 |") == 2
    assert "| 400 |" in table(steps) and "| 400 (10) |" in table(steps)
    docs, summary, plot = tmp_path / "results.md", tmp_path / "benchmarks.md", tmp_path / "long.png"
    docs.write_text("# x\n" + "\n".join(MARKERS) + "\n", encoding="utf-8")
    summary.write_text("# y\n" + "\n".join(SUMMARY_MARKERS) + "\nafter\n", encoding="utf-8")
    write_docs(steps, "Measured here.", docs, summary, plot)
    assert "| 600 |" in docs.read_text() and "Measured here." in docs.read_text()
    text = summary.read_text()
    assert "10,000 exchanges" in text and "1.31×" in text and "the gateway process 10 KB (400 MB in all)" in text
    assert "1.31× past reading the body (4 and 3 ms" in text and "| 3 / 2 |" in table(steps) and text.endswith("after\n")
    assert plot.stat().st_size > 5_000


@pytest.mark.skipif(not LONGMEMEVAL_DATA.exists(), reason=f"LongMemEval is not at {LONGMEMEVAL_DATA}")
def test_quick_mode_measures_two_small_steps_through_the_gateway(tmp_path: Path) -> None:
    out = tmp_path / "steps.json"
    assert long_thread.main(["--quick", "--json", str(out)]) == 0
    steps = [Step(**record) for record in json.loads(out.read_text())]
    assert [s.exchanges >= size for s, size in zip(steps, long_thread.QUICK_STEPS)] == [True, True]
    for s in steps:
        assert s.pages >= s.exchanges and s.cpu_ms and s.first_token_ms and not s.errors and s.rss_start_mb > 0 and s.rss_mb > 0
        assert len(s.read_ms) == s.questions  # each question's body refused once parsed (400), its CPU kept
        assert 0.0 <= s.recall["gateway@4000"] <= 1.0 and s.redis_keys_per_page > 0
        assert all(0.0 <= n <= 1.0 for n in s.map_named) and len(s.map_named) in (0, s.questions)
