from __future__ import annotations

import asyncio
import concurrent.futures
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gateway.adapters.embedder import DIMENSIONS, MiniLMEmbedder
from gateway.adapters.onnx_export import ensure_model, model_file


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


def test_a_text_asked_for_again_gets_its_kept_vector_without_a_forward_pass() -> None:
    told: list[tuple[int, int]] = []
    embedder = MiniLMEmbedder(on_embed=lambda computed, kept: told.append((computed, kept)), memo=2)
    try:
        first = asyncio.run(embedder.embed(["Where did we camp?", "A lens for birds", "Where did we camp?"]))
        assert told == [(2, 1)] and np.array_equal(first[0], first[2])
        again = asyncio.run(embedder.embed(["A lens for birds", "Where did we camp?"]))
        assert told[-1] == (0, 2) and np.array_equal(again, first[[1, 0]])
        again[:] = 0.0  # what a caller does with its vectors does not reach the kept ones
        assert np.array_equal(asyncio.run(embedder.embed(["Where did we camp?"]))[0], first[0])
        asyncio.run(embedder.embed(["A third text"]))  # two kept: the least recently used one goes
        assert told[-2:] == [(0, 1), (1, 0)]
        assert np.array_equal(asyncio.run(embedder.embed(["A lens for birds"]))[0], first[1]) and told[-1] == (1, 0)
        assert asyncio.run(embedder.embed([])).shape == (0, DIMENSIONS) and told[-1] == (1, 0)
    finally:
        embedder.close()


def test_a_gateway_process_embeds_without_importing_torch() -> None:
    # the model runs with onnxruntime; torch (~400 MB resident once imported) is only for the one-time export
    script = (
        "import asyncio, sys\n"
        "from gateway.adapters.embedder import MiniLMEmbedder\n"
        "e = MiniLMEmbedder()\n"
        "v = asyncio.run(e.embed(['hello there']))\n"
        "e.close()\n"
        "print(v.shape, sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    assert done.stdout.strip() == f"(1, {DIMENSIONS}) []"


def test_a_missing_model_is_exported_once_even_when_processes_race_for_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # scripts/setup exports the model; a gateway that finds none (a new PCP_MODEL_DIR) exports it on first use,
    # in a subprocess and under a lock, and the result embeds exactly as the installed export does
    monkeypatch.setenv("PCP_MODEL_DIR", str(tmp_path))
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        paths = list(pool.map(ensure_model, [True, True]))
    assert paths[0] == paths[1] == model_file(True) and paths[0].parent == tmp_path
    assert sorted(p.name for p in tmp_path.glob("*.onnx")) == sorted([model_file(True).name, model_file(False).name])
    text = "Where did we leave the camping gear last summer?"
    fresh = MiniLMEmbedder()
    try:
        exported = asyncio.run(fresh.embed([text]))
    finally:
        fresh.close()
    monkeypatch.delenv("PCP_MODEL_DIR")
    installed = MiniLMEmbedder()
    try:
        assert np.array_equal(exported, asyncio.run(installed.embed([text])))
    finally:
        installed.close()
