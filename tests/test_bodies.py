"""Long request bodies read on from an earlier body of their conversation (gateway.http.bodies): the same object as
reading them whole, whatever the earlier body shares with them, the repeated text messages handed out again and
anything a consumer may change decoded anew."""

from __future__ import annotations

import json
import random
from typing import Any

import orjson
import pytest

from gateway.errors import InvalidRequest
from gateway.http import bodies as bodies_module
from gateway.http.bodies import MIN_BYTES, Bodies
from gateway.http.validation import json_object, parse_chat_request


def _history(n: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful. " * 20}]
    for i in range(n):
        messages.append({"role": "user", "content": f"question {i}: caf\u00e9 \U0001f600 \"quoted\" \\ " * rng.randint(5, 40)})
        messages.append({"role": "assistant", "content": f"answer {i} " * rng.randint(5, 40)})
    return messages


def _body(messages: list[dict[str, Any]], **more: Any) -> bytes:
    return json.dumps({"model": "m", "messages": messages, **more}).encode()


def _read(bodies: Bodies, body: bytes) -> Any:
    read = bodies.read(body, json_object)
    assert read.data == orjson.loads(body) and list(read.data) == list(orjson.loads(body))
    bodies.keep(read)
    return read


def test_a_conversations_next_body_reads_on_from_the_last_and_hands_out_its_messages_again() -> None:
    bodies, messages = Bodies(), _history(60)
    first = _read(bodies, _body(messages, stream=True))
    assert len(first.body) > MIN_BYTES and first.reused == 0
    messages += [{"role": "assistant", "content": "the answer"}, {"role": "user", "content": "and then?"}]
    second = _read(bodies, _body(messages, stream=True))
    assert second.reused == 121  # every message the first body had
    assert all(a is b for a, b in zip(first.data["messages"], second.data["messages"][:121]))
    messages += [{"role": "assistant", "content": "more"}, {"role": "user", "content": "last"}]
    third = _read(bodies, _body(messages, stream=False))  # a parameter after the messages changed: read anew
    assert third.reused == 123 and third.data["stream"] is False
    assert len(bodies._kept) == 1  # each body replaced the one it continued


def test_an_edited_earlier_message_is_read_from_the_new_body() -> None:
    bodies, messages = Bodies(), _history(60)
    _read(bodies, _body(messages))
    _read(bodies, _body(messages))  # (the first body's messages are found when a later body is read)
    edited = [dict(m) for m in messages]
    edited[30]["content"] = "[Old tool result content cleared]"
    read = _read(bodies, _body(edited + [{"role": "user", "content": "next"}]))
    assert read.reused == 30 and read.data["messages"][30]["content"] == "[Old tool result content cleared]"
    named = [dict(m) for m in edited]
    named[20]["name"] = "ann"  # the message's bytes are the same up to its last: `}` became `,"name":…`
    read = _read(bodies, _body(named))
    assert read.reused == 20 and read.data["messages"][20]["name"] == "ann"


def test_parts_and_tool_calls_are_decoded_anew_each_time() -> None:
    bodies, messages = Bodies(), _history(40)
    messages[5] = {"role": "user", "content": [{"type": "text", "text": "a part"}]}
    messages[6] = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    messages[7] = {"role": "tool", "tool_call_id": "c1", "content": "done"}
    first = _read(bodies, _body(messages))
    first.data["messages"][5]["content"].append({"type": "text", "text": "added by a consumer"})
    second = _read(bodies, _body(messages + [{"role": "user", "content": "again"}]))
    assert second.reused == len(messages)
    assert second.data["messages"][5]["content"] == [{"type": "text", "text": "a part"}]
    assert second.data["messages"][6] is not first.data["messages"][6]
    assert second.data["messages"][7] is first.data["messages"][7]


@pytest.mark.parametrize("dumps", [
    lambda o: json.dumps(o, separators=(",", ":"), ensure_ascii=False).encode(),
    lambda o: json.dumps(o, indent=2).encode(),
    orjson.dumps,
])
def test_any_spacing_and_key_order_reads_as_orjson_reads_it(dumps: Any) -> None:
    bodies, rng = Bodies(), random.Random(3)
    messages = _history(30, seed=3)
    for turn in range(12):
        messages += [{"role": "assistant", "content": f"reply {turn} \u00e9"}, {"role": "user", "content": f"q {turn}"}]
        sent = list(messages)
        if rng.random() < 0.3:
            sent[rng.randrange(1, len(sent))] = {"content": "edited", "role": "user", "name": "x"}
        if rng.random() < 0.2:
            sent = sent[: len(sent) // 2]
        head = {"temperature": 0.5, "tools": [{"type": "function", "function": {"name": "t"}}]} if turn % 2 else {}
        _read(bodies, dumps({**head, "model": "m", "messages": sent, "stream": bool(turn % 3), "model": "m2"}))


def test_a_body_whose_new_part_is_wrong_is_refused_as_the_plain_reading_refuses_it() -> None:
    bodies, messages = Bodies(), _history(40)
    _read(bodies, _body(messages))
    _read(bodies, _body(messages))
    good = _body(messages)
    for bad, said in [(good[:-1] + b',}', "not valid JSON"), (good[:-2] + b', {"role": "user", "content": "\\ud800"}]}', "lone UTF-16 surrogate")]:
        with pytest.raises(InvalidRequest, match=said):
            bodies.read(bad, json_object)
    # NaN after the messages: orjson refuses it, json reads it, and so does the gateway
    assert bodies.read(good[:-1] + b', "temperature": NaN}', json_object).data["temperature"] != 0


def test_a_new_message_is_checked_and_named_by_its_place_in_the_whole_history() -> None:
    bodies, messages = Bodies(), _history(40)
    parse_chat_request(_body(messages), ["m"], bodies=bodies)
    parse_chat_request(_body(messages), ["m"], bodies=bodies)
    with pytest.raises(InvalidRequest, match=r"messages\[81\]\.role"):
        parse_chat_request(_body([*messages, {"role": "robot", "content": "x"}]), ["m"], bodies=bodies)
    request = parse_chat_request(_body([*messages, {"role": "user", "content": "fine"}]), ["m"], bodies=bodies)
    assert len(request.messages) == 82


def test_what_is_kept_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bodies_module, "MAX_BODIES", 3)
    bodies = Bodies()
    for seed in range(6):  # conversations that open differently
        _read(bodies, _body(_history(40, seed=seed)[1:]))
    assert len(bodies._kept) == 3 and bodies._bytes == sum(len(r.body) for r in bodies._kept.values())
    small = _read(bodies, _body(_history(1)))
    assert len(small.body) < MIN_BYTES and len(bodies._kept) == 3
