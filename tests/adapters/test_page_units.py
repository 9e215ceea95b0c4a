"""A page a query cuts into excerpt units is cut once for good: the units go to the store, and a process that has not
cut the page (a restarted gateway, or one whose memory let the page go) reads them instead of cutting it again."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from datetime import datetime, timezone

import pytest
import redis.asyncio as aioredis

import gateway.service.page_excerpts as page_excerpts
from gateway.adapters.redis_store import RedisStore
from gateway.adapters.store_keys import ThreadKey
from gateway.core import Page, TokenCounter, original_page, split_blocks
from gateway.core.excerpt import units_of
from gateway.service.page_excerpts import UNITS_VERSION, PageExcerpts, dump_units, load_units

THREAD = ThreadKey("tenant", "units")
LINES = [f"Step {n}: set pH to {n}.{n * 7} and stir for {n * 13} min — größer als {n * 1000 + 17}. Then rest." for n in range(1, 12)]
MESSAGES = [
    {"role": "user", "content": "What were the steps for the buffer, and which pH did step 5 use?"},
    {"role": "assistant", "content": "\n".join(LINES)},
    {"role": "user", "content": "And the stirring time?"},
]
WEIGHTS = {"ph": 1.0, "step": 0.5, "stir": 0.8}
NAMES = (("assistant", "Lena"), ("user", "Omar"))


@pytest.fixture
def prefix() -> str:
    return f"unitstest-{uuid.uuid4().hex[:8]}"


def _page() -> Page:
    return original_page(split_blocks(MESSAGES).blocks[0], datetime(2026, 1, 1, tzinfo=timezone.utc), TokenCounter().count)


def _no_cutting(monkeypatch: pytest.MonkeyPatch) -> None:
    def cut(*_: object, **__: object) -> None:
        raise AssertionError("the page was cut again")

    monkeypatch.setattr(page_excerpts, "units_of", cut)


@pytest.mark.parametrize("names", [(), NAMES])
def test_units_come_back_from_their_json_as_they_were_cut(names: tuple[tuple[str, str], ...]) -> None:
    units = units_of(_page().content, TokenCounter().count, dict(names))
    assert len(units) > 3 and load_units(dump_units(units)) == units
    assert load_units("not json") is None and load_units('[["too", "short"]]') is None


def test_what_units_of_gives_is_the_stored_version() -> None:
    """Units stored by an earlier code are read as this code's: a change to what `units_of` gives must take a new
    `UNITS_VERSION` (and then this digest), or a restarted gateway would read units this code does not cut."""
    units = units_of(_page().content, TokenCounter().count) + units_of(_page().content, TokenCounter("o200k_base").count, dict(NAMES))
    rows = [[u.text, u.tokens, u.message, u.first, u.joiner, u.speaker, u.side, sorted(u.terms)] for u in units]
    digest = hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16]
    assert (UNITS_VERSION, digest) == (1, "1d1d9703fba656dc")


async def test_a_process_that_has_not_cut_a_page_reads_its_units_where_a_query_cut_them(
    client: aioredis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, page, counter = RedisStore(client, prefix=prefix), _page(), TokenCounter()
    first = PageExcerpts()
    offered = first.of(THREAD, page, WEIGHTS, counter, None, NAMES)
    await first.write(store, THREAD)
    assert len(await client.hkeys(store.keys(THREAD).units)) == 1
    await first.write(store, THREAD)  # nothing new: nothing written again
    restarted = PageExcerpts()
    _no_cutting(monkeypatch)
    await restarted.read(store, THREAD, [page], counter, NAMES)
    assert restarted.of(THREAD, page, WEIGHTS, counter, None, NAMES) == offered
    with pytest.raises(AssertionError, match="cut again"):  # another tokenizer's units are not those
        await restarted.read(store, THREAD, [page], TokenCounter("o200k_base"), NAMES)
        restarted.of(THREAD, page, WEIGHTS, TokenCounter("o200k_base"), None, NAMES)


async def test_pages_cut_as_they_are_stored_are_written_once_a_query_reads_them_and_a_damaged_record_is_cut_again(
    client: aioredis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, page, counter = RedisStore(client, prefix=prefix), _page(), TokenCounter()
    other = dataclasses.replace(page, id="abcdef0123")
    stored = PageExcerpts()
    stored.prepare(THREAD, [page, other], counter)  # a thread of thousands of pages: most never read by a query
    await stored.write(store, THREAD)
    assert await client.hkeys(store.keys(THREAD).units) == []
    expected = stored.of(THREAD, page, WEIGHTS, counter, None)  # read by a query: a restarted gateway will not cut it
    await stored.write(store, THREAD)
    (field,) = await client.hkeys(store.keys(THREAD).units)
    assert field.startswith(f"{page.id}:")
    stored.of(THREAD, page, WEIGHTS, counter, None)
    assert stored._fresh.get(THREAD.scope) == {}  # written once
    restarted = PageExcerpts()
    with monkeypatch.context() as patched:
        _no_cutting(patched)
        await restarted.read(store, THREAD, [page], counter)
        assert restarted.of(THREAD, page, WEIGHTS, counter, None) == expected
    await client.hset(store.keys(THREAD).units, field, '[["damaged"]]')
    again = PageExcerpts()
    await again.read(store, THREAD, [page], counter)
    assert again.of(THREAD, page, WEIGHTS, counter, None) == expected
    await again.write(store, THREAD)
    assert load_units(await client.hget(store.keys(THREAD).units, field)) is not None  # written again, whole
