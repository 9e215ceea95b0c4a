from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.consolidation import (
    CHAPTER,
    DIGEST_CAP,
    HEAD_INTRO,
    ManifestAnswer,
    MergeCandidate,
    SummarizerAnswer,
    chapter_digest,
    extractive_consolidation,
    freeze,
    manifest_prompt,
    merge_runs,
    next_chapter,
    parse_manifest_answer,
    parse_summarizer_answer,
    summarizer_prompt,
)
from gateway.core.pages import Page, PageType, page_id

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


def original(content: str, summary: str = "", minute: int = 0) -> Page:
    return Page(page_id(content, str(minute)), PageType.ORIGINAL, T0 + timedelta(minutes=minute), content,
                summary, (), len(content.split()))


def words(text: str) -> int:
    return len(text.split())


CHILDREN = [
    original("user: Is the snake  game done?\n\nassistant: Yes,\tthe core loop works.",
             "User: Is the snake game done?\nAssistant: Yes, the core loop works.", 0),
    original("user: It does not die at the wall.\nassistant: Fixed: the wall check was off by one.",
             "User: It does not die at the wall.\nAssistant: Fixed: the wall check was off by one.", 5),
]


def test_extractive_content_is_every_child_verbatim_after_the_head() -> None:
    content, summary = extractive_consolidation(CHILDREN, "Built the snake game.")
    assert content == "\n\n".join([HEAD_INTRO + "Built the snake game.", CHILDREN[0].content, CHILDREN[1].content])
    assert summary.splitlines() == [
        HEAD_INTRO + "Built the snake game.",
        "User: Is the snake game done? Assistant: Yes, the core loop works.",
        "User: It does not die at the wall. Assistant: Fixed: the wall check was off by one.",
    ]
    assert extractive_consolidation(CHILDREN, "Built the snake game.") == (content, summary)


def test_a_relay_after_a_relay_does_not_nest_the_intro() -> None:
    first = extractive_consolidation(CHILDREN[:1], "Built the snake game.")[1]
    content, summary = extractive_consolidation(CHILDREN[1:], first)
    # the head's own "Earlier in this topic" line is the container before it: the relay carries the rest
    assert summary.splitlines()[0] == HEAD_INTRO + "User: Is the snake game done? Assistant: Yes, the core loop works."
    assert content.count(HEAD_INTRO) == 1 and "Built the snake game." not in content
    third = extractive_consolidation(CHILDREN[:1], summary)[1]
    assert third.splitlines()[0].count(HEAD_INTRO) == 1


def test_extractive_without_head_and_with_blank_summaries() -> None:
    long = original("word " * 200, "", 1)
    content, summary = extractive_consolidation([long, original("", "", 2)], "  ")
    assert content == long.content + "\n\n" and not content.startswith(HEAD_INTRO)
    assert summary.count("\n") == 0 and len(summary) <= DIGEST_CAP + 2 and summary.endswith("…")
    assert extractive_consolidation([original("", "", 3)], None) == ("", "(empty exchange)")
    with pytest.raises(ValueError):
        extractive_consolidation([], None)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(min_size=1), min_size=1, max_size=6), st.none() | st.text())
def test_extractive_content_keeps_every_child_in_order(texts: list[str], head: str | None) -> None:
    children = [original(text, text[::-1], minute) for minute, text in enumerate(texts)]
    content, summary = extractive_consolidation(children, head)
    position = 0
    for text in texts:
        found = content.find(text, position)
        assert found >= position
        position = found + len(text)
    assert summary and summary == extractive_consolidation(children, head)[1]


def test_summarizer_prompt_carries_the_head_and_every_child() -> None:
    messages = summarizer_prompt(CHILDREN, "Built the snake game.")
    assert [m["role"] for m in messages] == ["system", "user"]
    system, user = messages[0]["content"], messages[1]["content"]
    for phrase in ("chains of reasoning", "negations and corrections", "Do not drop facts for brevity", '"content"'):
        assert phrase in system
    assert "Built the snake game." in user
    assert user.index(CHILDREN[0].content) < user.index(CHILDREN[1].content)
    assert all(child.id in user for child in CHILDREN)
    assert "earlier_in_this_topic" not in summarizer_prompt(CHILDREN, None)[1]["content"]


def test_manifest_prompt() -> None:
    system, user = (m["content"] for m in manifest_prompt(CHILDREN[1]))
    for phrase in ("chains of reasoning", "negations and corrections", "Do not drop facts for brevity"):
        assert phrase in system
    assert '"content"' not in system and CHILDREN[1].content in user


GOOD = {"summary": " The wall bug is fixed. ", "content": "Account.", "clusters": ["snake", " wall ", "snake"], "x": 1}


@pytest.mark.parametrize("text", [
    json.dumps(GOOD),
    "```json\n" + json.dumps(GOOD, indent=2) + "\n```",
    "  ```JSON\n" + json.dumps(GOOD) + "```\n",
    "```\n" + json.dumps(GOOD) + "\n```",
])
def test_parse_summarizer_answer_accepts_good_json(text: str) -> None:
    assert parse_summarizer_answer(text) == SummarizerAnswer("The wall bug is fixed.", "Account.", ("snake", "wall"))
    assert parse_manifest_answer(text) == ManifestAnswer("The wall bug is fixed.", ("snake", "wall"))


BAD = [
    "", "not json", "[1, 2]", '"text"', "```json\n{}\n", "[" * 100_000,
    json.dumps({**GOOD, "summary": "  "}), json.dumps({**GOOD, "summary": 3}),
    json.dumps({**GOOD, "clusters": []}), json.dumps({**GOOD, "clusters": "snake"}),
    json.dumps({**GOOD, "clusters": ["snake", 2]}), json.dumps({**GOOD, "clusters": ["snake", " "]}),
    json.dumps({key: value for key, value in GOOD.items() if key != "clusters"}),
]


@pytest.mark.parametrize("text", BAD)
def test_parsers_reject_garbage(text: str) -> None:
    assert parse_summarizer_answer(text) is None and parse_manifest_answer(text) is None


@pytest.mark.parametrize("content", [None, "", ["a"]])
def test_summarizer_answer_needs_content(content: object) -> None:
    data = {**GOOD, "content": content} if content is not None else {k: v for k, v in GOOD.items() if k != "content"}
    assert parse_summarizer_answer(json.dumps(data)) is None
    assert parse_manifest_answer(json.dumps(data)) is not None


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_parsers_never_raise(text: str) -> None:
    parse_summarizer_answer(text)
    parse_manifest_answer(text)


def test_freeze_builds_the_consolidated_page() -> None:
    content, summary = extractive_consolidation(CHILDREN, None)
    page = freeze(CHILDREN, content=content, summary=summary, count=words, topic_id="t1")
    assert page.type is PageType.CONSOLIDATED and page.source_ids == tuple(c.id for c in CHILDREN)
    assert (page.timestamp, page.topic_id, page.tokens) == (CHILDREN[1].timestamp, "t1", words(content))
    assert page.clusters
    other = freeze(CHILDREN, content=content, summary=summary, count=words, topic_id=None, timestamp=T0,
                   clusters=["snake"])
    assert (other.timestamp, other.clusters, other.topic_id, other.id) == (T0, ("snake",), None, page.id)
    with pytest.raises(ValueError):
        freeze([], content="x", summary="x", count=words, topic_id=None)
    with pytest.raises(ValueError):
        freeze([CHILDREN[0], CHILDREN[0]], content="x", summary="x", count=words, topic_id=None)


NOW = T0 + timedelta(days=10)
STALE = timedelta(days=2)


def cp(pid: str, topic: str | None, day: int) -> MergeCandidate:
    return MergeCandidate(pid, topic, T0 + timedelta(days=day), T0 + timedelta(days=day, hours=1))


def test_merge_runs_finds_adjacent_stale_same_topic_runs() -> None:
    pages = [cp("a1", "A", 0), cp("a2", "A", 1), cp("b1", "B", 2), cp("a3", "A", 3), cp("a4", "A", 4),
             cp("a5", "A", 5), cp("n1", None, 6), cp("n2", None, 6), cp("c1", "C", 7), cp("c2", "C", 8)]
    assert merge_runs(pages, NOW, STALE) == [("a1", "a2"), ("a3", "a4", "a5")]
    assert merge_runs(pages, NOW, STALE, min_run=3) == [("a3", "a4", "a5")]
    assert merge_runs(pages, NOW + timedelta(days=5), STALE) == [("a1", "a2"), ("a3", "a4", "a5"), ("c1", "c2")]
    assert merge_runs([], NOW, STALE) == []
    naive = MergeCandidate("x", "A", T0.replace(tzinfo=None), T0.replace(tzinfo=None))
    assert naive.end == T0 and merge_runs([naive, cp("y", "A", 0)], NOW.replace(tzinfo=None), STALE) == [("x", "y")]
    with pytest.raises(ValueError):
        merge_runs(pages, NOW, STALE, min_run=1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["A", "B", None]), st.integers(0, 12)), max_size=30), st.integers(2, 4))
def test_merge_runs_properties(spec: list[tuple[str | None, int]], min_run: int) -> None:
    pages = [cp(f"p{i}", topic, day) for i, (topic, day) in enumerate(spec)]
    runs = merge_runs(pages, NOW, STALE, min_run)
    index = {page.id: i for i, page in enumerate(pages)}
    by_id = {page.id: page for page in pages}
    flat = [pid for run in runs for pid in run]
    assert len(flat) == len(set(flat)) and [index[p] for p in flat] == sorted(index[p] for p in flat)
    for run in runs:
        members = [by_id[pid] for pid in run]
        assert len(run) >= min_run and [index[p] for p in run] == list(range(index[run[0]], index[run[0]] + len(run)))
        assert members[0].topic_id is not None and {m.topic_id for m in members} == {members[0].topic_id}
        assert all(m.end < NOW - STALE for m in members)
    mergeable = [p.topic_id is not None and p.end < NOW - STALE for p in pages]
    for i in range(len(pages) - min_run + 1):
        window = pages[i:i + min_run]
        if all(mergeable[i:i + min_run]) and len({p.topic_id for p in window}) == 1:
            assert all(p.id in flat for p in window)


def test_the_oldest_run_of_a_chapter_s_worth_of_one_level_is_gathered_first() -> None:
    assert next_chapter([0, 0, 0]) is None and next_chapter([]) is None
    assert next_chapter([0] * CHAPTER) == 0
    assert next_chapter([1, 0, 0, 1, 1, 1, 1, 0], 4) == 3  # the first run of four of one level, not of any level
    assert next_chapter([2, 1, 1, 0, 0, 0], 3) == 3
    with pytest.raises(ValueError):
        next_chapter([0, 0], 1)


@given(st.integers(min_value=0, max_value=2_000), st.integers(min_value=2, max_value=6))
def test_gathering_leaves_fewer_than_a_chapter_of_each_level_on_top(topics: int, size: int) -> None:
    # topics frozen one at a time, each followed by the gathering: the top level is the digits of their count
    top: list[int] = []
    for _ in range(topics):
        top.append(0)
        while (start := next_chapter(top, size)) is not None:
            top[start : start + size] = [top[start] + 1]
    assert top == sorted(top, reverse=True)  # the oldest are the highest
    digits, n = [], topics
    while n:
        digits.append(n % size)
        n //= size
    assert [top.count(level) for level in range(len(digits))] == digits


def test_a_chapter_is_its_children_s_table_of_contents() -> None:
    topics = [
        Page(page_id(f"topic {i}", "x"), PageType.CONSOLIDATED, T0 + timedelta(days=i), "long content " * 500,
             f"Topic {i}: what was said about it. More of it.", (f"word{i}a", f"word{i}b", f"word{i}c", f"word{i}d"), 1500,
             (page_id(f"child {i}"),))
        for i in range(3)
    ]
    content, summary, clusters = chapter_digest(topics)
    assert content.splitlines() == [f"[{t.id}] Topic {i}: what was said about it. More of it." for i, t in enumerate(topics)]
    assert "long content" not in content  # none of the children's text beyond their summaries' leads
    assert summary.splitlines() == [f"word{i}a, word{i}b, word{i}c" for i in range(3)]
    assert clusters[:4] == ("word0a", "word1a", "word2a", "word0b")  # the first words name every topic
    with pytest.raises(ValueError):
        chapter_digest([])
