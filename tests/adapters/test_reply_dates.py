"""When ingestion dates an exchange, on a real Redis: by the request that asked its question, unless its reply was
first carried a sitting later and was not the gateway's own answer (a two-person chat replayed as one thread)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest
import redis.asyncio as aioredis

from gateway.adapters.redis_store import RedisStore
from gateway.adapters.store_keys import ThreadKey
from gateway.config import PcpSettings
from gateway.core import page_id
from gateway.core.continuation import answer_claims
from gateway.service.ingest import Ingestion

ASKED = datetime(2023, 3, 15, 19, 0, tzinfo=timezone.utc)
QUESTION = {"role": "user", "content": "Did you find a smoker for the garden?"}
REPLY = {"role": "assistant", "content": "Yes! I got a smoker this morning, an offset one."}
EARLIER = [{"role": "user", "content": "Any plans for the weekend?"}, {"role": "assistant", "content": "Gardening, mostly."}]


@pytest.fixture
def prefix() -> str:
    return f"replydates-{uuid.uuid4().hex[:8]}"


async def _dates(client: aioredis.Redis, prefix: str, later: timedelta, gave: bool) -> dict[str, datetime]:
    """The asking request at ASKED, the reply carried by the next one ``later``; when each exchange is dated."""
    store, thread = RedisStore(client, prefix=prefix), ThreadKey("tenant", uuid.uuid4().hex[:8])
    ingestion = Ingestion(store, PcpSettings(idle_flush_minutes=30), None)
    await ingestion.store_history(thread, [*EARLIER, QUESTION], ASKED)
    if gave:  # the gateway answered the question with the very reply the client sends back
        await store.claim_answer(thread, answer_claims(REPLY["content"], ()))
    else:
        await store.claim_answer(thread, answer_claims("I can help you choose one.", ()))
    history = await ingestion.store_history(thread, [*EARLIER, QUESTION, REPLY, {"role": "user", "content": "Which wood?"}], ASKED + later)
    manifests = await history.snapshot.manifests(history.ids)
    texts = {history.ids[0]: "earlier", history.ids[1]: "smoker"}
    assert len(history.ids) == 2 and set(manifests) == set(texts)
    return {texts[i]: manifests[i].page.timestamp.replace(microsecond=0) for i in texts}


async def test_a_reply_first_carried_a_sitting_later_is_dated_by_that_request(client: aioredis.Redis, prefix: str) -> None:
    dates = await _dates(client, prefix, timedelta(hours=14), gave=False)
    assert dates == {"earlier": ASKED, "smoker": ASKED + timedelta(hours=14)}


@pytest.mark.parametrize(("later", "gave"), [(timedelta(minutes=10), False), (timedelta(days=3), True)], ids=["same sitting", "the gateway's answer"])
async def test_a_reply_of_the_same_sitting_or_the_gateways_own_keeps_the_questions_time(
    client: aioredis.Redis, prefix: str, later: timedelta, gave: bool
) -> None:
    assert await _dates(client, prefix, later, gave) == {"earlier": ASKED, "smoker": ASKED}


def test_the_claim_is_the_replys_content_hash() -> None:
    assert answer_claims(REPLY["content"], ()) == ["r:" + page_id(REPLY["content"])]
