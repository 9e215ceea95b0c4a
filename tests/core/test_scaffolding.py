"""The scaffolding rule, driven on message lists shaped like the ones aider sends (recorded through the gateway)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from gateway.core.blocks import split_blocks
from gateway.core.scaffolding import compile_pins, is_plain_exchange, scaffolding_blocks

Message = dict[str, Any]

PINS = compile_pins([r"^Here are summaries of some files", r"^I have \*added these files to the chat\*"])
PREAMBLE = compile_pins([r"^I switched to a new code base"])


def pair(question: str, answer: str) -> list[Message]:
    return [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


EXAMPLES = pair("Change get_factorial() to use math.factorial", "To make this change we need ...") + pair(
    "Refactor hello() into its own file.", "To make this change we need to modify `main.py` ..."
)
SWITCHED = pair("I switched to a new code base. Please don't consider the above files.", "Ok.")
REPO = pair("Here are summaries of some files present in my git repository.\nmain.py:\n⋮\n", "Ok, I won't try ...")


def files(content: str) -> list[Message]:
    return pair(f"I have *added these files to the chat* so you can go ahead and edit them.\n\ngreet.py\n```\n{content}\n```", "Ok, any changes I propose will be to those files.")


def decide(messages: list[Message], pins: tuple[re.Pattern[str], ...] = PINS, preamble: tuple[re.Pattern[str], ...] = PREAMBLE) -> list[str]:
    """The first user line of every scaffolding block, in order."""
    blocks = split_blocks(messages).blocks
    return [blocks[i].anchor_text.splitlines()[0][:20] for i in sorted(scaffolding_blocks(blocks, pins, preamble))]


def test_aider_before_any_edit_examples_repo_map_and_files_are_scaffolding_the_exchanges_are_not() -> None:
    conversation = pair("Turn one: explain greet", "It greets.") + pair("Turn two: and bye?", "It says bye.")
    messages = [{"role": "system", "content": "Act as an expert"}, *EXAMPLES, *SWITCHED, *REPO, *files("v1"), *conversation]
    assert decide(messages) == ["Change get_factorial", "Refactor hello() int", "I switched to a new ", "Here are summaries o", "I have *added these "]


def test_aider_after_an_edit_the_file_block_between_conversation_parts_is_scaffolding_in_its_place() -> None:
    done = pair("Turn one: add bye", "greet.py\n<<<<<<< SEARCH ...") + pair("I committed the changes with git hash abc", "Ok.")
    messages = [*EXAMPLES, *SWITCHED, *REPO, *done, *files("v2"), *pair("Turn two", "Done.")]
    blocks = split_blocks(messages).blocks
    assert sorted(scaffolding_blocks(blocks, PINS, PREAMBLE)) == [0, 1, 2, 3, 6]  # not the edit or its commit note


def test_no_markers_no_scaffolding() -> None:
    blocks = split_blocks([*EXAMPLES, *SWITCHED, *REPO, *files("v1")]).blocks
    assert scaffolding_blocks(blocks, ()) == frozenset()
    assert scaffolding_blocks(blocks, (), ()) == frozenset()


def test_preamble_without_examples_is_the_marker_alone_and_pins_need_no_preamble() -> None:
    assert decide([*SWITCHED, *pair("hi", "hello")]) == ["I switched to a new "]
    assert decide([*pair("hi", "hello"), *REPO], preamble=()) == ["Here are summaries o"]


def test_only_the_first_marker_closes_the_preamble() -> None:
    messages = [*EXAMPLES, *SWITCHED, *pair("hi", "hello"), *pair("I switched to a new code base again", "Ok.")]
    assert decide(messages, pins=()) == ["Change get_factorial", "Refactor hello() int", "I switched to a new "]


def test_a_marker_after_tool_work_opens_no_preamble() -> None:
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}
    work = [{"role": "user", "content": "read it"}, call, {"role": "tool", "tool_call_id": "c1", "content": "text"}, {"role": "assistant", "content": "done"}]
    assert decide([*work, *SWITCHED, *pair("hi", "hello")], pins=()) == []
    assert decide([*work, *SWITCHED, *REPO]) == ["Here are summaries o"]


def test_pins_search_the_user_text_not_the_reply() -> None:
    assert decide(pair("plain question", "Here are summaries of some files"), preamble=()) == []
    assert decide([{"role": "assistant", "content": "greeting first"}, *pair("x", "y")]) == []  # a block without user text


def test_a_pinned_block_is_pinned_in_any_shape() -> None:
    merged = [{"role": "user", "content": "Here are summaries of some files"}, {"role": "user", "content": "and more"}, {"role": "assistant", "content": "Ok."}]
    assert decide(merged) == ["Here are summaries o"]


@pytest.mark.parametrize(
    ("messages", "plain"),
    [
        (pair("q", "a"), True),
        ([{"role": "user", "content": "q"}, {"role": "user", "content": "q2"}, {"role": "assistant", "content": "a"}], False),
        ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c", "content": "r"}, {"role": "assistant", "content": "a"}], False),
        ([{"role": "assistant", "content": "a"}], False),
        ([{"role": "tool", "tool_call_id": "c", "content": "r"}, {"role": "assistant", "content": "a"}], False),
    ],
)
def test_plain_exchange_shape(messages: list[Message], plain: bool) -> None:
    blocks = split_blocks(messages).blocks
    assert is_plain_exchange(blocks[0]) is plain


def test_bad_pattern_is_an_re_error() -> None:
    with pytest.raises(re.error):
        compile_pins(["(unclosed"])
