"""A page's excerpts are counted with the tokenizer of the request that asks for them, whichever asked first."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

import gateway.service.page_excerpts as page_excerpts
from gateway.adapters.store_keys import ThreadKey
from gateway.core import Page, TokenCounter, original_page, split_blocks
from gateway.service.page_excerpts import PageExcerpts

THREAD = ThreadKey("tenant", "excerpts")
# a long exchange whose lines the two tokenizers count differently (numbers, non-ASCII words)
LINES = [f"Step {n}: set pH to {n}.{n * 7} and stir for {n * 13} min at {n * 3}°C — größer als {n * 1000 + 17}." for n in range(1, 9)]
MESSAGES = [
    {"role": "user", "content": "What were the steps for the buffer, and which pH did step 5 use?"},
    {"role": "assistant", "content": "\n".join(LINES)},
]
WEIGHTS = {"ph": 1.0, "step": 0.5, "buffer": 0.8}


def _page() -> Page:
    block = split_blocks(MESSAGES).blocks[0]
    return original_page(block, datetime(2026, 1, 1, tzinfo=timezone.utc), TokenCounter().count)


def test_units_are_cut_per_tokenizer() -> None:
    page = _page()
    cl100k, o200k = TokenCounter("cl100k_base"), TokenCounter("o200k_base")
    alone = PageExcerpts().of(THREAD, page, WEIGHTS, o200k, None)
    shared = PageExcerpts()
    shared.prepare(THREAD, [page], cl100k)  # the request that stored the page named a cl100k model
    first = shared.of(THREAD, page, WEIGHTS, cl100k, None)
    after = shared.of(THREAD, page, WEIGHTS, o200k, None)
    assert [o.tokens for o in first[1]] != [o.tokens for o in alone[1]]  # the two tokenizers do differ here
    assert after == alone
    assert shared.of(THREAD, page, WEIGHTS, cl100k, None) == first


def test_a_page_no_unit_of_which_matches_is_offered_whole_in_its_entry() -> None:
    # it matched by meaning, or by its neighbours' words: a Detail node would cost its tags on top of the same text
    page, counter = _page(), TokenCounter()
    _, options, _ = PageExcerpts().of(THREAD, page, {"calibration": 1.0}, counter, None)
    assert len(options) == 1
    whole = options[0]
    assert whole.coverage == 1.0 and whole.text == "\n".join(row for m in MESSAGES for row in f"{m['role']}: {m['content']}".split("\n"))
    assert whole.tokens < page.tokens + 40  # the entry's id, not a node's tags


def test_a_history_longer_than_the_cache_has_only_its_last_pages_cut_as_it_is_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache keeps the last pages it cut: of a first request carrying more, the others would be cut for nothing."""
    counter = TokenCounter()
    pages = [original_page(block, datetime(2026, 1, 1, tzinfo=timezone.utc), counter.count)
             for block in split_blocks([m for n in range(6) for m in ({"role": "user", "content": f"question {n}"},
                                                                      {"role": "assistant", "content": f"answer {n}"})]
                                       + [{"role": "user", "content": "next"}]).blocks]
    cut: list[str] = []

    def units_of(content: str, count: object, names: object) -> tuple[()]:
        cut.append(content)
        return ()

    monkeypatch.setattr(page_excerpts, "units_of", units_of)
    PageExcerpts(capacity=4).prepare(THREAD, pages, counter)
    assert cut == [p.content for p in pages[-4:]]
