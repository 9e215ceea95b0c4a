"""Line labels: what opens the lines of several messages is found and left out of what is matched
(gateway.core.labels)."""

from __future__ import annotations

import pytest

from gateway.core.labels import called, label_shapes, line_heads, named_sides, side_names, speakers, without_labels, without_role, written_once


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


def test_the_labels_of_the_last_exchanges_say_who_is_who() -> None:
    messages = [
        ("user", "[29/12/2023, 22:42] Fahim Khan: back home\n[29/12/2023, 22:43] Fahim Khan: you?"),
        ("assistant", "<akib> same\n<akib> tired"),
        ("user", "[29/12/2023, 22:50] Fahim Khan: Tokyo: 3 days, booked"),
        ("assistant", "<akib> nice"),
    ]
    # every word of a name label, case-folded, with the role whose lines it opens; not the timestamps, and not a
    # head that opens one message only ("Tokyo:")
    assert speakers(messages) == {"fahim": "user", "khan": "user", "akib": "assistant"}


def test_a_label_that_opens_both_roles_lines_names_neither() -> None:
    # a bridge that writes the same channel tag before everyone's lines, and a name both sides' lines carry
    messages = [("user", "Team: hi"), ("assistant", "Team: hello"), ("user", "Emi: so"), ("user", "Emi: well")]
    assert speakers(messages) == {"emi": "user"}


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


def test_a_speakers_label_is_written_once_per_run() -> None:
    rows = ["user: Emi: Hey!", "Emi: how are you?", "user: Emi: I went skiing", "assistant: elise: nice", "elise: where?",
            "assistant: Kate: my turn"]
    assert written_once(rows) == ["user: Emi: Hey!", "how are you?", "I went skiing", "assistant: elise: nice", "where?",
                                  "assistant: Kate: my turn"]
    # a head with a digit (a timestamp, an amount) stays; so does a plain chat's role prefix, and another role's same name
    stamped = ["user: [22:42] Emi: hi", "[22:43] Emi: there", "[22:43] Emi: again"]
    assert written_once(stamped) == stamped
    assert written_once(["user: 1/2 cup flour", "1/2 cup sugar"]) == ["user: 1/2 cup flour", "1/2 cup sugar"]
    assert written_once(["user: hi", "user: there", "assistant: ok"]) == ["user: hi", "user: there", "assistant: ok"]
    assert written_once(["user: Bo: hi", "assistant: Bo: hi"]) == ["user: Bo: hi", "assistant: Bo: hi"]
    # markup and code keep every line as written
    html = ["assistant: Here:", "```html", "<td>a</td>", "<td>b</td>", "```", "    <th>x</th>", "    <th>y</th>"]
    assert written_once(html) == html


def test_names_stand_for_the_sides_where_each_role_opens_with_its_own_name() -> None:
    assert named_sides(["user: Vanessa: hi", "assistant: Nebraas: hey", "user: Vanessa: how are you"])
    assert named_sides(["user: Dr. Who: hi"])
    assert not named_sides(["user: Vanessa: hi", "assistant: hey"])
    assert not named_sides(["user: Vanessa: hi", "assistant: Vanessa: hey"])
    assert not named_sides(["user: Vanessa: hi", "user: Kate: hi", "assistant: Nebraas: hey"])
    assert not named_sides(["user: [22:42] Vanessa: hi", "assistant: [22:43] Nebraas: hey"])
    assert not named_sides(["user (alice): Vanessa: hi"])
    assert not named_sides(["user: It was Spider-Man: No Way Home", "assistant: Spider-Man: No Way Home is great"])
    assert not named_sides(["tool shell result: Done: ok"])
    assert not named_sides([])
    assert without_role("assistant: Nebraas: hey") == "Nebraas: hey" and without_role("Nebraas: hey") == "Nebraas: hey"


def test_a_name_is_what_a_greeting_or_a_clause_calls_the_other_by_not_a_sentences_first_word() -> None:
    assert called("Hey Gina! Good to see you too.") == {"Gina"}
    assert called("That's great, Jon! Thanks Mel, appreciate it.") == {"Jon", "Mel"}
    # a capitalized word opening a sentence before a comma is how people answer ("Yes, …", "Wow, …"), not a call
    assert called("Yes, I did. Wow, that is something.") == frozenset()
    assert called("I went to Paris with Anna.") == frozenset()


def test_the_sides_are_named_by_what_the_other_calls_them_and_never_by_themselves() -> None:
    calls = {("user", "Mel"): 40, ("user", "Melanie"): 30, ("user", "Yes"): 2, ("assistant", "Caroline"): 50, ("assistant", "Mel"): 1}
    # the most frequent call is a nickname; the name it begins is what a question asks about
    assert side_names(calls, 300) == {"user": "Caroline", "assistant": "Melanie"}
    # one side unnamed (a user–assistant chat: the assistant calls the user, nobody calls the assistant): the roles stay
    assert side_names({("assistant", "Sarah"): 12}, 300) == {}
    # a name both sides say is a third person they talk about
    assert side_names({("user", "Emma"): 20, ("assistant", "Emma"): 6, ("assistant", "Jon"): 20}, 300) == {}
    # too few pages for the thread's size
    assert side_names({("user", "Gina"): 4, ("assistant", "Jon"): 4}, 1000) == {}
    assert side_names({("user", "Gina"): 4, ("assistant", "Jon"): 4}, 100) == {"user": "Jon", "assistant": "Gina"}
