from __future__ import annotations

import pytest

from gateway.core.tokens import DEFAULT_ENCODING, MESSAGE_OVERHEAD, REPLY_PRIMING, PerTokenizer, TokenCounter, encoding_for_model


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("openai/gpt-4o-mini", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("ollama/llama3", DEFAULT_ENCODING),
        ("davinci", DEFAULT_ENCODING),  # r50k_base is not shipped: never download at request time
    ],
)
def test_encoding_for_model(model: str, encoding: str) -> None:
    assert encoding_for_model(model) == encoding
    assert TokenCounter.for_model(model).encoding_name == encoding


def test_count_is_total_on_any_text() -> None:
    counter = TokenCounter()
    assert counter.count("") == 0
    assert counter.count("hello world") == 2
    assert counter.count("<|endoftext|>") > 1  # special tokens are plain text here
    assert counter.count("lone \ud800 surrogate") > 0
    assert counter.encoding.name == "cl100k_base"


def test_count_messages() -> None:
    counter = TokenCounter()
    message = {"role": "user", "content": "hello world", "name": "ann"}
    assert counter.count_message(message) == MESSAGE_OVERHEAD + 1 + 2 + 1
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]}
    assert counter.count_message(call) > MESSAGE_OVERHEAD + 1
    assert counter.count_messages([message, call]) == REPLY_PRIMING + counter.count_message(message) + counter.count_message(call)


def test_a_per_tokenizer_value_is_made_once_per_encoding() -> None:
    made: list[str] = []

    def make(counter: TokenCounter) -> str:
        made.append(counter.encoding_name)
        return counter.encoding_name

    held = PerTokenizer(make)
    cl100k, o200k = TokenCounter("cl100k_base"), TokenCounter("o200k_base")
    assert [held.of(cl100k), held.of(o200k), held.of(TokenCounter("cl100k_base"))] == ["cl100k_base", "o200k_base", "cl100k_base"]
    assert made == ["cl100k_base", "o200k_base"]
