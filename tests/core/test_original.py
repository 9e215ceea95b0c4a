"""Giving an Original page's messages back: from the transcript where it can, from what was kept otherwise."""

from __future__ import annotations

import json
from typing import Any

from gateway.core import split_blocks
from gateway.core.original import kept_messages, page_messages, thread_messages, transcript_messages


def block_of(messages: list[dict[str, Any]]) -> Any:
    (block,) = split_blocks(messages).blocks
    return block


def test_a_plain_exchange_keeps_nothing_and_comes_back_from_its_transcript() -> None:
    messages = [
        {"role": "user", "content": "Where did I put the keys?\nThey were on the table."},
        {"role": "assistant", "content": "On the table, you said."},
        {"role": "assistant", "content": ""},
    ]
    block = block_of(messages)
    assert kept_messages(block) == ""
    assert page_messages(block.text, None) == messages
    assert page_messages(block.text, "") == messages


def test_messages_the_transcript_cannot_give_back_are_kept_whole() -> None:
    cases = [
        # a line inside a text that reads as a new message
        [{"role": "user", "content": "Quote this:\nassistant: hello"}, {"role": "assistant", "content": "Done."}],
        # a name, content parts, an extra field
        [{"role": "user", "name": "alice", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
        [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}, {"role": "assistant", "content": "Hello"}],
        [{"role": "user", "content": "Hi", "id": 7}, {"role": "assistant", "content": None}],
        # a tool call and its result
        [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
            {"role": "assistant", "content": "Sunny."},
        ],
    ]
    for messages in cases:
        block = block_of(messages)
        kept = kept_messages(block)
        assert kept and json.loads(kept) == messages
        assert page_messages(block.text, kept) == messages


def test_a_clients_reminders_are_not_in_the_page_but_its_messages_come_back_whole() -> None:
    """Claude Code writes its skills list, the user's CLAUDE.md and the date into the session's first user message, in
    <system-reminder> parts: the page is what the user said, and the message is kept as sent."""
    reminder = "<system-reminder>\nThe following skills are available:\n- code-review: Review the current diff\n</system-reminder>"
    messages = [
        {"role": "user", "content": [{"type": "text", "text": reminder}, {"type": "text", "text": "What is a closure?"}]},
        {"role": "assistant", "content": "A function with its environment."},
    ]
    block = block_of(messages)
    assert block.text == "user: What is a closure?\nassistant: A function with its environment."
    assert block.anchor_text == "What is a closure?"
    kept = kept_messages(block)
    assert page_messages(block.text, kept) == messages
    # a reminder left open, or one in an assistant's reply, is text like any other
    for kept_as_said in ([{"role": "user", "content": "<system-reminder> is a tag I saw"}, {"role": "assistant", "content": "Ok."}],
                         [{"role": "user", "content": "Quote it"}, {"role": "assistant", "content": reminder}]):
        assert block_of(kept_as_said).text == "\n".join(f"{m['role']}: {m['content']}" for m in kept_as_said)


def test_a_transcript_reads_as_plain_messages() -> None:
    assert transcript_messages("") == []
    assert transcript_messages("stray line\nuser: a\nb\nassistant: c") == [
        {"role": "user", "content": "a\nb"},
        {"role": "assistant", "content": "c"},
    ]


def test_a_thread_leaves_out_an_exchange_a_later_page_extended() -> None:
    first = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    extended = [*first, {"role": "assistant", "content": "How are you?"}]
    other = [{"role": "user", "content": "Fine"}, {"role": "assistant", "content": "Good"}]
    same_start = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hey there"}]  # an edit: a branch
    assert thread_messages([first, extended, other]) == [*extended, *other]
    assert thread_messages([first, other, same_start]) == [*first, *other, *same_start]
    assert thread_messages([extended, first]) == [*extended, *first]  # only a later page supersedes
    assert thread_messages([[], other]) == other
