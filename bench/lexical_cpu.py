"""CPU of the lexical work, per page at ingest and per query: what cutting text into terms costs, by language.

Per page: the term counts of an exchange (a user message and the reply to it), as ingestion computes them. Per
query: what the router does with a question's text before it looks anything up (its terms, the time phrases left
out, the date it names, whether it says anything at all). English texts are LoCoMo's and REALTALK's
(``../shared/data``); Chinese ones the generated set (bench/chinese_chats.py), with the gateway's segmenter
installed as the composition root installs it (its one-time load is reported apart). Process CPU time, the best
of ``--repeat`` passes over every text (the least disturbed by other work on the machine).

Run from the repository root:

    .venv/bin/python -m bench.lexical_cpu [--repeat 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.datasets import Dataset, load_locomo, load_realtalk  # noqa: E402
from gateway.core.lexical import drop_time_phrases, is_low_information, term_counts, terms  # noqa: E402
from gateway.core.when import named_span  # noqa: E402

NOW = datetime(2024, 3, 21, 9, 0, tzinfo=timezone.utc)


def exchanges(data: Dataset) -> tuple[list[str], list[str]]:
    """The set's exchanges (a message and the one after it, as a page's transcript) and its questions."""
    pages, questions = [], []
    for conv in data.conversations:
        turns = conv.turns
        pages += [f"user: {a.text}\nassistant: {b.text}" for a, b in zip(turns[::2], turns[1::2])]
        questions += [q.text for q in conv.questions]
    return pages, questions


def query_work(text: str) -> None:
    matched = drop_time_phrases(text)
    terms(matched)
    named_span(text, NOW)
    is_low_information(matched)


def best_of(repeat: int, work: Callable[[str], object], texts: Sequence[str]) -> float:
    """The least CPU seconds of ``repeat`` passes of ``work`` over ``texts``, per text."""
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        for text in texts:
            work(text)
        best = min(best, time.process_time() - started)
    return best / max(len(texts), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sets: list[tuple[str, Dataset]] = [("English (LoCoMo + REALTALK)", load_locomo()), ("", load_realtalk())]
    english = [exchanges(data) for _, data in sets]
    rows = [("English (LoCoMo + REALTALK)", english[0][0] + english[1][0], english[0][1] + english[1][1])]
    try:
        from bench.chinese_chats import load_chinese
        from gateway.adapters.segmenter import JiebaSegmenter
        from gateway.core.scripts import install_segmenter
    except ImportError:  # a checkout from before Chinese was cut into words
        pass
    else:
        segmenter = JiebaSegmenter()
        install_segmenter(segmenter)
        started = time.process_time()
        terms("中文")
        print(f"segmenter loaded on the first Chinese text: {time.process_time() - started:.3f} s CPU")
        pages, questions = exchanges(load_chinese())
        rows.append(("Chinese (generated set)", pages, questions))
    print("| texts | pages | µs per page (term counts) | questions | µs per query (terms, phrases, date) |")
    print("|---|---:|---:|---:|---:|")
    for name, pages, questions in rows:
        page = best_of(args.repeat, term_counts, pages)
        query = best_of(args.repeat, query_work, questions)
        print(f"| {name} | {len(pages)} | {page * 1e6:.1f} | {len(questions)} | {query * 1e6:.1f} |")


if __name__ == "__main__":
    main()
