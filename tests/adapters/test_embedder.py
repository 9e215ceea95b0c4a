from __future__ import annotations

import asyncio

import numpy as np

from gateway.adapters.embedder import DIMENSIONS, MiniLMEmbedder


def test_a_text_gets_the_same_vector_whatever_it_is_embedded_with() -> None:
    # int8 activations are scaled per tensor: in a shared batch, a text's vector used to depend on the others
    embedder = MiniLMEmbedder()
    try:
        text = "How do I configure Redis persistence for the cache?"
        alone = asyncio.run(embedder.embed([text]))
        mixed = asyncio.run(embedder.embed(["x", text, "A much longer text about hiking in the mountains with the dog, " * 4]))
        assert alone.shape == (1, DIMENSIONS) and mixed.shape == (3, DIMENSIONS)
        assert np.array_equal(alone[0], mixed[1])
        assert np.allclose(np.linalg.norm(mixed, axis=1), 1.0, atol=1e-5)
        assert float(mixed[0] @ mixed[1]) < 0.9  # different texts stay apart
    finally:
        embedder.close()
