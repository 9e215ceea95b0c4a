"""Re-embedding a thread whose vectors another embedding model made (`pcp.embedding_model` changed), or that a
request stored to embed later (a thread sent raw: `gateway.adapters.manifests.PENDING_VECTOR`).

Vectors of two models are never compared: the store gives the request path only the vectors of the embedder's
model (gateway.adapters.redis_store), so a page whose vector another model made is matched on its words alone until
it is re-embedded here, in the background, by the consolidator's job for the thread. Each vector is made again from
the text it was made from at ingestion (gateway.service.ingest): an Original page's exchange without its line labels,
its user's words and their sentences; a Consolidated page's is the mean of its children's. Then the thread records
the model all its vectors are of, so that the next job only reads that record.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from gateway.adapters.embedder import Embedder
from gateway.adapters.manifests import sentences_vector_field, user_vector_field
from gateway.adapters.redis_store import RedisStore
from gateway.adapters.store_keys import ThreadKey
from gateway.core import Block, PageType, split_blocks
from gateway.core.excerpt import sentences
from gateway.core.original import page_messages
from gateway.service.ingest import matched_texts

__all__ = ["Reembedding"]

log = logging.getLogger("gateway.reembedding")

Vector = npt.NDArray[np.float32]


class Reembedding:
    """Brings a thread's vectors to the embedder's model."""

    def __init__(self, store: RedisStore, embedder: Embedder | None) -> None:
        self._store = store
        self._embedder = embedder

    async def ensure(self, thread: ThreadKey) -> int:
        """Re-embed what another model made in ``thread``; returns how many vectors were made again (one read when
        the thread's vectors are all of the embedder's model already)."""
        if self._embedder is None:
            return 0
        model = self._embedder.model
        recorded = await self._store.vectors_model(thread)
        if recorded == model:
            return 0
        stale = set(await self._store.vectors_not_of(thread, model))
        fresh = await self._vectors(thread, stale) if stale else {}
        await self._store.replace_vectors(thread, fresh, model, since=recorded)
        if fresh:
            log.info("re-embedded %d vectors of %s with %s", len(fresh), thread.scope, model)
        return len(fresh)

    async def _vectors(self, thread: ThreadKey, stale: set[str]) -> dict[str, Vector]:
        assert self._embedder is not None
        originals = await self._store.originals(thread)
        blocks = [_block(content, kept) for _, content, kept in originals]
        position = {page_id: i for i, (page_id, _, _) in enumerate(originals)}
        ids = sorted({field.split(":")[0] for field in stale})
        manifests = await self._store.manifests(thread, ids)
        containers = {i: m.page.source_ids for i, m in manifests.items() if i in stale and m.page.type is PageType.CONSOLIDATED}
        texts: dict[str, str | list[str]] = {}  # field -> the text (or the sentences) it is made from
        sealed = _sealed(blocks)
        for page_id in ids:
            at = position.get(page_id)
            manifest = manifests.get(page_id)
            if page_id in stale and at is not None and blocks[at] is not None and page_id not in containers:
                texts[page_id] = matched_texts(sealed, _index(blocks, at)).embedded
            if manifest is not None and user_vector_field(page_id) in stale:
                texts[user_vector_field(page_id)] = manifest.anchor
            if manifest is not None and sentences_vector_field(page_id) in stale:
                texts[sentences_vector_field(page_id)] = sentences(manifest.anchor)
        flat = [t for text in texts.values() for t in ([text] if isinstance(text, str) else text)]
        rows = iter(await self._embedder.embed(flat))
        out: dict[str, Vector] = {}
        for field, text in texts.items():
            if isinstance(text, str):
                out[field] = next(rows)
            else:
                out[field] = np.vstack([next(rows) for _ in text]).ravel()
        out.update(await self._means(thread, containers, out))
        return out

    async def _means(self, thread: ThreadKey, containers: Mapping[str, Sequence[str]], made: Mapping[str, Vector]) -> dict[str, Vector]:
        """Consolidated pages' vectors: the normalised mean of their children's (children first)."""
        assert self._embedder is not None
        known = dict(made)
        children = {c for ids in containers.values() for c in ids if c not in known}
        known.update(await self._store.vectors(thread, sorted(children), model=self._embedder.model))
        out: dict[str, Vector] = {}
        todo = dict(containers)
        while todo:
            ready = {i: ids for i, ids in todo.items() if all(c in known or c not in todo for c in ids)}
            if not ready:
                break  # pragma: no cover - containers nest without cycles
            for page_id, ids in ready.items():
                rows = [known[c] for c in ids if c in known]
                del todo[page_id]
                if rows:
                    mean = np.mean(np.stack(rows), axis=0)
                    out[page_id] = known[page_id] = (mean / (np.linalg.norm(mean) or 1.0)).astype(np.float32)
        return out


def _block(content: str, kept: str | None) -> Block | None:
    """An Original page's block, from its stored messages."""
    found = split_blocks(page_messages(content, kept)).blocks
    return found[0] if found else None


def _sealed(blocks: Sequence[Block | None]) -> list[Block]:
    return [b for b in blocks if b is not None]


def _index(blocks: Sequence[Block | None], at: int) -> int:
    """The position of ``blocks[at]`` among the blocks that are not None."""
    return sum(1 for b in blocks[:at] if b is not None)
