"""A thread's page vectors, by the embedding model that made them (the vector hash of `gateway.adapters.store_keys`).

Vectors of two models are never compared: a read gives only the vectors of the model asked for, and the hash records
the model all its vectors are of (``@model``), which a request that stores pages to embed later marks as pending
(`gateway.adapters.redis_store`'s page script) and the background's re-embedding sets again
(`gateway.service.reembedding`). `gateway.adapters.redis_store.RedisStore` has these reads and writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from gateway.adapters.embedding_models import DEFAULT_MODEL
from gateway.adapters.manifests import decode_vector, encode_vector, sentences_vector_field, user_vector_field, vector_model
from gateway.adapters.store_errors import store_errors
from gateway.adapters.store_keys import ThreadKey, ThreadKeys

__all__ = ["MODEL_FIELD", "PageVectors"]

MODEL_FIELD = "@model"  # the vector hash's field naming the model of all its vectors (store_keys)

_REPLACE_VECTORS = """
-- KEYS: vector  ARGV: the model, the record it replaces ('' = whatever it is), the shipped model, then field, value pairs
for i = 4, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
local recorded = redis.call('HGET', KEYS[1], '@model') or ARGV[3]
if ARGV[2] == '' or recorded == ARGV[2] then redis.call('HSET', KEYS[1], '@model', ARGV[1]) end
return 1
"""


class PageVectors:
    """The vector reads and writes of a store over one Redis client (``_redis``) and its key layout (``keys``)."""

    _redis: Any

    def keys(self, thread: ThreadKey) -> ThreadKeys:
        raise NotImplementedError

    async def vectors(
        self, thread: ThreadKey, ids: Sequence[str], user: bool = False, model: str = DEFAULT_MODEL
    ) -> dict[str, npt.NDArray[np.float32]]:
        """Content embeddings of the pages among `ids` that have one made by ``model`` (another model's are as
        none: vectors of two models are never compared); with ``user``, of the user's own messages (the content's
        where the page has no separate one), as a matrix whose further rows are the embeddings of the user's
        sentences where they were stored (a message of several)."""
        if not ids:
            return {}
        n = len(ids)
        fields = ([user_vector_field(i) for i in ids] + list(ids) + [sentences_vector_field(i) for i in ids]) if user else list(ids)
        with store_errors():
            raws = [raw if raw is not None and vector_model(raw) == model else None
                    for raw in await self._redis.hmget(self.keys(thread).vector, fields)]
        found = {page_id: decode_vector(raw) for page_id, raw in zip(ids, raws[:n]) if raw is not None}
        if user:  # the page's own where it has no second one
            found.update({i: decode_vector(raw) for i, raw in zip(ids, raws[n : 2 * n]) if raw is not None and i not in found})
            for page_id, raw in zip(ids, raws[2 * n :]):
                whole = found.get(page_id)
                if raw is not None and whole is not None:
                    found[page_id] = np.vstack([whole, decode_vector(raw).reshape(-1, len(whole))])
        return found

    async def vectors_model(self, thread: ThreadKey) -> str:
        """The model every vector of the thread was made by, as last recorded (:meth:`replace_vectors`); the
        shipped model's when none was."""
        with store_errors():
            raw = await self._redis.hget(self.keys(thread).vector, MODEL_FIELD)
        return str(raw) if raw is not None else DEFAULT_MODEL

    async def vectors_not_of(self, thread: ThreadKey, model: str) -> list[str]:
        """The fields of the thread's vector hash (a page id, or its :func:`user_vector_field` or
        :func:`sentences_vector_field`) whose vector another model made."""
        with store_errors():
            stored = await self._redis.hgetall(self.keys(thread).vector)
        return [str(f) for f, raw in stored.items() if f != MODEL_FIELD and raw and vector_model(raw) != model]

    async def replace_vectors(
        self, thread: ThreadKey, vectors: Mapping[str, npt.NDArray[np.float32]], model: str, since: str | None = None
    ) -> None:
        """Store ``vectors`` (by vector-hash field) as made by ``model``, and record that every vector of the thread
        now is; with ``since`` (what :meth:`vectors_model` said before the vectors were made), only if that record is
        unchanged: a request that stored pages to embed later meanwhile changed it, and the next job makes those."""
        args: list[str] = [model, since or "", DEFAULT_MODEL]
        for field, vector in vectors.items():
            args += [field, encode_vector(vector, model)]
        with store_errors():
            await self._redis.eval(_REPLACE_VECTORS, 1, self.keys(thread).vector, *args)
