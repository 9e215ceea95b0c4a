from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.blocks import SEALS, TRANSITIONS, BlockState, Event, next_block_state, split_blocks
from gateway.core.errors import IllegalTransition, InvalidMessage
from gateway.core.messages import message_text

Message = dict[str, Any]


def user(text: Any, **extra: Any) -> Message:
    return {"role": "user", "content": text, **extra}


def reply(text: Any) -> Message:
    return {"role": "assistant", "content": text}


def call(*ids: str, content: Any = None, name: str = "search") -> Message:
    calls = [{"id": i, "type": "function", "function": {"name": name, "arguments": f'{{"q": "{i}"}}'}} for i in ids]
    return {"role": "assistant", "content": content, "tool_calls": calls}


def result(call_id: str, text: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def test_table_is_the_seed_machine() -> None:
    assert next_block_state(BlockState.IDLE, Event.USER) is BlockState.PROCESSING
    assert next_block_state(BlockState.PROCESSING, Event.REPLY) is BlockState.REPLIED
    assert next_block_state(BlockState.REPLIED, Event.REPLY) is BlockState.REPLIED
    assert (BlockState.REPLIED, Event.USER) in SEALS
    assert len(TRANSITIONS) == len(BlockState) * len(Event)


def test_illegal_transition_names_state_and_event() -> None:
    with pytest.raises(IllegalTransition, match="IDLE.*'SEALED'") as caught:
        next_block_state(BlockState.IDLE, "SEALED")  # type: ignore[arg-type]
    assert caught.value.state == "IDLE"


def test_simple_conversation() -> None:
    messages = [{"role": "system", "content": "Be brief."}, user("What is 2+2?"), reply("4."), user("And 3+3?")]
    seg = split_blocks(messages)
    assert seg.system == (messages[0],)
    (block,) = seg.blocks
    assert block.messages == (messages[1], messages[2])
    assert block.indexes == (1, 2)
    assert block.anchor_text == "What is 2+2?"
    assert block.text == "user: What is 2+2?\nassistant: 4."
    assert block.reply_text == "4."
    assert seg.tail == (messages[3],)
    assert seg.tail_start == 3
    assert seg.open_calls == ()


def test_system_and_developer_anywhere_are_kept_apart() -> None:
    messages = [
        {"role": "developer", "content": "dev"},
        user("a"),
        {"role": "system", "content": "mid"},
        reply("b"),
        {"role": "system", "content": "late"},
    ]
    seg = split_blocks(messages)
    assert [m["content"] for m in seg.system] == ["dev", "mid", "late"]
    assert seg.blocks[0].indexes == (1, 3)
    assert seg.tail == ()
    assert seg.tail_start == len(messages)


def test_parallel_tool_calls_matched_by_id() -> None:
    messages = [
        user("weather in Paris and Rome?"),
        call("c1", "c2", content="Checking both.", name="weather"),
        result("c2", "Rome: 20C"),
        result("c1", "Paris: 12C"),
        reply("Paris 12C, Rome 20C."),
    ]
    seg = split_blocks(messages)
    (block,) = seg.blocks
    assert seg.tail == ()
    assert block.tool_names == ("weather", "weather")
    assert block.text.split("\n") == [
        "user: weather in Paris and Rome?",
        "assistant: Checking both.",
        'assistant → tool call weather({"q": "c1"})',
        'assistant → tool call weather({"q": "c2"})',
        "tool weather result: Rome: 20C",
        "tool weather result: Paris: 12C",
        "assistant: Paris 12C, Rome 20C.",
    ]


def test_unanswered_calls_keep_the_block_open() -> None:
    messages = [user("q"), reply("a"), user("run both"), call("c1", "c2"), result("c1", "done")]
    seg = split_blocks(messages)
    assert len(seg.blocks) == 1
    assert seg.tail == tuple(messages[2:])
    assert seg.tail_start == 2
    assert seg.open_calls == ("c2",)


def test_client_tool_results_are_the_live_turn() -> None:
    messages = [user("list files"), call("c1", name="ls"), result("c1", "a.txt")]
    seg = split_blocks(messages)
    assert seg.blocks == ()
    assert seg.tail == tuple(messages)
    assert seg.open_calls == ()


def test_final_reply_abandons_unanswered_calls() -> None:
    seg = split_blocks([user("q"), call("c1"), reply("never mind")])
    assert len(seg.blocks) == 1
    assert seg.tail == ()


def test_multipart_content_and_names() -> None:
    parts = [{"type": "text", "text": "What is in"}, {"type": "image_url", "image_url": {"url": "x"}}]
    seg = split_blocks([user(parts, name="bob"), reply([{"type": "text", "text": "A cat."}])])
    (block,) = seg.blocks
    assert block.anchor_text == "What is in\n[image]"
    assert block.text == "user (bob): What is in\n[image]\nassistant: A cat."


def test_consecutive_user_messages_form_one_block() -> None:
    seg = split_blocks([user("first"), user("second"), reply("both seen")])
    (block,) = seg.blocks
    assert block.anchor_text == "first\nsecond"
    assert block.indexes == (0, 1, 2)


def test_history_starting_with_assistant() -> None:
    messages = [reply("Hello! How can I help?"), user("hi"), reply("hey")]
    seg = split_blocks(messages)
    assert [b.indexes for b in seg.blocks] == [(0,), (1, 2)]
    assert seg.blocks[0].anchor_text == ""
    chain = split_blocks([call("c1"), result("c1", "x"), reply("done")])
    assert [b.indexes for b in chain.blocks] == [(0, 1, 2)]


def test_empty_content() -> None:
    seg = split_blocks([user(""), reply(None), user(None)])
    assert seg.blocks[0].text == "user: \nassistant: "
    assert seg.blocks[0].reply_text == ""
    assert seg.tail == ({"role": "user", "content": None},)


def test_legacy_function_call() -> None:
    messages = [
        user("calc"),
        {"role": "assistant", "content": None, "function_call": {"name": "calc", "arguments": "1+1"}},
        {"role": "function", "name": "calc", "content": "2"},
        reply("2"),
    ]
    (block,) = split_blocks(messages).blocks
    assert "assistant → tool call calc(1+1)\ntool calc result: 2" in block.text


def test_invalid_message_is_a_typed_error() -> None:
    with pytest.raises(InvalidMessage):
        split_blocks([user("x"), {"role": "narrator", "content": "y"}])


def test_input_is_not_mutated() -> None:
    messages = [user("q"), call("c1"), result("c1", "r"), reply("a")]
    snapshot = repr(messages)
    split_blocks(messages)
    assert repr(messages) == snapshot


# --- properties -------------------------------------------------------------------------------------------------

_texts = st.text(max_size=12)
_content = st.one_of(
    st.none(),
    _texts,
    st.lists(
        st.one_of(
            st.builds(lambda t: {"type": "text", "text": t}, _texts),
            st.just({"type": "image_url", "image_url": {"url": "u"}}),
        ),
        max_size=3,
    ),
)
_ids = st.sampled_from(["c1", "c2", "c3", "c4"])


@st.composite
def _message(draw: st.DrawFn) -> Message:
    kind = draw(st.sampled_from(["system", "developer", "user", "reply", "call", "tool"]))
    if kind in ("system", "developer", "user"):
        message: Message = {"role": kind, "content": draw(_content)}
        if draw(st.booleans()):
            message["name"] = draw(st.sampled_from(["ann", "bo"]))
        return message
    if kind == "reply":
        return {"role": "assistant", "content": draw(_content)}
    if kind == "call":
        return call(*draw(st.lists(_ids, min_size=1, max_size=3, unique=True)), content=draw(_content))
    return result(draw(_ids), draw(_texts))


_histories = st.lists(_message(), max_size=25)


@settings(max_examples=300, deadline=None)
@given(_histories)
def test_no_message_is_lost_and_order_is_kept(messages: list[Message]) -> None:
    seg = split_blocks(messages)
    system = [i for i, m in enumerate(messages) if m["role"] in ("system", "developer")]
    assert list(seg.system) == [messages[i] for i in system]
    placed = [i for block in seg.blocks for i in block.indexes]
    tail = [i for i in range(seg.tail_start, len(messages)) if i not in system]
    assert list(seg.tail) == [messages[i] for i in tail]
    assert placed + tail == [i for i in range(len(messages)) if i not in system]
    assert all(i < seg.tail_start for i in placed)
    for block in seg.blocks:
        assert block.messages == tuple(messages[i] for i in block.indexes)
        last = block.messages[-1]
        assert last["role"] == "assistant" and "tool_calls" not in last
        for message in block.messages:
            assert message_text(message) in block.text


@settings(max_examples=200, deadline=None)
@given(_histories, st.integers(min_value=0, max_value=25))
def test_sealed_blocks_never_change_when_the_history_grows(messages: list[Message], cut: int) -> None:
    head = split_blocks(messages[:cut])
    before = head.blocks[:-1] if head.open_ended else head.blocks  # one sealed by the end may take more replies
    after = split_blocks(messages).blocks
    assert after[: len(before)] == before


def test_a_burst_of_replies_is_one_answer_and_the_next_user_message_seals_it() -> None:
    seg = split_blocks([user("q1"), user("q1 again"), reply("a"), reply("b"), reply("c"), user("q2"), reply("d"), user("q3")])
    assert [b.indexes for b in seg.blocks] == [(0, 1, 2, 3, 4), (5, 6)]
    assert seg.blocks[0].reply_text == "a\nb\nc" and not seg.open_ended
    assert [m["content"] for m in seg.tail] == ["q3"]
    # a history that ends with a reply: its last block is sealed, but more replies may still extend it
    ended = split_blocks([user("q1"), reply("a"), reply("b")])
    assert [b.indexes for b in ended.blocks] == [(0, 1, 2)] and ended.open_ended and ended.tail == ()
    # a tool call after a reply stays in the exchange; the final reply text is what follows the last call
    chain = split_blocks([user("q"), reply("let me check"), call("c1"), result("c1", "r"), reply("found it"), user("next")])
    assert [b.indexes for b in chain.blocks] == [(0, 1, 2, 3, 4)] and chain.blocks[0].reply_text == "found it"


def test_a_message_of_the_client_s_context_alone_has_no_line_in_its_block() -> None:
    context = "<environment_context>\n  <cwd>/home/u/project</cwd>\n</environment_context>"
    split = split_blocks([
        {"role": "user", "content": context}, {"role": "user", "content": "Turn 1: hello"}, {"role": "assistant", "content": "Hi."},
        {"role": "user", "content": "Turn 2"},
    ])  # fmt: skip
    (block,) = split.blocks
    assert block.text == "user: Turn 1: hello\nassistant: Hi." and block.anchor_text == "Turn 1: hello"
    assert len(block.messages) == 3  # kept as sent
