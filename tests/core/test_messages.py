from __future__ import annotations

import pytest

from gateway.core.errors import InvalidMessage
from gateway.core.messages import (ToolCall, client_context, content_text, message_role, message_text, said_text, tool_calls_of, transcript,
                                   users_said)


def test_content_text_handles_every_shape() -> None:
    assert content_text(None) == ""
    assert content_text("plain") == "plain"
    parts = [
        {"type": "text", "text": "look at"},
        {"type": "image_url", "image_url": {"url": "data:..."}},
        {"type": "input_audio", "input_audio": {}},
        {"type": "file", "file": {}},
        {"type": "refusal", "refusal": "no"},
        {"type": "video"},
        "bare string part",
        {"text": "typeless text"},
        {"type": "text", "text": 3},
        {"type": "refusal"},
        {"foo": "bar"},
        42,
    ]
    assert content_text(parts).split("\n") == [
        "look at",
        "[image]",
        "[audio]",
        "[file]",
        "no",
        "[video]",
        "bare string part",
        "typeless text",
        "",
        "",
        "[unsupported content]",
        "[unsupported content]",
    ]
    assert content_text(12) == "12"


def test_message_text_falls_back_to_refusal() -> None:
    assert message_text({"role": "assistant", "content": None, "refusal": "I can't"}) == "I can't"
    assert message_text({"role": "assistant", "content": "ok", "refusal": "I can't"}) == "ok"


@pytest.mark.parametrize(
    ("message", "problem"),
    [("text", "expected an object"), ({"content": "x"}, "missing 'role'"), ({"role": "robot"}, "unknown role")],
)
def test_message_role_rejects_non_messages(message: object, problem: str) -> None:
    with pytest.raises(InvalidMessage, match=problem) as caught:
        message_role(message, 7)
    assert caught.value.index == 7
    assert str(caught.value).startswith("message 7:")


def test_tool_calls_are_read_leniently() -> None:
    message = {
        "role": "assistant",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}},
            {"id": 5, "function": {"arguments": {"b": 1, "a": "é"}}},
            {"id": "c3", "function": "broken"},
            "not a call",
        ],
        "function_call": {"name": "legacy", "arguments": None},
    }
    assert tool_calls_of(message) == (
        ToolCall("c1", "search", '{"q": "x"}'),
        ToolCall("", "unknown", '{"a": "é", "b": 1}'),
        ToolCall("c3", "unknown", ""),
        ToolCall("", "legacy", ""),
    )
    assert tool_calls_of({"role": "assistant", "tool_calls": "nonsense", "function_call": {}}) == (
        ToolCall("", "unknown", ""),
    )


def test_transcript_lines() -> None:
    names = {"c1": "search"}
    assert transcript({"role": "user", "content": "hi", "name": "alice"}, names) == "user (alice): hi"
    assert transcript({"role": "user", "content": "hi", "name": ""}, names) == "user: hi"
    assert transcript({"role": "assistant", "content": None}, names) == "assistant: "
    call = {"id": "c1", "function": {"name": "search", "arguments": "{}"}}
    both = {"role": "assistant", "content": "Let me look.", "tool_calls": [call]}
    assert transcript(both, names) == "assistant: Let me look.\nassistant → tool call search({})"
    assert transcript({"role": "tool", "tool_call_id": "c1", "content": "found"}, names) == "tool search result: found"
    assert transcript({"role": "tool", "tool_call_id": "zz", "content": "x", "name": "calc"}, names) == "tool calc result: x"
    assert transcript({"role": "function", "name": "", "content": "x"}, names) == "tool unknown result: x"


def test_a_clients_context_in_a_user_message_is_apart_from_what_the_user_said() -> None:
    skills = "<system-reminder>\nSkills:\n- code-review: Review the diff\n</system-reminder>"
    date = "<system-reminder>Today is 2026-11-28.</system-reminder>"
    asked = {"role": "user", "content": [{"type": "text", "text": skills}, {"type": "text", "text": date}, {"type": "text", "text": "Hi there"}]}
    assert said_text(asked) == "Hi there"
    assert client_context(asked) == f"{skills}\n{date}"
    quoted = {"role": "user", "content": 'Why does re.compile(r"<system-reminder>.*?</system-reminder>") fail?'}
    for plain in ({"role": "user", "content": "Hi"}, {"role": "assistant", "content": date}, {"role": "user", "content": "<system-reminder> unclosed"}, quoted):
        assert said_text(plain) == message_text(plain) and client_context(plain) == ""


def test_users_said_is_every_user_message_s_own_words_joined() -> None:
    live = [
        {"role": "user", "content": "<system-reminder>\nskills: code review\n</system-reminder>\nWhere is the tax form?"},
        {"role": "assistant", "content": "Which year?"},
        {"role": "user", "content": [{"type": "text", "text": "2024"}]},
    ]
    assert users_said(live) == "Where is the tax form?\n2024"
    assert users_said([{"role": "assistant", "content": "hello"}]) == ""


CODEX_CONTEXT = (
    "# AGENTS.md instructions for /home/u/project\n\n<INSTRUCTIONS>\n# House rules\n\nRun tests with make check.\n\n</INSTRUCTIONS>"
    "<environment_context>\n  <cwd>/home/u/project</cwd>\n  <shell>bash</shell>\n</environment_context>"
)


def test_codex_s_message_of_the_session_s_context_is_the_client_s_not_said() -> None:
    """Codex sends the user's AGENTS.md and its environment as one user message, the two text parts joined as they
    come: all of it is the client's context, its parts a line apart, and the message says nothing."""
    message = {"role": "user", "content": CODEX_CONTEXT}
    assert said_text(message) == "" and transcript(message, {}) == ""
    assert client_context(message) == CODEX_CONTEXT.replace("</INSTRUCTIONS><environment_context>", "</INSTRUCTIONS>\n<environment_context>")
    assert users_said([message, {"role": "user", "content": "Turn 1: hello"}]) == "Turn 1: hello"
    for quoted in ("What does <environment_context>x</environment_context> mean?", "# AGENTS.md instructions for me"):
        plain = {"role": "user", "content": quoted}
        assert said_text(plain) == quoted and client_context(plain) == ""
