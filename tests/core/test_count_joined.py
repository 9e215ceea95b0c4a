"""`count_joined` counts a text in pieces cut where two parts meet: exact for every shipped encoding, on texts built
from the characters that decide where a tokenizer's words end (spaces, line breaks, slashes, punctuation, marks,
apostrophes, letters of several scripts, digits)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.tokens import OFFLINE_ENCODINGS, TokenCounter, count_joined

ALPHABET = [" ", "  ", "\n", "\n\n", "\r\n", "\t", "\u00a0", "\x1c", "/", "…", ".", "!", "'", "'s", "'ll", "-", ":", "(",
            "a", "s", "A", "Ab", "word", "1", "123", "4567", "é", "e\u0301", "中文", "ß", "🙂", "user:", "<|endoftext|>"]
PARTS = st.lists(st.lists(st.sampled_from(ALPHABET), max_size=6).map("".join), max_size=8)


@pytest.mark.parametrize("encoding", sorted(OFFLINE_ENCODINGS))
@settings(max_examples=400, deadline=None)
@given(parts=PARTS)
def test_counted_in_pieces_as_whole(encoding: str, parts: list[str]) -> None:
    counter = TokenCounter(encoding)
    pieces: list[str] = []
    assert count_joined(parts, lambda text: pieces.append(text) or counter.count(text)) == counter.count("".join(parts))
    assert "".join(pieces) == "".join(parts)


@pytest.mark.parametrize("encoding", sorted(OFFLINE_ENCODINGS))
def test_an_excerpts_rows_are_counted_apart(encoding: str) -> None:
    counter = TokenCounter(encoding)
    seen: list[str] = []
    parts = ["user: When did we go?", " We went in May.", "\nassistant: In May, to Lisbon.", "\n…"]
    assert count_joined(parts, lambda text: seen.append(text) or counter.count(text)) == counter.count("".join(parts))
    assert seen == ["user: When did we go?", " We went in May.\n", "assistant: In May, to Lisbon.\n", "…"]


@pytest.mark.parametrize(
    ("parts", "uncut"),
    [
        (["a.", "\n/usr"], "o200k: a slash joins the punctuation and line break before it"),
        (["a \n", "b"], "p50k: the spaces before a line break are one word at the text's end, two before a letter"),
        (["a\n", "\nb"], "two line breaks in a row"),
        (["a", "\u00a0b"], "a space that is not ' '"),
    ],
)
def test_a_place_the_split_may_not_cut_is_not_cut(parts: list[str], uncut: str) -> None:
    pieces: list[str] = []
    count_joined(parts, lambda text: pieces.append(text) or 0)
    assert pieces == ["".join(parts)], uncut


def test_two_of_the_places_not_cut_would_count_wrong() -> None:
    """What the first and third cases above guard against: cut there, these texts count otherwise than whole (the
    other two are kept out by what the patterns say, not by a text found to count wrong)."""
    o200k, cl100k = TokenCounter("o200k_base"), TokenCounter("cl100k_base")
    assert o200k.count("a.\n") + o200k.count("/") != o200k.count("a.\n/")
    assert cl100k.count("a\n") + cl100k.count("\nb") != cl100k.count("a\n\nb")
