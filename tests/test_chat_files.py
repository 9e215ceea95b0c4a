"""Reading conversation files (OpenAI chat JSONL, ChatGPT's export) and cutting a conversation into requests."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from gateway.service.chat_files import ChatFileError, export_line, read_conversations
from gateway.service.importer import Session, sessions_of

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=timezone.utc)
T1 = datetime(2024, 5, 2, 9, 30, tzinfo=timezone.utc)


def write(tmp_path: Path, text: str, name: str = "in.jsonl") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_jsonl_lines_with_times_and_threads(tmp_path: Path) -> None:
    lines = [
        {"thread": "a", "messages": [{"role": "user", "content": "Hi", "timestamp": "2024-05-01T10:00:00Z"}, {"role": "assistant", "content": "Hello\u2028there"}]},
        {"messages": [{"role": "user", "content": "Other", "timestamp": T1.timestamp()}, {"role": "assistant", "content": "Yes"}]},
        {"thread": "a", "messages": [{"role": "user", "content": "More", "timestamp": "2024-05-02T09:30:00"}]},
    ]
    text = "\n".join(json.dumps(line, ensure_ascii=False) for line in lines) + "\n\n"
    a, other = read_conversations(write(tmp_path, text))
    assert a.thread == "a" and other.thread is None
    assert a.messages == [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello\u2028there"}, {"role": "user", "content": "More"}]
    assert a.times == [T0, None, T1]
    assert other.times == [T1, None]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{nope", "line 1: not JSON"),
        ('{"messages": 3}', 'line 1: expected an object with a "messages" list'),
        ('{"thread": "", "messages": []}', 'line 1: "thread" must be a non-empty string'),
        ('{"messages": [{"role": "robot", "content": "x"}]}', "line 1, message 0: unknown role 'robot'"),
        ('{"messages": [{"role": "user", "content": "x", "timestamp": "yesterday"}]}', "line 1, message 0: timestamp must be"),
        ('{"messages": [{"role": "user", "content": "x", "timestamp": true}]}', "line 1, message 0: timestamp must be"),
        ('[{"title": "no mapping"}]', 'conversation 0: expected an object with a "mapping"'),
        ("[1, 2", "not JSON"),
    ],
)
def test_bad_files_say_where(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(ChatFileError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        read_conversations(write(tmp_path, text))


def test_a_missing_file_is_a_file_error(tmp_path: Path) -> None:
    with pytest.raises(ChatFileError):
        read_conversations(tmp_path / "absent.jsonl")


def node(node_id: str, parent: str | None, role: str | None, text: Any = None, when: float | None = None, **extra: Any) -> dict[str, Any]:
    message = None
    if role is not None:
        content = text if isinstance(text, dict) else {"content_type": "text", "parts": [text]}
        message = {"id": node_id, "author": {"role": role}, "content": content, "create_time": when, **extra}
    return {"id": node_id, "message": message, "parent": parent, "children": []}


def chatgpt_export() -> list[dict[str, Any]]:
    t0, t1 = T0.timestamp(), T1.timestamp()
    nodes = [
        node("root", None, None),
        node("sys", "root", "system", "You are ChatGPT.", t0),
        node("u1", "sys", "user", "Plan a trip to Lisbon", t0),
        node("a1", "u1", "assistant", "Day one: Alfama.", t0 + 5),
        node("a1b", "u1", "assistant", "An abandoned branch.", t0 + 6),
        node("search", "a1", "assistant", "search('Lisbon')", t0 + 7, recipient="browser"),
        node("tool", "search", "tool", "results", t0 + 8),
        node("hidden", "tool", "user", "custom instructions", t0 + 9, metadata={"is_visually_hidden_from_conversation": True}),
        node("img", "hidden", "user", {"content_type": "multimodal_text", "parts": [{"asset_pointer": "file-1"}, "And this photo?"]}, t1),
        node("a2", "img", "assistant", "A tram.", None),
        node("code", "a2", "assistant", {"content_type": "code", "text": "print()"}, t1 + 1),
        node("blank", "code", "assistant", "   ", t1 + 2),
    ]
    mapping = {n["id"]: n for n in nodes}
    return [
        {"title": "Lisbon", "conversation_id": "c-lisbon", "create_time": t0, "current_node": "blank", "mapping": mapping},
        {"title": "empty", "id": "c-empty", "current_node": "gone", "mapping": {"r": node("r", None, None)}},
        {"title": "no current node", "mapping": {"r": node("r", None, None), "u": node("u", "r", "user", "Hello?", None)}},
    ]


def test_the_chatgpt_export_follows_the_main_branch_and_keeps_what_was_seen(tmp_path: Path) -> None:
    lisbon, untitled = read_conversations(write(tmp_path, json.dumps(chatgpt_export()), "conversations.json"))
    assert lisbon.thread == "c-lisbon"
    assert lisbon.messages == [
        {"role": "user", "content": "Plan a trip to Lisbon"},
        {"role": "assistant", "content": "Day one: Alfama."},
        {"role": "user", "content": "And this photo?"},
        {"role": "assistant", "content": "A tram."},
    ]
    assert lisbon.times == [T0, T0, T1, T1]  # a reply takes its question's time: one request per exchange
    assert untitled.thread is None and untitled.messages == [{"role": "user", "content": "Hello?"}]
    assert untitled.times == [None]


def test_a_conversation_is_replayed_as_one_request_per_dated_run() -> None:
    default = datetime(2030, 1, 1, tzinfo=timezone.utc)
    assert sessions_of([None, T0, T0, None, T1, T1], default) == [Session(4, T0), Session(6, T1)]
    assert sessions_of([None, None], default) == [Session(2, default)]
    assert sessions_of([], default) == []


def test_an_export_line_reads_back(tmp_path: Path) -> None:
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    (conversation,) = read_conversations(write(tmp_path, export_line("t-1", messages) + "\n"))
    assert conversation.thread == "t-1" and conversation.messages == messages
