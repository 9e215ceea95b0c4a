"""The token counts of the texts clients send, kept across requests (gateway.core.tokens.KeptCounts, as the context
builder keeps them for a request's messages)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.core import TokenCounter
from gateway.core.tokens import KeptCounts
from gateway.service.context import MESSAGE_TEXTS, _MessageTokens


@dataclass(frozen=True)
class Encodings(TokenCounter):
    """A counter that records the texts it encoded."""

    encoded: list[str] = field(default_factory=list)

    def count(self, text: str) -> int:
        self.encoded.append(text)
        return super().count(text)


def test_a_text_sent_again_is_not_encoded_again() -> None:
    counter = Encodings()
    sent = KeptCounts(counter, MESSAGE_TEXTS)
    history = [{"role": "user", "content": "Where is the lighthouse?"}, {"role": "assistant", "content": "On the cape."}]
    first = _MessageTokens(counter, sent).total(history)
    assert first == sum(TokenCounter().count_message(m) for m in history)
    encoded = len(counter.encoded)
    # the next request carries the same history in new objects (a new JSON body), and one message more
    again = [dict(m) for m in history] + [{"role": "user", "content": "How tall is it?"}]
    assert _MessageTokens(counter, sent).total(again) == first + TokenCounter().count_message(again[-1])
    assert counter.encoded[encoded:] == ["How tall is it?"]  # (the roles were counted once too)


def test_the_counts_kept_are_bounded() -> None:
    counter = Encodings()
    sent = KeptCounts(counter, capacity=2)
    for text in ("one", "two", "three", "one"):
        assert sent.count(text) == TokenCounter().count(text)
    assert counter.encoded == ["one", "two", "three", "one"]  # "one" was dropped for "three"
