"""Line labels: what opens the lines of several messages is found and left out of what is matched
(gateway.core.labels)."""

from __future__ import annotations

import pytest

from gateway.core.labels import label_shapes, line_heads, without_labels


def test_a_name_that_opens_the_lines_of_two_messages_is_a_label() -> None:
    messages = ["Emi: Hey!\nEmi: how are you?", "Emi: I went skiing [shares a photo: a slope]", "elise: hi"]
    shapes = label_shapes(messages)
    assert shapes == frozenset({"emi:"})  # elise opens one message only
    assert [without_labels(m, shapes) for m in messages] == [
        "Hey!\nhow are you?", "I went skiing [shares a photo: a slope]", "elise: hi"
    ]


@pytest.mark.parametrize(
    ("messages", "stripped"),
    [
        # WhatsApp on iOS: a timestamp in brackets, then the name; the digits differ, the shape does not
        (["[29/12/2023, 22:42:04] Emi: yo", "[30/12/2023, 09:01:00] Emi: morning"], ["yo", "morning"]),
        # WhatsApp on Android: a bare timestamp and a dash
        (["29/12/2023, 22:42 - Fahim Khan: hello there", "29/12/2023, 22:50 - Fahim Khan: back"], ["hello there", "back"]),
        # IRC and chat bridges
        (["<emi> hey\n<emi> you there?", "<emi> ok"], ["hey\nyou there?", "ok"]),
    ],
)
def test_timestamps_and_nicknames_are_labels_too(messages: list[str], stripped: list[str]) -> None:
    shapes = label_shapes(messages)
    assert [without_labels(m, shapes) for m in messages] == stripped


def test_what_one_message_says_before_a_colon_is_its_own_content() -> None:
    messages = ["Tokyo: 3 days\nKyoto: 2 days", "Note: buy milk", "Error: file not found\nError: disk full"]
    shapes = label_shapes(messages)
    assert shapes == frozenset()
    assert [without_labels(m, shapes) for m in messages] == messages


def test_a_sentence_is_no_head_and_a_line_that_is_only_a_head_keeps_it() -> None:
    assert line_heads("and then I told her: come over") == []  # more than three words
    assert line_heads("http://example.com is down") == []
    assert line_heads("Emi:") == []  # nothing after it: the line is its own content


def test_a_transcripts_role_prefix_stays_unless_asked_to_go() -> None:
    content = "user: Emi: Hey!\nEmi: more\nassistant: elise: hi\nassistant → tool call read({})"
    shapes = frozenset({"emi:", "elise:"})
    assert without_labels(content, shapes) == "user: Hey!\nmore\nassistant: hi\nassistant → tool call read({})"
    assert without_labels(content, shapes, roles=False) == "Hey!\nmore\nhi\nassistant → tool call read({})"
    assert without_labels("user: Emi: Hey!", frozenset(), roles=False) == "Emi: Hey!"
