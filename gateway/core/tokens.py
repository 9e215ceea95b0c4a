"""Token counting with tiktoken.

The encoding is the model's own when tiktoken knows the model and its encoding file ships with litellm
(:data:`OFFLINE_ENCODINGS`), ``cl100k_base`` otherwise. Encodings and model lookups are cached with ``functools.lru_cache``.
tiktoken reads encoding files from ``TIKTOKEN_CACHE_DIR``; the gateway package sets it on import so that no
download is ever attempted for the shipped encodings.

Counting never fails on text: special-token strings count as plain text and lone surrogates are replaced.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import tiktoken

from gateway.core.lru import Lru
from gateway.core.messages import message_text, tool_calls_of

__all__ = ["DEFAULT_ENCODING", "MESSAGE_OVERHEAD", "OFFLINE_ENCODINGS", "REPLY_PRIMING", "KeptCounts", "PerTokenizer", "TokenCounter", "count_joined", "encoding_for_model"]

DEFAULT_ENCODING = "cl100k_base"
# The encodings whose files litellm ships (o200k_harmony reuses the o200k_base file).
OFFLINE_ENCODINGS = frozenset({"cl100k_base", "o200k_base", "o200k_harmony", "p50k_base"})
MESSAGE_OVERHEAD = 3
REPLY_PRIMING = 3


@functools.lru_cache(maxsize=None)
def _encoding(name: str) -> tiktoken.Encoding:
    return tiktoken.get_encoding(name)


@functools.lru_cache(maxsize=256)
def encoding_for_model(model: str) -> str:
    """The encoding name to use for ``model`` (a provider prefix like ``openai/`` is ignored)."""
    for candidate in (model, model.rsplit("/", 1)[-1]):
        try:
            name = tiktoken.encoding_name_for_model(candidate)
        except KeyError:
            continue
        # Other encodings would be downloaded at request time; never risk that.
        return name if name in OFFLINE_ENCODINGS else DEFAULT_ENCODING
    return DEFAULT_ENCODING


@dataclass(frozen=True)
class TokenCounter:
    """Counts tokens with one tiktoken encoding (by name)."""

    encoding_name: str = DEFAULT_ENCODING

    @classmethod
    def for_model(cls, model: str) -> TokenCounter:
        return cls(encoding_for_model(model))

    @property
    def encoding(self) -> tiktoken.Encoding:
        return _encoding(self.encoding_name)

    def count(self, text: str) -> int:
        """Tokens in ``text``."""
        return len(self.encoding.encode(text, disallowed_special=()))

    def count_message(self, message: Mapping[str, Any], count: Callable[[str], int] | None = None) -> int:
        """Tokens of one chat message as the model sees it: role, name, text, tool calls, plus a fixed overhead; its
        parts counted by ``count`` when given (one that keeps what it counted), else by :meth:`count`."""
        parts = [str(message.get("role", "")), message_text(message)]
        name = message.get("name")
        if isinstance(name, str):
            parts.append(name)
        for call in tool_calls_of(message):
            parts.append(json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False))
        count = count or self.count
        return MESSAGE_OVERHEAD + sum(count(part) for part in parts if part)

    def count_messages(self, messages: Iterable[Mapping[str, Any]]) -> int:
        """Tokens of a message list, including the reply priming OpenAI adds."""
        return REPLY_PRIMING + sum(self.count_message(message) for message in messages)


class KeptCounts:
    """``TokenCounter.count`` of texts that recur (a thread's history sent again with each request, excerpts shown
    again), kept by the text's length and hash, not by the text, which can be large (a client's tool outputs):
    bounded, least recently used out."""

    def __init__(self, counter: TokenCounter, capacity: int) -> None:
        self._counter = counter
        self._counts: Lru[tuple[int, int], int] = Lru(capacity)

    def count(self, text: str) -> int:
        key = (len(text), hash(text))
        n = self._counts.get(key)
        if n is None:
            n = self._counter.count(text)
            self._counts.put(key, n)
        return n


def count_joined(parts: Sequence[str], count: Callable[[str], int]) -> int:
    """``count("".join(parts))`` for a ``count`` of a shipped encoding (:data:`OFFLINE_ENCODINGS`), counted in pieces
    cut where two parts meet, so that a ``count`` that keeps what it counted (:class:`KeptCounts`) counts a part
    said again (an excerpt's lines, in each of the nested excerpts of a page) only once.

    A cut is exact where the encoding's pre-split into words always cuts and neither side's split depends on the
    other (its patterns look ahead only at whitespace, and at the text's end only after whitespace): before a space
    that follows a non-space (no word of these patterns holds a space after another character), and after a line
    break that follows a non-space and precedes a character that is neither a space nor ``/`` (o200k's punctuation
    takes line breaks and slashes after it). A meeting point that is neither, nor one line break before one, is not
    cut. Pinned for every shipped encoding by ``tests/core/test_count_joined.py``."""
    text = "".join(parts)
    total = 0
    start = 0
    at = 0
    for part in parts[:-1]:
        at += len(part)
        cut = at if _cuts(text, at) else at + 1 if text.startswith("\n", at) and _cuts(text, at + 1) else None
        if cut is not None and cut > start:
            total += count(text[start:cut])
            start = cut
    return total + count(text[start:])


def _cuts(text: str, at: int) -> bool:
    """Whether every shipped encoding's pre-split cuts ``text`` at ``at`` whatever comes before and after (see
    :func:`count_joined`)."""
    if not 0 < at < len(text):
        return False
    before, here = text[at - 1], text[at]
    if here == " ":
        return not before.isspace()
    return before == "\n" and at > 1 and not text[at - 2].isspace() and not here.isspace() and here != "/"


_T = TypeVar("_T")


class PerTokenizer(Generic[_T]):
    """A value made once per tokenizer (by its encoding name), on first use: what a count a process keeps depends on."""

    def __init__(self, make: Callable[[TokenCounter], _T]) -> None:
        self._make = make
        self._values: dict[str, _T] = {}

    def of(self, counter: TokenCounter) -> _T:
        value = self._values.get(counter.encoding_name)
        if value is None:
            value = self._values[counter.encoding_name] = self._make(counter)
        return value
